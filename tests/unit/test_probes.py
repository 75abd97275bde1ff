"""Probes, pure parts: the trainer-side stop rule (gpuledger.track), shapes of a sweep, and the plan of a
probed shape (start-up apart from the steady rate; measured full runs win; another machine's probe and
another program's do not count)."""

from __future__ import annotations

import dataclasses
import json
import socket
import time
from datetime import datetime
from pathlib import Path

import polars as pl
import psutil
import pytest

from gpuledger import protocol, track
from gpuledger.inputs.machine import MachineSpeed
from gpuledger.plan import plan_sweep
from gpuledger.plan.model import PlannedTrial
from gpuledger.plan.probes import PROBE_SCHEMA, shape_key, shapes_to_probe, trial_shape, workload_shape
from gpuledger.runtime.probe import fill_slots, probe_cost_estimate_usd, probe_env, probe_seconds_estimate
from gpuledger.spec import expand_trials, load_spec

ROOT = Path(__file__).resolve().parents[2]
HOST = socket.gethostname()
MACHINE = MachineSpeed(hostname=HOST, cores=int(psutil.cpu_count(logical=False) or psutil.cpu_count() or 1),
                       logical_cores=int(psutil.cpu_count() or 1),
                       total_ram_gib=round(psutil.virtual_memory().total / 2**30, 3), matmul_gflops_one_core=80.0,
                       method="literal (test)", measured_at="2026-11-01T00:00:00+00:00")


@pytest.fixture()
def fresh_track(monkeypatch):
    monkeypatch.setitem(track._probe_seen, "steps", set())
    monkeypatch.setitem(track._probe_seen, "first_time", None)
    monkeypatch.delenv(protocol.ENV_PROBE_STEPS, raising=False)
    monkeypatch.delenv(protocol.ENV_PROBE_SECONDS, raising=False)
    return monkeypatch


def test_no_limit_never_stops(fresh_track):
    assert not any(track.probe_limit_reached(s) for s in range(1000))


def test_step_limit_counts_distinct_training_steps(fresh_track):
    fresh_track.setenv(protocol.ENV_PROBE_STEPS, "3")
    assert not track.probe_limit_reached(0)  # step 0 (a base eval) is not a training step
    assert not track.probe_limit_reached(None)
    assert not track.probe_limit_reached(1)
    assert not track.probe_limit_reached(1)  # the same step logged twice (loss, then eval) counts once
    assert not track.probe_limit_reached(2)
    assert track.probe_limit_reached(3)


def test_seconds_limit_counts_from_the_first_training_step(fresh_track):
    fresh_track.setenv(protocol.ENV_PROBE_SECONDS, "5")
    assert not track.probe_limit_reached(1, now=100.0)
    assert not track.probe_limit_reached(2, now=104.9)
    assert track.probe_limit_reached(3, now=105.0)


def test_a_bad_limit_is_no_limit(fresh_track):
    fresh_track.setenv(protocol.ENV_PROBE_STEPS, "lots")
    fresh_track.setenv(protocol.ENV_PROBE_SECONDS, "-1")
    assert not any(track.probe_limit_reached(s) for s in range(1, 50))


def test_log_ends_the_process_cleanly_after_writing(fresh_track, tmp_path):
    metrics = tmp_path / "m.jsonl"
    fresh_track.setenv(protocol.ENV_METRICS, str(metrics))
    fresh_track.setenv(protocol.ENV_PROBE_STEPS, "2")
    track.log(step=1, tokens=512)
    with pytest.raises(SystemExit) as stop:
        track.log(step=2, tokens=1024)
    assert stop.value.code == 0
    points = [json.loads(line) for line in metrics.read_text().splitlines()]
    assert [p["value"] for p in points if p["name"] == "tokens"] == [512, 1024]


def test_a_probes_training_steps_carry_the_trainers_cpu_seconds(fresh_track, tmp_path):
    metrics = tmp_path / "m.jsonl"
    fresh_track.setenv(protocol.ENV_METRICS, str(metrics))
    track.log(step=1, tokens=64)  # not a probe: nothing added
    fresh_track.setenv(protocol.ENV_PROBE_SECONDS, "100")
    track.log(step=0, eval_loss=4.0)  # a base eval: not a training step
    track.log(step=2, tokens=128)
    track.log(step=3, tokens=192, process_cpu_s=7.5)  # the trainer's own figure stays
    points = [json.loads(line) for line in metrics.read_text().splitlines()]
    cpu = [(p["step"], p["value"]) for p in points if p["name"] == protocol.PROBE_CPU_METRIC]
    assert [step for step, _ in cpu] == [2, 3] and cpu[1][1] == 7.5
    assert 0 < cpu[0][1] <= time.process_time()


def _demo():
    spec = load_spec(ROOT / "specs" / "lora-grid.yaml")
    return spec, expand_trials(spec)


def test_demo_grid_has_two_shapes_micro_batch_apart():
    spec, trials = _demo()
    rows = {t.trial_id: t for t in plan_sweep(spec, trials, machine=MACHINE).planned_trials}
    shapes = shapes_to_probe(spec, trials, rows)
    assert sorted(s["micro_batch"] for s, _ in shapes) == [8, 32]
    assert {s["accelerator"] for s, _ in shapes} == {"CPU"} and {s["sharding"] for s, _ in shapes} == {"none"}
    # the first trial of each shape represents it; lora_r and learning_rate do not make a shape
    assert [t.index for _, t in shapes] == [0, 1]
    a, b = trials[0], trials[6]  # lora_r 4 vs 16, same micro-batch
    assert workload_shape(spec, a.params) == workload_shape(spec, b.params)
    # another program is another shape
    other = spec.model_copy(update={"task": spec.task.model_copy(update={"run": spec.task.run + " --seed 1"})})
    assert shape_key(workload_shape(other, a.params)) != shape_key(workload_shape(spec, a.params))


def _probes(spec, trials, rows, *, tps, startup_s, mem, host=HOST, when="2026-11-26T10:00:00"):
    """The `plan_probes` rows of one probe per shape of the plan (as the warehouse returns them)."""
    out = []
    for i, (shape, t) in enumerate(shapes_to_probe(spec, trials, rows)):
        out.append({"run_id": f"p{i}-{t.trial_id}", "accelerator": "CPU", "gpus": 1, "hostname": host,
                    "probe_shape": json.dumps(trial_shape(spec, t.params, rows[t.trial_id])),
                    "startup_s": startup_s, "tokens_per_s": tps[shape["micro_batch"]], "memory_gib": mem,
                    "ended_at": datetime.fromisoformat(when)})
    return pl.DataFrame(out, schema=PROBE_SCHEMA)


@pytest.mark.slow  # over ~1 s (a whole report, replay, plan or warehouse): make test runs it, make test-fast does not
def test_a_probed_shape_is_extrapolated_from_start_up_and_the_steady_rate():
    spec, trials = _demo()
    before = plan_sweep(spec, trials, machine=MACHINE)
    rows = {t.trial_id: t for t in before.planned_trials}
    tps = {8: 4000.0, 32: 6000.0}
    probes = _probes(spec, trials, rows, tps=tps, startup_s=2.5, mem=0.25)
    after = plan_sweep(spec, trials, machine=MACHINE, probes=probes)
    tokens = spec.train.tokens_per_trial
    for t in after.trials:
        mb = t["params"]["micro_batch"]
        assert t["est_basis"] == f"probe p{0 if mb == 8 else 1}-{trials[0 if mb == 8 else 1].trial_id} 2026-11-26"
        assert t["compute_s"] == pytest.approx(tokens / tps[mb], abs=1e-3)
        assert t["est_wall_s"] == pytest.approx(2.5 + tokens / tps[mb], abs=1e-3)  # local: no provisioning
        assert t["est_memory_gib"] == pytest.approx(0.25)
        assert t["est_cost_usd"] == pytest.approx(t["usd_per_hour"] * t["est_wall_s"] / 3600, rel=1e-3)
    notes = [a for a in after.assumptions if a.startswith("probe ")]
    assert len(notes) == 2 and all("start-up 2.5 s" in n and "tokens/s measured" in n for n in notes)
    # the cores the probe's trainer used are said (none measured here)
    assert not any("of a core" in n for n in notes)
    shared = plan_sweep(spec, trials, machine=MACHINE, probes=probes.with_columns(cpu_cores=pl.lit(0.69)))
    notes = [a for a in shared.assumptions if a.startswith("probe ")]
    assert all("its trainer using 0.69 of a core" in n and "it shared the cores" in n for n in notes)
    assert [t["est_wall_s"] for t in shared.trials] == [t["est_wall_s"] for t in after.trials]
    assert after.total_est_cost_usd != before.total_est_cost_usd
    # the same inputs, the same plan
    assert after.to_json_text() == plan_sweep(spec, trials, machine=MACHINE, probes=probes).to_json_text()


@pytest.mark.slow  # over ~0.5 s alone (a report, warehouse, plan or subprocess): make test runs it, make test-fast does not
def test_another_machine_or_program_does_not_count_and_measured_wins():
    spec, trials = _demo()
    rows = {t.trial_id: t for t in plan_sweep(spec, trials, machine=MACHINE).planned_trials}
    elsewhere = _probes(spec, trials, rows, tps={8: 1.0, 32: 1.0}, startup_s=1.0, mem=1.0, host="elsewhere")
    assert {t["est_basis"] for t in plan_sweep(spec, trials, machine=MACHINE, probes=elsewhere).trials} == {"estimate"}
    other = spec.model_copy(update={"task": spec.task.model_copy(update={"run": spec.task.run + " --seed 1"})})
    probes = _probes(spec, trials, rows, tps={8: 4000.0, 32: 6000.0}, startup_s=2.5, mem=0.25)
    assert {t["est_basis"] for t in plan_sweep(other, expand_trials(other), machine=MACHINE, probes=probes).trials} \
        == {"estimate"}
    measured_id = trials[2].trial_id
    measured = pl.DataFrame([{"trial_id": measured_id, "accelerator": "CPU", "gpus": 1, "hostname": HOST,
                              "wall_s": 42.0, "runs": 1, "est_flops": rows[measured_id].flops_total}])
    plan = {t["trial_id"]: t for t in plan_sweep(spec, trials, machine=MACHINE, probes=probes,
                                                 measurements=measured).trials}
    assert plan[measured_id]["est_basis"] == "measured" and plan[measured_id]["est_wall_s"] == pytest.approx(42.0)
    assert plan[trials[0].trial_id]["est_basis"].startswith("probe ")


@pytest.mark.slow  # over ~0.5 s alone (a report, warehouse, plan or subprocess): make test runs it, make test-fast does not
def test_newest_probe_of_a_shape_wins():
    spec, trials = _demo()
    rows = {t.trial_id: t for t in plan_sweep(spec, trials, machine=MACHINE).planned_trials}
    new = _probes(spec, trials, rows, tps={8: 4000.0, 32: 6000.0}, startup_s=2.0, mem=0.2, when="2026-11-26T10:00:00")
    old = _probes(spec, trials, rows, tps={8: 100.0, 32: 100.0}, startup_s=9.0, mem=0.9, when="2026-11-20T10:00:00")
    old = old.with_columns(pl.col("run_id") + "-old")
    plan = plan_sweep(spec, trials, machine=MACHINE, probes=pl.concat([new, old]))  # newest first, as the query orders
    assert all(t["est_basis"].endswith("2026-11-26") for t in plan.trials)


def test_copies_of_the_shapes_fill_the_slots_the_trials_will_share():
    assert fill_slots(["a"], 2) == ["a", "a"]
    assert fill_slots(["a", "b"], 5) == ["a", "b", "a", "b", "a"]
    assert fill_slots(["a", "b", "c"], 2) == ["a", "b", "c"]  # more shapes than slots: each once
    assert fill_slots([], 4) == []


def test_probe_environment_and_cost_estimates():
    shape = {"micro_batch": 8, "seq_len": 64, "gpus": 1}
    env = probe_env(shape, steps=None, seconds=10.0)
    assert env[protocol.ENV_PURPOSE] == "probe" and env[protocol.ENV_PROBE_SECONDS] == "10" and protocol.ENV_PROBE_STEPS not in env
    assert json.loads(env[protocol.ENV_PROBE_SHAPE]) == shape
    spec, _ = _demo()
    row = PlannedTrial(trial_id="t", trial_index=0, params={}, feasible=True, compute_s=96.0,
                       usd_per_hour=3.6)  # 384 steps of 512 tokens in 96 s: 0.25 s a step
    assert probe_seconds_estimate(row, spec, shape, steps=40, seconds=None) == pytest.approx(10.0)
    assert probe_seconds_estimate(row, spec, shape, steps=None, seconds=500.0) == pytest.approx(96.0)  # ends first
    assert probe_cost_estimate_usd(row, 3.0, 10.0) == pytest.approx(3.6 * 13.0 / 3600)


def test_auto_probe_decides_on_cost_budget_and_what_is_known():
    from gpuledger.runtime.probe import auto_probe_trials

    spec, trials = _demo()
    planned = plan_sweep(spec, trials, machine=MACHINE)
    plan = dataclasses.replace(planned, total_est_cost_usd=10.0,
                               trials_frame=planned.trials_frame.with_columns(feasible=True, est_basis=pl.lit("estimate")))
    ids, why = auto_probe_trials(spec, plan)
    assert ids == [] and "never" in why  # the default
    auto = spec.model_copy(update={"search": spec.search.model_copy(update={"probe": "auto"}),
                                   "budget": spec.budget.model_copy(update={"max_usd": 20.0})})
    ids, why = auto_probe_trials(auto, plan)
    assert ids == [t.trial_id for t in trials] and "above $5" in why
    assert auto_probe_trials(auto, dataclasses.replace(plan, total_est_cost_usd=4.0))[0] == []  # not above probe_above_usd
    assert "over the" in auto_probe_trials(auto, dataclasses.replace(plan, total_est_cost_usd=25.0))[1]  # the guard decides
    known = plan.trials_frame.with_columns(
        est_basis=pl.when(pl.col("trial_index") % 2 == 1).then(pl.lit("measured")).otherwise(pl.lit("probe x 2026-11-26")))
    assert auto_probe_trials(auto, dataclasses.replace(plan, trials_frame=known))[0] == []
    from gpuledger.spec import sweep_id_for

    assert sweep_id_for(auto) == sweep_id_for(spec)  # how to plan is not the experiment


def test_the_sweeps_auto_probe_step_goes_on_without_probes_when_refused(monkeypatch):
    from gpuledger.errors import BudgetExceeded
    from gpuledger.runtime import probe as probe_module

    class Log:
        def __init__(self):
            self.lines = []

        def info(self, fmt, *args):
            self.lines.append(("info", fmt % args))

        def warning(self, fmt, *args):
            self.lines.append(("warning", fmt % args))

    spec, trials = _demo()
    planned = plan_sweep(spec, trials, machine=MACHINE)
    plan = dataclasses.replace(planned, total_est_cost_usd=10.0,
                               trials_frame=planned.trials_frame.with_columns(est_basis=pl.lit("estimate")))
    from types import SimpleNamespace

    log = Log()
    accepted = SimpleNamespace(spec=spec, plan=plan, launcher="local", trials=tuple(trials), sweep_id="s-1")
    assert probe_module.auto_probe(Path("s.yaml"), accepted, log) is False
    assert "never" in log.lines[0][1]
    auto = spec.model_copy(update={"search": spec.search.model_copy(update={"probe": "auto"}),
                                   "budget": spec.budget.model_copy(update={"max_usd": 20.0})})

    def refuse(*a, **k):
        raise BudgetExceeded("the probes would cross the budget")

    monkeypatch.setattr(probe_module, "run_probes", refuse)
    log = Log()
    assert probe_module.auto_probe(Path("s.yaml"), SimpleNamespace(**{**vars(accepted), "spec": auto}), log) is False
    assert log.lines[-1] == ("warning", "Not probing: the probes would cross the budget")


@pytest.mark.slow  # over ~1 s (a whole report, replay, plan or warehouse): make test runs it, make test-fast does not
def test_the_warm_start_up_of_a_shape_is_the_least_of_its_probes():
    spec, trials = _demo()
    rows = {t.trial_id: t for t in plan_sweep(spec, trials, machine=MACHINE).planned_trials}
    cold = _probes(spec, trials, rows, tps={8: 4000.0, 32: 6000.0}, startup_s=60.0, mem=0.25)  # paid a pretraining
    warm = cold.with_columns(warm_startup_s=pl.lit(2.0))
    tokens = spec.train.tokens_per_trial
    for t in plan_sweep(spec, trials, machine=MACHINE, probes=warm).trials:
        tps = 4000.0 if t["params"]["micro_batch"] == 8 else 6000.0
        assert t["est_wall_s"] == pytest.approx(2.0 + tokens / tps, abs=1e-3)
    first = plan_sweep(spec, trials, machine=MACHINE, probes=cold).trials[0]
    assert first["est_wall_s"] == pytest.approx(60.0 + tokens / 4000.0, abs=1e-3)  # without a warm run: as measured


@pytest.mark.slow  # over ~0.5 s alone (a report, warehouse, plan or subprocess): make test runs it, make test-fast does not
def test_a_probed_plan_takes_its_band_from_the_probes_step_times():
    spec, trials = _demo()
    rows = {t.trial_id: t for t in plan_sweep(spec, trials, machine=MACHINE).planned_trials}
    probes = _probes(spec, trials, rows, tps={8: 4000.0, 32: 6000.0}, startup_s=2.5, mem=0.25).with_columns(
        step_s_p10=pl.lit(0.8), step_s_p50=pl.lit(1.0), step_s_p90=pl.lit(1.5), step_times=pl.lit(12))
    plan = plan_sweep(spec, trials, machine=MACHINE, probes=probes)
    for t in plan.trials:
        assert t["est_basis"].startswith("probe ")
        assert t["est_band"].startswith("the spread of probe p") and "12 step times" in t["est_band"]
        # the compute part at the steps' P10 / P90 over their median; start-up as measured
        assert t["est_wall_s_p90"] == pytest.approx(2.5 + 1.5 * t["compute_s"], rel=1e-3)
        assert t["est_wall_s_p10"] == pytest.approx(2.5 + 0.8 * t["compute_s"], rel=1e-3)
        assert t["mem_gib_p90"] == pytest.approx(0.25)  # the probe's measured peak
    # too few step times: the spread of the trial's cell around the probe's figure
    few = plan_sweep(spec, trials, machine=MACHINE, probes=probes.with_columns(step_times=pl.lit(2)))
    assert all("no step-time spread" in t["est_band"] for t in few.trials)
