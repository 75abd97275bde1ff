"""End to end: the real estimator, the bundled catalog and the `gpuledger plan` command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytest.importorskip("gpuledger.estimate")
from gpuledger import estimate as estimate_package  # noqa: E402

if not hasattr(estimate_package, "estimate"):
    pytest.skip("estimator not available", allow_module_level=True)

CLOUD_SPEC = (ROOT / "specs" / "llama3-8b-lora-cloud.yaml").read_text()


def _cli(tmp_path, *args):
    env = {**os.environ, "GPULEDGER_WAREHOUSE": str(tmp_path / "wh" / "ledger.duckdb")}
    env.pop("GPULEDGER_PRICES", None)
    return subprocess.run([sys.executable, "-X", "importtime", "-m", "gpuledger.cli", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=180)


def test_plan_cli_budget_guard_refuses_before_any_write(tmp_path):
    spec = tmp_path / "tight.yaml"
    spec.write_text(CLOUD_SPEC.replace("budget: {max_usd: 300, deadline: 8h}", "budget: {max_usd: 5, deadline: 8h}"))
    r = _cli(tmp_path, "plan", str(spec), "--json")
    assert r.returncode == 3, r.stderr[-2000:]
    plan = json.loads(r.stdout)
    assert plan["within_budget"] is False and plan["budget_usd"] == 5
    assert plan["total_est_cost_usd"] > 5
    msg = "\n".join(line for line in r.stderr.splitlines() if not line.startswith("import time:"))
    assert "exceeds the budget $5.00" in msg and "top cost drivers" in msg and "what would fit" in msg
    assert "Traceback" not in msg
    # pure: nothing written (no warehouse file, nothing in the working directory) ...
    assert not (tmp_path / "wh").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tight.yaml"]
    # ... and neither Prefect, SkyPilot nor DuckDB imported (python -X importtime)
    imported = {line.split("|")[-1].strip().split(".")[0] for line in r.stderr.splitlines() if line.startswith("import time:")}
    assert imported and not imported & {"prefect", "sky", "duckdb"}


def test_plan_cli_within_budget_table_and_capacity_spec(tmp_path, capsys, monkeypatch):
    from gpuledger.cli import main

    monkeypatch.delenv("GPULEDGER_PRICES", raising=False)
    spec = tmp_path / "ok.yaml"
    spec.write_text(CLOUD_SPEC)
    assert main(["plan", str(spec), "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert len(plan["trials"]) == 12 and all(t["feasible"] for t in plan["trials"])
    assert plan["within_budget"] and plan["price_snapshot"].startswith("px-")
    times = [w["time_to_recipe_s"] for w in plan["what_if"]]
    assert times == sorted(times, reverse=True)
    assert main(["plan", str(spec)]) == 0
    out = capsys.readouterr().out
    assert "what-if" in out and "total $" in out and "assumptions:" in out
    tight = tmp_path / "tight.yaml"
    tight.write_text(CLOUD_SPEC.replace("max_usd: 300", "max_usd: 1"))
    assert main(["plan", str(tight)]) == 3
    captured = capsys.readouterr()
    assert "plan for" in captured.out and "exceeds the budget $1.00" in captured.err
    assert main(["plan", str(ROOT / "specs" / "chat-capacity.yaml")]) == 1
    assert "gpuledger capacity" in capsys.readouterr().err


def test_plan_user_price_file_changes_choice(tmp_path, monkeypatch):
    from gpuledger.plan import plan_sweep
    from gpuledger.spec import parse_spec

    spec = parse_spec(CLOUD_SPEC.replace("spot: auto", "spot: never"), "cloud.yaml")
    before = plan_sweep(spec)
    prices = tmp_path / "p.csv"
    prices.write_text(
        "cloud,region,instance_type,accelerator,accelerator_count,usd_per_hour_on_demand,usd_per_hour_spot,vcpus,memory_gib,source,as_of\n"
        "aws,us-east-1,p5.4xlarge,H100,1,1.50,,16,256,negotiated,2026-06-01\n"  # a plausible negotiated rate (a price far below its peers is refused: catalog/floors.py)
    )
    monkeypatch.setenv("GPULEDGER_PRICES", str(prices))
    after = plan_sweep(spec)
    assert after.price_snapshot != before.price_snapshot
    assert all(t["instance_type"] == "p5.4xlarge" and t["usd_per_hour"] == 1.50 for t in after.trials)
    assert after.total_est_cost_usd < before.total_est_cost_usd


def test_impossible_trials_reported_from_real_estimates():
    from gpuledger.plan import plan_sweep
    from gpuledger.spec import parse_spec

    text = CLOUD_SPEC.replace("meta-llama/Llama-3.1-8B\nmethod: lora", "meta-llama/Llama-3.1-70B\nmethod: full") \
        .replace("accelerators: [L4, A10G, L40S, A100-80GB, H100]", "accelerators: [L4]").replace("gpus_per_trial: auto", "gpus_per_trial: 1")
    plan = plan_sweep(parse_spec(text, "big.yaml"))
    assert plan.trials and not any(t["feasible"] for t in plan.trials)
    assert plan.trials[0]["reason"].startswith("needs ") and "largest candidate L4 has 22.0 GiB usable" in plan.trials[0]["reason"]
    assert plan.total_est_cost_usd == 0


MACHINE = dict(hostname="test-host", cores=2, logical_cores=2, total_ram_gib=16.0, matmul_gflops_one_core=80.0,
               method="literal (test)", measured_at="2026-11-01T00:00:00+00:00")


def test_local_plan_is_this_machine_at_the_reference_rate():
    from gpuledger.catalog.local import local_reference
    from gpuledger.inputs.machine import MachineSpeed
    from gpuledger.plan import plan_sweep, render_plan
    from gpuledger.spec import load_spec

    spec = load_spec(ROOT / "specs" / "lora-grid.yaml")
    machine = MachineSpeed(**MACHINE)
    plan = plan_sweep(spec, machine=machine)
    assert plan.launcher == "local" and plan.max_parallel == 2
    assert all(t["cloud"] == "local" and t["accelerator"] == "CPU" and not t["spot"] for t in plan.trials)
    ref = local_reference()
    assert ref.reference and ref.usd_per_hour > 0 and ref.as_of
    # every trial is priced at the reference rate for its planned time
    for t in plan.trials:
        assert t["usd_per_hour"] == ref.usd_per_hour and t["price_as_of"] == ref.as_of
        assert t["est_cost_usd"] == pytest.approx(ref.usd_per_hour * t["est_wall_s"] / 3600, rel=1e-3)
        assert t["est_basis"] == "estimate"
    assert plan.total_est_cost_usd > 0
    assert any("reference rate, not a bill" in a and "n2-standard-2" in a for a in plan.assumptions)
    assert any("80.0 GFLOP/s" in a for a in plan.assumptions)
    # the what-if shows different costs per K (the target stops the sweep; more slots start more trials)
    costs = [w["cost_usd"] for w in plan.what_if]
    assert len(set(costs)) >= 3 and all(c > 0 for c in costs)
    # beside the local figures: what the same trials would cost on the cloud GPU a cloud plan picks
    eq = plan.cloud_equivalent
    assert set(eq) == {t["trial_id"] for t in plan.trials}
    cloud = plan_sweep(spec, launcher="skypilot")
    for t in cloud.trials:
        e = eq[t["trial_id"]]
        assert (e.accelerator, e.instance_type, e.usd, e.wall_s) == (
            t["accelerator"], t["instance_type"], t["est_cost_usd"], t["est_wall_s"])
        assert e.usd > 0 and e.accelerator != "CPU"
    assert "cloud equivalent: the same 12 trial(s)" in render_plan(plan)
    # the spec's own rate wins over the reference
    own = load_spec(ROOT / "specs" / "lora-grid.yaml")
    own = own.model_copy(update={"local": own.local.model_copy(update={"usd_per_hour": 0.0})})
    own.local.model_fields_set.add("usd_per_hour")
    assert plan_sweep(own, machine=machine).total_est_cost_usd == 0.0


def test_two_plans_in_a_row_are_identical(tmp_path, monkeypatch):
    """The machine is measured once (first plan), stored, and read by every later plan."""
    from gpuledger.inputs.ledger import planning_inputs
    from gpuledger.inputs.machine import machine_file
    from gpuledger.plan import plan_sweep
    from gpuledger.spec import load_spec

    monkeypatch.setenv("GPULEDGER_MACHINE_FILE", str(tmp_path / "machine.json"))
    monkeypatch.setenv("GPULEDGER_WAREHOUSE", str(tmp_path / "none.duckdb"))
    spec = load_spec(ROOT / "specs" / "lora-grid.yaml")
    first = plan_sweep(spec, inputs=planning_inputs(spec)).to_json_text()
    stored = json.loads(machine_file().read_text())
    assert stored["matmul_gflops_one_core"] > 0 and stored["measured_at"] and "NUM_THREADS=1" in stored["method"]
    second = plan_sweep(spec, inputs=planning_inputs(spec)).to_json_text()
    assert first == second
    assert not (tmp_path / "none.duckdb").exists()


def test_prices_used_lists_each_chosen_offer_once():
    from gpuledger.plan import plan_sweep, prices_used
    from gpuledger.spec import load_spec

    plan = plan_sweep(load_spec(ROOT / "specs" / "llama3-8b-lora-cloud.yaml"))
    data = plan.to_json()
    rows = prices_used(data)
    chosen = {(t["cloud"], t["region"], t["instance_type"], t["accelerator"], bool(t["spot"]))
              for t in data["trials"] if t["feasible"]}
    assert {(r["cloud"], r["region"], r["instance_type"], r["accelerator"], r["spot"]) for r in rows} == chosen
    assert sum(r["trials"] for r in rows) == sum(1 for t in data["trials"] if t["feasible"])
    for r in rows:
        assert r["price_snapshot"] == data["price_snapshot"] and r["as_of"] and r["source"]
        t = next(t for t in data["trials"] if (t["cloud"], t["instance_type"], bool(t["spot"]))
                 == (r["cloud"], r["instance_type"], r["spot"]))
        assert r["usd_per_hour"] == t["usd_per_hour"]
