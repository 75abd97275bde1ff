"""Step 3 of the plan: score (estimate key × candidate offer) pairs that fit: time, expected cost with
spot preemptions, and the deadline test — every pair as a frame (`scored_candidates`, what pools and
the budget guard read) or only each key's best (`best_per_key`, `best_rows`: what the choice reads, without ever
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
  and n_allowed = floor((deadline − T0) / per_preemption). At `budget.confidence: p90`
  (`PlanSettings.deadline_factor`) the test takes T0 at the P90 of the compute time (overhead +
  compute × P90 / P50 of its cell's band, gpuledger/plan/bands.py); cost and the expected wall stay at P50.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from gpuledger.plan.compute_table import KeyCompute, accelerator_ids, compute_matrix
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
    acc_ids = accelerator_ids(accel)
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
    settles the rows with mu / (n_allowed + 1) clearly below 1 − confidence; the others take the sum.
    At P90 (`deadline_factor`) the caller passes T0 and mu of the P90 compute time (`deadline_t0`)."""
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


def scored_candidates(estimates: pl.DataFrame, candidates: pl.DataFrame, accel: pl.DataFrame, times: pl.DataFrame | None,
                      settings: PlanSettings, *, prune_within: Sequence[str] = ("spot",),
                      compute: KeyCompute | None = None) -> pl.DataFrame:
    """Returns every (estimate key × candidate) whose memory fits (columns SCORED_COLS), by `timing` and
    `deadline_met`.

    `estimates` has one row per distinct `key` (KEY_COLS); `candidates` comes from `candidate_offers`
    with a `cand` id; `times`: workload, accelerator, compute_s, or `compute`: the keys' seconds read
    from it (`compute_table`, accelerators numbered by `accelerator_ids(accel)`). Candidates dominated within their
    `prune_within` class are dropped first (see `_pareto`). The plan's own choice reads `best_per_key`.
    """
    s = settings
    acc_ids, cand = numeric_candidates(candidates, accel, s, prune_within)
    comp = compute if compute is not None else compute_matrix(estimates, times, acc_ids)
    key, acc, model_s = comp.pairs()
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
    compute_s = df["compute_s"].to_numpy()
    t = timing(compute_s, df["usd_per_hour"].to_numpy(), df["preemptions_per_hour"].to_numpy(), s)
    t0_d, mu_d = t["t0_s"], t["expected_preemptions"]
    if s.deadline_factor is not None and s.deadline_s is not None and df.height:
        names = dict(zip(acc_ids["acc_id"].to_list(), acc_ids["accelerator"].to_list(), strict=True))
        factor = np.array([s.deadline_factor(names[a], int(g), p) for a, g, p in zip(
            df["acc_id"].to_list(), df["gpus"].to_list(), df["precision"].to_list(), strict=True)])
        t0_d = compute_s * factor + s.overhead_s  # the same operations as _score_keys
        mu_d = df["preemptions_per_hour"].to_numpy() / S_PER_H * t0_d
    t["deadline_ok"] = deadline_met(t0_d, t["per_preemption_s"], mu_d, s)
    return df.with_columns(**{k: pl.Series(k, v) for k, v in t.items()}).select(SCORED_COLS)


def best_per_key(keys: pl.DataFrame, candidates: pl.DataFrame, accel: pl.DataFrame, times: pl.DataFrame | None,
                 settings: PlanSettings, *, spot: bool | None = None,
                 compute: KeyCompute | None = None) -> tuple[pl.DataFrame, bool]:
    """Returns (each key's best scored row, columns SCORED_COLS: deadline met first, then the lowest
    cost, then less time, ties to the lower candidate id; whether any candidate fits any key at all,
    whatever `spot`). `spot`: None any, True spot only, False on-demand only. `times` or `compute`:
    as in `scored_candidates`. The frame of `best_rows`.
    """
    cols, any_fit = best_rows(keys, candidates, accel, times, settings, spot=spot, compute=compute)
    return pl.DataFrame(cols).cast({"key": keys.schema["key"]}).select(SCORED_COLS), any_fit


def best_rows(keys: pl.DataFrame, candidates: pl.DataFrame, accel: pl.DataFrame, times: pl.DataFrame | None,
              settings: PlanSettings, *, spot: bool | None = None,
              compute: KeyCompute | None = None, extra_usd: np.ndarray | None = None) -> tuple[dict[str, np.ndarray], bool]:
    """Returns `best_per_key`'s rows as numpy arrays ({column of SCORED_COLS: values}, keys in order).

    The same rows `scored_candidates` scores, without its cross join: keys are grouped by requirement
    shape (gpus, precision) and ordered by memory (by how many of the group's usable memories lie below
    theirs), so the keys a candidate fits are a prefix; each
    candidate (dominated ones pruned first, `_pareto`) is scored over its prefix against a running best
    per key, and only the winners' rows are built. What depends on the accelerator only (the prefix's
    compute seconds, T0, the preemptions a deadline allows) is computed once per accelerator, not per
    candidate, and keys an accelerator cannot win are skipped (`_best_in_group`). `extra_usd`: per key id the
    $/hour of a second instance its trial also holds (an RL trial's rollout instance, gpuledger/plan/rl_roles.py),
    added to every candidate's price for that key (so in the choice, the cost and `usd_per_hour`).
    """
    s = settings
    acc_ids, cand = numeric_candidates(candidates, accel, s)
    comp = compute if compute is not None else compute_matrix(keys, times, acc_ids)
    n_keys = comp.n_keys
    key_ids = keys["key"].to_numpy().astype(np.int64)
    mem_all = keys["est_memory_gib"].to_numpy()
    # per key: the candidate row of the best score (cost + wall × 1e-12) meeting the deadline, and missing it
    ok_row, late_row = np.full(n_keys, -1, dtype=np.int64), np.full(n_keys, -1, dtype=np.int64)
    any_fit = False
    cand = cand.with_row_index("_row")
    names = dict(zip(acc_ids["acc_id"].to_list(), acc_ids["accelerator"].to_list(), strict=True))
    for gc, idx, rank, levels in key_groups(keys, cand):
        dfac = None
        if s.deadline_factor is not None and gc.height:
            g, p = int(gc["gpus"][0]), gc["precision"][0]
            dfac = {a: float(s.deadline_factor(names[a], g, p)) for a in gc["acc_id"].unique().to_list()}
        fit_any, okr = _best_in_group(gc, idx, rank, levels, comp, s, spot, deadline=s.deadline_s is not None,
                                      dfac=dfac, extra_usd=extra_usd)
        any_fit = any_fit or fit_any
        ok_row[idx] = okr
        none_ok = np.flatnonzero(okr < 0)  # few keys: those no candidate takes within the deadline
        if s.deadline_s is not None and none_ok.size:  # their best, all late
            late_row[idx[none_ok]] = _best_in_group(gc, idx[none_ok], rank[none_ok], levels, comp, s, spot, deadline=False,
                                                    extra_usd=extra_usd)[1]
    met = ok_row >= 0
    chosen = np.where(met, ok_row, late_row)
    key = np.flatnonzero(chosen >= 0)
    row = chosen[key]
    col = {c: cand[c].to_numpy()[row] for c in ("cand", "gpus", "acc_id", "spot", "usd_per_hour", "preemptions_per_hour",
                                                "usable_memory_gib", "time_factor")}
    mem = np.full(n_keys, np.nan)
    mem[key_ids] = mem_all
    compute_s = comp.at(key, col["acc_id"]) * col.pop("time_factor")
    if extra_usd is not None:
        col["usd_per_hour"] = col["usd_per_hour"] + extra_usd[key]
    t = timing(compute_s, col["usd_per_hour"], col["preemptions_per_hour"], s)
    return {"key": key, "est_memory_gib": mem[key], **col, "compute_s": compute_s, **t, "deadline_ok": met[key]}, any_fit


def key_groups(keys: pl.DataFrame, cand: pl.DataFrame):
    """Yields, per requirement shape (gpus, precision) of the candidates `cand`: (its candidates, its keys
    ordered by memory level, their levels, the levels: the distinct usable memories of its candidates).

    A key fits the candidates whose usable memory is at or above its memory: ranked by how many levels
    lie below their memory (a radix sort, not a full sort by memory), the keys a candidate fits are a
    prefix (`fitting`)."""
    key_ids = keys["key"].to_numpy().astype(np.int64)
    mem_all, gpus_all = keys["est_memory_gib"].to_numpy(), keys["gpus"].to_numpy()
    of_precision: dict[str, np.ndarray] = {}
    for (gpus, precision), gc in cand.partition_by("gpus", "precision", as_dict=True, maintain_order=True).items():
        if precision not in of_precision:
            of_precision[precision] = (keys["precision"] == precision).fill_null(False).to_numpy()
        in_group = (gpus_all == gpus) & of_precision[precision]
        if not in_group.any():
            continue
        levels = np.unique(gc["usable_memory_gib"].to_numpy())
        rank = np.searchsorted(levels, mem_all[in_group], side="left")
        order = np.argsort(rank.astype(np.int16) if len(levels) < 2**15 else rank, kind="stable")
        yield gc, key_ids[in_group][order], rank[order], levels


def fitting(rank: np.ndarray, levels: np.ndarray, usable_gib: float) -> int:
    """Returns how many keys (ordered by `rank`, see `key_groups`) have memory <= `usable_gib`."""
    return int(np.searchsorted(rank, np.searchsorted(levels, usable_gib), side="right"))


def _best_in_group(gc: pl.DataFrame, idx: np.ndarray, rank: np.ndarray, levels: np.ndarray, comp: KeyCompute, s: PlanSettings,
                   spot: bool | None, *, deadline: bool, dfac: dict | None = None,
                   extra_usd: np.ndarray | None = None) -> tuple[bool, np.ndarray]:
    """Returns (whether any candidate of `gc` fits a key, per key of `idx` (sorted by `rank`: the number of
    `levels`, the group's usable memories, below the key's memory) the row of
    its best candidate, -1 where none; `deadline`: among those meeting it only) by the formulas of
    `timing` and `deadline_met`, to the last bit: the same operations on the same numbers.

    Candidates come accelerator by accelerator. An accelerator's cheapest candidate bounds all of its
    candidates from below: every score there is >= fl(fl(usd_min × T0) / 3600) (wall >= T0, the
    added wall × 1e-12 >= 0, rounding is monotone), which is >= T0 × (usd_min / 3600 × (1 − 1e-12))
    in floating point (the margin covers the few roundings, ~1e-16 each). So only the keys whose best
    so far is not below that bound are scored (about a third: the accelerators likely to win are taken
    first, by the bound's median over a sample of keys). Any order gives the same choice: ties go to
    the lower candidate row. `dfac`: per acc_id the compute time's P90 / P50 the deadline test takes
    (budget.confidence p90; None: at P50)."""
    dl = s.deadline_s
    threshold = (1 - s.deadline_confidence) - _MARKOV_MARGIN
    n_all = len(idx)
    best, best_row = np.full(n_all, np.inf), np.full(n_all, -1, dtype=np.int64)
    compute_b, t0_b, lower_b = (np.empty(n_all) for _ in range(3))
    buf = {name: np.empty(n_all) for name in ("compute", "t0", "per_pre", "best", "wall", "score", "tmp")}
    buf.update(best_row=np.empty(n_all, dtype=np.int64), in_time=np.empty(n_all, dtype=bool), better=np.empty(n_all, dtype=bool),
               tie=np.empty(n_all, dtype=bool))
    any_fit = False
    per_acc: dict[int, list] = {}
    for row, a, is_spot, usd, rate, usable, tf in gc.select(
            "_row", "acc_id", "spot", "usd_per_hour", "preemptions_per_hour", "usable_memory_gib", "time_factor").iter_rows():
        n = fitting(rank, levels, usable)
        if n and comp.column[a] >= 0:  # else it fits no key, or has no time on this accelerator (NaN: never wins)
            per_acc.setdefault(a, []).append((row, is_spot, usd, rate, n, tf))
    sample = np.arange(0, n_all, max(1, n_all // 256))
    likely = {}  # the bound's median over a sample of the keys: the likely winners first
    for a, cands in per_acc.items():
        n, tf = cands[0][4], cands[0][5]
        part = sample[sample < n]
        t0 = s.overhead_s + comp.at(idx[part], a) * tf
        likely[a] = float(np.nanmedian(min(c[2] for c in cands) * t0)) if part.size and not np.isnan(t0).all() else np.inf
    for a in sorted(per_acc, key=lambda a: likely[a]):
        cands = per_acc[a]
        groups = {}
        for c in cands:  # one accelerator: the same usable memory and time factor, so one prefix, unless given otherwise
            groups.setdefault((c[4], c[5]), []).append(c)
        for (n, tf), same in groups.items():
            compute, t0 = comp.at(idx[:n], a), t0_b[:n]
            if tf != 1.0:  # x × 1.0 is x
                compute = np.multiply(compute, tf, out=compute_b[:n])
            any_fit = any_fit or not np.isnan(compute).all()
            scored = [c for c in same if spot is None or bool(c[1]) == spot]
            if not scored:
                continue
            np.add(compute, s.overhead_s, out=t0)  # T0 = overhead + compute
            lower = np.multiply(t0, min(c[2] for c in scored) / S_PER_H * (1 - 1e-12), out=lower_b[:n])
            keep = np.flatnonzero(lower <= best[:n])  # NaN (no time) is never kept; extra_usd >= 0 keeps the bound
            if keep.size:
                _score_keys(scored, keep, compute, t0, best, best_row, s, deadline, dl, threshold, buf,
                            dfactor=1.0 if dfac is None else dfac.get(a, 1.0),
                            extra=None if extra_usd is None else extra_usd[idx[:n][keep]])
    return any_fit, best_row


def _score_keys(cands: list, keep: np.ndarray, compute: np.ndarray, t0: np.ndarray, best: np.ndarray, best_row: np.ndarray,
                s: PlanSettings, deadline: bool, dl: float | None, threshold: float, buf: dict[str, np.ndarray],
                dfactor: float = 1.0, extra: np.ndarray | None = None) -> None:
    """Scores one accelerator's candidates (row, spot, usd_per_hour, preemptions_per_hour, ...) on the keys
    `keep` of `compute`/`t0` and updates `best`/`best_row` there (lower score, then lower row); `buf`:
    arrays at least as long as `keep`, written instead of new ones per candidate."""
    m = keep.size
    compute, t0 = np.take(compute, keep, out=buf["compute"][:m]), np.take(t0, keep, out=buf["t0"][:m])
    if s.checkpoint_interval_s is not None:
        per_pre = np.broadcast_to(s.restart_s + s.checkpoint_interval_s / 2, (m,))
    else:  # restart + compute / 2
        per_pre = np.divide(compute, 2, out=buf["per_pre"][:m])
        np.add(per_pre, s.restart_s, out=per_pre)
    if deadline:
        t0d = t0 if dfactor == 1.0 else compute * dfactor + s.overhead_s  # the deadline's T0 (at P90 when asked)
        in_time = np.less_equal(t0d, dl, out=buf["in_time"][:m])
        check = np.flatnonzero(in_time)
        t0_check = t0d[check]
        n_allowed = np.floor((dl - t0_check) / per_pre[check])
        ratio = t0_check / (n_allowed + 1)  # Markov's mu / (n_allowed + 1) = rate × ratio
    b, br = np.take(best, keep, out=buf["best"][:m]), np.take(best_row, keep, out=buf["best_row"][:m])
    wall_b, score, tmp, better = buf["wall"][:m], buf["score"][:m], buf["tmp"][:m], buf["better"][:m]
    for row, _, usd, rate, _, _ in cands:
        rate_per_s = rate / S_PER_H
        if rate_per_s == 0:  # on-demand: T0 × (1 + 0 × per_pre) = T0
            wall = t0
        else:  # T0 × (1 + rate × per_pre)
            wall = np.multiply(per_pre, rate_per_s, out=wall_b)
            np.add(wall, 1, out=wall)
            np.multiply(wall, t0, out=wall)
        np.multiply(wall, usd if extra is None else usd + extra, out=score)  # cost = usd × wall / S_PER_H; + wall × 1e-12
        np.divide(score, S_PER_H, out=score)
        np.add(score, np.multiply(wall, 1e-12, out=tmp), out=score)  # NaN (no time for a key) never wins
        np.less(score, b, out=better)
        tie = np.equal(score, b, out=buf["tie"][:m])  # rare: then the lower row wins
        if tie.any():
            better |= tie & (row < br)
        if deadline:
            ok = in_time
            if rate_per_s > 0 and check.size:
                # the rows Markov does not settle: rate × ratio differs from deadline_met's mu / (n + 1) by a
                # few ulps at most, inside _MARKOV_MARGIN, where both shortcuts agree with the Poisson sum
                unsure = np.flatnonzero(ratio >= threshold / rate_per_s)
                if unsure.size:
                    mu = rate_per_s * t0_check[unsure]
                    unsure, mu = unsure[mu > 0], mu[mu > 0]  # no preemption expected: nothing to test
                    ok = in_time.copy()
                    q = poisson_quantile(mu, s.deadline_confidence, cap=n_allowed[unsure])
                    ok[check[unsure]] = q <= n_allowed[unsure]
            np.logical_and(better, ok, out=better)
        np.copyto(b, score, where=better)
        np.copyto(br, row, where=better)
    best[keep], best_row[keep] = b, br
