"""RL runs billed by role (issue 40; gpuledger/report/rl_cost.py, migration 047): a GRPO trial whose rollouts
ran on an instance of their own has one billing line per role (the trainer's and the rollouts' instance, each
with its instance type, GPU kind and count); the cloud's FOCUS bill names each instance's role by its
gpuledger-role label; the sweep report's RL section shows per role what the plan estimated (P50 and the
trial's P10-P90 cost band), what the launcher recorded and what the cloud billed. A run on one instance is
split by its trainer's logged roles. A real plan of the GRPO example, a real DuckDB warehouse, a real
FOCUS file through `ingest_billing_file`."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pydantic
import pytest
import yaml
from helpers.billing_fixtures import ingest
from helpers.record_fixtures import example_record
from helpers.warehouse_template import fresh_warehouse

from gpuledger.billing.labels import launch_labels
from gpuledger.plan import plan_sweep
from gpuledger.record import parse_record
from gpuledger.report import load_sweep, sweep_markdown
from gpuledger.report.rl_cost import PLAN_ROLE, cost_rows
from gpuledger.spec import expand_trials, load_spec
from gpuledger.warehouse import Warehouse

ROOT = Path(__file__).resolve().parents[2]
SID = "grpo-qwen-7b-0000abcd"
STEP = {"rl_rollout_s": 6.0, "rl_logprob_s": 1.0, "rl_reward_s": 0.5, "rl_train_s": 2.0, "rl_sync_s": 0.5,
        "rl_step_s": 10.0}
HEADER = ["BillingPeriodStart", "BillingPeriodEnd", "ChargePeriodStart", "ChargePeriodEnd", "ChargeCategory",
          "BillingAccountId", "ProviderName", "ServiceName", "ServiceCategory", "RegionId", "BilledCost",
          "EffectiveCost", "ListCost", "BillingCurrency", "ResourceId", "Tags"]


def _plan(tmp_path, **train):
    data = yaml.safe_load((ROOT / "specs" / "grpo-qwen-7b.yaml").read_text())
    data["search"]["params"] = {"learning_rate": [1.0e-6]}
    data["resources"].update(accelerators=["H100"], gpus_per_trial=8, clouds=["aws"], spot="never")
    data["train"].update(train)
    path = tmp_path / "grpo.yaml"
    path.write_text(yaml.safe_dump(data))
    spec = load_spec(path)
    trials = expand_trials(spec)
    return spec, trials, plan_sweep(spec, trials)


def _warehouse(tmp_path, spec, trials, plan):
    w = Warehouse.open(fresh_warehouse(tmp_path / "wh.duckdb"))
    w.register_sweep(sweep_id=SID, name="grpo-qwen-7b", project="math-reasoning", owner="rl-team", method="grpo",
                     model=spec.model, launcher="skypilot", objective_metric="reward_mean", objective_goal="maximize",
                     budget_usd=2500.0, max_parallel=2, started_at="2026-01-05T10:00:00", plan_json=plan.to_json())
    w.upsert_trials(SID, [{"trial_id": t.trial_id, "index": t.index, "params": t.params, "accelerator": "H100",
                           "gpus": 8, "cloud": "aws", "spot": False, "feasible": True, "status": "pending"}
                          for t in trials])
    return w


def _metrics():
    return [{"name": k, "value": v, "step": s, "t_s": 60.0 + 10 * s} for s in (1, 2, 3) for k, v in STEP.items()]


def _line(role, instance, acc, gpus, rate, hours=1.0):
    return {"source": "catalog", "description": f"aws {instance} us-east-1 on-demand", "usd_per_hour": rate,
            "hours": hours, "cost_usd": rate * hours, "spot": False, "on_demand_usd_per_hour": rate,
            "role": role, "instance_type": instance, "accelerator": acc, "gpus": gpus}


def _focus(path: Path, trial_id: str, items: list[tuple[str | None, float]]) -> Path:
    with path.open("w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(HEADER)
        for role, cost in items:
            tags = launch_labels(sweep_id=SID, trial_id=trial_id, sweep_name="grpo-qwen-7b", role=role)
            out.writerow(["2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z", "2026-01-05T10:00:00Z",
                          "2026-01-05T11:00:00Z", "Usage", "ACCT-1", "Amazon Web Services",
                          "Amazon Elastic Compute Cloud", "Compute", "us-east-1", f"{cost:.2f}", f"{cost:.2f}",
                          f"{cost:.2f}", "USD", f"i-{role or 'none'}", json.dumps(tags)])
    return path


@pytest.mark.slow  # over ~1 s (a whole report, replay, plan or warehouse): make test runs it, make test-fast does not
def test_a_job_group_run_is_recorded_billed_and_planned_by_role(tmp_path):
    spec, trials, plan = _plan(tmp_path, generation="vllm_server", rollout_gpu="L40S", rollout_gpus=4)
    t = plan.to_json()["trials"][0]
    groups = t["roles"]["groups"]
    trainer_rate, rollout_rate = groups["trainer"]["usd_per_hour"], groups["rollout"]["usd_per_hour"]
    rollout_type = groups["rollout"]["instance_type"]
    w = _warehouse(tmp_path, spec, trials, plan)
    rec = example_record("run-g", t["trial_id"], sweep_id=SID, wall_s=3600, launcher="skypilot", cloud="aws",
                         accelerator="H100", gpus=8, region="us-east-1", instance_type=t["instance_type"],
                         metrics=_metrics(), final_metrics={"reward_mean": 0.5})
    rec["billing"] = [_line("trainer", t["instance_type"], "H100", 8, trainer_rate),
                      _line("rollout", rollout_type, "L40S", 4, rollout_rate)]
    w.ingest_records([rec])
    stored = w.query("select role, instance_type, accelerator, gpus from billing where run_id = 'run-g' order by line_no")
    assert stored.rows() == [("trainer", t["instance_type"], "H100", 8), ("rollout", rollout_type, "L40S", 4)]
    # the bill: each instance under its role label, and one item of the trial without a role (its controller)
    ingest(w, _focus(tmp_path / "bill.csv", t["trial_id"], [("trainer", 70.0), ("rollout", 9.5), (None, 0.4)]))
    data = load_sweep(w, sweep_id=SID)
    by_role = {r["role"]: r for r in data.rl_cost.to_dicts()}
    assert set(by_role) == {"trainer", "rollout", None}
    assert by_role["trainer"]["recorded_usd"] == pytest.approx(trainer_rate)
    assert by_role["trainer"]["billed_usd"] == pytest.approx(70.0)
    assert by_role["rollout"]["billed_usd"] == pytest.approx(9.5) and by_role["rollout"]["accelerator"] == "L40S"
    assert by_role[None]["recorded_usd"] is None and by_role[None]["billed_usd"] == pytest.approx(0.4)

    rows = cost_rows(data.plan_roles, data.rl_cost, data.rl_roles, data.plan_bands, {})
    shown = {r[2]: r for r in rows}
    assert set(shown) == {"trainer", "rollout", "unlabelled"}
    # planned: the plan's roles folded into the run's two instances (the reference and reward ran on the trainer's)
    roles = t["roles"]["roles"]
    want_rollout = sum(v["usd"] for k, v in roles.items() if PLAN_ROLE[k] == "rollout")
    want_trainer = sum(v["usd"] for k, v in roles.items() if PLAN_ROLE[k] != "rollout")
    lo, hi = t["est_cost_usd_p10"] / t["est_cost_usd"], t["est_cost_usd_p90"] / t["est_cost_usd"]
    assert lo < 1 < hi
    assert shown["rollout"][4].startswith(f"${want_rollout:,.2f} (${want_rollout * lo:,.2f}-")
    assert shown["trainer"][4].startswith(f"${want_trainer:,.2f} (")
    assert shown["trainer"][5] == f"${trainer_rate:,.2f}" and shown["trainer"][6] == "$70.00"
    assert shown["trainer"][7] == f"{trainer_rate / want_trainer:.2f}x"
    assert shown["rollout"][3] == f"4x L40S ({rollout_type})"
    md = sweep_markdown(data)
    assert "Cost by role" in md and "its own billing line" in md and "$9.50" in md
    w.close()


@pytest.mark.slow  # over ~0.5 s alone (a report, warehouse, plan or subprocess): make test runs it, make test-fast does not
def test_a_run_on_one_instance_is_split_by_its_logged_roles(tmp_path):
    spec, trials, plan = _plan(tmp_path, generation="vllm_server")  # split on one node: one instance
    t = plan.to_json()["trials"][0]
    w = _warehouse(tmp_path, spec, trials, plan)
    rec = example_record("run-c", t["trial_id"], sweep_id=SID, wall_s=3600, launcher="skypilot", cloud="aws",
                         accelerator="H100", gpus=8, usd_per_hour=36.0, metrics=_metrics(),
                         final_metrics={"reward_mean": 0.5})
    w.ingest_records([rec])  # a line without the 047 fields: the run's own instance stands in
    data = load_sweep(w, sweep_id=SID)
    row = data.rl_cost.row(0, named=True)
    assert row["role"] is None and row["accelerator"] == "H100" and row["gpus"] == 8
    rows = cost_rows(data.plan_roles, data.rl_cost, data.rl_roles, data.plan_bands, {})
    shown = {r[2]: r for r in rows}
    # 6 s rollout, 1 s log-probs (ref), 0.5 s reward, 2 + 0.5 s train and sync of a 10 s step, of $36
    assert {k: v[5] for k, v in shown.items()} == {"trainer": "$9.00", "rollout": "$21.60", "ref": "$3.60",
                                                   "reward": "$1.80"}
    assert all(v[6] == "not billed yet" for v in shown.values())
    assert shown["rollout"][8] == "one instance, 60% of the logged step time"
    planned_total = sum(v["usd"] for v in t["roles"]["roles"].values())
    planned = [r[4].split(" ")[0] for r in rows if r[4] != "-"]  # a role the plan gives no dollars shows "-"
    assert sum(float(p.strip("$").replace(",", "")) for p in planned) == pytest.approx(planned_total, abs=0.05)
    w.close()


def test_a_billing_line_names_only_known_roles():
    rec = example_record("run-x", "t1", launcher="skypilot", cloud="aws", accelerator="H100", gpus=8, usd_per_hour=1.0)
    rec["billing"][0].update(role="rollout", instance_type="g6e.12xlarge", accelerator="L40S", gpus=4)
    assert parse_record(rec).billing[0].role == "rollout"
    rec["billing"][0]["role"] = "critic"
    with pytest.raises(pydantic.ValidationError, match="role"):
        parse_record(rec)
