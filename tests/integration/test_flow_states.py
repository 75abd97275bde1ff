"""The flow run's Prefect state and `gpuledger sweep`'s exit code agree (real CLI processes, the session's
Prefect server): failed trials end `Failed` with the counts (exit 1, the trial's stderr and log path shown),
a budget refusal `Failed` with the refusal (exit 3), an interrupted sweep `Cancelled` (exit 130), a sweep
whose trials all succeeded `Completed` (exit 0). And a run with `resume` unset (the deployment's default)
starts a fresh sweep once the spec's last one ended, but continues one that did not finish.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from helpers.sweep_specs import write_spec


def _env(tmp_path: Path, warehouse: Path, api_url: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"GPULEDGER_WAREHOUSE": str(warehouse), "PREFECT_HOME": str(tmp_path / "prefect-home"),
                "PREFECT_API_URL": api_url, "DO_NOT_TRACK": "1", "PYTHONUNBUFFERED": "1"})
    return env


def _sweep(spec: Path, env: dict[str, str], *extra: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpuledger.cli", "sweep", str(spec), *extra], cwd=spec.parent,
                          env=env, capture_output=True, text=True, timeout=timeout)


def _flow_run_of(spec: Path, api_url: str) -> dict:
    """The latest flow run of the `sweep` flow whose `spec` parameter is `spec` (the server's REST API)."""
    resp = httpx.post(f"{api_url}/flow_runs/filter", json={"sort": "START_TIME_DESC", "limit": 200}, timeout=30)
    resp.raise_for_status()
    runs = [r for r in resp.json() if (r.get("parameters") or {}).get("spec") == str(spec)]
    assert runs, f"no flow run of {spec}"
    return runs[0]


@pytest.mark.slow
def test_failed_trials_end_failed_with_counts_and_stderr_exit_1(tmp_path, _isolated_warehouse, prefect_api_url):
    spec = write_spec(tmp_path, "states-fail", xs=(0.1, 0.2), fail=0.2, max_parallel=2)
    done = _sweep(spec, _env(tmp_path, _isolated_warehouse, prefect_api_url))
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    run = _flow_run_of(spec, prefect_api_url)
    assert run["state"]["type"] == "FAILED", run["state"]
    assert "2 launched, 1 succeeded, 1 failed" in run["state"]["message"], run["state"]["message"]
    # the CLI shows why: the trial's last stderr line and where its whole log is
    assert "trial failed on purpose" in done.stdout and "log: " in done.stdout, done.stdout
    log_line = next(line for line in done.stdout.splitlines() if line.strip().startswith("log: "))
    assert Path(log_line.split("log: ", 1)[1]).is_file()
    from gpuledger.warehouse import Warehouse

    with Warehouse.open(read_only=True) as wh:
        row = wh.query("select stderr_tail, log_path from v_runs where status = 'failed'").to_dicts()
    assert len(row) == 1 and "trial failed on purpose" in row[0]["stderr_tail"] and row[0]["log_path"]


@pytest.mark.slow
def test_a_budget_refusal_ends_failed_with_the_refusal_exit_3(tmp_path, _isolated_warehouse, prefect_api_url):
    spec = write_spec(tmp_path, "states-refused", xs=(0.1, 0.2), usd_per_hour=1_000_000, budget=1.0)
    done = _sweep(spec, _env(tmp_path, _isolated_warehouse, prefect_api_url))
    assert done.returncode == 3, done.stdout[-3000:] + done.stderr[-3000:]
    run = _flow_run_of(spec, prefect_api_url)
    assert run["state"]["type"] == "FAILED" and "budget" in run["state"]["message"].lower(), run["state"]


@pytest.mark.slow
def test_an_interrupted_sweep_ends_cancelled_exit_130(tmp_path, _isolated_warehouse, prefect_api_url):
    spec = write_spec(tmp_path, "states-int", xs=(0.1, 0.2, 0.3), sleep=60.0, max_parallel=1)
    proc = subprocess.Popen([sys.executable, "-m", "gpuledger.cli", "sweep", str(spec)], cwd=tmp_path,
                            env=_env(tmp_path, _isolated_warehouse, prefect_api_url), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    deadline = time.monotonic() + 240
    for line in proc.stdout:  # the first trial started: interrupt as a user's Ctrl-C would
        lines.append(line)
        if "Trial" in line and "started" in line:
            break
        assert time.monotonic() < deadline, "".join(lines)[-3000:]
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, "".join(lines)[-2000:] + out[-3000:]
    run = _flow_run_of(spec, prefect_api_url)
    assert run["state"]["type"] == "CANCELLED" and "interrupted" in run["state"]["message"], run["state"]


@pytest.mark.slow
def test_resume_unset_starts_a_fresh_sweep_after_an_ended_one(tmp_path, _isolated_warehouse, prefect_api_url,
                                                              monkeypatch):
    monkeypatch.setenv("PREFECT_API_URL", prefect_api_url)
    monkeypatch.chdir(tmp_path)
    from gpuledger.flows.sweep import sweep

    spec = write_spec(tmp_path, "states-twice", xs=(0.1, 0.2), max_parallel=2)
    first = sweep(spec=str(spec), return_state=True)
    assert first.type.value == "COMPLETED", first.message
    one = first.result()
    second = sweep(spec=str(spec), return_state=True)  # what `prefect deployment run` does: no resume given
    two = second.result()
    assert two.sweep_id != one.sweep_id and two.succeeded == 2 and two.skipped_done == 0
    from gpuledger.runtime.ids import sweep_to_run
    from gpuledger.spec import load_spec
    from gpuledger.warehouse import Warehouse

    sp = load_spec(spec)
    assert sweep_to_run(sp, True)[0] == two.sweep_id  # asked to resume: the last one (its trials skipped)
    assert sweep_to_run(sp, None)[0] not in (one.sweep_id, two.sweep_id)  # unset: a third, fresh one
    with Warehouse.open() as wh:  # the last sweep did not finish (a killed run): it is continued, not replaced
        wh.finish_sweep(two.sweep_id, status="interrupted")
    assert sweep_to_run(sp, None)[0] == two.sweep_id
