"""`gpuledger status` during a real sweep (the sweep in another process, the session's Prefect server; the
polls in this process, `status` and the final `status --json` in processes of their own): the running
sweep's state, its trials by state (one running), its spend against the plan and an ETA; once it ended,
its final state and no ETA."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from helpers.sweep_specs import write_spec


def _status(env: dict[str, str], cwd) -> dict:
    done = subprocess.run([sys.executable, "-m", "gpuledger.cli", "status", "--json"], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return json.loads(done.stdout)


def _status_here(capsys) -> dict:
    """`gpuledger status --json` in this process (the polls: a process per poll, each a Python start-up,
    took the CPU the sweep needed on a loaded machine); the sweep runs in its own process."""
    from gpuledger.cli import main

    capsys.readouterr()
    code = main(["status", "--json"])
    out = capsys.readouterr()
    assert code == 0, out.out[-2000:] + out.err[-2000:]
    return json.loads(out.out)


@pytest.mark.slow
def test_status_during_and_after_a_sweep(tmp_path, _isolated_warehouse, prefect_api_url, monkeypatch, capsys):
    spec = write_spec(tmp_path, "status-grid", xs=(0.1, 0.2, 0.3), sleep=8.0, max_parallel=1, usd_per_hour=3.6)
    env = {**os.environ, "GPULEDGER_WAREHOUSE": str(_isolated_warehouse), "PREFECT_API_URL": prefect_api_url,
           "PREFECT_HOME": str(tmp_path / "prefect-home"), "DO_NOT_TRACK": "1", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "gpuledger.cli", "sweep", str(spec)], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    monkeypatch.chdir(tmp_path)  # the polls read what the CLI there reads (the same warehouse and data folder)
    try:
        seen = None
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and proc.poll() is None:
            sweeps = _status_here(capsys)["sweeps"]
            if sweeps and sweeps[0]["state"] == "running" and sweeps[0]["trials"].get("running"):
                seen = sweeps[0]
                break
            time.sleep(1.0)
        assert seen is not None, "status never showed the sweep running"
        assert seen["sweep"] == "status-grid" and seen["sweep_id"].startswith("status-grid-")
        assert seen["trials"]["running"] == 1 and sum(seen["trials"].values()) == 3
        assert seen["planned_usd"] is not None and seen["planned_usd"] > 0
        assert seen["spent_usd"] >= 0 and seen["eta_s"] is not None and seen["eta_s"] > 0 and seen["eta_basis"]
        text = subprocess.run([sys.executable, "-m", "gpuledger.cli", "status"], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120)
        assert text.returncode == 0 and "planned" in text.stdout, text.stdout + text.stderr
        out, _ = proc.communicate(timeout=600)
        assert proc.returncode == 0, out[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
    after = _status(env, tmp_path)["sweeps"][0]
    assert after["state"] == "succeeded", (after, out[-3000:])
    assert after["state"] == "succeeded" and after["eta_s"] is None and after["trials"] == {"succeeded": 3}
    assert after["spent_usd"] > 0
