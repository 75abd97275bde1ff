"""Step 3 of the plan: score every (estimate × candidate offer) that fits: time, expected cost with
spot preemptions, and the deadline test."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from gpuledger.plan.preemption import poisson_quantile
from gpuledger.plan.settings import S_PER_H, PlanSettings

#: The estimate columns that make two trials the same workload: one scoring `key` per distinct row
#: (`workload` decides memory and time; the others travel with it).
KEY_COLS = ["gpus", "sharding", "precision", "est_memory_gib", "flops_total", "workload"]


def _pareto(cand: pl.DataFrame, within: list[str]) -> pl.DataFrame:
    """Returns the candidates no other candidate of the same (gpus, precision, accelerator, *within)
    dominates.

    A dominates B when it is no dearer per hour, has no less usable memory and no higher preemption
    rate (on-demand counts as rate 0) on the same accelerator (the same speed for every workload):
    then for every workload A fits where B fits, costs no more and finishes no later with no more
    risk to the deadline — so pruning B is exact. Across accelerators speed ranks differ by workload
    (the step model), so nothing is pruned there. Ties keep the lower candidate id. Done per class
    (`within`, e.g. spot vs on-demand) so that "all spot" / "all on-demand" alternatives stay exact.
    """
    on = list(dict.fromkeys(["gpus", "precision", "acc_id", *within]))
    a = cand.select(*on, "cand", "usd_per_hour", "usable_memory_gib", "preemptions_per_hour")
    pairs = a.join(a, on=on, how="inner", suffix="_b").filter(
        (pl.col("cand") != pl.col("cand_b"))
        & (pl.col("usd_per_hour") <= pl.col("usd_per_hour_b"))
        & (pl.col("usable_memory_gib") >= pl.col("usable_memory_gib_b"))
        & (pl.col("preemptions_per_hour") <= pl.col("preemptions_per_hour_b"))
        & (
            (pl.col("usd_per_hour") < pl.col("usd_per_hour_b"))
            | (pl.col("usable_memory_gib") > pl.col("usable_memory_gib_b"))
            | (pl.col("preemptions_per_hour") < pl.col("preemptions_per_hour_b"))
            | (pl.col("cand") < pl.col("cand_b"))
        )
    )
    rest = [c for c in on if c != "spot"] + (["spot"] if "spot" in on else [])
    dominated = pairs.select(pl.col("cand_b").alias("cand"), *[pl.col(c) for c in rest]).unique()
    return cand.join(dominated, on=["cand", *rest], how="anti")


#: Candidate columns carried through the big (estimate key × candidate) frame: numbers only.
_NUMERIC_CAND = ["cand", "gpus", "acc_id", "spot", "usd_per_hour", "preemptions_per_hour", "usable_memory_gib", "time_factor"]


def scored_candidates(estimates: pl.DataFrame, candidates: pl.DataFrame, accel: pl.DataFrame, times: pl.DataFrame,
                      settings: PlanSettings, *, prune_within: Sequence[str] = ("spot",)) -> pl.DataFrame:
    """Returns every (estimate key × candidate) whose memory fits, with:

    usable_memory_gib = memory_gib × safety − reserve;
    compute_s = the workload's compute seconds on the candidate's accelerator (`times`, from
      `estimates.compute_times`: the step model) × the accelerator's time_factor (1, or calibrated);
    on-demand: est_wall_s = T0 = overhead + compute; spot: lost = checkpoint_interval/2 (or
      compute/2 without checkpoints), per_preemption = restart + lost, rate = preemptions per
      hour / 3600, est_wall_s = T0 + rate × T0 × per_preemption (first order: rework is not
      itself preempted);
    est_cost_usd = usd_per_hour × est_wall_s / 3600;
    deadline_ok: on-demand T0 <= deadline; spot P(N <= n_allowed) >= confidence with
      N ~ Poisson(rate × T0) and n_allowed = floor((deadline − T0) / per_preemption).

    `estimates` has one row per distinct `key` (KEY_COLS); `candidates` comes from
    `candidate_offers` with a `cand` id; `times`: workload, accelerator, compute_s. Only numeric columns
    travel through this frame (the big one); strings are joined back after the choice.
    Candidates dominated within their `prune_within` class are dropped first (see `_pareto`).
    """
    s = settings
    acc_ids = accel.select("accelerator").unique(maintain_order=True).with_row_index("acc_id")
    cand = (
        candidates.join(acc_ids, on="accelerator", how="inner")
        .join(accel, on="accelerator", how="inner")
        .with_columns(
            usable_memory_gib=pl.col("memory_gib") * s.memory_safety_fraction - s.memory_reserve_gib,
        )
        .select(*_NUMERIC_CAND, "precision")
    )
    cand = _pareto(cand, list(prune_within))
    keys = estimates.select("key", "gpus", "precision", "est_memory_gib", "workload").join(
        times.join(acc_ids, on="accelerator", how="inner").select("workload", "acc_id", pl.col("compute_s").alias("_model_s")),
        on="workload", how="inner").drop("workload")
    compute = pl.col("_model_s") * pl.col("time_factor")
    t0 = pl.lit(s.overhead_s) + pl.col("compute_s")
    lost = pl.lit(s.checkpoint_interval_s / 2) if s.checkpoint_interval_s is not None else pl.col("compute_s") / 2
    per_pre = pl.lit(s.restart_s) + lost
    rate_per_s = pl.col("preemptions_per_hour") / S_PER_H
    df = (
        keys.lazy()
        .join(cand.lazy(), on=["gpus", "precision", "acc_id"], how="inner")
        .filter(pl.col("est_memory_gib") <= pl.col("usable_memory_gib"))
        .with_columns(compute_s=compute)
        .with_columns(t0_s=t0, per_preemption_s=per_pre)
        .with_columns(
            est_wall_s=pl.when(pl.col("spot")).then(pl.col("t0_s") * (1 + rate_per_s * pl.col("per_preemption_s"))).otherwise(pl.col("t0_s")),
            expected_preemptions=rate_per_s * pl.col("t0_s"),
        )
        .with_columns(est_cost_usd=pl.col("usd_per_hour") * pl.col("est_wall_s") / S_PER_H)
        .drop("precision", "time_factor", "_model_s")
        .collect()
    )
    if s.deadline_s is None:
        return df.with_columns(deadline_ok=pl.lit(True))
    dl = s.deadline_s
    ok = df["t0_s"].to_numpy() <= dl
    spot = df["spot"].to_numpy()
    check = np.flatnonzero(ok & spot & (df["expected_preemptions"].to_numpy() > 0))
    if check.size:
        t0v = df["t0_s"].to_numpy()[check]
        n_allowed = np.floor((dl - t0v) / df["per_preemption_s"].to_numpy()[check])
        q = poisson_quantile(df["expected_preemptions"].to_numpy()[check], s.deadline_confidence, cap=n_allowed)
        ok = ok.copy()
        ok[check] = q <= n_allowed
    return df.with_columns(deadline_ok=pl.Series(ok))
