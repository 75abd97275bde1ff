"""Pools in the planner (gpuledger/plan/pools.py): the schedule, the money by hand, and the choice on the
shipped cloud LoRA grid cut to short trials (real estimator, bundled catalog)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gpuledger.plan.pools import (
    POOL_JOB_START_S,
    POOL_TEARDOWN_S,
    pool_schedule,
    pool_what_if,
    pool_workers,
    price_pool,
    spot_run_s,
)
from gpuledger.plan.settings import PlanSettings

ROOT = Path(__file__).resolve().parents[2]
CLOUD_SPEC = (ROOT / "specs" / "llama3-8b-lora-cloud.yaml").read_text()
OFFER = {"cand": 0, "cloud": "aws", "region": "us-east-1", "instance_type": "x", "accelerator": "H100", "gpus": 1,
         "spot": False, "usd_per_hour": 3.6, "on_demand_usd_per_hour": 3.6, "preemptions_per_hour": 0.0,
         "price_source": "test", "price_as_of": "2026-11-26"}


def test_schedule_by_hand():
    sch = pool_schedule([100.0, 50.0, 50.0], 2, startup_s=600.0, teardown_s=120.0)
    assert sch.start_s.tolist() == [600.0, 600.0, 650.0]
    assert sch.end_s.tolist() == [700.0, 650.0, 700.0]
    assert sch.worker.tolist() == [0, 1, 1]
    assert sch.busy_s.tolist() == [100.0, 100.0]
    assert sch.makespan_s == 700.0 and sch.end_pool_s == 820.0
    assert sch.worker_s == 1640.0
    assert sch.idle_tail_s == pytest.approx(2 * (820 - 600) - 200)


def test_fewest_workers_within_the_bound():
    equal = [100.0] * 12
    two_rounds = pool_schedule(equal, 8, 0.0, 0.0).makespan_s
    assert two_rounds == 200.0
    assert pool_workers(equal, 8, 0.0, two_rounds) == 6  # six workers also take two rounds
    assert pool_workers(equal, 8, 0.0, None) == 8
    assert pool_workers(equal, 8, 0.0, 50.0) == 8  # nothing meets it: the most parallel
    assert pool_workers(equal, 64, 0.0, 100.0) == 12  # never more workers than trials


def test_price_by_hand_on_demand_and_attribution():
    s = PlanSettings(provisioning_s=300.0, setup_s=300.0, max_parallel=2)
    compute = np.array([970.0, 470.0, 470.0])
    opt = price_pool(OFFER, ["a", "b", "c"], compute, 2, s)
    run = compute + POOL_JOB_START_S  # [1000, 500, 500]
    assert opt.run_s.tolist() == run.tolist()
    end_pool = 600 + 1000 + POOL_TEARDOWN_S
    assert opt.cost_usd == pytest.approx(2 * end_pool * 3.6 / 3600)
    per_trial = opt.trial_cost_usd()
    # each worker ran 1000 s: its 600 s start-up shared by run time, the idle tail left to the sweep
    assert per_trial.tolist() == pytest.approx([1.6, 0.8, 0.8])
    assert per_trial.sum() + opt.schedule.idle_tail_s * 0.001 == pytest.approx(opt.cost_usd)


def test_spot_worker_rework_and_deadline_at_confidence():
    s = PlanSettings(provisioning_s=300.0, setup_s=300.0, deadline_s=2000.0, max_parallel=1)
    compute = np.array([3600.0])
    run = spot_run_s(compute + POOL_JOB_START_S, compute, 0.5, s)
    assert run[0] == pytest.approx(3630 * (1 + 0.5 / 3600 * (600 + 1800)))
    spot = {**OFFER, "spot": True, "usd_per_hour": 1.0, "preemptions_per_hour": 0.5}
    opt = price_pool(spot, ["a"], compute, 1, s)
    assert not opt.deadline_ok  # 600 + 3630 s alone exceeds 2000 s
    ok = price_pool(spot, ["a"], compute, 1, PlanSettings(provisioning_s=300.0, setup_s=300.0, deadline_s=1e6))
    assert ok.deadline_ok and ok.makespan_conf_s > 600 + 3630


def test_what_if_prices_each_k_and_matches_the_pool_without_a_target():
    s = PlanSettings(provisioning_s=300.0, setup_s=300.0, max_parallel=2)
    opt = price_pool(OFFER, list("abcd"), np.array([970.0, 970.0, 470.0, 470.0]), 2, s)
    rows = pool_what_if(opt, [1, 2, 4], stop_at_target=False)
    assert rows[1]["pool_cost_usd"] == pytest.approx(opt.cost_usd)
    assert rows[0]["pool_time_to_recipe_s"] > rows[1]["pool_time_to_recipe_s"] > rows[2]["pool_time_to_recipe_s"]
    stopping = pool_what_if(opt, [1, 2, 4], stop_at_target=True)
    assert all(a["pool_cost_usd"] <= b["pool_cost_usd"] + 1e-9 for a, b in zip(stopping, rows, strict=True))


def test_what_if_never_prices_more_workers_than_trials():
    """A pool of 2 trials starts 2 workers whatever K allows (`pool_workers`), so K = 4 or 64 in the what-if is
    the 2-worker pool's time and money, not 2 or 62 idle workers billed."""
    s = PlanSettings(provisioning_s=300.0, setup_s=300.0, max_parallel=2)
    opt = price_pool(OFFER, list("ab"), np.array([970.0, 470.0]), 2, s)
    for stop in (False, True):
        two, four, many = pool_what_if(opt, [2, 4, 64], stop_at_target=stop)
        assert four == two == many
    assert two["pool_cost_usd"] == pytest.approx(opt.cost_usd)


def _plan(mode: str, tokens: str = "2_000_000", extra: str = ""):
    from gpuledger.plan import plan_sweep
    from gpuledger.spec import parse_spec

    text = CLOUD_SPEC.replace("20_000_000", tokens).replace("  spot: auto\n", f"  spot: auto\n  pool: {mode}\n")
    return plan_sweep(parse_spec(text + extra, "cloud.yaml")).to_json()


def test_short_cloud_grid_costs_less_on_a_pool_than_as_per_trial_jobs():
    auto, never = _plan("auto"), _plan("never")
    assert never["pool"]["used"] is False and "workers" not in never["pool"]
    pool = auto["pool"]
    assert pool["used"] is True and auto["total_est_cost_usd"] < never["total_est_cost_usd"]
    assert 1 <= pool["workers"] <= 8 and len(pool["assignments"]) == pool["workers"]
    assert sorted(t for a in pool["assignments"] for t in a["trials"]) == sorted(t["trial_id"] for t in auto["trials"])
    assert pool["saving_usd"] == pytest.approx(never["total_est_cost_usd"] - pool["cost_usd"], abs=1e-3)
    # no slower than the per-trial jobs it replaces
    assert auto["makespan_s"] <= never["makespan_s"]
    w = pool["worker"]
    assert all(t["instance_type"] == w["instance_type"] and t["spot"] == w["spot"] for t in auto["trials"])
    # the trials carry their run and start-up share; the idle tail is the sweep's
    attributed = sum(t["est_cost_usd"] for t in auto["trials"])
    assert attributed + pool["idle_tail_usd"] == pytest.approx(auto["total_est_cost_usd"], abs=1e-3)
    assert pool["startup_s_per_worker"] == 600.0
    assert all("pool_cost_usd" in row for row in auto["what_if"])


def test_always_and_differing_setups():
    always = _plan("always", tokens="200_000_000")
    assert always["pool"]["used"] is True and always["pool"]["reason"] == "resources.pool: always"
    per_trial_setup = _plan("always").get("pool")
    assert per_trial_setup["used"]
    text_setup = CLOUD_SPEC.replace("20_000_000", "2_000_000").replace(
        "setup: pip install -r trainers/requirements.txt", "setup: echo {lora_r}")
    from gpuledger.plan import plan_sweep
    from gpuledger.spec import parse_spec

    differing = plan_sweep(parse_spec(text_setup, "cloud.yaml")).to_json()["pool"]
    assert differing["used"] is False and "set-ups differ" in differing["reason"]
