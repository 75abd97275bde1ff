"""Step 3 of the plan: score (estimate key × candidate offer) pairs that fit: time, expected cost with
spot preemptions, and the deadline test — every pair as a frame (`scored_candidates`, what pools and
the budget guard read) or only each key's best (`best_per_key`, what the choice reads, without ever
holding the keys × offers cross join).

The formulas, in one place (`timing`, `deadline_met`):
usable_memory_gib = memory_gib × safety − reserve;
compute_s = the workload's compute seconds on the candidate's accelerator (`times`, from
  `estimates.compute_times`: the step model) × the accelerator's time_factor (1, or calibrated);
on-demand: est_wall_s = T0 = overhead + compute; spot: lost = checkpoint_interval/2 (or compute/2
  without checkpoints), per_preemption = restart + lost, rate = preemptions per hour / 3600,
  est_wall_s = T0 + rate × T0 × per_preemption (first order: rework is not itself preempted);
est_cost_usd = usd_per_hour × est_wall_s / 3600;
deadline_ok: on-demand T0 <= deadline; spot P(N <= n_allowed) >= confidence with N ~ Poisson(rate × T0)
  and n_allowed = floor((deadline − T0) / per_preemption).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from gpuledger.plan.preemption import poisson_quantile
from gpuledger.plan.settings import S_PER_H, PlanSettings

#: The estimate columns that make two trials the same workload: one scoring `key` per distinct row
#: (`workload` decides memory and time; the others travel with it).
KEY_COLS = ["gpus", "sharding", "precision", "est_memory_gib", "flops_total", "workload"]

#: Candidate columns carried through scoring: numbers only (strings are joined back after the choice).
_NUMERIC_CAND = ["cand", "gpus", "acc_id", "spot", "usd_per_hour", "preemptions_per_hour", "usable_memory_gib", "time_factor"]

#: The columns of a scored (key × candidate) row, in order.
SCORED_COLS = ["key", "gpus", "est_memory_gib", "acc_id", "cand", "spot", "usd_per_hour", "preemptions_per_hour",
               "usable_memory_gib", "compute_s", "t0_s", "per_preemption_s", "est_wall_s", "expected_preemptions",
               "est_cost_usd", "deadline_ok"]

#: Markov's inequality P(N >= n + 1) <= mu / (n + 1) settles most spot deadline tests without the
#: Poisson sum; this margin keeps the shortcut clear of the sum's rounding.
_MARKOV_MARGIN = 1e-9


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


def numeric_candidates(candidates: pl.DataFrame, accel: pl.DataFrame, s: PlanSettings,
                       prune_within: Sequence[str] = ("spot",)) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Returns (acc_ids: accelerator → acc_id, the candidates' numeric columns per precision with
    usable_memory_gib, those dominated within their `prune_within` class dropped: see `_pareto`)."""
    acc_ids = accel.select("accelerator").unique(maintain_order=True).with_row_index("acc_id")
    cand = (
        candidates.join(acc_ids, on="accelerator", how="inner")
        .join(accel, on="accelerator", how="inner")
        .with_columns(usable_memory_gib=pl.col("memory_gib") * s.memory_safety_fraction - s.memory_reserve_gib)
        .select(*_NUMERIC_CAND, "precision")
    )
    return acc_ids, _pareto(cand, list(prune_within)).sort("cand")


def timing(compute_s, usd_per_hour, preemptions_per_hour, s: PlanSettings) -> dict[str, np.ndarray]:
    """Returns t0_s, per_preemption_s, est_wall_s, expected_preemptions, est_cost_usd (numpy, elementwise;
    numbers or arrays in) by the module's formulas. On-demand has rate 0, so its wall is T0 exactly."""
    compute_s = np.asarray(compute_s, dtype=np.float64)
    t0 = s.overhead_s + compute_s
    lost = s.checkpoint_interval_s / 2 if s.checkpoint_interval_s is not None else compute_s / 2
    per_pre = s.restart_s + lost
    rate_per_s = np.asarray(preemptions_per_hour, dtype=np.float64) / S_PER_H
    wall = t0 * (1 + rate_per_s * per_pre)
    return {"t0_s": t0, "per_preemption_s": np.broadcast_to(per_pre, t0.shape), "est_wall_s": wall,
            "expected_preemptions": rate_per_s * t0, "est_cost_usd": usd_per_hour * wall / S_PER_H}


def deadline_met(t0_s: np.ndarray, per_preemption_s: np.ndarray, expected_preemptions: np.ndarray,
                 s: PlanSettings) -> np.ndarray:
    """Returns the deadline test per row (all true without a deadline): T0 <= deadline, and for a row
    with expected preemptions mu > 0, P(N <= n_allowed) >= confidence, N ~ Poisson(mu). Markov's bound
    settles the rows with mu / (n_allowed + 1) clearly below 1 − confidence; the others take the sum."""
    if s.deadline_s is None:
        return np.ones(np.shape(t0_s), dtype=bool)
    dl = s.deadline_s
    ok = t0_s <= dl
    check = np.flatnonzero(ok & (expected_preemptions > 0))
    if check.size:
        n_allowed = np.floor((dl - t0_s[check]) / per_preemption_s[check])
        mu = expected_preemptions[check]
        sure = mu / (n_allowed + 1) < (1 - s.deadline_confidence) - _MARKOV_MARGIN
        sum_rows = np.flatnonzero(~sure)
        if sum_rows.size:
            q = poisson_quantile(mu[sum_rows], s.deadline_confidence, cap=n_allowed[sum_rows])
            ok[check[sum_rows]] = q <= n_allowed[sum_rows]
    return ok


def _key_times(keys: pl.DataFrame, times: pl.DataFrame, acc_ids: pl.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Returns (key, acc_id, compute seconds) arrays: each key's compute seconds per accelerator (`times`
    by workload).

    `compute_times` writes a workload's rows together, so `times` is matched to the keys per run of
    equal workloads (a run-length encoding), not per row: the same result for any row order, and a
    join of the distinct workloads instead of every (workload, accelerator) row when they come in runs.
    """
    runs = times.select(pl.col("workload").rle()).unnest("workload").with_row_index("run")
    lens = runs["len"].to_numpy().astype(np.int64)
    pairs = runs.join(keys.select("key", pl.col("workload").alias("value")), on="value", how="inner")
    run, key = pairs["run"].to_numpy(), pairs["key"].to_numpy().astype(np.int64)
    n_acc = acc_ids.height
    acc = (times["accelerator"].cast(pl.Enum(acc_ids["accelerator"].to_list()), strict=False)
           .to_physical().cast(pl.Int64).fill_null(n_acc).to_numpy())  # Enum codes in acc_ids' order
    compute = times["compute_s"].to_numpy()
    if np.bincount(run, minlength=len(lens)).max(initial=0) <= 1:  # one key per workload at most
        key_of_run = np.full(len(lens), -1, dtype=np.int64)
        key_of_run[run] = key
        key_row = np.repeat(key_of_run, lens)
    else:  # a workload shared by several keys: each (run, key) pair takes its run's rows
        plen = lens[run]
        pair_of = np.repeat(np.arange(len(run)), plen)
        row = (np.cumsum(lens) - lens)[run][pair_of] + (np.arange(int(plen.sum())) - np.repeat(np.cumsum(plen) - plen, plen))
        key_row, acc, compute = key[pair_of], acc[row], compute[row]
    keep = (key_row >= 0) & (acc < n_acc)
    if not keep.all():
        key_row, acc, compute = key_row[keep], acc[keep], compute[keep]
    return key_row, acc, compute


def scored_candidates(estimates: pl.DataFrame, candidates: pl.DataFrame, accel: pl.DataFrame, times: pl.DataFrame,
                      settings: PlanSettings, *, prune_within: Sequence[str] = ("spot",)) -> pl.DataFrame:
    """Returns every (estimate key × candidate) whose memory fits (columns SCORED_COLS), by `timing` and
    `deadline_met`.

    `estimates` has one row per distinct `key` (KEY_COLS); `candidates` comes from `candidate_offers`
    with a `cand` id; `times`: workload, accelerator, compute_s. Candidates dominated within their
    `prune_within` class are dropped first (see `_pareto`). The plan's own choice reads `best_per_key`.
    """
    s = settings
    acc_ids, cand = numeric_candidates(candidates, accel, s, prune_within)
    key, acc, model_s = _key_times(estimates, times, acc_ids)
    kt = pl.DataFrame({"key": key, "acc_id": acc, "_model_s": model_s}).cast(
        {"key": estimates.schema["key"], "acc_id": pl.UInt32})
    df = (
        estimates.lazy().select("key", "gpus", "precision", "est_memory_gib")
        .join(kt.lazy(), on="key", how="inner")
        .join(cand.lazy(), on=["gpus", "precision", "acc_id"], how="inner")
        .filter(pl.col("est_memory_gib") <= pl.col("usable_memory_gib"))
        .with_columns(compute_s=pl.col("_model_s") * pl.col("time_factor"))
        .collect()
    )
    t = timing(df["compute_s"].to_numpy(), df["usd_per_hour"].to_numpy(), df["preemptions_per_hour"].to_numpy(), s)
    t["deadline_ok"] = deadline_met(t["t0_s"], t["per_preemption_s"], t["expected_preemptions"], s)
    return df.with_columns(**{k: pl.Series(k, v) for k, v in t.items()}).select(SCORED_COLS)


def best_per_key(keys: pl.DataFrame, candidates: pl.DataFrame, accel: pl.DataFrame, times: pl.DataFrame,
                 settings: PlanSettings, *, spot: bool | None = None) -> tuple[pl.DataFrame, bool]:
    """Returns (each key's best scored row, columns SCORED_COLS: deadline met first, then the lowest
    cost, then less time, ties to the lower candidate id; whether any candidate fits any key at all,
    whatever `spot`). `spot`: None any, True spot only, False on-demand only.

    The same rows `scored_candidates` scores, without its cross join: keys are grouped by requirement
    shape (gpus, precision) and sorted by memory, so the keys a candidate fits are a prefix; each
    candidate (dominated ones pruned first, `_pareto`) is scored over its prefix against a running best
    per key, and only the winners' rows are built.
    """
    s = settings
    acc_ids, cand = numeric_candidates(candidates, accel, s)
    key, acc, model_s = _key_times(keys, times, acc_ids)
    n_keys = int(keys["key"].max()) + 1 if keys.height else 0
    comp = np.full((n_keys, acc_ids.height), np.nan)  # model seconds per key and accelerator
    comp[key, acc] = model_s
    # per key: the best score (cost + wall × 1e-12) and candidate row meeting the deadline, and missing it
    ok_best, late_best = np.full(n_keys, np.inf), np.full(n_keys, np.inf)
    ok_row, late_row = np.full(n_keys, -1, dtype=np.int64), np.full(n_keys, -1, dtype=np.int64)
    any_fit = False
    groups = keys.select("key", "gpus", "precision", "est_memory_gib").sort("est_memory_gib").partition_by(
        "gpus", "precision", as_dict=True, maintain_order=True)
    cand = cand.with_row_index("_row")
    for (gpus, precision), gc in cand.partition_by("gpus", "precision", as_dict=True, maintain_order=True).items():
        group = groups.get((gpus, precision))
        if group is None:
            continue
        idx = group["key"].to_numpy()
        mem = group["est_memory_gib"].to_numpy()
        comp_g = {a: np.ascontiguousarray(comp[idx, a]) for a in gc["acc_id"].unique().to_list()}
        okb, okr, lab, lar = ok_best[idx], ok_row[idx], late_best[idx], late_row[idx]
        for row, a, is_spot, usd, rate, usable, tf in gc.select(
                "_row", "acc_id", "spot", "usd_per_hour", "preemptions_per_hour", "usable_memory_gib", "time_factor").iter_rows():
            n = int(np.searchsorted(mem, usable, side="right"))
            if n == 0:
                continue
            compute = comp_g[a][:n] * tf
            any_fit = any_fit or not np.isnan(compute).all()
            if spot is not None and bool(is_spot) != spot:
                continue
            t = timing(compute, usd, rate, s)
            score = t["est_cost_usd"] + t["est_wall_s"] * 1e-12  # NaN (no time on this accelerator) never wins
            ok = deadline_met(t["t0_s"], t["per_preemption_s"], t["expected_preemptions"], s)
            better = ok & (score < okb[:n])
            np.copyto(okb[:n], score, where=better)
            np.copyto(okr[:n], row, where=better)
            worse = ~ok & (score < lab[:n])
            np.copyto(lab[:n], score, where=worse)
            np.copyto(lar[:n], row, where=worse)
        ok_best[idx], ok_row[idx], late_best[idx], late_row[idx] = okb, okr, lab, lar
    met = ok_row >= 0
    chosen = np.where(met, ok_row, late_row)
    key = np.flatnonzero(chosen >= 0)
    row = chosen[key]
    col = {c: cand[c].to_numpy()[row] for c in ("cand", "gpus", "acc_id", "spot", "usd_per_hour", "preemptions_per_hour",
                                                "usable_memory_gib", "time_factor")}
    mem = np.full(n_keys, np.nan)
    mem[keys["key"].to_numpy()] = keys["est_memory_gib"].to_numpy()
    compute = comp[key, col["acc_id"]] * col.pop("time_factor")
    t = timing(compute, col["usd_per_hour"], col["preemptions_per_hour"], s)
    out = pl.DataFrame({"key": key, "est_memory_gib": mem[key], **col, "compute_s": compute, **t, "deadline_ok": met[key]})
    return out.cast({"key": keys.schema["key"], "cand": cand.schema["cand"], "acc_id": cand.schema["acc_id"]}).select(SCORED_COLS), any_fit
