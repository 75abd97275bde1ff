"""Bands: P10 / P50 / P90 of a time or memory estimate, from the measured error of its kind of run.

A figure's *cell* is (framework, method, quantization, GPU-count regime 1 | 2-8 | >8, GPU family).
Its band is the spread of log(measured / estimated) over the rows of that cell: public measurements
scored out of source (`band_rows`: each training-throughput source predicted with the stack
efficiencies fitted on the other sources, `public.held_out_tokens_per_s`; the peak-memory rows of
memory_public.csv, which no coefficient is fitted on, at their stated level) and the team's own
measured runs (`run_band_rows`, from the warehouse's `estimate_runs`).

Hierarchical, so a cell with few rows gets a wider, coarser band: the levels drop the GPU family,
then the count regime, then the quantization, then the method, then the framework (the root: every
row of the quantity). Each level's P10 / P50 / P90 are empirical quantiles of its rows with every
source weighted equally (rows of one source share its conditions, so they are not independent),
shrunk toward the parent's by `SHRINK_SOURCES` (weight n / (n + SHRINK_SOURCES), n = the level's
sources), and each side's spread is combined in quadrature with `FLOOR` (a source never seen is further
from the rest than the rows of one source are from each other: measured by `benchmarks/band_table.py`,
leave-one-source-out).

The public rows are precomputed (`gpuledger/estimate/data/band_rows.json`, written by
`python benchmarks/band_table.py --write`, `make bands`; tests/unit/test_band_table.py fails when
the shipped file is not what the model gives now), so `estimate` and `plan` only read and sort a
few hundred numbers. Pure apart from reading that package file.
"""

from __future__ import annotations

import functools
import json
import math
import statistics
from dataclasses import dataclass, field, replace
from importlib import resources

from gpuledger.estimate.coefficients import STACK_KERNEL_METHODS

#: package data with the public rows' out-of-source errors (benchmarks/band_table.py --write)
BAND_ROWS_FILE = "band_rows.json"
#: quantiles of a band
QUANTILES = (0.10, 0.50, 0.90)
#: prior strength, in sources, of a level's parent: a level of n sources keeps n / (n + 2) of its own
#: quantiles (one source: a third). Chosen with benchmarks/band_table.py's out-of-source coverage.
SHRINK_SOURCES = 2.0
#: the spread around the P50 (in log space) times this factor per quantity (1: as measured)
WIDEN = {"time": 1.0, "memory": 1.0}
#: an unseen source's own offset, in log space, added in quadrature to each side's spread: rows of one
#: source are closer to each other than to a source the table has not seen, so a cell whose sources
#: agree still gets about this much (±22% for time at 0.2), a wide cell barely more than its own
#: spread. Chosen so that the P10-P90 band holds 70-90% of the rows of a source left out with a median
#: P90 / P50 well under 1.6 (benchmarks/band_table.py; docs/accuracy.md): time 0.2, memory 0.15.
FLOOR = {"time": 0.20, "memory": 0.15}
#: A quantization whose figures rest on a coefficient no scored public row tests, and that coefficient's own
#: spread in log space (P10 / P90 half-width): added in quadrature to each side of a band of that quantization
#: that backs off past its quantization level (no row of it). time, 8bit: bitsandbytes LLM.int8 bases
#: (`INT8_BASE_MATMUL_FACTOR`), from the published 8-bit / 16-bit and 8-bit / 4-bit training-time ratios of
#: gpuledger/estimate/data/int8_speed.csv (3 sources, 4 ratios: 2.0-5.0x against 16 bit, 2.5x against 4 bit)
#: against the model's ratio at their settings: 1.2816 x the root mean square of each source's mean log ratio
#: (`public.int8_ratio_rows`; tests/unit/test_band_table.py recomputes it). The P50 is not moved: the ratios are
#: ranges, bounds and settings the sources leave unstated.
UNSCORED_SPREAD = {("time", "8bit"): 0.47}
UNSCORED_WHAT = {("time", "8bit"): "the 8-bit factor's own spread (3 published ratios, int8_speed.csv)"}
#: A stack timed with a kernel factor of its own over its engine (coefficients.STACK_KERNEL_SPEEDUP: adapter runs),
#: and that factor's spread in log space (P10 / P90 half-width), added in quadrature to each side of the time band
#: of such a run (its cell is its engine's: no scored public row is a run of the stack): 1.2816 x the root mean square
#: of each source's mean log residual of gpuledger/estimate/data/stack_speed.csv against the model's ratio at the
#: factor (`public.stack_residuals`; tests/unit/test_stack_speed.py recomputes it). The two sources (Unsloth's own
#: measurements and LLaMA-Factory's wiki) sit ~1.5x apart, so the spread is wide.
STACK_SPREAD = {"unsloth": 0.27}
STACK_WHAT = {"unsloth": "unsloth's kernel factor's own spread (14 published ratios of 2 sources, stack_speed.csv)"}
#: Mixture-of-experts models with more routed experts than any scored row's model (the Mixtral rows of
#: training_throughput.csv: 8), run through Transformers' own loop over the experts (framework hf), and that regime's
#: spread in log space (P10 / P90 half-width), added in quadrature to each side of their time band (their cell is a
#: dense one's: hf lora 16bit ...): 1.2816 x the root mean square of each source's mean log(measured / the model's
#: figure) of gpuledger/estimate/data/moe_eager_runs.csv (`public.moe_eager_rows`: gpt-oss-20b LoRA on one H100,
#: 2.2x the model's time; Qwen2-57B-A14B over Qwen2-72B under ZeRO-3, 2.7x the model's ratio; tests/unit/
#: test_band_table.py recomputes it). The P50 is not moved: a third public run (LLaMA-Factory #7921, Qwen3-30B-A3B
#: against QwQ-32B under ZeRO-3, settings not stated) is slower than the model says at no plausible setting, and
#: the three differ in what dominates (the per-expert kernel loop, ZeRO-3's per-module fetches). docs/training-time.md.
MOE_SCORED_EXPERTS = 8
MOE_EAGER_SPREAD = 1.14
MOE_EAGER_WHAT = ("the spread of Transformers' mixture-of-experts runs of more than 8 experts "
                  "(2 published runs, moe_eager_runs.csv; no scored row)")
#: the cell's fields, finest first dropped last (the order levels drop them: family first)
CELL_FIELDS = ("framework", "method", "quantization", "regime", "family")
QUANTITIES = ("time", "memory")


def gpu_regime(gpus: int | None) -> str:
    """Returns the GPU-count regime of a cell: '1', '2-8' (one node) or '>8' (several nodes)."""
    g = int(gpus or 1)
    return "1" if g <= 1 else "2-8" if g <= 8 else ">8"


def quantization(precision: str | None) -> str:
    """Returns the quantization of a cell: '4bit' (nf4, int4, bnb 4-bit), '8bit' (LLM.int8), 'fp8',
    or '16bit' (bf16, fp16, mixed or fp32 weights)."""
    p = (precision or "bf16").lower()
    if p in ("nf4", "fp4", "int4", "4bit") or "4bit" in p:
        return "4bit"
    if p in ("int8", "8bit") or "int8" in p:
        return "8bit"
    if p.startswith("fp8"):
        return "fp8"
    return "16bit"


@functools.lru_cache(maxsize=256)
def family_of(accelerator: str | None) -> str:
    """Returns the GPU family of a cell ('cpu' for the local CPU, 'any' when the GPU is not known: no
    row has it, so the band backs off to the count regime)."""
    if not accelerator:
        return "any"
    if accelerator.upper() == "CPU":
        return "cpu"
    from gpuledger.estimate.calibration import accelerator_family

    return accelerator_family(accelerator)


def cell_of(framework: str, method: str, precision: str | None, gpus: int | None, accelerator: str | None) -> tuple:
    """Returns the cell (CELL_FIELDS) of a figure (QLoRA's base is 4-bit whatever precision names the
    compute dtype, as torchtune's rows state bf16)."""
    quant = quantization(precision)
    if method == "qlora" and quant == "16bit":
        quant = "4bit"
    return (framework or "hf", method, quant, gpu_regime(gpus), family_of(accelerator))


@dataclass(frozen=True)
class BandRow:
    """One measured error: log(measured / estimated) of a figure of `cell`, from `source`."""

    quantity: str
    cell: tuple
    log_ratio: float
    source: str
    id: str = ""

    def to_json(self) -> dict:
        return {"quantity": self.quantity, **dict(zip(CELL_FIELDS, self.cell, strict=True)),
                "log_ratio": round(self.log_ratio, 5), "source": self.source, "id": self.id}

    @classmethod
    def from_json(cls, d: dict) -> BandRow:
        return cls(d["quantity"], tuple(d[f] for f in CELL_FIELDS), float(d["log_ratio"]), d["source"], d.get("id", ""))

    @property
    def error(self) -> float:
        """The estimate's signed error (estimate − measured) / measured."""
        return math.exp(-self.log_ratio) - 1.0


@dataclass(frozen=True)
class Band:
    """Multipliers of an estimate at P10 / P50 / P90 and what they rest on."""

    quantity: str
    p10: float
    p50: float
    p90: float
    rows: int  # rows of the level the band rests on (the figure's own cell when it has any)
    sources: int
    median_abs_error: float | None  # of the estimate on those rows
    level: tuple  # the cell fields kept at that level (a prefix of CELL_FIELDS' values)
    cell: tuple  # the figure's own cell
    runs: int = 0  # of the rows, the team's own measured runs
    basis: str = "public"  # public | probe | measured | none
    note: str = ""
    unscored: str = ""  # what widened a band with no row of its quantization (UNSCORED_SPREAD)

    def of(self, value: float) -> dict[str, float]:
        """Returns {p10, p50, p90} of a figure whose model value is `value`."""
        return {"p10": value * self.p10, "p50": value * self.p50, "p90": value * self.p90}

    def centered(self, note: str | None = None) -> Band:
        """Returns the band's spread around a figure already at its P50 (the planner's time, or one
        calibrated on the team's runs: `note` says which): P50 1, P10 and P90 in the same proportion."""
        if note is None:
            return replace(self, p10=self.p10 / self.p50, p50=1.0, p90=self.p90 / self.p50)
        return Band(self.quantity, self.p10 / self.p50, 1.0, self.p90 / self.p50, self.rows, self.sources,
                    self.median_abs_error, self.level, self.cell, self.runs, "calibrated",
                    f"{note}; the spread of {self.describe()}")

    @property
    def exact(self) -> bool:
        return len(self.level) == len(self.cell)

    def describe(self) -> str:
        """Returns what the band rests on, e.g. '14 public runs of this kind, median error 21%'."""
        if self.basis != "public":
            return self.note or self.basis
        if not self.rows:
            return "no measured run of any kind: a nominal band"
        what = "this kind" if self.exact else level_label(self.level)
        kinds = f"{self.rows - self.runs} public" + (f" + {self.runs} of your" if self.runs else "")
        err = f", median error {self.median_abs_error:.0%}" if self.median_abs_error is not None else ""
        if self.exact:
            back = ""
        elif self.cell[-1:] == ("any",) and self.level == self.cell[:-1]:
            back = " (no GPU named: any family)"
        else:
            shown = self.cell[:-1] if self.cell[-1:] == ("any",) else self.cell
            back = f" (none of {cell_label(shown)}: a wider band)"
        return f"{kinds} runs of {what}{back}{err}" + (f"; + {self.unscored}" if self.unscored else "")

    def to_json(self) -> dict:
        return {"p10": round(self.p10, 4), "p50": round(self.p50, 4), "p90": round(self.p90, 4), "rows": self.rows,
                "sources": self.sources, "runs": self.runs,
                "median_abs_error": None if self.median_abs_error is None else round(self.median_abs_error, 4),
                "cell": cell_label(self.cell), "rests_on": level_label(self.level) if self.level else "all runs",
                "basis": self.basis, "says": self.describe()}


def cell_label(cell: tuple) -> str:
    """Returns a cell as words: 'hf lora 16bit, 1 GPU, ampere'."""
    return level_label(cell)


def level_label(level: tuple) -> str:
    if not level:
        return "any kind"
    parts = list(level)
    if len(parts) >= 4:
        parts[3] = {"1": "1 GPU", "2-8": "2-8 GPUs", ">8": ">8 GPUs"}.get(parts[3], parts[3])
    head = " ".join(parts[:3])
    return ", ".join([head, *parts[3:]]) if len(parts) > 3 else head


def weighted_quantiles(values: list[float], weights: list[float], qs=QUANTILES) -> tuple[float, ...]:
    """Returns the quantiles `qs` of `values` weighted by `weights` (midpoints of the cumulative
    weight, linear between, clamped at the ends)."""
    pairs = sorted(zip(values, weights, strict=True))
    total = sum(w for _, w in pairs)
    cum, mids = 0.0, []
    for _, w in pairs:
        mids.append((cum + w / 2) / total)
        cum += w
    out = []
    for q in qs:
        if q <= mids[0]:
            out.append(pairs[0][0])
        elif q >= mids[-1]:
            out.append(pairs[-1][0])
        else:
            i = next(i for i in range(1, len(mids)) if mids[i] >= q)
            t = (q - mids[i - 1]) / (mids[i] - mids[i - 1])
            out.append(pairs[i - 1][0] + t * (pairs[i][0] - pairs[i - 1][0]))
    return tuple(out)


def _level_stats(rows: list[BandRow]) -> tuple[tuple[float, ...], int]:
    """Returns (source-weighted quantiles of the rows' log ratios, number of sources)."""
    per_source: dict[str, int] = {}
    for r in rows:
        per_source[r.source] = per_source.get(r.source, 0) + 1
    return (weighted_quantiles([r.log_ratio for r in rows], [1.0 / per_source[r.source] for r in rows]),
            len(per_source))


@dataclass
class BandTable:
    """The rows a quantity's bands are computed from, and the bands computed (cached per cell)."""

    rows: list[BandRow]
    shrink: float = SHRINK_SOURCES
    widen: dict = field(default_factory=lambda: dict(WIDEN))
    floor: dict = field(default_factory=lambda: dict(FLOOR))
    _cache: dict = field(default_factory=dict)

    def band(self, quantity: str, cell: tuple) -> Band:
        """Returns the band of `cell` for `quantity` (see the module's docstring)."""
        key = (quantity, cell)
        if key not in self._cache:
            self._cache[key] = self._band(quantity, cell)
        return self._cache[key]

    def _band(self, quantity: str, cell: tuple) -> Band:
        rows = [r for r in self.rows if r.quantity == quantity]
        if not rows:
            return Band(quantity, 1.0, 1.0, 1.0, 0, 0, None, (), cell, basis="public")
        est = None
        rests_on: tuple = ()
        rests_rows = rows
        for depth in range(len(CELL_FIELDS) + 1):
            level = cell[:depth]
            sel = [r for r in rows if r.cell[:depth] == level]
            if not sel:
                break
            raw, n_src = _level_stats(sel)
            w = 1.0 if est is None else n_src / (n_src + self.shrink)
            est = raw if est is None else tuple(w * a + (1 - w) * b for a, b in zip(raw, est, strict=True))
            rests_on, rests_rows = level, sel
        q10, q50, q90 = est
        wid, tau = self.widen[quantity], self.floor[quantity]
        q10 = q50 - math.hypot(wid * max(q50 - q10, 0.0), tau)
        q90 = q50 + math.hypot(wid * max(q90 - q50, 0.0), tau)
        quant = CELL_FIELDS.index("quantization")
        unscored = ""
        extra = UNSCORED_SPREAD.get((quantity, cell[quant])) if len(cell) > quant else None
        if extra and len(rests_on) <= quant:
            q10, q90 = q50 - math.hypot(q50 - q10, extra), q50 + math.hypot(q90 - q50, extra)
            unscored = UNSCORED_WHAT[(quantity, cell[quant])]
        sources = len({r.source for r in rests_rows})
        med = statistics.median(abs(r.error) for r in rests_rows)
        runs = sum(1 for r in rests_rows if r.source.startswith("warehouse"))
        return Band(quantity, math.exp(q10), math.exp(q50), math.exp(q90), len(rests_rows), sources, med, rests_on,
                    cell, runs=runs, unscored=unscored)


def _read_shipped() -> list[BandRow]:
    with resources.files("gpuledger.estimate").joinpath("data", BAND_ROWS_FILE).open() as fh:
        doc = json.load(fh)
    return [BandRow.from_json(d) for d in doc["rows"]]


@functools.cache
def public_table() -> BandTable:
    """Returns the BandTable of the shipped public rows (read once)."""
    return BandTable(_read_shipped())


def table_with_runs(runs: list[dict] | None) -> BandTable:
    """Returns the public table, plus the team's measured runs (`calibration.load_runs`) when any."""
    extra = run_band_rows(runs or [])
    return BandTable(public_table().rows + extra) if extra else public_table()


def band_for(quantity: str, framework: str, method: str, precision: str | None, gpus: int | None,
             accelerator: str | None, stack: str | None = None, model: str | None = None,
             table: BandTable | None = None) -> Band:
    """Returns the band of one figure (`quantity` time | memory) of its cell; the time of a run of a `stack`
    with a kernel factor of its own (STACK_SPREAD) also carries that factor's spread, and the time of a
    Transformers run of a `model` with more experts than any scored row's (MOE_EAGER_SPREAD) that regime's."""
    band = (table or public_table()).band(quantity, cell_of(framework, method, precision, gpus, accelerator))
    if quantity != "time":
        return band
    band = with_stack_spread(band, stack, method)
    return widened(band, MOE_EAGER_SPREAD, MOE_EAGER_WHAT) if eager_moe(framework, model) else band


def with_stack_spread(band: Band, stack: str | None, method: str) -> Band:
    """Returns a time band widened, each side in quadrature, by the spread of `stack`'s kernel factor where the
    run's time uses one (an adapter run of a stack in STACK_SPREAD), else the band as it is."""
    extra = STACK_SPREAD.get(stack or "")
    if not extra or method not in STACK_KERNEL_METHODS:
        return band
    return widened(band, extra, STACK_WHAT[stack])


def widened(band: Band, extra: float, what: str) -> Band:
    """Returns `band` with `extra` (log space) added in quadrature to each side's spread, saying `what` it is."""
    lo = math.hypot(math.log(band.p50 / band.p10), extra)
    hi = math.hypot(math.log(band.p90 / band.p50), extra)
    unscored = "; + ".join(x for x in (band.unscored, what) if x)
    return replace(band, p10=band.p50 * math.exp(-lo), p90=band.p50 * math.exp(hi), unscored=unscored)


@functools.lru_cache(maxsize=256)
def eager_moe(framework: str | None, model: str | None) -> bool:
    """Whether a run of `model` under `framework` is a mixture-of-experts run through Transformers' own loop over
    the experts with more experts than any scored row's model (MOE_SCORED_EXPERTS); False when the model's
    config cannot be read (the estimate that needs it says why)."""
    from gpuledger.estimate.coefficients import FRAMEWORK_CLASS

    if not model or FRAMEWORK_CLASS.get(framework or "hf") != "hf":
        return False
    from gpuledger.models import load_config

    try:
        return load_config(model).num_experts > MOE_SCORED_EXPERTS
    except Exception:  # noqa: BLE001 - an unreadable config has no band of its own; its estimate refuses it
        return False


def probe_band(step_s_p10: float | None, step_s_p50: float | None, step_s_p90: float | None, steps: int,
               run_id: str) -> Band | None:
    """Returns the band of a probe's extrapolated compute time from the probe's own step times (P10 / P90
    of its steps over their median), or None when it measured too few steps."""
    if not step_s_p50 or not step_s_p10 or not step_s_p90 or steps < 3:
        return None
    lo, hi = min(step_s_p10 / step_s_p50, 1.0), max(step_s_p90 / step_s_p50, 1.0)
    return Band("time", lo, 1.0, hi, steps, 1, None, (), (), basis="probe",
                note=f"the spread of probe {run_id}'s {steps} step times")


# ---- the rows ---------------------------------------------------------------------------------

def public_time_rows() -> list[BandRow]:
    """Returns the scored training_throughput.csv rows: log(measured time / held-out model time)."""
    from gpuledger.estimate.public import held_out_tokens_per_s, time_cases

    cases = time_cases()
    predicted = held_out_tokens_per_s(cases)
    out = []
    for c in cases:
        s = c.setup
        out.append(BandRow("time", cell_of(s.framework, s.method, s.precision, s.gpus, s.accelerator),
                           math.log(predicted[c.id] / c.measured), c.source, c.id))
    return out


def public_whole_run_rows() -> list[BandRow]:
    """Returns the whole runs of whole_runs.csv (one rented GPU, a data set x epochs, the published runtime):
    log(measured / the model's whole-run time) with the samples' lengths as the spec leaves them (the
    default, `DEFAULT_SAMPLE_TOKENS`): what a user who writes the run's settings is planned. No coefficient
    is fitted on them."""
    from gpuledger.estimate.public import whole_runs

    return [BandRow("time", cell_of(r.workload.framework, r.workload.method, r.workload.precision, r.workload.gpus,
                                    r.accelerator), math.log(r.measured_s / r.model_s()), r.source, r.id)
            for r in whole_runs()]


def public_rl_rows() -> list[BandRow]:
    """Returns the GRPO/PPO step times of rl_step_times.csv: log(measured step / the RL model's step,
    gpuledger/estimate/rl.py) in the cell of the run as a user would write it (framework hf, method grpo|ppo).
    One source per publisher (`public.rl_source`). The RL model's `VLLM_EAGER_LAYER_S` is fitted on the
    verl-data rows, so that source's rows are in-sample for it; no other coefficient is fitted on them."""
    from gpuledger.estimate.public import RL_CSV, read_csv, rl_model_step_s, rl_source, rl_workload

    out = []
    for row in read_csv(RL_CSV):
        w = rl_workload(row)
        out.append(BandRow("time", cell_of(w.framework, w.method, w.precision, w.gpus, row["accelerator"]),
                           math.log(float(row["measured_step_s"]) / rl_model_step_s(row)), rl_source(row), row["id"]))
    return out


def public_memory_rows() -> list[BandRow]:
    """Returns the peak rows of memory_public.csv: log(measured / estimate at the row's level)."""
    from gpuledger.estimate import estimate
    from gpuledger.estimate.public import MEMORY_CSV, MEMORY_FAMILY_GPU, memory_workload, read_csv

    out = []
    for row in read_csv(MEMORY_CSV):
        if row["kind"] != "peak":
            continue
        w = memory_workload(row)
        est = estimate(w).memory_gib[row["level"]]
        out.append(BandRow("memory", cell_of(w.framework, w.method, w.precision, w.gpus, MEMORY_FAMILY_GPU[row["family"]]),
                           math.log(float(row["measured_gib"]) / est), row["family"], row["id"]))
    return out


def band_rows() -> list[BandRow]:
    """Returns every public row of the table (time: throughput rows, whole runs, RL steps; then memory), as
    `benchmarks/band_table.py` ships them."""
    return public_time_rows() + public_whole_run_rows() + public_rl_rows() + public_memory_rows()


def run_band_rows(runs: list[dict]) -> list[BandRow]:
    """Returns band rows of the team's succeeded runs (`calibration.load_runs`): time where the plan's
    time was the model's own (est_basis 'estimate'), log(wall_s / est_wall_s); memory on GPUs,
    log(peak device memory / planned device memory). Each sweep counts as one source."""
    from gpuledger.estimate.calibration import RUN_FRAMEWORK

    out = []
    for r in runs:
        gpus = r.get("gpus") or 0
        if not gpus or not r.get("accelerator"):
            continue  # CPU runs measure RSS against a CPU model: not a GPU cell
        cell = cell_of(r.get("framework") or RUN_FRAMEWORK, r["method"], r.get("precision"), gpus, r["accelerator"])
        src = f"warehouse:{r.get('sweep_id')}"
        if (r.get("est_wall_s") or 0) > 0 and (r.get("wall_s") or 0) > 0 and r.get("est_basis") in (None, "estimate"):
            out.append(BandRow("time", cell, math.log(r["wall_s"] / r["est_wall_s"]), src, str(r.get("run_id"))))
        if (r.get("est_memory_gib") or 0) > 0 and (r.get("measured_memory_gib") or 0) > 0:
            out.append(BandRow("memory", cell, math.log(r["measured_memory_gib"] / r["est_memory_gib"]), src,
                               str(r.get("run_id"))))
    return out


# ---- what the shipped table and the accuracy gate record ---------------------------------------

def cell_summary(rows: list[BandRow]) -> list[dict]:
    """Returns per quantity and cell that has rows: rows, sources, median |error| (the accuracy gate's
    file, benchmarks/results/accuracy_cells.json)."""
    groups: dict[tuple, list[BandRow]] = {}
    for r in rows:
        groups.setdefault((r.quantity, r.cell), []).append(r)
    out = []
    for (q, cell), sel in sorted(groups.items()):
        out.append({"quantity": q, "cell": cell_label(cell), **dict(zip(CELL_FIELDS, cell, strict=True)),
                    "rows": len(sel), "sources": len({r.source for r in sel}),
                    "median_abs_error": round(statistics.median(abs(r.error) for r in sel), 4)})
    return out


def calibration(rows: list[BandRow], *, shrink: float = SHRINK_SOURCES, widen: dict | None = None,
                floor: dict | None = None) -> dict:
    """Returns the bands' out-of-source calibration per quantity: every row's band computed from the
    rows of the OTHER sources; the share whose measured value lies within P10-P90, below P10, above
    P90, and the median P90 / P50."""
    out = {}
    for quantity in QUANTITIES:
        sel = [r for r in rows if r.quantity == quantity]
        inside = below = above = 0
        ratios = []
        for source in sorted({r.source for r in sel}):
            table = BandTable([r for r in rows if r.source != source], shrink=shrink, widen=dict(widen or WIDEN),
                              floor=dict(floor or FLOOR))
            for r in sel:
                if r.source != source:
                    continue
                b = table.band(quantity, r.cell)
                m = math.exp(r.log_ratio)  # measured / estimate
                inside += b.p10 <= m <= b.p90
                below += m < b.p10
                above += m > b.p90
                ratios.append(b.p90 / b.p50)
        n = len(ratios)
        out[quantity] = {"rows": n, "sources": len({r.source for r in sel}),
                         "coverage_p10_p90": round(inside / n, 4) if n else None,
                         "below_p10": round(below / n, 4) if n else None,
                         "above_p90": round(above / n, 4) if n else None,
                         "median_p90_over_p50": round(statistics.median(ratios), 4) if n else None}
    return out
