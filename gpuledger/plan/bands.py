"""The plan's bands and the decisions taken at a stated confidence (pure).

Every feasible trial gets P10 / P90 of its wall-clock and cost and the P90 of its peak memory
(`with_bands`), from the band of its cell (gpuledger/estimate/bands.py: framework × method ×
quantization × GPU-count regime × GPU family, public rows out of source + the team's runs):
- basis "estimate": the planner's compute time is already the band's P50 (`estimates.compute_times`);
  P10 / P90 scale the compute part (start-up and spot rework in proportion);
- "calibrated on N runs" and "measured": the figure is the team's own; the cell's spread around it;
- "probe ...": the spread of the probe's own step times (`bands.probe_band`), else the cell's spread;
- the local CPU (no public CPU rows): the spread of the coarser cell it backs off to, around the
  model's time.
Memory: `mem_gib_p10` / `mem_gib_p90` = the estimate × the memory band's P10 / P90 (a probe's measured
peak stands).

`at_confidence(plan, confidence)` then takes the budget decision at the stated quantile (`p50` |
`p90`, `budget.confidence`): the spend the guard compares is the P90 total (the pruned expected
spend scaled the same way) with the P50 beside it, and a trial whose P90 wall-clock misses the
deadline says so.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import TYPE_CHECKING

import polars as pl

from gpuledger.plan.model import Plan

if TYPE_CHECKING:
    from gpuledger.plan.sections import PlanBands

CONFIDENCES = ("p50", "p90")
DEFAULT_CONFIDENCE = "p90"
BAND_COLS = ("est_wall_s_p10", "est_wall_s_p90", "est_cost_usd_p10", "est_cost_usd_p90", "mem_gib_p10", "mem_gib_p90",
             "est_band", "oom_risk", "memory_note")


def confidence_of(spec) -> str:
    """Returns the quantile decisions are taken at: the spec's `budget.confidence`, else the
    project's setting `budget.confidence`, else p90."""
    value = getattr(getattr(spec, "budget", None), "confidence", None)
    if value:
        return value
    from gpuledger.errors import UserError
    from gpuledger.settings import current

    try:
        value = current().get("budget.confidence")
    except UserError:
        value = None
    value = (value or DEFAULT_CONFIDENCE).lower()
    if value not in CONFIDENCES:
        raise UserError(f"budget.confidence: {value!r} is not one of {', '.join(CONFIDENCES)} (gpuledger.toml "
                        "[budget] confidence or GPULEDGER_BUDGET_CONFIDENCE)")
    return value


def deadline_factor(framework: str, method: str, confidence: str, table=None, stack: str | None = None,
                    model: str | None = None):
    """Returns the deadline test's factor (accelerator, gpus, precision) -> P90 / P50 of the compute time
    of that cell (cached), or None at p50 (`PlanSettings.deadline_factor`, gpuledger/plan/scoring.py)."""
    if confidence != "p90":
        return None
    from gpuledger.estimate.bands import band_for

    cache: dict = {}

    def factor(accelerator: str, gpus: int, precision: str) -> float:
        key = (accelerator, gpus, precision)
        if key not in cache:
            b = band_for("time", framework, method, precision, gpus, accelerator, stack, model, table=table)
            cache[key] = b.p90 / b.p50
        return cache[key]

    return factor


#: The fit decision (`memory_fit_factors`, gpuledger/plan/choice.py): a placement is SAFE when the memory
#: band's P90 fits the usable memory, RISKY when only its P10 does (planned, with the OOM risk said), and
#: refused when even the P10 does not fit. The memory band is taken without the GPU family: the peak is
#: the same tensors on any card (the family level of the public rows only separates their sources).
MEMORY_FIT_RULE = ("memory fit at the band: a trial is refused only when even its memory's P10 (the optimistic end) "
                   "exceeds the usable memory; placements whose P90 fits are preferred (the larger GPU over a cheaper "
                   "one that would be at risk); a trial only P10 fits is planned with its OOM risk stated")


def memory_band_of(workload_text: str | None, table=None):
    """Returns the memory band of an estimate row's workload (its cell without the GPU family), or None
    for a row without a GPU workload (a hand-made frame, a CPU run: its estimate stands as it is)."""
    if not workload_text:
        return None
    try:
        w = json.loads(workload_text)["workload"]
    except (ValueError, KeyError, TypeError):
        return None
    if w.get("device", "gpu") != "gpu":
        return None
    from gpuledger.estimate.bands import band_for

    return band_for("memory", w.get("framework") or "hf", w.get("method") or "lora", w.get("precision"),
                    w.get("gpus") or 1, None, table=table)


def memory_fit_factors(estimates: pl.DataFrame, table=None) -> tuple[pl.Series, pl.Series]:
    """Returns per estimate row the (P10, P90) multipliers of its peak memory (1, 1 where `memory_band_of`
    gives none). A plan's rows share their framework, method and device (the spec's; search parameters do
    not change them), so the band is looked up per (precision, GPU count) of the rows, not per workload:
    the first row's workload names the rest (a frame without workloads, or a CPU plan, gets 1, 1)."""
    n = estimates.height
    ones = pl.Series("f", [1.0] * n, dtype=pl.Float64)
    if "workload" not in estimates.columns or not n:
        return ones, ones
    first = next((t for t in estimates["workload"].head(64).to_list() if t), None)
    band = memory_band_of(first, table)
    if band is None:
        return ones, ones
    w = json.loads(first)["workload"]
    from gpuledger.estimate.bands import band_for

    shapes = estimates.select("precision", "gpus").unique()
    lo, hi = [], []
    for precision, gpus in shapes.iter_rows():
        b = band_for("memory", w.get("framework") or "hf", w.get("method") or "lora", precision, gpus or 1, None,
                     table=table)
        lo.append(b.p10)
        hi.append(b.p90)
    f = estimates.select("precision", "gpus").join(
        shapes.with_columns(_lo=pl.Series(lo, dtype=pl.Float64), _hi=pl.Series(hi, dtype=pl.Float64)),
        on=["precision", "gpus"], how="left", maintain_order="left", nulls_equal=True)
    return f["_lo"].fill_null(1.0), f["_hi"].fill_null(1.0)


def oom_risk(est_gib: float, usable_gib: float, p10: float, p50: float, p90: float) -> float:
    """Returns the chance that a peak estimated at `est_gib` (band multipliers p10 / p50 / p90) exceeds
    `usable_gib`: log(peak / estimate) taken as normal on each side of the P50 with that side's P10 or P90
    at 1.2816 standard deviations (a split normal through the band's three quantiles)."""
    if est_gib <= 0 or usable_gib <= 0:
        return 0.0
    x, q50 = math.log(usable_gib / est_gib), math.log(p50)
    side = math.log(p90) - q50 if x >= q50 else q50 - math.log(p10)
    if side <= 0:
        return 0.0 if x >= q50 else 1.0
    z = (x - q50) / side * 1.2815516
    return 0.5 * math.erfc(z / math.sqrt(2))


def risk_note(est_gib: float, usable_gib: float, accelerator: str, band) -> str:
    """Returns the words of a risky placement: its OOM risk and the band it rests on."""
    risk = oom_risk(est_gib, usable_gib, band.p10, band.p50, band.p90)
    return (f"OOM risk ~{risk:.0%}: peak P10 {est_gib * band.p10:.1f} - P90 {est_gib * band.p90:.1f} GiB per GPU "
            f"vs {usable_gib:.1f} usable on {accelerator} (memory band: {band.describe()})")


def _cell(workload_text: str | None, s, accelerator: str, gpus: int) -> tuple:
    w = json.loads(workload_text)["workload"] if workload_text else {}
    return (w.get("framework") or "hf", w.get("method") or s.method, w.get("precision") or s.precision, gpus, accelerator,
            w.get("stack"), w.get("model"))


def trial_band(basis: str, cell: tuple, table, *, local: bool, probe: dict | None = None):
    """Returns (time band relative to the trial's P50 figure, memory band) of one trial."""
    from gpuledger.estimate.bands import band_for, probe_band

    tb = band_for("time", *cell, table=table)
    mb = band_for("memory", *cell, table=table)
    basis = basis or "estimate"
    if basis.startswith("probe"):
        pb = probe_band(probe.get("step_s_p10"), probe.get("step_s_p50"), probe.get("step_s_p90"),
                        int(probe.get("steps") or 0), basis.split()[1] if len(basis.split()) > 1 else "?") if probe else None
        return (pb or tb.centered(f"{basis}: no step-time spread measured")), None
    if basis == "estimate" and not local:
        return tb.centered(), mb
    return tb.centered(basis if basis != "estimate" else "the model's CPU time"), mb


def typical_lengths_ratio(workload_text: str, accelerator: str, gpus: int) -> float | None:
    """Returns a trial planned at the cap (lengths unstated: padding max_length) its compute time with the typical
    lengths padded to each micro-batch's longest instead, as a share of its time (None for other workloads):
    what its band's P10 reaches (issue 36: the two assumptions bound such a spec)."""
    from gpuledger.estimate import Workload, estimate, training_step

    w = Workload(**json.loads(workload_text)["workload"])
    if w.padding != "max_length" or w.sample_tokens is not None or w.method not in ("full", "lora", "qlora"):
        return None
    at_cap = training_step(estimate(w), accelerator, gpus).time_s(1.0)
    typical = training_step(estimate(w.model_copy(update={"padding": "longest"})), accelerator, gpus).time_s(1.0)
    return min(1.0, typical / at_cap) if at_cap > 0 else None


def with_bands(plan: Plan, estimates: pl.DataFrame, s, *, table=None, probed: pl.DataFrame | None = None,
               overhead_s: float | None = None) -> Plan:
    """Returns `plan` with the band columns (BAND_COLS) on every feasible trial and the totals'
    P10 / P90 (`Plan.bands`)."""
    t = plan.trials_frame
    if t.is_empty():
        return replace(plan, bands={"total_cost_usd_p10": 0.0, "total_cost_usd_p90": 0.0,
                                    "makespan_s_p10": 0.0, "makespan_s_p90": 0.0})
    wl = {(r["trial_id"], r["gpus"], r["sharding"]): r["workload"]
          for r in estimates.select("trial_id", "gpus", "sharding", "workload").iter_rows(named=True)}
    probes = {}
    if probed is not None and not probed.is_empty():
        for r in probed.iter_rows(named=True):
            probes[(r["trial_id"], r["accelerator"], int(r["gpus"]))] = r
    ov = s.overhead_s if overhead_s is None else overhead_s
    local = s.launcher == "local"
    cols: dict[str, list] = {c: [] for c in BAND_COLS}
    for r in t.select("trial_id", "feasible", "accelerator", "gpus", "sharding", "spot", "compute_s", "est_wall_s",
                      "est_cost_usd", "est_memory_gib", "usable_memory_gib", "est_basis").iter_rows(named=True):
        if not r["feasible"] or r["est_wall_s"] is None:
            for c in BAND_COLS:
                cols[c].append(None)
            continue
        text = wl.get((r["trial_id"], r["gpus"], r["sharding"]))
        cell = _cell(text, s, r["accelerator"], r["gpus"])
        tb, mb = trial_band(r["est_basis"], cell, table, local=local,
                            probe=probes.get((r["trial_id"], r["accelerator"], int(r["gpus"]))))
        if mb is not None:  # the band the fit was decided on (choice.py), where it has one
            mb = memory_band_of(text, table) or mb
        wall, compute = float(r["est_wall_s"]), max(float(r["compute_s"] or 0.0), 0.0)
        # the compute part moves; start-up stays; spot rework grows with the run (its ratio to T0)
        rework = max(wall / (ov + compute), 1.0) if r["spot"] and ov + compute > 0 else 1.0
        low = typical_lengths_ratio(text, r["accelerator"], r["gpus"]) if s.lengths_unstated and text else None
        for q, f in (("p10", tb.p10 if low is None else min(tb.p10, low)), ("p90", tb.p90)):
            w = max(wall + compute * (f - 1.0) * rework, 0.0)
            cols[f"est_wall_s_{q}"].append(round(w, 3))
            cols[f"est_cost_usd_{q}"].append(round(float(r["est_cost_usd"] or 0.0) * (w / wall if wall > 0 else 1.0), 6))
        mem = r["est_memory_gib"]
        cols["mem_gib_p10"].append(None if mem is None else round(mem * (mb.p10 if mb is not None else 1.0), 3))
        cols["mem_gib_p90"].append(None if mem is None else round(mem * (mb.p90 if mb is not None else 1.0), 3))
        cols["est_band"].append(tb.describe() if low is None or low >= tb.p10 else
                                f"{tb.describe()}; P10 at the typical sample lengths (x{low:.2f} of the cap's time)")
        usable = r["usable_memory_gib"]
        if mem is None or mb is None or usable is None:
            cols["oom_risk"].append(None)
            cols["memory_note"].append(None)
        else:
            cols["oom_risk"].append(round(oom_risk(mem, usable, mb.p10, mb.p50, mb.p90), 4))
            cols["memory_note"].append(risk_note(mem, usable, r["accelerator"], mb) if mem * mb.p90 > usable else None)
    frame = t.with_columns(**{c: pl.Series(c, v, dtype=pl.String if c in ("est_band", "memory_note") else pl.Float64)
                              for c, v in cols.items()})
    note = ("bands: each trial's P10 / P90 of wall-clock and cost and its memory's P10 / P90 from the measured error "
            "of its kind of run (framework x method x quantization x GPU count x GPU family; public runs scored out "
            "of source + your runs; gpuledger/estimate/bands.py, docs/accuracy.md); a modelled compute time is its "
            "cell's P50 (the model's time x the median measured / modelled there); est_band says what each rests on")
    notes = [note, MEMORY_FIT_RULE]
    risky = frame.filter(pl.col("memory_note").is_not_null())
    if risky.height:
        first = risky.row(0, named=True)
        notes.append(f"WARNING memory: {risky.height} trial(s) planned at risk of running out of GPU memory (their "
                     f"P90 exceeds the usable memory, no placement holds it), e.g. {first['trial_id']}: "
                     f"{first['memory_note']}")
    return replace(plan, trials_frame=frame, bands=_totals(plan, frame), assumptions=[*plan.assumptions, *notes])


def _totals(plan: Plan, frame: pl.DataFrame) -> PlanBands:
    """Returns the plan's P10 / P90 total cost (a pool's total scaled by its trials' ratio) and makespan."""
    from gpuledger.plan.schedule import makespan_s
    from gpuledger.plan.sections import PlanBands

    feas = frame.filter(pl.col("feasible") & pl.col("est_cost_usd_p90").is_not_null())
    p50 = float(feas["est_cost_usd"].sum()) if feas.height else 0.0
    out = {}
    for q in ("p10", "p90"):
        part = float(feas[f"est_cost_usd_{q}"].sum()) if feas.height else 0.0
        out[f"total_cost_usd_{q}"] = round(plan.total_est_cost_usd * (part / p50) if p50 > 0 else part, 4)
        if feas.height:
            order = {tid: i for i, tid in enumerate(plan.launch_order)}
            durs = [d for _, d in sorted(zip(feas["trial_id"].to_list(), feas[f"est_wall_s_{q}"].to_list(), strict=True),
                                         key=lambda x: order.get(x[0], math.inf))]
            out[f"makespan_s_{q}"] = round(float(makespan_s(durs, max(1, plan.max_parallel))), 3)
        else:
            out[f"makespan_s_{q}"] = 0.0
    return PlanBands(**out)


def at_confidence(plan: Plan, confidence: str) -> Plan:
    """Returns `plan` with its decisions taken at `confidence`: `within_budget` on the spend at that
    quantile (the pruned expected spend when known, scaled by the plan's P90 / P50 ratio at p90),
    `decided_usd` that spend, and trials whose wall-clock at that quantile misses the deadline marked
    (deadline_ok false, the reason with both quantiles)."""
    bands = replace(plan.bands, confidence=confidence) if plan.bands is not None else None
    decided = replace(plan, bands=bands).spend_at(confidence)  # the rule's one home: Plan.spend_at
    budget = plan.budget_usd if plan.budget_usd is not None else math.inf
    frame = plan.trials_frame
    dl = plan.deadline_s
    if dl is not None and confidence == "p90" and "est_wall_s_p90" in frame.columns:
        # spot rows of per-trial jobs were tested at P90 by the choice (Poisson preemptions on the P90 T0,
        # scoring.deadline_met); on-demand rows and a pool's runs are their P90 wall-clock
        pooled = plan.pool is not None and plan.pool.used
        late = pl.col("feasible") & pl.col("est_wall_s_p90").is_not_null() & (pl.col("est_wall_s_p90") > dl) \
            & pl.col("deadline_ok").fill_null(False) & (pl.lit(pooled) | ~pl.col("spot").fill_null(False))
        frame = frame.with_columns(
            reason=pl.when(late).then(
                pl.lit("misses deadline at P90: ") + pl.col("est_wall_s_p90").round(0).cast(pl.Int64).cast(pl.String)
                + pl.lit(" s (P50 ") + pl.col("est_wall_s").round(0).cast(pl.Int64).cast(pl.String)
                + pl.lit(f" s) > {round(dl)} s")).otherwise(pl.col("reason")),
            deadline_ok=pl.when(late).then(pl.lit(False)).otherwise(pl.col("deadline_ok")))
    return replace(plan, trials_frame=frame, bands=bands, within_budget=decided <= budget + 1e-9)
