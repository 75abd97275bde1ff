"""The Prefect flows under Prefect's test harness, with the real local launcher and warehouse.

One harness (a temporary Prefect server, ~10 s) serves the whole module; every test gets its own
warehouse (tests/conftest.py), its own working folder (reports land there) and its own spec.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from helpers.sweep_specs import write_spec


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    """A Prefect test harness (temporary server and database) for the module; yields its API URL."""
    home = tmp_path_factory.mktemp("prefect-home")
    saved = {k: os.environ.get(k) for k in ("PREFECT_HOME", "PREFECT_RESULTS_LOCAL_STORAGE_PATH", "PREFECT_API_URL")}
    os.environ["PREFECT_HOME"] = str(home)
    os.environ["PREFECT_RESULTS_LOCAL_STORAGE_PATH"] = str(home / "storage")
    os.environ.pop("PREFECT_API_URL", None)
    from prefect.settings import PREFECT_API_URL
    from prefect.testing.utilities import prefect_test_harness

    try:
        with prefect_test_harness(server_startup_timeout=240):
            yield PREFECT_API_URL.value()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # relative spec paths; reports go to GPULEDGER_REPORTS_DIR (conftest)
    return tmp_path


def _artifacts(keys_prefix: str) -> dict[str, list]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    with get_client(sync_client=True) as client:
        found = client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(like_=keys_prefix)))
    out: dict[str, list] = {}
    for art in found:
        out.setdefault(art.key or f"<{art.type}>", []).append(art)
    return out


def _events(prefix: str, api_url: str) -> list[dict]:
    import httpx

    resp = httpx.post(f"{api_url}/events/filter", json={"filter": {"event": {"prefix": [prefix]}}, "limit": 50},
                      timeout=10)
    resp.raise_for_status()
    return resp.json().get("events", [])


def _wh():
    from gpuledger.warehouse import Warehouse

    return Warehouse.open(read_only=True)


@pytest.mark.slow
def test_sweep_flow_runs_four_trials_ingests_reports_and_publishes_artifacts(harness, workdir):
    from gpuledger.flows.sweep import sweep

    spec = write_spec(workdir)
    summary = sweep(spec=str(spec))
    assert summary.succeeded == 4 and summary.failed == 0 and summary.status == "succeeded"
    with _wh() as wh:
        runs = wh.query("SELECT trial_id, status FROM runs WHERE sweep_id = ?", [summary.sweep_id])
        trials = wh.query("SELECT status FROM trials WHERE sweep_id = ?", [summary.sweep_id])
        prices = wh.query("SELECT cloud, usd_per_hour, source, extra FROM prices WHERE sweep_id = ?",
                          [summary.sweep_id])
    assert runs.height == 4 and runs["trial_id"].n_unique() == 4
    # the price the plan used is recorded with the sweep: this machine at the spec's local rate
    assert prices.height == 1 and prices["cloud"][0] == "local" and prices["usd_per_hour"][0] == 0.0
    assert '"trials": 4' in prices["extra"][0]
    assert set(runs["status"]) == {"succeeded"} and set(trials["status"]) == {"succeeded"}
    html = Path(summary.report_html)
    from gpuledger import settings

    assert html.is_file() and html.is_relative_to(settings.current().reports_dir)  # GPULEDGER_REPORTS_DIR
    assert Path(summary.report_markdown).is_file()
    arts = _artifacts("sweep-tiny-grid-%")
    for key in ("sweep-tiny-grid-plan", "sweep-tiny-grid-roi", "sweep-tiny-grid-results",
                "sweep-tiny-grid-progress", "sweep-tiny-grid-report"):
        assert key in arts, f"artifact {key} missing; have {sorted(arts)}"
    assert len(json.loads(arts["sweep-tiny-grid-plan"][0].data)) == 4  # one plan row per trial
    assert html.as_uri() in arts["sweep-tiny-grid-roi"][0].data  # the markdown links the HTML
    assert float(arts["sweep-tiny-grid-progress"][-1].data) == 100.0

    # a re-run asked to continue (resume=True; unset starts a fresh sweep of a finished one): nothing is launched again
    again = sweep(spec=str(spec), resume=True)
    assert again.skipped_done == 4 and again.launched == 0
    with _wh() as wh:
        assert wh.scalar("SELECT count(*) FROM runs WHERE sweep_id = ?", [summary.sweep_id]) == 4


@pytest.mark.slow
def test_budget_stop_mid_sweep_skips_the_rest_and_emits_the_event(harness, workdir):
    """$3600/h = $1/s; a trial sleeps 4.5 s (~5 s billed), planned ~3 s each: the guard passes at its P90
    (4 x ~3.2 s = $12.65 < $12.9) but after 2 measured trials the next would cross the budget."""
    from gpuledger.flows.sweep import sweep

    spec = write_spec(workdir, name="budget-grid", sleep=4.5, max_parallel=1, usd_per_hour=3600, budget=12.9)
    summary = sweep(spec=str(spec))
    assert summary.budget_stopped and summary.status == "budget-stopped"
    assert summary.launched == 2 and summary.succeeded == 2 and summary.skipped_budget == 2
    assert summary.spent_usd <= 12.9
    with _wh() as wh:
        statuses = wh.query("SELECT status, count(*) AS n FROM trials WHERE sweep_id = ? GROUP BY status",
                            [summary.sweep_id])
        forced = wh.scalar("SELECT forced FROM sweeps WHERE sweep_id = ?", [summary.sweep_id])
    assert dict(zip(statuses["status"], statuses["n"], strict=True)) == {"succeeded": 2, "skipped-budget": 2}
    assert forced is False
    from prefect.events.worker import EventsWorker

    EventsWorker.drain_all(timeout=10)
    # the server persists events in the background (batched): wait for it, within a deadline
    deadline = time.monotonic() + 30
    while True:
        events = [e for e in _events("gpuledger.budget", harness)
                  if e["payload"].get("sweep") == summary.sweep_id]
        if events or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert len(events) == 1
    payload = events[0]["payload"]
    assert payload["budget"] == 12.9 and 0 < payload["spent"] <= 12.9 and payload["skipped"] == 2
    assert events[0]["resource"]["prefect.resource.id"] == f"gpuledger.sweep.{summary.sweep_id}"


@pytest.mark.slow
def test_budget_guard_refuses_before_any_write_unless_forced(harness, workdir, _isolated_warehouse):
    from gpuledger.errors import BudgetExceeded
    from gpuledger.flows.sweep import sweep

    spec = write_spec(workdir, name="too-dear", xs=(0.1, 0.2), usd_per_hour=1_000_000, budget=1)
    with pytest.raises(BudgetExceeded):
        sweep(spec=str(spec))
    assert not _isolated_warehouse.exists()  # no warehouse write
    assert not list(workdir.glob("**/landing"))  # nothing launched

    dry = sweep(spec=str(spec), dry_run=True, force=True)
    assert dry.status == "dry-run" and dry.forced and not _isolated_warehouse.exists()

    forced = sweep(spec=str(spec), force=True)
    assert forced.forced and forced.succeeded == 2 and not forced.budget_stopped
    with _wh() as wh:
        assert wh.scalar("SELECT forced FROM sweeps WHERE sweep_id = ?", [forced.sweep_id]) is True


@pytest.mark.slow
def test_trial_failure_is_recorded_not_retried_and_launcher_errors_are_retried(harness, workdir, monkeypatch):
    import gpuledger.flows.sweep as sweep_flow

    real = sweep_flow.launcher_factory
    calls = {"submit": 0}

    def flaky(*args, **kwargs):
        launcher = real(*args, **kwargs)
        submit = launcher.submit

        def first_submit_fails(request):
            calls["submit"] += 1
            if calls["submit"] == 1:
                raise ConnectionError("launcher API unavailable (simulated)")
            return submit(request)

        launcher.submit = first_submit_fails
        return launcher

    monkeypatch.setattr(sweep_flow, "launcher_factory", flaky)
    spec = write_spec(workdir, name="flaky-grid", xs=(0.1, 0.5), max_parallel=1, fail=0.5)
    state = sweep_flow.sweep(spec=str(spec), return_state=True)
    assert state.is_failed() and "1 succeeded, 1 failed" in state.message  # the state says what the exit code says
    summary = state.result(raise_on_failure=False)
    # one retried launcher error (3 submits in all), one trial that failed on its own (1 attempt)
    assert calls["submit"] == 3
    assert summary.succeeded == 1 and summary.failed == 1 and summary.launcher_errors == 0
    with _wh() as wh:
        runs = wh.query("SELECT status, exit_code FROM runs WHERE sweep_id = ? ORDER BY status", [summary.sweep_id])
    assert runs["status"].to_list() == ["failed", "succeeded"]
    assert runs["exit_code"].to_list()[0] != 0


@pytest.mark.slow
def test_cost_report_and_capacity_flows_write_reports_and_artifacts(harness, workdir, repo_root):
    from gpuledger.flows.capacity import capacity
    from gpuledger.flows.cost_report import cost_report, last_complete_week
    from gpuledger.warehouse import Warehouse

    with Warehouse.open():
        pass  # an empty, migrated warehouse
    out = cost_report(week="2026-W05")
    assert out["week"] == "2026-W05" and Path(out["html"]).is_file()
    assert "cost-report-weekly" in _artifacts("cost-report-%")
    assert cost_report()["week"] == last_complete_week()

    cap = capacity(spec=str(repo_root / "specs" / "chat-capacity.yaml"))
    assert Path(cap["html"]).is_file() and cap["plan"]
    assert "capacity-chat-serving" in _artifacts("capacity-%")


def test_last_complete_week_and_week_check():
    from datetime import UTC, datetime

    from gpuledger.errors import UserError
    from gpuledger.flows.cost_report import check_week, last_complete_week

    assert last_complete_week(datetime(2026, 1, 12, 8, tzinfo=UTC)) == "2026-W02"  # a Monday
    assert last_complete_week(datetime(2026, 1, 4, tzinfo=UTC)) == "2025-W52"  # Sunday of 2026-W01
    assert check_week("2026-W05") == "2026-W05"
    for bad in ("2026-5", "2026-W54", "W05"):
        with pytest.raises(UserError):
            check_week(bad)


def test_cli_commands_that_must_not_import_prefect_do_not():
    import subprocess
    import sys

    code = ("import sys; from gpuledger.cli import main; import gpuledger.flows.server, gpuledger.cli.commands.sweep, "
            "gpuledger.cli.commands.serve; assert 'prefect' not in sys.modules, 'prefect imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def _run_logs(state) -> list[str]:
    """Returns the messages the flow run of `state` (and its task runs) logged to the API."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId

    from gpuledger.flows.sweep import drain_prefect

    drain_prefect()
    with get_client(sync_client=True) as client:
        logs = client.read_logs(log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[state.state_details.flow_run_id])))
    return [log.message for log in logs]


@pytest.mark.slow
def test_a_spec_the_planner_refuses_ends_failed_with_one_log_line_not_a_traceback(harness, workdir):
    from gpuledger.errors import UserError
    from gpuledger.flows.cost_report import cost_report
    from gpuledger.flows.sweep import sweep

    spec = write_spec(workdir, name="no-tokens", xs=(0.1,))
    spec.write_text(spec.read_text().replace(", tokens_per_trial: 1000", ""))
    state = sweep(spec=str(spec), return_state=True)
    assert state.is_failed()
    error = state.result(raise_on_failure=False)
    assert isinstance(error, UserError) and "train.tokens_per_trial is needed" in str(error)
    logs = _run_logs(state)
    assert [m for m in logs if "tokens_per_trial is needed" in m] and not [m for m in logs if "Traceback" in m]

    report = cost_report(week="2026-W05", return_state=True)  # no warehouse yet: a user's error too
    assert report.is_failed() and "no warehouse at" in str(report.result(raise_on_failure=False))
    logs = _run_logs(report)
    assert [m for m in logs if "no warehouse at" in m] and not [m for m in logs if "Traceback" in m]
    with pytest.raises(UserError):  # called plainly, the flow raises it (as the budget guard's refusal)
        cost_report(week="2026-W05")
