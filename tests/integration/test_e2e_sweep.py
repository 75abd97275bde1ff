"""`gpuledger sweep` as a real process: SIGKILLed after its first ingested result, then run again.

The second run (on the session's Prefect server) must re-run no trial that succeeded in the first and
duplicate no row; the killed process must leave nothing running (its temporary Prefect server and its
trials die with it).
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from helpers.sweep_specs import write_spec


def sweep_env(tmp_path: Path, warehouse: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PREFECT_API_URL", None)  # no server configured: the temporary one
    env.update({"GPULEDGER_WAREHOUSE": str(warehouse), "PREFECT_HOME": str(tmp_path / "prefect-home"),
                "DO_NOT_TRACK": "1", "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PYTHONUNBUFFERED": "1"})
    return env


def gpuledger() -> list[str]:
    return [sys.executable, "-m", "gpuledger.cli"]


def descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


@pytest.mark.slow
@pytest.mark.timeout(900)  # a temporary Prefect server can take minutes to start on a loaded machine
def test_killed_sweep_resumes_without_rerunning_or_duplicating(tmp_path, _isolated_warehouse, prefect_api_url):
    spec = write_spec(tmp_path, "kill-grid", xs=(0.1, 0.2, 0.3, 0.4), sleep=2.0, max_parallel=1)
    env = sweep_env(tmp_path, _isolated_warehouse)
    proc = subprocess.Popen([*gpuledger(), "sweep", str(spec)], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    seen: list[str] = []
    children: list[psutil.Process] = []
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + 200
    try:
        while time.monotonic() < deadline:
            if not sel.select(timeout=1.0):
                children = descendants(proc.pid) or children
                continue
            line = proc.stdout.readline().decode(errors="replace")
            if not line:
                break
            seen.append(line)
            children = descendants(proc.pid) or children
            if " stored (1/4" in line:
                break
        else:
            pytest.fail("no result was ingested in time:\n" + "".join(seen[-40:]))
        assert " stored (1/4" in seen[-1], "".join(seen[-40:])
        children = descendants(proc.pid) or children
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.stdout.close()
    # the temporary Prefect server and the running trial die with the killed process
    time.sleep(1.0)
    gone, alive = psutil.wait_procs(children, timeout=20)
    try:
        assert not alive, f"orphans after SIGKILL: {[(p.pid, p.cmdline()) for p in alive]}"
    finally:
        for p in alive:
            p.kill()

    from gpuledger.warehouse import Warehouse

    with Warehouse.open(read_only=True) as wh:
        first = wh.query("SELECT trial_id, run_id FROM runs WHERE status = 'succeeded'")
    assert first.height >= 1
    done_first = set(first["trial_id"])

    (tmp_path / "no-sleep").touch()  # the trials left run at once now (the sleep only kept the first run busy)
    # the second run on the session's Prefect server (what resumes is in the warehouse and the landing folder,
    # not in the killed run's server; a second temporary server would only cost its start)
    again = subprocess.run([*gpuledger(), "sweep", str(spec)], cwd=tmp_path, env={**env, "PREFECT_API_URL": prefect_api_url},
                           capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    with Warehouse.open(read_only=True) as wh:
        runs = wh.query("SELECT trial_id, run_id, status FROM runs")
        trials = wh.query("SELECT trial_id, status FROM trials")
        metric_dups = wh.scalar("SELECT count(*) FROM (SELECT run_id, name, seq FROM metrics GROUP BY ALL "
                                "HAVING count(*) > 1)")
    ok = runs.filter(runs["status"] == "succeeded")
    assert set(ok["trial_id"]) == set(trials["trial_id"]) and trials.height == 4
    assert set(trials["status"]) == {"succeeded"}
    # no succeeded trial ran twice; no run row twice
    assert ok["trial_id"].n_unique() == ok.height == 4, ok
    assert runs["run_id"].n_unique() == runs.height
    for tid in done_first:
        assert ok.filter(ok["trial_id"] == tid)["run_id"].to_list() == \
            first.filter(first["trial_id"] == tid)["run_id"].to_list()
    assert metric_dups == 0
    # what the first run finished counts as done (records it left in the landing folder are recovered)
    import re

    before = int(re.search(r"(\d+) done before", again.stdout).group(1))
    assert before >= len(done_first), again.stdout


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_cli_dry_run_and_budget_refusal_exit_codes(tmp_path, _isolated_warehouse, prefect_api_url):
    spec = write_spec(tmp_path, "cli-grid", xs=(0.1, 0.2), sleep=0.0, max_parallel=1)
    # the session's Prefect server, as PREFECT_API_URL (a temporary server per run is the test above's)
    env = {**sweep_env(tmp_path, _isolated_warehouse), "PREFECT_API_URL": prefect_api_url}
    dry = subprocess.run([*gpuledger(), "sweep", str(spec), "--dry-run"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=420)
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert "dry run of cli-grid-" in dry.stdout and not _isolated_warehouse.exists()
    assert "temporary Prefect server" not in dry.stderr  # a healthy PREFECT_API_URL is used as it is
    dear = spec.read_text().replace("usd_per_hour: 0.0", "usd_per_hour: 1000000").replace("max_usd: 5", "max_usd: 1")
    spec.write_text(dear)
    refused = subprocess.run([*gpuledger(), "sweep", str(spec)], cwd=tmp_path, env=env, capture_output=True,
                             text=True, timeout=420)
    assert refused.returncode == 3, refused.stdout[-2000:] + refused.stderr[-2000:]
    assert "gpuledger sweep:" in refused.stderr and "Traceback" not in refused.stderr
    assert not _isolated_warehouse.exists()
