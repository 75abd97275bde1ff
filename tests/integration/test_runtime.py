"""The sweep's runtime without Prefect: request building, the budget rule, and whole runs of
`gpuledger.runtime.engine.execute` with the fake launcher against a real DuckDB warehouse."""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from helpers.fake_launcher import FakeLauncher
from helpers.sweep_specs import write_spec

from gpuledger import vocabulary
from gpuledger.plan.model import PlannedTrial
from gpuledger.runtime import landing
from gpuledger.runtime.accepted import AcceptedSweep, prepare
from gpuledger.runtime.budget import BudgetMeter
from gpuledger.runtime.engine import Hooks, SweepRun, execute
from gpuledger.runtime.requests import launch_requests


def _prepared(folder: Path, **kw) -> AcceptedSweep:
    """The spec written under `folder`, accepted for the local launcher at 2 trials at once."""
    return replace(prepare(write_spec(folder, **kw), launcher="local"), cap=2)


def _run(folder: Path, *, launcher_kw=None, forced=False, **spec_kw) -> tuple[SweepRun, list[FakeLauncher]]:
    accepted = _prepared(folder, **spec_kw)
    made: list[FakeLauncher] = []

    def factory(name, spec, cap, landing_dir):
        made.append(FakeLauncher(landing_dir=landing_dir, **(launcher_kw or {})))
        return made[-1]

    summary = accepted.new_summary()
    summary.forced = forced
    run = SweepRun(accepted, summary=summary, launcher_factory=factory, retry_delays_s=(0.01, 0.01))
    return run, made


def _wh():
    from gpuledger.warehouse import Warehouse

    return Warehouse.open(read_only=True)


def test_requests_local_cloud_infeasible_and_unplanned(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    accepted = _prepared(tmp_path, usd_per_hour=1.25)
    sp, sweep_id, trials = accepted.spec, accepted.sweep_id, list(accepted.trials)
    rows = {t.trial_id: t for t in accepted.plan.planned_trials}
    local = launch_requests(sp, trials, rows, sweep_id=sweep_id, launcher="local")
    req = local[trials[0].trial_id]
    assert req.accelerator is None and req.gpus == 0 and req.cloud is None and req.price_source == "local"
    assert req.usd_per_hour == pytest.approx(rows[trials[0].trial_id].usd_per_hour)
    assert req.timeout_s == sp.local.trial_timeout and req.workdir == tmp_path.resolve()
    cloud_row = PlannedTrial(trials[0].trial_id, 0, {}, True, accelerator="A100", gpus=0, cloud="aws",
                             region="us-east-1", instance_type="p4d.24xlarge", spot=True, usd_per_hour=9.5,
                             price_source="catalog", price_as_of="2026-05-20")
    (cloud,) = launch_requests(sp, trials[:1], {trials[0].trial_id: cloud_row}, sweep_id=sweep_id,
                               launcher="skypilot", resolve_workdir=False).values()
    assert (cloud.accelerator, cloud.gpus, cloud.spot, cloud.usd_per_hour) == ("A100", 1, True, 9.5)
    assert cloud.workdir == Path(sp.task.workdir) and "2026-05-20" in cloud.price_description
    infeasible = PlannedTrial(trials[0].trial_id, 0, {}, False, reason="too big")
    (bad,) = launch_requests(sp, trials[:1], {trials[0].trial_id: infeasible}, sweep_id=sweep_id,
                             launcher="skypilot").values()
    assert bad.accelerator is None and bad.price_description == "not placed: too big"
    (unplanned,) = launch_requests(sp, trials[:1], None, sweep_id=sweep_id, launcher="skypilot").values()
    assert unplanned.price_description == "spec's first choices (no plan)"


def test_budget_rule_counts_measured_in_flight_and_next_and_corrects_the_plan_by_measurements():
    costs = {"a": 3.0, "b": 3.0, "c": 3.0, "d": float("nan")}
    meter = BudgetMeter.for_plan(10.0, {k: PlannedTrial(k, i, {}, True, est_cost_usd=v)
                                        for i, (k, v) in enumerate(costs.items())})
    assert meter.check("a") is None
    meter.launched("a")
    meter.launched("b")
    assert meter.check("c") is None  # 0 + 6 + 3 <= 10
    meter.launched("c")
    stop = meter.check("a2")  # unknown trial: estimate 0 -> fits
    assert stop is None and meter.estimate_usd("d") == 0.0
    meter.finished("a", [(5.0, False)])  # measured 5: every estimate is now max(plan, 5)
    stop = meter.check("d")
    assert stop is not None and stop.spent_usd == 5.0 and stop.in_flight_est_usd == 10.0 and stop.next_est_usd == 5.0
    assert "would cross the $10.00 budget" in stop.reason
    meter.finished("b", [(0.5, True)])  # a cancelled attempt is spent but is not a measurement
    assert meter.spent_usd == 5.5 and meter.measured_usd == [5.0]
    assert BudgetMeter.for_plan(1.0, {}, spent_usd=99.0, forced=True).check("x") is None


def test_a_run_stores_every_record_and_a_rerun_continues(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run, made = _run(tmp_path, launcher_kw={"wall_s": 36.0}, usd_per_hour=1.0)
    summary = execute(run, Hooks())
    assert (summary.status, summary.launched, summary.succeeded, summary.unrecorded) == (vocabulary.SWEEP_SUCCEEDED, 4, 4, 0)
    assert summary.spent_usd == pytest.approx(4 * 0.01) and summary.exit_code() == 0
    landing_dir = Path(summary.landing)
    assert landing.waiting(landing_dir) == [] and len(list((landing_dir / landing.INGESTED).glob("*.json"))) == 4
    with _wh() as wh:
        runs = wh.query("SELECT launcher, status, cost_usd FROM runs WHERE sweep_id = ?", [run.sweep_id])
        status = wh.scalar("SELECT status FROM sweeps WHERE sweep_id = ?", [run.sweep_id])
    assert runs.height == 4 and set(runs["launcher"]) == {"fake"} and set(runs["status"]) == {"succeeded"}
    assert runs["cost_usd"].sum() == pytest.approx(0.04) and status == vocabulary.SWEEP_SUCCEEDED

    again, _ = _run(tmp_path, usd_per_hour=1.0)
    summary = execute(again, Hooks())
    assert summary.skipped_done == 4 and summary.launched == 0 and summary.status == vocabulary.SWEEP_SUCCEEDED


def test_failures_launcher_errors_and_the_budget_stop(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a").mkdir()
    run, made = _run(tmp_path / "a", name="mixed", launcher_kw={
        "outcome": lambda req: {"status": "oom"} if req.params["x"] == 0.2 else {}, "submit_errors": 1})
    summary = execute(run, Hooks())
    assert made[0].submitted == 5  # one launcher error, retried
    assert (summary.succeeded, summary.failed, summary.launcher_errors) == (3, 1, 0)
    assert summary.status == vocabulary.SWEEP_PARTIAL and summary.exit_code() == 1
    assert any("oom" in f for f in summary.failures)

    # $3600/h = $1/s, 5 s per trial, plan ~0: after 2 measured trials the next would cross $12.5
    (tmp_path / "b").mkdir()
    run, _ = _run(tmp_path / "b", name="dear", max_parallel=1, usd_per_hour=3600, budget=12.5,
                  launcher_kw={"wall_s": 5.0})
    run.sweep = replace(run.sweep, cap=1)
    stops = []

    class Recording(Hooks):
        def budget_stopped(self, stop, trial_ids):
            stops.append((stop, trial_ids))

    summary = execute(run, Recording())
    assert summary.budget_stopped and summary.status == vocabulary.SWEEP_BUDGET_STOPPED and summary.exit_code() == 0
    assert summary.spent_usd <= 12.5 and summary.skipped_budget == len(stops[0][1]) > 0
    with _wh() as wh:
        skipped = wh.scalar("SELECT count(*) FROM trials WHERE sweep_id = ? AND status = 'skipped-budget'",
                            [run.sweep_id])
    assert skipped == summary.skipped_budget


READER = """
import sys, time, duckdb
con = duckdb.connect(sys.argv[1], read_only=True)
print("holding", flush=True)
time.sleep(float(sys.argv[2]))
"""


def test_a_second_run_of_a_running_sweep_refuses_naming_the_holder(tmp_path, monkeypatch):
    from gpuledger.warehouse import SweepBusy

    monkeypatch.chdir(tmp_path)
    first, _ = _run(tmp_path, launcher_kw={"sleep_s": 2.0})
    second, made = _run(tmp_path)
    outcome = {}

    class StartSecond(Hooks):
        def progress(self, done, total, final=False):
            if not outcome:
                with pytest.raises(SweepBusy) as err:
                    execute(second, Hooks())
                outcome["err"] = err.value

    summary = execute(first, StartSecond())
    assert summary.status == vocabulary.SWEEP_SUCCEEDED and summary.launched == 4
    assert outcome["err"].exit_code == 4 and first.holder in str(outcome["err"]) and not made  # launched nothing
    third, _ = _run(tmp_path)  # the lease was given back at the end
    assert execute(third, Hooks()).skipped_done == 4


def test_records_that_cannot_be_stored_are_counted_named_and_stored_by_the_next_run(tmp_path, monkeypatch):
    """A reader holds the warehouse while the trials finish: the run must not say they were stored."""
    from gpuledger.settings import resolve_path

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GPULEDGER_LOCK_TIMEOUT_S", "0.5")
    run, _ = _run(tmp_path, launcher_kw={"sleep_s": 0.3})
    readers: list[subprocess.Popen] = []

    class HoldOnStart(Hooks):
        def progress(self, done, total, final=False):
            if not readers:  # registered; before any result: a reader takes the file for 8 s
                proc = subprocess.Popen([sys.executable, "-c", READER, str(resolve_path()), "8"],
                                        stdout=subprocess.PIPE, text=True)
                assert proc.stdout.readline().strip() == "holding"
                readers.append(proc)

    try:
        summary = execute(run, HoldOnStart())
    finally:
        for proc in readers:
            proc.kill()
            proc.wait()
    assert summary.status == vocabulary.SWEEP_UNRECORDED and summary.exit_code() == 1
    assert summary.unrecorded == 4 and len(summary.unrecorded_files) == 4
    assert all(Path(f).parent == Path(summary.landing) for f in summary.unrecorded_files)
    # the next run stores them first, and skips the trials they show succeeded
    time.sleep(0.1)
    again, _ = _run(tmp_path)
    # the first run could not give its lease back either; a next run is another process, whose
    # predecessor's pid is dead by then (which frees the lease): here, in one process, the same holder
    again.holder = run.holder
    summary = execute(again, Hooks())
    assert summary.skipped_done == 4 and summary.launched == 0 and summary.unrecorded == 0
    assert summary.status == vocabulary.SWEEP_SUCCEEDED
    with _wh() as wh:
        assert wh.scalar("SELECT count(*) FROM runs WHERE sweep_id = ?", [run.sweep_id]) == 4


def test_ctrl_c_stops_launching_cancels_what_runs_and_still_stores_what_finished(tmp_path, monkeypatch):
    """#17.9: after Ctrl-C the finished trials' records are stored before the run ends, and it says interrupted."""
    import signal
    import threading

    monkeypatch.chdir(tmp_path)
    # Ctrl-C as at a terminal: a background job of a non-interactive shell starts with SIGINT ignored
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    run, made = _run(tmp_path, max_parallel=2, launcher_kw={"sleep_s": 3.0})
    timers: list[threading.Timer] = []

    class InterruptAfterFirstResults(Hooks):
        def progress(self, done, total, final=False):
            if done >= 1 and not timers:  # the first trials stored, the next ones running: Ctrl-C
                timers.append(threading.Timer(0.3, signal.raise_signal, args=(signal.SIGINT,)))
                timers[0].start()

    try:
        summary = execute(run, InterruptAfterFirstResults())
    finally:
        signal.signal(signal.SIGINT, previous)
    assert summary.interrupted and summary.status == vocabulary.SWEEP_INTERRUPTED and summary.exit_code() == 130
    assert summary.succeeded >= 2 and summary.unrecorded == 0
    with _wh() as wh:
        runs = wh.query("SELECT status, count(*) AS n FROM runs WHERE sweep_id = ? GROUP BY status", [run.sweep_id])
        status = wh.scalar("SELECT status FROM sweeps WHERE sweep_id = ?", [run.sweep_id])
    counts = dict(zip(runs["status"], runs["n"], strict=True))
    # every launched trial's record is stored: the finished ones succeeded, the running ones cancelled
    # (on a very loaded machine the interrupt may come after they finished: then all succeeded)
    assert set(counts) <= {"succeeded", "cancelled"} and sum(counts.values()) == summary.launched
    assert counts["succeeded"] == summary.succeeded and status == vocabulary.SWEEP_INTERRUPTED


def test_the_pruning_watch_counts_each_step_once_over_attempts_and_every_step_less_point():
    from gpuledger.runtime.engine import objective_values

    first = [{"name": "eval_loss", "value": 3.0, "step": 0}, {"name": "loss", "value": 9.0, "step": 1},
             {"name": "eval_loss", "value": 2.5, "step": 10}, {"name": "eval_loss", "value": 2.5, "step": 10},
             {"name": "eval_loss", "value": True, "step": 11}, {"name": "eval_loss", "value": "x", "step": 12}]
    values, high = objective_values(first, "eval_loss", float("-inf"))
    assert values == [3.0, 2.5] and high == 10
    # a retry's new attempt starts its steps again: only the steps past 10 are new
    retry = [{"name": "eval_loss", "value": 3.1, "step": 0}, {"name": "eval_loss", "value": 2.6, "step": 10},
             {"name": "eval_loss", "value": 2.0, "step": 20}]
    assert objective_values(retry, "eval_loss", high) == ([2.0], 20)
    # a trainer that logs no step: each point is a value
    bare = [{"name": "eval_loss", "value": v} for v in (1.0, 0.9, 0.8)]
    assert objective_values(bare, "eval_loss", float("-inf")) == ([1.0, 0.9, 0.8], float("-inf"))


def test_candidates_a_search_never_asks_for_end_not_asked_not_pending(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run, _ = _run(tmp_path, strategy="tpe", n_trials=2)
    summary = execute(run)
    assert (summary.launched, summary.succeeded, summary.not_asked) == (2, 2, 2)
    with _wh() as wh:
        statuses = sorted(wh.query("select status from trials where sweep_id = ?", [run.sweep_id])["status"])
    assert statuses == [vocabulary.NOT_ASKED, vocabulary.NOT_ASKED, vocabulary.SUCCEEDED, vocabulary.SUCCEEDED]
    again, _ = _run(tmp_path, strategy="tpe", n_trials=2)  # the same sweep again: nothing more to ask
    summary = execute(again)
    assert (summary.launched, summary.not_asked) == (0, 2)


def test_a_probe_run_is_the_engines_run_of_trials_with_purpose_probe(tmp_path, monkeypatch):
    """`run_probes` runs through `execute` (one lease, launch loop, writer): another holder's lease refuses it
    before anything launches; its records carry purpose `probe` and their shape; the warm start-ups follow in
    the same run on the same launcher; a failed probe is named and marks no trial; the sweep stays `planned`."""
    from gpuledger import protocol
    from gpuledger.runtime.probe import run_probes
    from gpuledger.spec import load_spec
    from gpuledger.warehouse import SweepBusy, Warehouse

    monkeypatch.chdir(tmp_path)
    path = write_spec(tmp_path, name="probe-engine", xs=(0.1, 0.2), usd_per_hour=1.0)
    spec = load_spec(path)
    made: list[FakeLauncher] = []

    def factory(name, spec, cap, landing_dir):
        warm_fails = {"status": vocabulary.FAILED, "reason": "warm start-up broke"}
        made.append(FakeLauncher(landing_dir=landing_dir, wall_s=2.0, usd_per_hour=1.0,
                                 outcome=lambda req: warm_fails if req.probe_env.get(protocol.ENV_PROBE_STEPS) == "1" else {}))
        return made[-1]

    with Warehouse.open() as wh:
        wh.acquire_lease("probe-engine", "another run", 60)
    with pytest.raises(SweepBusy):
        run_probes(spec, path, steps=3, say=lambda m: None, launcher_factory=factory, sweep_id="probe-engine")
    assert made == []  # refused at the lease: nothing launched
    with Warehouse.open() as wh:
        wh.release_lease("probe-engine", "another run")

    said: list[str] = []
    summary = run_probes(spec, path, steps=3, say=said.append, launcher_factory=factory, sweep_id="probe-engine")
    assert len(made) == 1 and made[0].submitted == 4  # 1 shape x 2 slots, then each warm start-up
    assert said and said[0].startswith("probing 1 shape(s) of probe-engine (2 trials) (2 probes: copies fill the 2 slots")
    probed = {p["trial_id"] for p in summary.probes}
    assert len(summary.probes) == 4 and len(probed) == 1
    assert summary.failures == [f"probe of trial {next(iter(probed))} failed: warm start-up broke"] * 2
    assert summary.cost_usd == pytest.approx(4 * 2.0 / 3600)
    with _wh() as wh:
        runs = wh.query("SELECT purpose, probe_shape IS NOT NULL AS shaped, status FROM runs ORDER BY status").to_dicts()
        assert runs == [{"purpose": "probe", "shaped": True, "status": "failed"}] * 2 + \
                      [{"purpose": "probe", "shaped": True, "status": "succeeded"}] * 2
        trials = wh.query("SELECT trial_id, status FROM trials WHERE sweep_id = 'probe-engine'").to_dicts()
        assert len(trials) == 2 and {t["status"] for t in trials} == {vocabulary.PENDING}  # no probe marked a trial
        assert wh.scalar("SELECT status FROM sweeps WHERE sweep_id = 'probe-engine'") == vocabulary.SWEEP_PLANNED
    with Warehouse.open() as wh:  # the probes gave their lease back
        wh.acquire_lease("probe-engine", "the sweep", 60)
