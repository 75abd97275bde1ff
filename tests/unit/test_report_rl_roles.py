"""The sweep report of a GRPO sweep (gpuledger/report/rl_roles.py): each trial's placement and planned
time and dollars by role from the stored plan (a real `plan_sweep` of the GRPO example), and what its
trainer measured by role (the rl_* metrics gpuledger.integrations.trl logs) with the run's cost split by
each role's share of its logged step time. A real DuckDB warehouse built through the Warehouse API."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from helpers.record_fixtures import example_record
from helpers.warehouse_template import fresh_warehouse

from gpuledger.plan import plan_sweep
from gpuledger.report import load_sweep, sweep_markdown
from gpuledger.report.rl_roles import measured_roles
from gpuledger.spec import expand_trials, load_spec
from gpuledger.warehouse import Warehouse

ROOT = Path(__file__).resolve().parents[2]
SID = "grpo-qwen-7b-0000abcd"
#: per step: rollout 6 s, log-probs 1 s, reward 0.5 s, train 2 s, sync 0.5 s = a 10 s step; 3 steps
STEP = {"rl_rollout_s": 6.0, "rl_logprob_s": 1.0, "rl_reward_s": 0.5, "rl_train_s": 2.0, "rl_sync_s": 0.5,
        "rl_step_s": 10.0}


@pytest.fixture()
def wh(tmp_path):
    data = yaml.safe_load((ROOT / "specs" / "grpo-qwen-7b.yaml").read_text())
    data["search"]["params"] = {"learning_rate": [1.0e-6, 3.0e-6]}
    data["resources"].update(accelerators=["H100"], gpus_per_trial=8)
    data["train"]["generation"] = "vllm_server"
    path = tmp_path / "grpo.yaml"
    path.write_text(yaml.safe_dump(data))
    spec = load_spec(path)
    trials = expand_trials(spec)
    plan = plan_sweep(spec, trials)
    w = Warehouse.open(fresh_warehouse(tmp_path / "wh.duckdb"))
    w.register_sweep(sweep_id=SID, name="grpo-qwen-7b", project="math-reasoning", owner="rl-team", method="grpo",
                     model=spec.model, launcher="skypilot", objective_metric="reward_mean", objective_goal="maximize",
                     budget_usd=2500.0, max_parallel=2, started_at="2026-01-05T10:00:00", plan_json=plan.to_json())
    w.upsert_trials(SID, [{"trial_id": t.trial_id, "index": t.index, "params": t.params, "accelerator": "H100",
                           "gpus": 8, "cloud": "aws", "spot": False, "feasible": True, "status": "pending"}
                          for t in trials])
    metrics = [{"name": k, "value": v, "step": s, "t_s": 60.0 + 10 * s} for s in (1, 2, 3) for k, v in STEP.items()]
    rec = example_record("run-a", trials[0].trial_id, sweep_id=SID, wall_s=3600, launcher="skypilot", cloud="aws",
                         accelerator="H100", gpus=8, usd_per_hour=36.0, metrics=metrics,
                         final_metrics={"reward_mean": 0.5})
    w.ingest_records([rec])
    w.mark_trials(SID, [trials[0].trial_id], "succeeded")
    yield w, plan, trials
    w.close()


def test_the_grpo_sweep_report_shows_roles_planned_and_measured(wh):
    w, plan, trials = wh
    data = load_sweep(w, sweep_id=SID)
    assert set(data.plan_roles) == {t["trial_id"] for t in plan.to_json()["trials"] if t["feasible"]}
    row = data.rl_roles.row(0, named=True)
    assert row["steps"] == 3 and row["rollout_s"] == pytest.approx(18.0) and row["step_s"] == pytest.approx(30.0)
    roles = measured_roles(row)
    # the run cost $36 (1 h at $36/h): its logged steps are 30 s of it, split by role
    assert roles["rollout"]["usd"] == pytest.approx(36.0 * 18 / 30) and roles["train"]["seconds"] == pytest.approx(6.0)
    assert sum(v["usd"] for v in roles.values()) == pytest.approx(36.0)
    md = sweep_markdown(data)
    assert "RL roles: time and dollars by role" in md
    chosen = plan.to_json()["trials"][0]["roles"]
    placement = f"{chosen['placement']} ("
    assert placement in md and "rollout" in md
    assert "not measured (the trainer logged no roles)" in md  # the second trial never ran


@pytest.mark.slow  # over ~1 s (a whole report, replay, plan or warehouse): make test runs it, make test-fast does not
def test_a_sweep_without_roles_has_no_rl_section(tmp_path):
    from helpers.report_fixtures import build_roi_fixture

    build_roi_fixture(tmp_path / "roi.duckdb")
    with Warehouse.open(tmp_path / "roi.duckdb", read_only=True) as w:
        data = load_sweep(w, "lora-grid")
    assert data.plan_roles == {} and (data.rl_roles is None or data.rl_roles.is_empty())
    assert "RL roles" not in sweep_markdown(data)
