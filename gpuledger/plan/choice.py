"""Step 4 of the plan: the choice per trial, measured durations applied, the schedule, totals,
the what-if and the alternatives the budget guard quotes."""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
import polars as pl

from gpuledger.plan.alternatives import alternatives as budget_alternatives
from gpuledger.plan.assumptions import plan_assumptions
from gpuledger.plan.candidates import candidate_offers
from gpuledger.plan.compute_table import KeyCompute, accelerator_ids, compute_in_row_order, compute_matrix
from gpuledger.plan.estimates import accelerator_table, compute_times
from gpuledger.plan.model import Plan
from gpuledger.plan.schedule import list_schedule, makespan_s
from gpuledger.plan.scoring import KEY_COLS, best_rows
from gpuledger.plan.settings import S_PER_H, PlanSettings
from gpuledger.plan.whatif import what_if_curve

#: The columns of a plan's trial table (plan.trials_frame), in order. `est_basis` says where the
#: duration comes from: "measured" (this trial's own measured run), "calibrated on N runs" (a rate
#: fitted to measured runs of the same model, method and accelerator), "probe RUN_ID DATE" (extrapolated
#: from a probe of the trial's shape, gpuledger/plan/probes.py) or "estimate" (the training-step model,
#: `gpuledger.estimate.train_time_s`).
OUT_COLS = [
    "trial_id", "trial_index", "accelerator", "gpus", "sharding", "cloud", "region", "instance_type", "spot",
    "est_memory_gib", "usable_memory_gib", "flops_total", "compute_s", "est_wall_s", "est_cost_usd", "est_basis",
    "usd_per_hour", "on_demand_usd_per_hour", "preemptions_per_hour", "expected_preemptions", "deadline_ok",
    "price_source", "price_as_of", "price_basis", "feasible", "reason",
]

MEASURED_SCHEMA = {"trial_id": pl.String, "accelerator": pl.String, "gpus": pl.Int64, "wall_s": pl.Float64}


def _infeasible_reasons(estimates: pl.DataFrame, candidates: pl.DataFrame, accel: pl.DataFrame, settings: PlanSettings,
                        banded: bool = False) -> pl.DataFrame:
    """Returns trial_id, reason for trials with no fitting candidate (`banded`: `est_memory_gib` is the
    memory band's P10, the optimistic end the refusal rests on)."""
    usable = (
        candidates.select("accelerator", "gpus").unique()
        .join(accel.select("accelerator", "memory_gib").unique("accelerator"), on="accelerator")
        .with_columns(usable=pl.col("memory_gib") * settings.memory_safety_fraction - settings.memory_reserve_gib)
    )
    best = usable.sort("usable", descending=True).group_by("gpus", maintain_order=True).first()
    largest = usable.sort("usable", descending=True).head(1)
    per_trial = (
        estimates.sort("est_memory_gib", nulls_last=True)
        .group_by("trial_id", maintain_order=True)
        .agg(pl.col("est_memory_gib").first(), pl.col("gpus").first(), pl.col("sharding").first(), pl.col("est_error").drop_nulls().first())
        .join(best.select("gpus", pl.col("accelerator").alias("best_acc"), pl.col("usable").alias("best_usable")), on="gpus", how="left")
    )
    la, lu = (largest["accelerator"][0], largest["usable"][0]) if largest.height else (None, None)
    reasons = []
    for r in per_trial.iter_rows(named=True):
        if r["est_memory_gib"] is None:
            reasons.append(r["est_error"] or "no estimate")
        elif la is None:
            reasons.append("no offer for the candidate accelerators in the chosen clouds/regions (with a price that "
                           "passed the price floor: refused prices are named in the assumptions)")
        else:
            acc, us = (r["best_acc"], r["best_usable"]) if r["best_acc"] else (la, lu)
            where = f" ({r['gpus']} GPU{'s' if r['gpus'] > 1 else ''}, {r['sharding']})"
            at = " even at the memory band's P10 (its optimistic end)" if banded else ""
            reasons.append(f"needs {r['est_memory_gib']:.1f} GiB per GPU{where}{at}; largest candidate {acc} has "
                           f"{us:.1f} GiB usable")
    return pl.DataFrame({"trial_id": per_trial["trial_id"], "reason": reasons}, schema={"trial_id": pl.String, "reason": pl.String})


def _apply_known(table: pl.DataFrame, known: pl.DataFrame, s: PlanSettings, on: list[str],
                 skip_basis: str | None = None) -> pl.DataFrame:
    """Returns the chosen rows with a known duration in place of the estimate where `known` (trial_id,
    the placement columns `on`, _k_wall = T0 the whole run, _k_compute, _k_basis, optional _k_mem) matches
    the chosen placement (and the row's basis is not `skip_basis`). Spot rework and the cost follow
    from T0 as in `scored_candidates`."""
    t = table.join(known.rename({c: f"_k_{c}" for c in on}), on="trial_id", how="left")
    hit = pl.col("_k_wall").is_not_null()
    for c in on:
        hit = hit & (pl.col(f"_k_{c}") == pl.col(c))
    if skip_basis is not None:
        hit = hit & (pl.col("est_basis").fill_null("") != skip_basis)
    hit = hit.fill_null(False)
    lost = pl.lit(s.checkpoint_interval_s / 2) if s.checkpoint_interval_s is not None else pl.col("_k_compute").clip(0) / 2
    rate_per_s = pl.col("preemptions_per_hour") / S_PER_H
    wall = pl.when(pl.col("spot")).then(pl.col("_k_wall") * (1 + rate_per_s * (pl.lit(s.restart_s) + lost))).otherwise(pl.col("_k_wall"))
    mem = pl.col("_k_mem") if "_k_mem" in known.columns else pl.lit(None, dtype=pl.Float64)
    t = t.with_columns(
        compute_s=pl.when(hit).then(pl.col("_k_compute").clip(0)).otherwise(pl.col("compute_s")),
        est_wall_s=pl.when(hit).then(wall).otherwise(pl.col("est_wall_s")),
        expected_preemptions=pl.when(hit).then(rate_per_s * pl.col("_k_wall")).otherwise(pl.col("expected_preemptions")),
        est_memory_gib=pl.when(hit & mem.is_not_null()).then(mem).otherwise(pl.col("est_memory_gib")),
        est_basis=pl.when(hit).then(pl.col("_k_basis")).otherwise(pl.col("est_basis")),
    ).with_columns(
        est_cost_usd=pl.when(hit).then(pl.col("usd_per_hour") * pl.col("est_wall_s") / S_PER_H).otherwise(pl.col("est_cost_usd")),
    )
    return t.drop([c for c in t.columns if c.startswith("_k_")])


def apply_measured(table: pl.DataFrame, measured: pl.DataFrame | None, s: PlanSettings) -> pl.DataFrame:
    """Returns the chosen rows with a trial's own measured wall-clock in place of its estimate where
    that trial was measured on the chosen accelerator and GPU count (est_basis "measured"): the
    measurement is the whole run (start-up included), so T0 = wall_s and compute_s = wall_s −
    overhead; spot rework and the cost follow from T0 as in `scored_candidates`."""
    if measured is None or measured.is_empty():
        return table
    known = measured.select(
        "trial_id", "accelerator", pl.col("gpus").cast(pl.Int64), pl.col("wall_s").alias("_k_wall"),
        (pl.col("wall_s") - s.overhead_s).alias("_k_compute"), pl.lit("measured").alias("_k_basis"))
    return _apply_known(table, known, s, ["accelerator", "gpus"])


def apply_probes(table: pl.DataFrame, probed: pl.DataFrame | None, s: PlanSettings) -> pl.DataFrame:
    """Returns the chosen rows extrapolated from a probe of their shape where one ran on the chosen
    accelerator, GPU count and sharding (gpuledger/plan/probes.py: compute_s = tokens / tokens_per_s,
    T0 = provisioning + probe start-up + compute_s, memory = the probe's peak; est_basis "probe RUN_ID
    DATE"); a trial measured itself ("measured") keeps its measurement."""
    if probed is None or probed.is_empty():
        return table
    compute = pl.col("tokens") / pl.col("tokens_per_s")
    known = probed.select(
        "trial_id", "accelerator", pl.col("gpus").cast(pl.Int64), "sharding",
        (pl.lit(s.provisioning_s) + pl.col("startup_s") + compute).alias("_k_wall"), compute.alias("_k_compute"),
        pl.col("basis").alias("_k_basis"), pl.col("memory_gib").alias("_k_mem"))
    return _apply_known(table, known, s, ["accelerator", "gpus", "sharding"], skip_basis="measured")


def plan_from_estimates(
    estimates: pl.DataFrame,
    offers: pl.DataFrame,
    settings: PlanSettings,
    *,
    trials_meta: pl.DataFrame | None = None,
    accel: pl.DataFrame | None = None,
    times: pl.DataFrame | None = None,
    extra_assumptions: Sequence[str] = (),
    measured: pl.DataFrame | None = None,
    probed: pl.DataFrame | None = None,
    what_if_shared_cores: int | None = None,
    rollout_offers: pl.DataFrame | None = None,
) -> Plan:
    """Returns the Plan: per trial the cheapest (gpus, offer, spot) that meets the deadline (else
    the cheapest that fits, with reason "misses deadline"), or infeasible with the reason; then the
    LPT schedule on `max_parallel` slots, totals, the what-if curve and the alternatives the budget
    guard quotes.

    `estimates`: trial_id, gpus, sharding, est_memory_gib, flops_total, workload (+ optional
    trial_index, precision, est_error). `offers`: the columns of `load_offers`. `trials_meta`: trial_id,
    params (JSON text) — for the output. `accel`: the `accelerator_table` (default: from the
    catalog for the offers' accelerators; may carry `basis`, e.g. "calibrated on 12 runs").
    `times`: workload, accelerator, compute_s (default: `compute_times` of the estimates' workloads).
    `measured`: trial_id, accelerator, gpus, wall_s (see `apply_measured`). `probed`: per trial a
    probe of its shape (`gpuledger.plan.probes.probes_for_trials`, see `apply_probes`). `rollout_offers`: where
    an RL trial whose rollouts run on GPUs of their own (`rollout_gpu`) finds its rollout instance (default
    `offers`): its on-demand $/hour is added to the trial's price for the whole wall time (rl_roles.py).
    """
    s = settings
    est = estimates
    if "price_problem" not in offers.columns or "spot_problem" not in offers.columns:
        from gpuledger.catalog.floors import mark

        offers = mark(offers)  # a hand-made frame: the price floors over its own rows
    if "spot_suspicious" not in offers.columns:
        from gpuledger.catalog.offers import spot_suspicious_expr

        offers = offers.with_columns(spot_suspicious=spot_suspicious_expr())
    if "precision" not in est.columns:
        est = est.with_columns(precision=pl.lit(s.precision))
    if "est_error" not in est.columns:
        est = est.with_columns(est_error=pl.lit(None, dtype=pl.String))
    if "trial_index" not in est.columns:
        idx = est.select("trial_id").unique(maintain_order=True).with_row_index("trial_index").with_columns(pl.col("trial_index").cast(pl.Int64))
        est = est.join(idx, on="trial_id", how="left")
    est = est.with_columns(pl.col("gpus").cast(pl.Int64), pl.col("est_memory_gib").cast(pl.Float64), pl.col("flops_total").cast(pl.Float64))
    if accel is None:
        accel = accelerator_table(offers["accelerator"].unique().to_list(), est["precision"].unique().to_list(), s.method)
    if times is None:
        times = compute_times(est, accel["accelerator"].unique().to_list())
    if "basis" not in accel.columns:
        accel = accel.with_columns(basis=pl.lit("estimate"))
    snapshot = offers["price_snapshot"][0] if "price_snapshot" in offers.columns and offers.height else None
    if snapshot is None:
        from gpuledger.catalog.offers import price_snapshot_id

        snapshot = price_snapshot_id(offers)
    candidates = candidate_offers(offers, est["gpus"].unique().to_list(), s).with_row_index("cand")

    # the fit at the memory band (gpuledger/plan/bands.py MEMORY_FIT_RULE): first every trial on a placement
    # its P90 fits (safe), then the trials with none on one its P10 fits (at risk); the rest are refused
    spot_allowed = {"auto": None, "always": True, "never": False}[s.spot]
    trial_code = _trial_codes(est)
    row_trial = trial_code[est["est_memory_gib"].is_not_null().to_numpy()]  # per row of `keyed`
    lo, hi = _memory_fit_columns(est, s)
    est_safe = est.with_columns(est_memory_gib=hi)
    keyed, keys, compute, row_key = _keys(est_safe, times, accel)
    from gpuledger.plan.rl_roles import rollout_extra_usd  # an RL trial's rollout instance of its own

    r_offers = offers if rollout_offers is None else rollout_offers
    extra = rollout_extra_usd(keys, r_offers, s)
    best_key, any_fit = best_rows(keys, candidates, accel, None, s, spot=spot_allowed, compute=compute,
                                  extra_usd=extra)
    per_trial, missing = _per_trial(est_safe, keyed, row_key, row_trial, trial_code, best_key, candidates, accel)
    if not (lo == hi).all():
        est_risky = est.with_columns(est_memory_gib=lo)
        keyed, keys, compute, row_key = _keys(est_risky, times, accel)
        extra = rollout_extra_usd(keys, r_offers, s)  # these keys' ids
        if missing.height:
            best_key, any_fit = best_rows(keys, candidates, accel, None, s, spot=spot_allowed, compute=compute,
                                          extra_usd=extra)
            risky, missing = _per_trial(est_risky, keyed, row_key, row_trial, trial_code, best_key, candidates, accel)
            risky = risky.join(missing, on="trial_id", how="anti")
            per_trial = pl.concat([per_trial.join(risky.select("trial_id"), on="trial_id", how="anti"), risky])
            per_trial = per_trial.sort("trial_index")
        # the chosen rows say the model's estimate (the band's P10 / P90 are the plan's mem_gib_p10 / p90)
        model_mem = est.select("trial_id", "gpus", "sharding", pl.col("est_memory_gib").alias("_model_mem"))
        per_trial = per_trial.join(model_mem, on=["trial_id", "gpus", "sharding"], how="left", maintain_order="left") \
            .with_columns(est_memory_gib=pl.col("_model_mem")).drop("_model_mem")

    if extra is not None:  # the rollout instance (on demand) in the trial's on-demand rate too
        per_trial = _with_rollout_on_demand(per_trial, est, r_offers, s)
    dl = s.deadline_s
    chosen = apply_probes(apply_measured(per_trial, measured, s), probed, s)
    late = np.flatnonzero(~chosen["deadline_ok"].to_numpy())  # the reason is written for these only
    reason = pl.repeat(None, chosen.height, dtype=pl.String, eager=True).alias("reason")
    if late.size:
        reason = reason.scatter(late, chosen[late].select(
            pl.lit("misses deadline: ") + pl.col("est_wall_s").round(0).cast(pl.Int64).cast(pl.String)
            + pl.lit(f" s > {dl if dl is None else round(dl)} s")
            + pl.when(pl.col("spot")).then(pl.lit(f" at {s.deadline_confidence:.0%} confidence")).otherwise(pl.lit(""))
        ).to_series())
    feasible = chosen.with_columns(feasible=pl.lit(True), reason=reason).select(OUT_COLS)

    # schedule: LPT (longest first, ties by trial_index) list scheduling on max_parallel slots
    k = max(1, int(s.max_parallel))
    wall = feasible["est_wall_s"].to_numpy()
    order = np.argsort(-wall)
    if (np.diff(wall[order]) == 0).any():  # equal durations: the lower trial_index first
        order = np.lexsort((feasible["trial_index"].to_numpy(), -wall))
    durations = wall[order]
    costs = feasible["est_cost_usd"].to_numpy()[order]
    start, slot = list_schedule(durations, k)
    makespan = float((start + durations).max()) if len(durations) else 0.0
    start_s, slot_of = np.empty(len(order)), np.empty(len(order), dtype=np.int64)
    start_s[order], slot_of[order] = start, slot
    table = feasible.with_columns(start_s=start_s, slot=slot_of)
    if missing.height:
        banded = not (lo == hi).all()
        table = pl.concat([table, _infeasible(est, missing, candidates, accel, s, spot_allowed, feasible,
                                              fit_memory=lo if banded else None)], how="diagonal_relaxed")
    total = float(costs.sum()) if len(costs) else 0.0
    what_if = what_if_curve(durations, costs, stop_at_target=s.target is not None, shared_cores=what_if_shared_cores,
                            _schedules={k: (start, slot)})
    alternatives = budget_alternatives(any_fit, row_key, keyed["trial_id"], candidates, accel, compute, table, s, total, keys,
                                       extra_usd=extra)

    if trials_meta is not None:
        table = table.join(trials_meta.select("trial_id", "params"), on="trial_id", how="left")
    else:
        table = table.with_columns(params=pl.lit("{}"))
    round_cols = {"est_memory_gib": 3, "usable_memory_gib": 3, "compute_s": 3, "est_wall_s": 3, "est_cost_usd": 6,
                  "start_s": 3, "expected_preemptions": 4}
    table = table.with_columns([pl.col(c).round(n) for c, n in round_cols.items()])
    if not table["trial_index"].is_sorted():
        table = table.sort("trial_index")

    from gpuledger.plan.prices import price_notes

    used = candidates[np.unique(per_trial["cand"].to_numpy())].with_columns(feasible=pl.lit(True))  # the prices chosen
    assumptions = list(extra_assumptions) + plan_assumptions(s, candidates, offers, accel) + price_notes(used, s.launcher)
    if dl is not None and len(durations):
        assumptions.append(_deadline_note(durations, makespan, k, dl))
    return Plan(
        sweep=s.sweep, trials_frame=table, total_est_cost_usd=total, makespan_s=makespan, max_parallel=k,
        budget_usd=s.budget_usd, within_budget=total <= s.budget_usd, price_snapshot=snapshot, what_if=what_if,
        assumptions=assumptions, launcher=s.launcher, launch_order=feasible["trial_id"].gather(order).to_list(),
        alternatives=alternatives, deadline_s=dl,
    )


def _with_rollout_on_demand(per_trial: pl.DataFrame, est: pl.DataFrame, offers: pl.DataFrame,
                            s: PlanSettings) -> pl.DataFrame:
    """Adds each trial's rollout instance $/hour (RL rollouts on GPUs of their own) to its on-demand rate,
    as scoring added it to `usd_per_hour`."""
    from gpuledger.estimate.workload import Workload
    from gpuledger.plan.rl_roles import rollout_instance

    texts = est.select("trial_id", "gpus", "sharding", "workload").unique(["trial_id", "gpus", "sharding"], keep="first")
    rows = per_trial.select("trial_id", "gpus", "sharding").join(texts, on=["trial_id", "gpus", "sharding"],
                                                                  how="left", maintain_order="left")
    usd: dict[str, float] = {}
    add = []
    for text in rows["workload"].to_list():
        if text is None:
            add.append(0.0)
            continue
        if text not in usd:
            inst = rollout_instance(Workload(**json.loads(text)["workload"]), offers, s)
            usd[text] = inst["usd_per_hour"] if inst else 0.0
        add.append(usd[text])
    return per_trial.with_columns(on_demand_usd_per_hour=pl.col("on_demand_usd_per_hour") + pl.Series(add))


def _memory_fit_columns(est: pl.DataFrame, s: PlanSettings) -> tuple[pl.Series, pl.Series]:
    """Returns per estimate row its peak memory at the band's P10 and at its P90 (`bands.memory_fit_factors`;
    the estimate itself where no band applies)."""
    from gpuledger.plan.bands import memory_fit_factors

    lo, hi = memory_fit_factors(est, s.band_table)
    mem = est["est_memory_gib"]
    return (mem * lo).alias("est_memory_gib"), (mem * hi).alias("est_memory_gib")


def _keys(est: pl.DataFrame, times: pl.DataFrame, accel: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame, KeyCompute, np.ndarray]:
    """Returns (the estimate rows with a memory estimate, the scoring keys (key, KEY_COLS), their
    compute matrix (`compute_table`), each row's key). Distinct workloads laid out in `times` row by row
    (`compute_in_row_order`): one key per row; otherwise identical rows (KEY_COLS) share a key, scored once."""
    keyed = est.filter(pl.col("est_memory_gib").is_not_null())
    acc_ids = accelerator_ids(accel)
    compute = compute_in_row_order(keyed["workload"], times, acc_ids)
    if compute is not None:
        row_key = np.arange(keyed.height, dtype=np.int64)
        keys = keyed.select(pl.int_range(pl.len(), dtype=pl.UInt32).alias("key"), *KEY_COLS)
        return keyed, keys, compute, row_key
    key = (keyed.select(pl.struct(KEY_COLS).rank("dense")).to_series() - 1).cast(pl.UInt32)
    keys = keyed.with_columns(key=key).unique("key", keep="any").select("key", *KEY_COLS)
    return keyed, keys, compute_matrix(keys, times, acc_ids), key.to_numpy().astype(np.int64)


def _trial_codes(est: pl.DataFrame) -> np.ndarray:
    """Returns each estimate row's trial as a code 0..trials − 1: its trial_index's place when trial ids
    and indexes match one to one (checked: a gather and a count, no hashing of every row), else its
    trial_id's place in sorted order."""
    ti, ids = est["trial_index"], est["trial_id"]
    n = est.height
    if n and not ti.null_count() and not ids.null_count() and ti.min() >= 0 and ti.max() < 4 * n:
        index = ti.to_numpy().astype(np.int64)
        first = np.full(int(index.max()) + 1, n, dtype=np.int64)  # each trial_index's first row
        np.minimum.at(first, index, np.arange(n))
        firsts = first[first < n]
        if (ids == ids.gather(first[index])).all() and ids.gather(firsts).n_unique() == len(firsts):
            code_of = np.cumsum(first < n) - 1
            return code_of[index]
    return ids.rank("dense").to_numpy().astype(np.int64) - 1


def _per_trial(est: pl.DataFrame, keyed: pl.DataFrame, row_key: np.ndarray, row_trial: np.ndarray, trial_code: np.ndarray,
               best_key: dict[str, np.ndarray], candidates: pl.DataFrame, accel: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Returns (per trial its chosen row: deadline met first, then the lowest cost, then less time, ties
    to the first row, in trial_index order; the trials with none: trial_id, trial_index).

    One score per row (cost, + twice the largest cost where the deadline is missed, + wall × 1e-12)
    and its minimum per trial (numpy: no join or group-by on the trial ids). `best_key`: each key's best
    row (`scoring.best_rows`)."""
    n_trials = int(trial_code.max()) + 1 if len(trial_code) else 0
    pos = np.full(int(row_key.max()) + 1 if len(row_key) else 0, -1, dtype=np.int64)  # key -> its row of best_key
    pos[best_key["key"]] = np.arange(len(best_key["key"]))
    rows = np.flatnonzero(pos[row_key] >= 0)  # rows of `keyed` with a best candidate
    at = pos[row_key[rows]]
    cost = best_key["est_cost_usd"][at]
    first = np.full(n_trials, len(rows), dtype=np.int64)
    if len(rows):
        big = float(np.nanmax(cost)) * 2 + 1.0
        score = cost + np.where(best_key["deadline_ok"][at], 0.0, big) + best_key["est_wall_s"][at] * 1e-12
        code = row_trial[rows]
        least = np.full(n_trials, np.inf)
        np.minimum.at(least, code, score)
        hit = np.flatnonzero(score == least[code])
        np.minimum.at(first, code[hit], hit)
    chosen = first[first < len(rows)]
    sel = rows[chosen]
    index = keyed["trial_index"].to_numpy()[sel]
    if (np.diff(index) < 0).any():  # trial codes from trial_index come in its order already
        sel = sel[np.argsort(index, kind="stable")]
    at = pos[row_key[sel]]
    picked = pl.DataFrame({c: v[at] for c, v in best_key.items() if c not in ("key", "gpus", "est_memory_gib")})
    basis = accel.select("accelerator", pl.col("basis").alias("est_basis")).unique("accelerator", keep="first")
    cand_info = candidates.select(
        "cand", "accelerator", "cloud", "region", "instance_type", "on_demand_usd_per_hour", "price_source", "price_as_of",
        "price_basis", "gpus",
    ).join(basis, on="accelerator", how="left", maintain_order="left")
    per_trial = pl.concat([
        keyed.select("trial_id", "trial_index", "sharding", "est_memory_gib", "flops_total")[sel],
        picked, cand_info[picked["cand"].to_numpy()].drop("cand"),
    ], how="horizontal")
    has = np.zeros(n_trials, dtype=bool)
    has[row_trial[sel]] = True
    rep = np.full(n_trials, len(trial_code), dtype=np.int64)  # each trial's first estimate row
    np.minimum.at(rep, trial_code, np.arange(len(trial_code)))
    missing = est.select("trial_id", "trial_index")[rep[~has]]
    return per_trial, missing


def _infeasible(est: pl.DataFrame, missing: pl.DataFrame, candidates: pl.DataFrame, accel: pl.DataFrame, s: PlanSettings,
                spot_allowed: bool | None, feasible: pl.DataFrame, fit_memory: pl.Series | None = None) -> pl.DataFrame:
    """Returns the rows (OUT_COLS) of the trials no candidate fits, each with its reason (`fit_memory`: per
    row of `est` the memory the refusal rests on, the band's P10; None: the estimate)."""
    fit = est if fit_memory is None else est.with_columns(est_memory_gib=fit_memory)
    reasons = _infeasible_reasons(fit.join(missing, on="trial_id", how="semi"), candidates, accel, s,
                                  fit_memory is not None)
    if spot_allowed is True:
        reasons = reasons.with_columns(reason=pl.col("reason") + pl.lit("; spot: always and no trustworthy spot offer fits"))
    min_mem = est.join(missing, on="trial_id", how="semi").sort("est_memory_gib", nulls_last=True).group_by("trial_id", maintain_order=True).first()
    infeas = missing.join(reasons, on="trial_id").join(min_mem.select("trial_id", "gpus", "sharding", "est_memory_gib"), on="trial_id", how="left").with_columns(
        feasible=pl.lit(False), spot=pl.lit(False), deadline_ok=pl.lit(False),
    )
    return pl.concat([feasible.clear(), infeas], how="diagonal_relaxed").select(OUT_COLS)


def _deadline_note(durations: np.ndarray, makespan: float, k: int, dl: float) -> str:
    from gpuledger.plan.formats import fmt_duration

    if makespan <= dl:
        return (f"deadline: each trial's choice must finish within {fmt_duration(dl)}; the whole sweep's makespan "
                f"{fmt_duration(makespan)} on {k} slot(s) meets it too")
    # a makespan is at least max(longest trial, total / slots): slot counts whose bound misses are not scheduled
    longest, work = float(durations.max()), float(durations.sum())
    need = next((kk for kk in (2**i for i in range(0, 11))
                 if kk > k and max(longest, work / kk) <= dl and makespan_s(durations, kk) <= dl), None)
    hint = f"; {need} slots would meet it" if need else "; no parallelism up to 1024 slots meets it"
    return (f"WARNING deadline: the sweep's makespan {fmt_duration(makespan)} on {k} slot(s) exceeds the "
            f"{fmt_duration(dl)} deadline{hint} (resources.max_parallel)")
