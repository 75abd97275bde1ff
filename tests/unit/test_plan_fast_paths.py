"""The planner's fast paths give what the plain ones give: the times frame read as blocks
(`compute_table.compute_in_row_order`) against the join (`compute_matrix`); the per-accelerator lower
bound of `scoring.best_per_key` (keys skipped where an accelerator cannot win) against the whole cross
join; `list_schedule`'s rounds against a plain heap; the trial codes from trial_index against trial ids."""

from __future__ import annotations

import heapq

import numpy as np
import polars as pl
import pytest

from gpuledger.plan import PlanSettings, candidate_offers, plan_from_estimates
from gpuledger.plan.compute_table import accelerator_ids, compute_in_row_order, compute_matrix
from gpuledger.plan.schedule import ROUNDS_MIN_SLOTS, list_schedule, list_starts
from gpuledger.plan.scoring import best_per_key, scored_candidates
from gpuledger.plan.sections import CostTotal

H = 3600.0
ACCS = ["L4", "A100", "H100"]
ACCEL = pl.DataFrame({"accelerator": ACCS, "precision": ["bf16"] * 3, "memory_gib": [22.49, 40.0, 79.65],
                      "time_factor": [1.0] * 3, "time_source": ["test"] * 3})


def _offer(cloud, acc, count, od, spot):
    return {"cloud": cloud, "region": "r1", "instance_type": f"{acc}-{count}", "accelerator": acc, "accelerator_count": count,
            "usd_per_hour_on_demand": od, "usd_per_hour_spot": spot, "vcpus": 8.0, "memory_gib": 32.0, "source": "test",
            "as_of": "2026-11-01"}


def _frames(n: int, seed: int):
    """Estimates of `n` trials on 1 and 2 GPUs (distinct workloads) and their times in blocks, one per
    estimate row in order, the accelerators in one order (what `compute_times` writes)."""
    rng = np.random.default_rng(seed)
    mem = rng.uniform(4.0, 70.0, n)
    work = np.exp(rng.uniform(np.log(0.2), np.log(60.0), n)) * H
    est = pl.concat([pl.DataFrame({
        "trial_id": [f"t{i:04d}" for i in range(n)], "trial_index": np.arange(n), "gpus": [g] * n,
        "sharding": ["none" if g == 1 else "fsdp"] * n, "est_memory_gib": mem / g + (g - 1), "flops_total": work,
        "workload": [f"w{i}/{g}" for i in range(n)]}) for g in (1, 2)])
    speed = {"L4": 1.0, "A100": 3.1, "H100": 6.0}
    times = pl.DataFrame({
        "workload": np.repeat(est["workload"].to_numpy(), 3), "accelerator": ACCS * est.height,
        "compute_s": np.concatenate([[w / g / speed[a] * rng.uniform(0.8, 1.25) for a in ACCS]
                                     for w, g in zip(est["flops_total"], est["gpus"], strict=True)])})
    offers = pl.DataFrame([_offer(c, a, k, od * k, sp * k) for c, f in (("aws", 1.0), ("gcp", 0.93))
                           for a, od, sp in (("L4", 0.8 * f, 0.3 * f), ("A100", 3.0 * f, 1.1 * f), ("H100", 6.5 * f, 2.0 * f))
                           for k in (1, 2)])
    return est, times, offers


def test_times_in_blocks_are_read_as_the_join_reads_them():
    est, times, _ = _frames(50, 1)
    ids = accelerator_ids(ACCEL.sample(fraction=1.0, shuffle=True, seed=2))  # another accelerator order
    blocks = compute_in_row_order(est["workload"], times, ids)
    keys = est.with_row_index("key")
    joined = compute_matrix(keys, times.sample(fraction=1.0, shuffle=True, seed=3), ids)
    assert blocks is not None and blocks.seconds.shape == (est.height, 3)
    for a in range(3):
        assert np.array_equal(blocks.at(np.arange(est.height), a), joined.at(np.arange(est.height), a))
    swapped = times.with_columns(accelerator=pl.when(pl.int_range(pl.len()) == 5).then(pl.lit("A100")).otherwise("accelerator"))
    not_blocks = [
        times.sample(fraction=1.0, shuffle=True, seed=4),  # rows in another order
        times.head(times.height - 3),  # a workload without its block
        swapped,  # the second block names A100 twice and no H100
        times.with_columns(workload=pl.when(pl.int_range(pl.len()) == 7).then(pl.lit("w0/1")).otherwise("workload")),
        times.with_columns(workload=pl.when(pl.int_range(pl.len()).is_between(6, 8)).then(pl.lit("x")).otherwise("workload")),
    ]
    for t in not_blocks:
        assert compute_in_row_order(est["workload"], t, ids) is None


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("spot", [None, True, False])
def test_an_accelerator_skipped_by_its_bound_never_wins_and_the_others_still_do(seed, spot):
    """The lower bound (its cheapest price × T0) skips keys an accelerator cannot win; the best rows are
    still those of the whole cross join, the deadline and memory decide between accelerators (the slow
    cheap L4 wins the small jobs, the H100 the long ones under the deadline, the A100 the rest)."""
    est, times, offers = _frames(300, seed)
    s = PlanSettings(provisioning_s=600.0, setup_s=600.0, deadline_s=[None, 6 * H][seed % 2], preemption_per_hour=0.2)
    cands = candidate_offers(offers, [1, 2], s).with_row_index("cand")
    keys = est.with_row_index("key").with_columns(pl.col("key").cast(pl.UInt32), precision=pl.lit("bf16"))
    scored = scored_candidates(keys, cands, ACCEL, times, s)
    if spot is not None:
        scored = scored.filter(pl.col("spot") == spot)
    want = (scored.with_columns(rank_score=pl.col("est_cost_usd") + pl.col("est_wall_s") * 1e-12)
            .sort(["key", pl.col("deadline_ok").not_(), "rank_score", "cand"]).group_by("key", maintain_order=True).first())
    compute = compute_in_row_order(keys["workload"], times, accelerator_ids(ACCEL))
    got, any_fit = best_per_key(keys, cands, ACCEL, None, s, spot=spot, compute=compute)
    assert any_fit
    assert got.sort("key").equals(want.select(got.columns))
    won = set(got.join(cands.select("cand", "accelerator"), on="cand")["accelerator"].to_list())
    assert len(won) >= 2  # more than one accelerator wins somewhere: the bound skipped keys, not accelerators


def test_the_plan_is_the_same_whichever_way_times_are_read():
    est, times, offers = _frames(200, 5)
    s = PlanSettings(provisioning_s=600.0, setup_s=600.0, deadline_s=8 * H, max_parallel=50, budget_usd=10.0)
    fast = plan_from_estimates(est, offers, s, times=times, accel=ACCEL)
    plain = plan_from_estimates(est, offers, s, times=times.sample(fraction=1.0, shuffle=True, seed=1), accel=ACCEL)
    assert fast.trials_frame.equals(plain.trials_frame)
    assert (fast.total_est_cost_usd, fast.what_if, fast.alternatives) == (plain.total_est_cost_usd, plain.what_if, plain.alternatives)
    assert fast.alternatives.by_accelerator  # over budget: the alternatives were computed


def test_trial_codes_fall_back_to_trial_ids_when_indexes_do_not_match_them():
    est, times, offers = _frames(30, 6)
    s = PlanSettings(provisioning_s=600.0, setup_s=600.0)
    plan = plan_from_estimates(est, offers, s, times=times, accel=ACCEL)
    shared = est.with_columns(trial_index=pl.col("trial_index") // 2)  # two trials per index: codes by trial_id
    other = plan_from_estimates(shared, offers, s, times=times, accel=ACCEL)
    assert other.trials_frame.height == plan.trials_frame.height == 30
    by_id = plan.trials_frame.sort("trial_id").drop("trial_index", "start_s", "slot")
    assert other.trials_frame.sort("trial_id").drop("trial_index", "start_s", "slot").equals(by_id)


def _heap_schedule(d, k):
    """The rule, plainly: each job starts on the slot that frees first, ties to the lowest slot."""
    heap = [(0.0, i) for i in range(k)]
    start, slot = [], []
    for x in d:
        free, i = heapq.heappop(heap)
        start.append(free)
        slot.append(i)
        heapq.heappush(heap, (free + x, i))
    return np.array(start), np.array(slot)


@pytest.mark.parametrize("k", [2, 7, ROUNDS_MIN_SLOTS, 64, 130])
def test_list_schedule_in_rounds_is_the_heap_schedule(k):
    rng = np.random.default_rng(k)
    cases = [np.sort(rng.exponential(100.0, 3000))[::-1],  # longest first: full rounds
             rng.exponential(100.0, 2000),  # any order: short rounds, the heap takes over
             rng.integers(1, 4, 2000).astype(float),  # many equal end times: ties to the lowest slot
             np.sort(rng.integers(0, 3, 1500).astype(float))[::-1]]  # zero durations
    for d in cases:
        want_start, want_slot = _heap_schedule(d, k)
        start, slot = list_schedule(d, k)
        assert np.array_equal(start, want_start) and np.array_equal(slot, want_slot)
        assert np.array_equal(list_starts(d, k), want_start)


def test_budget_guard_alternatives_are_the_minima_of_the_cross_join():
    """The alternatives an over-budget plan quotes (cheapest ignoring the deadline, all spot, all
    on-demand, one accelerator for all) equal the per-trial minima of `scored_candidates`' whole frame."""
    from dataclasses import replace

    est, times, offers = _frames(120, 8)
    s = PlanSettings(provisioning_s=600.0, setup_s=600.0, deadline_s=4 * H, preemption_per_hour=0.2, budget_usd=1.0)
    alt = plan_from_estimates(est, offers, s, times=times, accel=ACCEL).alternatives
    keys = est.with_row_index("key").with_columns(pl.col("key").cast(pl.UInt32), precision=pl.lit("bf16"))
    cands = candidate_offers(offers, [1, 2], s).with_row_index("cand")
    rows = (scored_candidates(keys, cands, ACCEL, times, replace(s, deadline_s=None), prune_within=("spot", "acc_id"))
            .join(keys.select("key", "trial_id"), on="key").join(cands.select("cand", "accelerator"), on="cand"))

    def total(frame):
        per_trial = frame.group_by("trial_id").agg(pl.col("est_cost_usd").min())
        return CostTotal(total_usd=round(per_trial["est_cost_usd"].sum(), 2), trials=per_trial.height)

    assert alt.cheapest_ignoring_deadline_usd == total(rows)
    assert alt.all_spot_usd == total(rows.filter(pl.col("spot")))
    assert alt.all_on_demand_usd == total(rows.filter(~pl.col("spot")))
    by_acc = {a: replace(total(rows.filter(pl.col("accelerator") == a)), of=120) for a in sorted(set(rows["accelerator"]))}
    assert alt.by_accelerator == by_acc and len(by_acc) == 3
