"""End to end on a real Prefect server and worker, as a newcomer runs it: `gpuledger init`, `gpuledger serve
--port N` (not the default port, no PREFECT_API_URL), then `prefect deployment run sweep/lora-grid --watch` twice
from the project's folder on a small spec, then Ctrl-C.

The port is one setting: `serve --port` points the project's prefect.toml at it, so the plain `prefect`
commands reach this server and `gpuledger doctor` calls it this project's. Two runs of the deployment are two
sweeps (each complete). Temporary PREFECT_HOME and warehouse; the worker runs the flow in the project (the
deployment's pull step). Checks the warehouse, a clean shutdown (worker, then server, exit 0) and that no
process is left behind. Runs in CI (marked slow, not skipped).
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import pytest
from helpers.sweep_specs import write_spec


def read_until(proc: subprocess.Popen, needle: str, timeout_s: float, seen: list[str]) -> bool:
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None and not sel.select(timeout=0):
            return False
        if not sel.select(timeout=1.0):
            continue
        line = proc.stdout.readline().decode(errors="replace")
        if not line:
            return False
        seen.append(line)
        if needle in line:
            return True
    return False


def deployments(api: str) -> set[str]:
    """Returns the server's deployments as `flow/deployment` names (Prefect's REST API: POST
    /deployments/filter and /flows/filter)."""

    def post(path: str) -> list[dict]:
        req = urllib.request.Request(f"{api}/{path}", data=b"{}", headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as resp:  # noqa: S310 - the test's own local server
            return json.loads(resp.read())

    flows = {f["id"]: f["name"] for f in post("flows/filter")}
    return {f"{flows.get(d['flow_id'])}/{d['name']}" for d in post("deployments/filter")}


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_serve_deploy_run_sweep_deployment_and_shut_down_cleanly(tmp_path, _isolated_warehouse):
    from gpuledger.flows.server import free_port

    project = tmp_path / "proj"
    spec = write_spec(tmp_path, name="e2e-grid", xs=(0.1, 0.3))
    port = free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = dict(os.environ)
    env.pop("PREFECT_API_URL", None)  # the newcomer's shell: only prefect.toml says where the server is
    env.update({"PREFECT_HOME": str(tmp_path / "prefect-home"),
                "GPULEDGER_WAREHOUSE": str(_isolated_warehouse), "DO_NOT_TRACK": "1",
                "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PYTHONUNBUFFERED": "1"})
    gl = [sys.executable, "-m", "gpuledger.cli"]
    made = subprocess.run([*gl, "init", str(project)], env=env, capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stdout + made.stderr
    serve = subprocess.Popen([*gl, "serve", "--port", str(port)], cwd=project, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    seen: list[str] = []
    procs: list[psutil.Process] = []
    try:
        assert read_until(serve, "gpuledger serve ready", 300, seen), "".join(seen[-60:])

        # a second `gpuledger serve` finds it running and leaves it alone
        second = subprocess.run([*gl, "serve", "--port", str(port)], cwd=project, env=env,
                                capture_output=True, text=True, timeout=60)
        assert second.returncode == 0 and "already running" in second.stdout, second.stdout + second.stderr
        assert f"127.0.0.1:{port}/api" in (project / "prefect.toml").read_text()  # the one port setting
        doctor = subprocess.run([*gl, "doctor", "--json"], cwd=project, env=env, capture_output=True, text=True,
                                timeout=120)
        checks = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}
        assert checks["prefect"]["status"] == "ok" and "this project's" in checks["prefect"]["detail"], checks

        deployed = deployments(api)  # from the REST API (as `prefect deployment ls` reads it, without its start-up)
        for name in ("sweep/lora-grid", "cost-report/weekly", "capacity/chat-serving", "warehouse-maintenance/weekly"):
            assert name in deployed, deployed
        prefect = str(Path(sys.executable).parent / "prefect")
        for _ in range(2):  # twice: two sweeps, each of them complete
            run = subprocess.run(
                [prefect, "deployment", "run", "sweep/lora-grid", "--param", f"spec={spec}", "--watch",
                 "--watch-timeout", "240"],
                env=env, cwd=project, capture_output=True, text=True, timeout=300)
            assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
            watched = run.stdout + run.stderr
            assert "Completed" in watched
            assert "started" in watched and "spent $" in watched, watched[-4000:]  # trial progress in --watch

        from gpuledger.warehouse import Warehouse

        with Warehouse.open(read_only=True) as wh:
            runs = wh.query("SELECT trial_id, status FROM runs")
            sweeps = wh.query("SELECT name, status FROM sweeps")
        assert runs.height == 4 and set(runs["status"]) == {"succeeded"}
        assert sweeps.to_dicts() == [{"name": "e2e-grid", "status": "succeeded"}] * 2
        procs = psutil.Process(serve.pid).children(recursive=True)
        assert len(procs) >= 2  # server and worker (and their children)
    finally:
        if serve.poll() is None:
            os.killpg(serve.pid, signal.SIGINT)  # Ctrl-C
        try:
            rest = serve.communicate(timeout=90)[0].decode(errors="replace")
        except subprocess.TimeoutExpired:
            os.killpg(serve.pid, signal.SIGKILL)
            rest = serve.communicate()[0].decode(errors="replace")
            pytest.fail("gpuledger serve did not stop within 90 s of Ctrl-C:\n" + "".join(seen[-40:]))
    out = "".join(seen) + rest
    assert serve.returncode == 0, out[-4000:]
    assert out.index("Stopping: worker first") < out.index("Stopped.")
    gone, alive = psutil.wait_procs(procs, timeout=15)
    try:
        assert not alive, f"left behind: {[(p.pid, p.cmdline()) for p in alive]}"
    finally:
        for p in alive:
            p.kill()
