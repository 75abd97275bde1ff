"""`gpuledger probe` for real: a trial script run by the local launcher under the agent, stopped by
gpuledger.track after N steps, stored as a run with purpose 'probe' (DuckDB), not counted as the
trial's result but as the sweep's spend, and read back by the next plan."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gpuledger.inputs.ledger import planning_inputs
from gpuledger.plan import plan_sweep
from gpuledger.runtime.probe import plan_for_probes, probe_lines, run_probes, sweep_spend_usd
from gpuledger.spec import load_spec
from gpuledger.warehouse import Warehouse

pytestmark = pytest.mark.slow

#: 10,000 steps of 0.02 s (200 s) unless the probe stops it; 64 tokens a step
TRIAL = """
import sys, time
from gpuledger.track import log
time.sleep(0.3)  # start-up
for step in range(1, 10_001):
    time.sleep(0.02)
    log(step=step, tokens=step * 64)
log(step=10_000, eval_loss=1.0)
"""


@pytest.fixture()
def probe_spec(tmp_path, monkeypatch):
    from helpers.sweep_specs import sweep_spec

    monkeypatch.setenv("GPULEDGER_MACHINE_FILE", str(tmp_path / "machine.json"))
    (tmp_path / "trial.py").write_text(TRIAL, encoding="utf-8")
    return sweep_spec(tmp_path, name="probe-it", search="strategy: grid",
                      params="{micro_batch: [1, 2], learning_rate: [0.1, 0.2]}",
                      run=f"{sys.executable} {tmp_path / 'trial.py'} --mb {{micro_batch}}",
                      tokens_per_trial=64_000, max_parallel=2)


def test_probe_stops_the_trainer_is_stored_and_replans(probe_spec):
    spec = load_spec(probe_spec)
    summary = run_probes(spec, probe_spec, steps=15, say=lambda m: None)
    # per shape: the probe, then (local launcher) a run to its first step only, for the warm start-up
    assert summary.shapes == 2 and len(summary.probes) == 4 and not summary.failures
    warm = [p for p in summary.probes if not p["usable"]]
    assert len(warm) == 2 and all(p["steps"] == 1 and p["status"] == "succeeded" and p["startup_s"] >= 0.3 for p in warm)
    summary.probes = [p for p in summary.probes if p["usable"]]
    for p in summary.probes:
        assert p["status"] == "succeeded" and p["usable"] and p["tokens_source"] == "reported"
        assert p["steps"] == 15 and p["wall_s"] < 60  # stopped long before its 200 s
        assert 0.3 <= p["startup_s"] < p["wall_s"]
        assert 64 / 0.2 < p["tokens_per_s"] <= 64 / 0.02 * 1.05  # one step is at least the 20 ms sleep
        assert json.loads(p["probe_shape"])["micro_batch"] in (1, 2)
        # the trainer's CPU seconds over the steady window (gpuledger.track adds them): it mostly sleeps
        assert p["steady_cpu_s"] >= 0 and 0 <= p["cpu_cores"] < 0.9
    assert len(probe_lines(summary)) == 2
    shape_startup = {}
    for p in [*summary.probes, *warm]:
        shape_startup[p["probe_shape"]] = min(shape_startup.get(p["probe_shape"], 1e9), p["startup_s"])
    with Warehouse.open(read_only=True) as wh:
        runs = wh.query("SELECT purpose, count(*) AS n FROM v_runs GROUP BY ALL")
        assert runs.to_dicts() == [{"purpose": "probe", "n": 4}]
        results = wh.query("SELECT attempts, status FROM v_trial_results WHERE sweep_id = ?", [summary.sweep_id])
        assert set(results["attempts"]) == {0} and set(results["status"]) == {"pending"}
        assert wh.succeeded_trial_ids(summary.sweep_id) == set()
        spent = wh.query_named("sweep_spent", {"sweep_id": summary.sweep_id})["spent_usd"][0]
        assert spent == pytest.approx(summary.cost_usd) and spent > 0
    # the sweep's pre-launch budget guard adds the probes' part of the spend to the plan's trials
    assert sweep_spend_usd(summary.sweep_id) == (pytest.approx(spent), pytest.approx(spent))
    with Warehouse.open(read_only=True) as wh:
        roi = wh.query("SELECT total_cost_usd, best_run_id, status FROM v_sweep_roi").to_dicts()[0]
        assert roi["total_cost_usd"] == pytest.approx(spent) and roi["best_run_id"] is None and roi["status"] == "planned"
    plan = plan_sweep(spec, inputs=planning_inputs(spec))
    by_mb = {p["trial_id"]: p for p in summary.probes}
    for t in plan.trials:
        assert t["est_basis"].startswith("probe ") and t["est_basis"].split()[1] in {p["run_id"] for p in summary.probes}
    probe = next(iter(by_mb.values()))
    tid = probe["trial_id"]
    row = next(t for t in plan.trials if t["trial_id"] == tid)
    startup = shape_startup[probe["probe_shape"]]  # the warm start-up: the least of the shape's runs
    assert row["est_wall_s"] == pytest.approx(startup + 64_000 / probe["tokens_per_s"], rel=1e-3)


def test_one_shape_is_probed_by_as_many_copies_at_once_as_the_trials_will_run(probe_spec):
    # the local sweep runs max_parallel trials at once on this machine's cores: a shape probed alone
    # would measure its rate with the cores to itself, so copies fill the slots
    spec = load_spec(probe_spec)
    _, plan = plan_for_probes(spec, "local")
    cap = plan.max_parallel
    first = plan.planned_trials[0].trial_id
    summary = run_probes(spec, probe_spec, steps=5, trial_ids=[first], say=lambda m: None)
    assert summary.shapes == 1 and not summary.failures
    usable = [p for p in summary.probes if p["usable"]]
    assert len(usable) == cap and {p["trial_id"] for p in usable} == {first}
    assert len({p["probe_shape"] for p in usable}) == 1
    if cap > 1:  # they ran side by side: each started before the other ended
        a, b = usable[:2]
        assert a["started_at"] < b["ended_at"] and b["started_at"] < a["ended_at"]


def test_cli_probe_refuses_over_budget_and_names_a_bad_trial(probe_spec, _isolated_warehouse):
    text = probe_spec.read_text().replace("max_usd: 5.0", "max_usd: 0.000001")
    probe_spec.write_text(text)
    run = subprocess.run([sys.executable, "-m", "gpuledger.cli", "probe", str(probe_spec), "--steps", "3"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 3 and "budget" in run.stderr and "Traceback" not in run.stderr
    run = subprocess.run([sys.executable, "-m", "gpuledger.cli", "probe", str(probe_spec), "--trial", "99"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 1 and "--trial 99" in run.stderr and "Traceback" not in run.stderr
    assert not _isolated_warehouse.exists()  # refused before anything was written or launched


#: An RL trainer's per-role points (the names gpuledger/integrations/trl.py logs): the first step pays a
#: start-up (10 s of rollout) that the steady medians must leave out; 48 generated tokens a step
RL_TRIAL = """
import time
from gpuledger.track import log
for step in range(1, 10_001):
    time.sleep(0.02)
    rollout = 10.0 if step == 1 else 0.012 + 0.001 * (step % 2)
    log(step=step, tokens=step * 64, rl_rollout_s=rollout, rl_logprob_s=0.003, rl_reward_s=0.001, rl_train_s=0.004,
        rl_sync_s=0.0005, rl_step_s=rollout + 0.0085, rl_generated_tokens=48)
"""


def test_an_rl_probe_records_its_roles_apart(probe_spec):
    (probe_spec.parent / "trial.py").write_text(RL_TRIAL, encoding="utf-8")
    spec = load_spec(probe_spec)
    _, plan = plan_for_probes(spec, "local")
    summary = run_probes(spec, probe_spec, steps=7, trial_ids=[plan.planned_trials[0].trial_id], say=lambda m: None)
    usable = [p for p in summary.probes if p["usable"]]
    assert usable and not summary.failures
    for p in usable:
        assert p["rl_steps"] == 6  # steps 2..7: the first step's start-up left out
        assert p["rollout_s"] == pytest.approx(0.0125, abs=6e-4)  # the median of 0.012 / 0.013
        assert (p["logprob_s"], p["reward_s"], p["train_s"], p["sync_s"]) == pytest.approx((0.003, 0.001, 0.004, 0.0005))
        assert p["rl_step_s"] == pytest.approx(0.021, abs=6e-4)
        assert p["rollout_tokens_per_s"] == pytest.approx(6 * 48 / (3 * 0.012 + 3 * 0.013), rel=1e-6)
    with Warehouse.open(read_only=True) as wh:
        rows = wh.query_named("plan_probes", {"model": spec.model, "method": spec.method})
    assert set(rows["rollout_s"].drop_nulls().round(4)) == {0.0125}
    # a trainer without roles: null role columns (the first test's trial), not zeros
    (probe_spec.parent / "trial.py").write_text(TRIAL, encoding="utf-8")
    plain = run_probes(spec, probe_spec, steps=3, trial_ids=[plan.planned_trials[0].trial_id], say=lambda m: None)
    assert all(p["rollout_s"] is None and p["rl_steps"] == 0 for p in plain.probes)
