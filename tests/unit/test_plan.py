"""Planner choice step on literal estimate and offer frames (hand-computed), schedule, what-if,
budget guard."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuledger.errors import BudgetExceeded
from gpuledger.plan import (
    PlanSettings,
    budget_guard,
    list_schedule,
    plan_from_estimates,
    poisson_cdf,
    render_plan,
    what_if_curve,
)
from gpuledger.plan.settings import MEMORY_SAFETY_FRACTION

H = 3600.0  # seconds per hour: the planner works in seconds, these hand computations in hours
# The tests' own time table (the planner takes compute seconds per workload and accelerator as an
# input, `times`): a trial's size is given in hours on one L4 (as FLOPs: 121 dense bf16 TFLOP/s at
# 0.5); an H100 runs it 989/121 times faster; g GPUs divide it by g x SHARD_EFF[sharding].
L4_GPU_HOUR = 121e12 * 0.5 * 3600
PEAK = {"L4": 121.0, "H100": 989.0}
SHARD_EFF = {"none": 1.0, "ddp": 0.9, "fsdp": 0.85}
ACCEL = pl.DataFrame({
    "accelerator": ["L4", "H100"], "precision": ["bf16", "bf16"], "memory_gib": [22.49, 79.65],
    "time_factor": [1.0, 1.0], "time_source": ["test", "test"],
})


def times_for(e: pl.DataFrame) -> pl.DataFrame:
    """Returns the `times` frame of the estimates `e` by the tests' time table."""
    rows = e.unique("workload", keep="first").iter_rows(named=True)
    return pl.DataFrame([{"workload": r["workload"], "accelerator": acc,
                          "compute_s": r["flops_total"] / (r["gpus"] * peak * 1e12 * 0.5 * SHARD_EFF[r["sharding"]])}
                         for r in rows for acc, peak in PEAK.items()],
                        schema={"workload": pl.String, "accelerator": pl.String, "compute_s": pl.Float64})


def plan_of(e: pl.DataFrame, o: pl.DataFrame, s: PlanSettings, **kw):
    """plan_from_estimates with the tests' time table (each estimate row its own workload)."""
    if "workload" not in e.columns:
        e = e.with_columns(workload=pl.format("{}/{}/{}/{}", "trial_id", "gpus", "sharding", "flops_total"))
    return plan_from_estimates(e, o, s, times=times_for(e), **kw)


def offers(*rows):
    """rows: (cloud, instance, accelerator, count, on_demand, spot)."""
    return pl.DataFrame(
        [{"cloud": c, "region": "r1", "instance_type": i, "accelerator": a, "accelerator_count": n,
          "usd_per_hour_on_demand": od, "usd_per_hour_spot": sp, "vcpus": 8.0, "memory_gib": 32.0,
          "source": "test", "as_of": "2026-05-20"} for c, i, a, n, od, sp in rows],
        schema={"cloud": pl.String, "region": pl.String, "instance_type": pl.String, "accelerator": pl.String,
                "accelerator_count": pl.Int64, "usd_per_hour_on_demand": pl.Float64, "usd_per_hour_spot": pl.Float64,
                "vcpus": pl.Float64, "memory_gib": pl.Float64, "source": pl.String, "as_of": pl.String},
    )


def estimates(*rows):
    """rows: (trial_id, gpus, sharding, mem_gib, gpu_hours_on_one_L4)."""
    return pl.DataFrame(
        {"trial_id": [r[0] for r in rows], "gpus": [r[1] for r in rows], "sharding": [r[2] for r in rows],
         "est_memory_gib": [r[3] for r in rows], "flops_total": [r[4] * L4_GPU_HOUR for r in rows]},
        schema={"trial_id": pl.String, "gpus": pl.Int64, "sharding": pl.String, "est_memory_gib": pl.Float64, "flops_total": pl.Float64},
    )


# overhead 0.1 h provisioning + 0.1 h setup = 0.2 h; restart = 0.2 h
BASE = PlanSettings(provisioning_s=0.1 * H, setup_s=0.1 * H, budget_usd=100.0, max_parallel=2)


def one(plan, tid="t1"):
    return next(t for t in plan.trials if t["trial_id"] == tid)


def test_on_demand_cost_hand_computed():
    p = plan_of(estimates(("t1", 1, "none", 10.0, 2.0)), offers(("aws", "g6.xlarge", "L4", 1, 1.0, None)), BASE, accel=ACCEL)
    t = one(p)
    assert t["feasible"] and not t["spot"]
    assert t["compute_s"] / H == pytest.approx(2.0)
    assert t["est_wall_s"] / H == pytest.approx(2.2)  # 2 h compute + 0.2 h overhead
    assert t["est_cost_usd"] == pytest.approx(2.2)
    assert t["usable_memory_gib"] == pytest.approx(22.49 * MEMORY_SAFETY_FRACTION - 0.5, abs=1e-3)
    assert p.total_est_cost_usd == pytest.approx(2.2)
    assert p.within_budget


def test_spot_chosen_when_cheap_and_deadline_has_slack():
    s = PlanSettings(**{**BASE.__dict__, "deadline_s": 8.0 * H, "preemption_per_hour": 0.05})
    p = plan_of(estimates(("t1", 1, "none", 10.0, 2.0)), offers(("aws", "g6.xlarge", "L4", 1, 1.0, 0.3)), s, accel=ACCEL)
    t = one(p)
    # T0 = 2.2; per preemption = restart 0.2 + lost (half the compute) 1.0 = 1.2
    # expected hours = 2.2 + 0.05 * 2.2 * 1.2 = 2.332; cost = 0.3 * 2.332
    assert t["spot"] is True
    assert t["est_wall_s"] / H == pytest.approx(2.332)
    assert t["est_cost_usd"] == pytest.approx(0.6996)
    assert t["on_demand_usd_per_hour"] == 1.0 and t["usd_per_hour"] == 0.3


def test_on_demand_when_deadline_tight():
    # deadline 2.5 h: n_allowed = floor((2.5 - 2.2) / 1.2) = 0; P(N = 0) = exp(-0.11) = 0.896 < 0.9
    s = PlanSettings(**{**BASE.__dict__, "deadline_s": 2.5 * H, "preemption_per_hour": 0.05})
    e, o = estimates(("t1", 1, "none", 10.0, 2.0)), offers(("aws", "g6.xlarge", "L4", 1, 1.0, 0.3))
    t = one(plan_of(e, o, s, accel=ACCEL))
    assert t["spot"] is False and t["est_cost_usd"] == pytest.approx(2.2) and t["reason"] is None
    # at 85% confidence the same deadline holds for spot
    s85 = PlanSettings(**{**s.__dict__, "deadline_confidence": 0.85})
    assert one(plan_of(e, o, s85, accel=ACCEL))["spot"] is True


def test_on_demand_when_preemptions_frequent():
    # rate 2/h: expected hours = 2.2 + 2 * 2.2 * 1.2 = 7.48; 7.48 * 0.3 = 2.244 > 2.2 on demand
    s = PlanSettings(**{**BASE.__dict__, "preemption_per_hour": 2.0})
    t = one(plan_of(estimates(("t1", 1, "none", 10.0, 2.0)), offers(("aws", "g6.xlarge", "L4", 1, 1.0, 0.3)), s, accel=ACCEL))
    assert t["spot"] is False and t["est_cost_usd"] == pytest.approx(2.2)


def test_spot_always_and_never():
    e, o = estimates(("t1", 1, "none", 10.0, 2.0)), offers(("aws", "g6.xlarge", "L4", 1, 1.0, 0.9))
    always = PlanSettings(**{**BASE.__dict__, "spot": "always", "preemption_per_hour": 2.0})
    assert one(plan_of(e, o, always, accel=ACCEL))["spot"] is True
    never = PlanSettings(**{**BASE.__dict__, "spot": "never", "preemption_per_hour": 0.0})
    assert one(plan_of(e, offers(("aws", "g6.xlarge", "L4", 1, 1.0, 0.01 + 0.3)), never, accel=ACCEL))["spot"] is False


def test_suspicious_spot_is_not_trusted():
    # spot exactly 10% of on-demand: flagged; the planner uses on-demand and says so
    o = offers(("aws", "g6.xlarge", "L4", 1, 1.0, 0.1))
    p = plan_of(estimates(("t1", 1, "none", 10.0, 2.0)), o, PlanSettings(**{**BASE.__dict__, "preemption_per_hour": 0.0}), accel=ACCEL)
    assert one(p)["spot"] is False
    assert any("suspicious" in a for a in p.assumptions)


def test_cheapest_gpu_count_and_whole_instance_billing():
    # 30 GiB does not fit one L4 (20.87 usable); 2 GPUs fsdp need 16 GiB each.
    # Only an 8-GPU instance exists for 2 GPUs: it is paid whole.
    e = estimates(("t1", 1, "none", 30.0, 4.0), ("t1", 2, "fsdp", 16.0, 4.0))
    o = offers(("aws", "g6.xlarge", "L4", 1, 1.0, None), ("aws", "g6.48xlarge", "L4", 8, 8.0, None))
    t = one(plan_of(e, o, BASE, accel=ACCEL))
    # compute = 4 GPU-h / (2 GPUs * fsdp efficiency 0.85) = 2.3529 h; hours = 2.5529; cost = 8 $/h
    assert t["gpus"] == 2 and t["instance_type"] == "g6.48xlarge" and t["sharding"] == "fsdp"
    assert t["est_wall_s"] / H == pytest.approx(0.2 + 4.0 / (2 * 0.85), rel=1e-4)
    assert t["est_cost_usd"] == pytest.approx(8.0 * (0.2 + 4.0 / 1.7), rel=1e-4)


def test_cheaper_accelerator_wins_and_deadline_can_force_faster_one():
    # H100: peak 989 vs 121 -> compute 2 L4-hours = 0.24469 h on an H100
    e = estimates(("t1", 1, "none", 10.0, 2.0))
    o = offers(("aws", "g6.xlarge", "L4", 1, 1.0, None), ("aws", "p5.4xlarge", "H100", 1, 7.0, None))
    t = one(plan_of(e, o, BASE, accel=ACCEL))
    assert t["accelerator"] == "L4"  # 2.2 $ vs 7 * 0.4447 = 3.11 $
    tight = PlanSettings(**{**BASE.__dict__, "deadline_s": 1.0 * H})
    t = one(plan_of(e, o, tight, accel=ACCEL))
    assert t["accelerator"] == "H100" and t["reason"] is None
    assert t["est_cost_usd"] == pytest.approx(7.0 * (0.2 + 2.0 * 121 / 989), rel=1e-4)


def test_misses_deadline_still_planned_with_reason():
    s = PlanSettings(**{**BASE.__dict__, "deadline_s": 1.0 * H})
    t = one(plan_of(estimates(("t1", 1, "none", 10.0, 2.0)), offers(("aws", "g6.xlarge", "L4", 1, 1.0, None)), s, accel=ACCEL))
    assert t["feasible"] and t["reason"].startswith("misses deadline: 7920 s > 3600 s")


def test_impossible_trial_listed_with_reason_never_dropped():
    e = estimates(("ok", 1, "none", 10.0, 1.0), ("big", 1, "none", 143.0, 1.0))
    p = plan_of(e, offers(("aws", "g6.xlarge", "L4", 1, 1.0, None)), BASE, accel=ACCEL)
    assert [t["trial_id"] for t in p.trials] == ["ok", "big"]
    big = one(p, "big")
    assert big["feasible"] is False and big["est_cost_usd"] is None
    assert big["reason"] == "needs 143.0 GiB per GPU (1 GPU, none); largest candidate L4 has " + f"{22.49 * MEMORY_SAFETY_FRACTION - 0.5:.1f} GiB usable"
    assert p.total_est_cost_usd == pytest.approx(1.2)
    assert "INFEASIBLE: needs 143.0 GiB" in render_plan(p)


def test_schedule_lpt_and_makespan():
    e = estimates(("a", 1, "none", 1.0, 0.8), ("b", 1, "none", 1.0, 2.8), ("c", 1, "none", 1.0, 1.8))
    p = plan_of(e, offers(("aws", "g6.xlarge", "L4", 1, 1.0, None)), BASE, accel=ACCEL)
    # hours 1, 3, 2 -> LPT on 2 slots: b@0 (slot 0), c@0 (slot 1), a@2 (slot 1) -> makespan 3
    assert p.launch_order == ["b", "c", "a"]
    assert one(p, "a")["start_s"] / H == pytest.approx(2.0)
    assert p.makespan_s / H == pytest.approx(3.0)
    assert p.total_est_cost_usd == pytest.approx(6.0)


def test_json_keys():
    p = plan_of(estimates(("t1", 1, "none", 10.0, 2.0)), offers(("aws", "g6.xlarge", "L4", 1, 1.0, None)), BASE, accel=ACCEL)
    j = p.to_json()
    for k in ("sweep", "trials", "total_est_cost_usd", "makespan_s", "max_parallel", "budget_usd", "within_budget",
              "price_snapshot", "what_if", "assumptions"):
        assert k in j
    for k in ("trial_id", "params", "accelerator", "gpus", "cloud", "region", "instance_type", "spot", "est_memory_gib",
              "usable_memory_gib", "est_wall_s", "est_basis", "est_cost_usd", "feasible", "reason"):
        assert k in j["trials"][0]
    assert [w["parallel"] for w in j["what_if"]] == [1, 2, 4, 8, 16, 32, 64]
    assert set(j["what_if"][0]) == {"parallel", "time_to_recipe_s", "cost_usd"}
    assert j["price_snapshot"].startswith("px-")


def test_budget_guard_message_has_numbers_and_alternatives():
    e = estimates(*[(f"t{i}", 1, "none", 10.0, 2.0) for i in range(10)])
    o = offers(("aws", "g6.xlarge", "L4", 1, 1.0, 0.4), ("aws", "p5.4xlarge", "H100", 1, 7.0, None))
    s = PlanSettings(**{**BASE.__dict__, "budget_usd": 10.0, "spot": "never", "preemption_per_hour": 0.05})
    p = plan_of(e, o, s, accel=ACCEL)
    assert p.total_est_cost_usd == pytest.approx(22.0) and not p.within_budget
    with pytest.raises(BudgetExceeded) as err:
        budget_guard(p)
    msg = str(err.value)
    assert err.value.exit_code == 3
    assert "estimated cost $22.00 exceeds the budget $10.00" in msg
    assert "10 trial(s) on 1x L4 on-demand (g6.xlarge): $22.00 (100%)" in msg
    assert "4 of 10 trial(s) fit the budget" in msg
    assert "spot for every trial" in msg and "$9.33 (fits)" in msg  # 10 * 0.4 * 2.332
    budget_guard(plan_of(e, o, PlanSettings(**{**s.__dict__, "budget_usd": 50.0}), accel=ACCEL))


def test_budget_guard_counts_what_the_sweeps_probes_spent():
    # search.probe auto: the sweep probes, then plans again; the plan's trials fit, the probes' spend
    # on top of them does not (docs/probes.md: probe spend is the sweep's spend)
    e = estimates(*[(f"t{i}", 1, "none", 10.0, 2.0) for i in range(10)])
    o = offers(("aws", "g6.xlarge", "L4", 1, 1.0, 0.4))
    s = PlanSettings(**{**BASE.__dict__, "budget_usd": 23.0, "spot": "never", "preemption_per_hour": 0.05})
    p = plan_of(e, o, s, accel=ACCEL)
    assert p.total_est_cost_usd == pytest.approx(22.0) and p.within_budget
    budget_guard(p)
    budget_guard(p, probes_usd=0.99)  # $22.99: still within $23
    with pytest.raises(BudgetExceeded) as err:
        budget_guard(p, probes_usd=1.5)
    msg = str(err.value)
    assert "estimated cost $22.00 + $1.50 the sweep's probes spent exceeds the budget $23.00 (by $0.50)" in msg
    assert "raise budget.max_usd to at least $23.50" in msg


# ------------------------------------------------------------------ what-if


def test_what_if_hand_computed():
    w = what_if_curve([1, 1, 1, 1], [1, 1, 1, 1], target_index=1, ks=(1, 2, 4))
    # K=1: finishes 1,2,3,4 -> t=2, started before 2: trials 0,1 -> $2
    # K=2: starts 0,0,1,1 -> t=1, started before 1: 2 -> $2; K=4: all start at 0 -> t=1, $4 (waste)
    assert [(x["time_to_recipe_s"], x["cost_usd"]) for x in w] == [(2.0, 2.0), (1.0, 2.0), (1.0, 4.0)]
    allrun = what_if_curve([1, 1, 1, 1], [1, 1, 1, 1], target_index=1, ks=(1, 4), stop_at_target=False)
    assert [x["cost_usd"] for x in allrun] == [4.0, 4.0]
    # local slots share 2 cores: at K=4 each trial takes (and is billed) 4/2 = 2x as long; all 4 start
    # at 0 and finish at 2, so the recipe (trial 1) is at 2 s and all four are paid: 4 x $2
    shared = what_if_curve([1, 1, 1, 1], [1, 1, 1, 1], target_index=1, ks=(2, 4), shared_cores=2)
    assert [(x["time_to_recipe_s"], x["cost_usd"]) for x in shared] == [(1.0, 2.0), (2.0, 8.0)]
    # uniform prior over the recipe position: K=1 mean finish (1+2+3+4)/4
    assert what_if_curve([1, 1, 1, 1], [1, 1, 1, 1], ks=(1,))[0]["time_to_recipe_s"] == 2.5


durations = st.lists(st.floats(min_value=0.01, max_value=100, allow_nan=False), min_size=1, max_size=40)


@pytest.mark.slow  # over ~0.5 s alone (a report, warehouse, plan or subprocess): make test runs it, make test-fast does not
@settings(max_examples=150, deadline=None)
@given(durations, st.data())
def test_what_if_time_never_rises_with_k(d, data):
    target = data.draw(st.one_of(st.none(), st.integers(0, len(d) - 1)))
    w = what_if_curve(d, [1.0] * len(d), target_index=target, ks=(1, 2, 3, 4, 5, 8, 16, 32, 64))
    times = [x["time_to_recipe_s"] for x in w]
    assert all(b <= a + 1e-9 for a, b in zip(times, times[1:], strict=False))
    assert times[-1] >= (min(d) if target is None else d[target]) - 1e-6


@settings(max_examples=100, deadline=None)
@given(durations, st.integers(1, 10))
def test_list_schedule_starts_non_decreasing(d, k):
    start, slot = list_schedule(d, k)
    assert np.all(np.diff(start) >= -1e-12)
    assert slot.max() < k


def test_poisson_cdf():
    n = np.array([0, 1, 2, 5, -1, 40])
    mu = np.array([0.11, 1.0, 2.0, 3.0, 1.0, 35.0])
    exact = [math.exp(-0.11), 2 * math.exp(-1), 5 * math.exp(-2), sum(math.exp(-3) * 3**k / math.factorial(k) for k in range(6)), 0.0,
             sum(math.exp(-35) * 35**k / math.factorial(k) for k in range(41))]
    got = poisson_cdf(n, mu)
    assert got[:5] == pytest.approx(exact[:5], abs=1e-12)
    assert got[5] == pytest.approx(exact[5], abs=0.01)  # normal approximation above mu = 30


# ------------------------------------------------------------------ pruning is exact


def _brute_force(est_rows, offer_rows, s: PlanSettings, accel: dict):
    """Reference: a plain loop over every estimate row × offer (no pruning) -> cost per trial."""
    best: dict[str, tuple] = {}
    for tid, g, sh, mem, gpu_hours in est_rows:
        flops = gpu_hours * L4_GPU_HOUR
        for _cloud, _inst, acc, n, od, sp in offer_rows:
            memory, peak, mfu = accel[acc]
            if n < g or mem > memory * s.memory_safety_fraction - s.memory_reserve_gib:
                continue
            eff = {"none": 1.0, "ddp": 0.9, "fsdp": 0.85}[sh]
            compute = flops / (g * peak * 1e12 * mfu * eff) / 3600
            t0 = s.overhead_s / H + compute
            dl = None if s.deadline_s is None else s.deadline_s / H
            options = [(od, t0, True if dl is None else t0 <= dl)] if s.spot != "always" else []
            suspicious = sp is not None and (abs(sp / od - 0.1) <= 0.1 * 0.002 or sp >= od or sp / od < 0.08)
            if sp is not None and not suspicious and s.spot != "never":
                rate = s.preemption_per_hour
                per = s.restart_s / H + compute / 2
                hours = t0 * (1 + rate * per)
                ok = True
                if dl is not None:
                    if t0 > dl:
                        ok = False
                    else:
                        n_allowed = math.floor((dl - t0) / per)
                        mu = rate * t0
                        cdf = sum(math.exp(-mu) * mu**k / math.factorial(k) for k in range(min(n_allowed, 150) + 1))
                        ok = cdf >= s.deadline_confidence
                options.append((sp, hours, ok))
            for price, hours, ok in options:
                cand = (not ok, price * hours)
                if tid not in best or cand < best[tid]:
                    best[tid] = cand
    return best


ACC_DICT = {"L4": (22.49, 121.0, 0.5), "H100": (79.65, 989.0, 0.5)}
offer_st = st.tuples(
    st.sampled_from(["aws", "gcp"]), st.text("abcdef", min_size=3, max_size=6), st.sampled_from(["L4", "H100"]),
    st.sampled_from([1, 2, 4, 8]), st.floats(0.5, 60.0), st.one_of(st.none(), st.floats(0.05, 70.0)),
)
est_st = st.tuples(st.sampled_from(["a", "b", "c"]), st.sampled_from([1, 2, 4, 8]), st.sampled_from(["none", "ddp", "fsdp"]),
                   st.floats(1.0, 90.0), st.floats(0.01, 50.0))


@settings(max_examples=60, deadline=None)
@given(st.lists(offer_st, min_size=1, max_size=8, unique_by=lambda o: (o[0], o[1])), st.lists(est_st, min_size=1, max_size=6),
       st.sampled_from([None, 3.0, 12.0]), st.sampled_from([0.0, 0.05, 0.5]), st.sampled_from(["auto", "never", "always"]))
@pytest.mark.slow  # over ~1 s (a whole report, replay, plan or warehouse): make test runs it, make test-fast does not
def test_pruned_choice_equals_brute_force(offer_rows, est_rows, deadline, rate, spot):
    est_rows = [(t, g, "none" if g == 1 else (sh if sh != "none" else "ddp"), m, h) for t, g, sh, m, h in est_rows]
    s = PlanSettings(**{**BASE.__dict__, "deadline_s": None if deadline is None else deadline * H, "preemption_per_hour": rate, "spot": spot})
    o = offers(*[(c, i, a, n, od, sp) for c, i, a, n, od, sp in offer_rows])
    e = pl.DataFrame({"trial_id": [r[0] for r in est_rows], "gpus": [r[1] for r in est_rows], "sharding": [r[2] for r in est_rows],
                      "est_memory_gib": [r[3] for r in est_rows], "flops_total": [r[4] * L4_GPU_HOUR for r in est_rows]})
    p = plan_of(e, o, s, accel=ACCEL)
    # the reference refuses what the planner's price floors refuse (gpuledger/catalog/floors.py): an
    # on-demand price far below its peers is never planned on, a spot price far below them never used
    from gpuledger.catalog import floors

    marked = floors.mark(o).select("cloud", "instance_type", "price_problem", "spot_problem").rows()
    problems = {(c, i): (pp, sp) for c, i, pp, sp in marked}
    kept = [(c, i, a, n, od, None if problems[(c, i)][1] else sp) for c, i, a, n, od, sp in offer_rows
            if not problems[(c, i)][0]]
    ref = _brute_force(est_rows, kept, s, ACC_DICT)
    for t in p.trials:
        if t["trial_id"] not in ref:
            assert not t["feasible"]
            continue
        late, cost = ref[t["trial_id"]]
        assert t["feasible"]
        assert t["est_cost_usd"] == pytest.approx(cost, rel=1e-3, abs=1e-3)
        assert (t["reason"] is not None) == late


def test_sweep_makespan_over_deadline_is_warned():
    e = estimates(*[(f"t{i}", 1, "none", 1.0, 1.8) for i in range(4)])  # 2 h each
    s = PlanSettings(**{**BASE.__dict__, "deadline_s": 3.0 * H, "max_parallel": 1})
    p = plan_of(e, offers(("aws", "g6.xlarge", "L4", 1, 1.0, None)), s, accel=ACCEL)
    assert all(t["reason"] is None for t in p.trials)  # each trial meets the deadline alone
    assert p.makespan_s / H == pytest.approx(8.0)
    assert any(a.startswith("WARNING deadline: the sweep's makespan 8.00 h on 1 slot(s)") and "4 slots would meet it" in a
               for a in p.assumptions)


def test_measured_preemptions_replace_the_default_rate():
    e, o = estimates(("t1", 1, "none", 10.0, 2.0)), offers(("aws", "g6.xlarge", "L4", 1, 1.0, 0.3))
    default = PlanSettings(**{**BASE.__dict__, "deadline_s": 8.0 * H})
    t = one(plan_of(e, o, default, accel=ACCEL))
    assert t["spot"] is True and t["preemptions_per_hour"] == 0.03  # preemption.csv: aws g-family
    # the warehouse measured 2 preemptions per spot hour over 100 h: spot no longer pays
    measured = PlanSettings(**{**default.__dict__, "measured_preemption": {("aws", "L4"): (100.0, 200.0)}})
    t = one(plan_of(e, o, measured, accel=ACCEL))
    assert t["spot"] is False
    p = plan_of(e, o, PlanSettings(**{**default.__dict__, "measured_preemption": {("aws", "L4"): (10.0, 20.0)}}), accel=ACCEL)
    assert one(p)["spot"] is True  # 10 spot hours are too few to trust: the default stays
