"""The local launcher with real subprocesses: concurrency, failures, timeout, cancel, no orphans."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from datetime import datetime
from pathlib import Path

import psutil
import pytest

from gpuledger.launch import get_launcher
from gpuledger.launch.base import Launcher, LaunchRequest
from gpuledger.launch.local import LocalLauncher
from gpuledger.record import parse_record

REPO = Path(__file__).resolve().parents[2]


def _req(trial_id: str, run: str, **kw) -> LaunchRequest:
    return LaunchRequest(sweep_id="sw-1", sweep_name="sw", trial_id=trial_id, params=kw.pop("params", {}),
                         run=run, workdir=kw.pop("workdir", REPO), **kw)


def _max_overlap(records: list[dict]) -> int:
    events = []
    for r in records:
        events.append((datetime.fromisoformat(r["started_at"]).timestamp(), 1))
        events.append((datetime.fromisoformat(r["ended_at"]).timestamp(), -1))
    events.sort(key=lambda e: (e[0], e[1]))  # an end before a start at the same instant
    running = peak = 0
    for _, delta in events:
        running += delta
        peak = max(peak, running)
    return peak


def test_protocol_and_factory(tmp_path):
    launcher = get_launcher("local", max_parallel=2, landing_dir=tmp_path)
    assert isinstance(launcher, Launcher) and isinstance(launcher, LocalLauncher)
    launcher.close()


def test_local_rate_from_env(tmp_path, monkeypatch):
    monkeypatch.setenv("GPULEDGER_LOCAL_USD_PER_HOUR", "1.5")
    assert LocalLauncher(landing_dir=tmp_path).usd_per_hour == 1.5
    assert LocalLauncher(landing_dir=tmp_path, usd_per_hour=0.0).usd_per_hour == 0.0
    with pytest.raises(ValueError):
        LocalLauncher(max_parallel=0, landing_dir=tmp_path)


def test_concurrency_never_exceeds_max_parallel(tmp_path):
    reqs = [_req(f"t{i}", "sleep 0.6", params={"i": i}) for i in range(5)]
    with LocalLauncher(max_parallel=2, landing_dir=tmp_path) as launcher:
        handles = [launcher.submit(r) for r in reqs]
        assert launcher.running == 2
        assert [launcher.poll(h) for h in handles][2:] == ["pending"] * 3
        seen = 0
        while not launcher.wait(handles, timeout_s=0.05):
            seen = max(seen, launcher.running)
            assert launcher.running <= 2
        records = [rec for h in handles for rec in [r.to_json() for r in launcher.collect(h)]]
    assert [launcher.poll(h) for h in handles] == ["succeeded"] * 5
    assert _max_overlap(records) == 2
    for rec, handle in zip(records, handles, strict=True):
        parse_record(rec)
        assert rec["run_id"] == handle.run_id and rec["run_id"].startswith(f"{rec['trial_id']}-a1-")
        assert rec["launcher"] == "local" and rec["hostname"] and rec["sweep_id"] == "sw-1"
        assert rec["gpus"] == 0 or rec["accelerator"]
        (line,) = rec["billing"]
        assert line["source"] == "local" and line["usd_per_hour"] == 0.0 and line["cost_usd"] == 0.0
        assert line["description"] == "local machine at $0.00/h (GPULEDGER_LOCAL_USD_PER_HOUR)"
        assert line["hours"] == pytest.approx(rec["wall_s"] / 3600)
        assert json.loads((tmp_path / f"{rec['run_id']}.json").read_text()) == rec  # landing = completed


def test_crash_timeout_billing_and_attempts(tmp_path):
    crash = "echo some output; for i in $(seq 1 80); do echo err $i >&2; done; exit 3"
    with LocalLauncher(max_parallel=3, landing_dir=tmp_path, usd_per_hour=3.6) as launcher:
        h_crash = launcher.submit(_req("crash", crash))
        h_hang = launcher.submit(_req("hang", "sleep 1000", timeout_s=1.5))
        h_ok = launcher.submit(_req("ok", "echo fine", env={"FOO": "bar"}))
        launcher.wait(timeout_s=30)
        crash_rec, = [r.to_json() for r in launcher.collect(h_crash)]
        hang_rec, = [r.to_json() for r in launcher.collect(h_hang)]
        ok_rec, = [r.to_json() for r in launcher.collect(h_ok)]
        again = launcher.submit(_req("ok", "test \"$FOO\" = bar && test \"$GPULEDGER_ATTEMPT\" = 2",
                                     env={"FOO": "bar"}))
        again_rec, = [r.to_json() for r in launcher.collect(again)]
    assert launcher.poll(h_crash) == "failed"
    assert crash_rec["status"] == "failed" and crash_rec["exit_code"] == 3
    assert crash_rec["reason"] == "exit code 3"
    assert "err 80" in crash_rec["stderr_tail"] and "err 20\n" not in crash_rec["stderr_tail"]
    assert hang_rec["status"] == "failed" and hang_rec["reason"] == "timeout after 1.5 s"
    assert hang_rec["wall_s"] < 10
    assert ok_rec["status"] == "succeeded"
    assert ok_rec["billing"][0]["cost_usd"] == pytest.approx(ok_rec["wall_s"] * 3.6 / 3600)
    assert ok_rec["billing"][0]["description"] == "local machine at $3.60/h (GPULEDGER_LOCAL_USD_PER_HOUR)"
    assert again_rec["attempt"] == 2 and again_rec["run_id"].startswith("ok-a2-")
    assert again_rec["status"] == "succeeded"


def test_setup_runs_first_and_a_failing_setup_fails_the_trial(tmp_path):
    with LocalLauncher(max_parallel=2, landing_dir=tmp_path) as launcher:
        good = launcher.submit(_req("g", "test -f marker", setup="touch marker", workdir=tmp_path))
        bad = launcher.submit(_req("b", "echo never", setup="echo nope >&2; false", workdir=tmp_path))
        launcher.wait()
        assert [r.to_json() for r in launcher.collect(good)][0]["status"] == "succeeded"
        bad_rec = [r.to_json() for r in launcher.collect(bad)][0]
    assert bad_rec["status"] == "failed" and "nope" in bad_rec["stderr_tail"]


def _wait_for_child_named(name: str, timeout_s: float = 60.0) -> None:
    """Waits until a process called `name` runs below this one (a fixed sleep is too short under load)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if any(k.name() == name for k in psutil.Process().children(recursive=True)):
            return
        time.sleep(0.05)
    raise AssertionError(f"no {name} process started within {timeout_s} s")


def test_cancel_pending_and_running(tmp_path):
    with LocalLauncher(max_parallel=1, landing_dir=tmp_path) as launcher:
        running = launcher.submit(_req("r", "sleep 1000"))
        pending = launcher.submit(_req("p", "sleep 1000"))
        _wait_for_child_named("sleep")  # the agent runs the trial (its signal handlers are set)
        launcher.cancel(pending)
        launcher.cancel(running)
        launcher.cancel(running)  # idempotent
        assert launcher.poll(pending) == "cancelled" and launcher.poll(running) == "cancelled"
        rec_p, = [r.to_json() for r in launcher.collect(pending)]
        rec_r, = [r.to_json() for r in launcher.collect(running)]
    assert rec_p["status"] == "cancelled" and rec_p["reason"] == "cancelled before start" and rec_p["wall_s"] == 0
    assert rec_r["status"] == "cancelled" and rec_r["reason"] == "cancelled by SIGTERM"
    parse_record(rec_p)


def test_agent_dying_without_record_gives_failed_record(tmp_path):
    # the trial kills its agent (bash's parent) with SIGKILL: no record is ever written
    with LocalLauncher(max_parallel=1, landing_dir=tmp_path) as launcher:
        h = launcher.submit(_req("dies", "echo last words >&2; sleep 0.5; kill -9 $PPID; sleep 1000"))
        rec, = [r.to_json() for r in launcher.collect(h)]
    assert rec["status"] == "failed" and rec["exit_code"] == -9
    assert "without writing a result record" in rec["reason"]
    assert "last words" in rec["stderr_tail"]
    parse_record(rec)


_DRIVER = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    import psutil
    from gpuledger.launch.base import LaunchRequest
    from gpuledger.launch.local import LocalLauncher
    launcher = LocalLauncher(max_parallel=2, landing_dir=Path(sys.argv[1]), kill_grace_s=1)
    for i in range(3):
        launcher.submit(LaunchRequest(sweep_id="s", sweep_name="s", trial_id=f"t{i}", params={},
                                      run="sleep 1000 & sleep 1000; wait"))
    for _ in range(300):  # up to 30 s on a loaded machine
        kids = psutil.Process().children(recursive=True)
        if len([k for k in kids if k.name() == "sleep"]) >= 4:
            break
        time.sleep(0.1)
    print(json.dumps([k.pid for k in kids]), flush=True)
    while True:
        launcher.wait(timeout_s=1)
""")


def _start_driver(tmp_path: Path) -> tuple[subprocess.Popen, list[psutil.Process]]:
    driver = subprocess.Popen([sys.executable, "-c", _DRIVER, str(tmp_path)], stdout=subprocess.PIPE,
                              cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                              # Ctrl-C as a terminal delivers it: SIGINT at its default (a background job of a
                              # non-interactive shell starts with it ignored, and Python then installs no handler)
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    pids = json.loads(driver.stdout.readline())
    procs = [psutil.Process(pid) for pid in pids]
    assert len(procs) >= 6  # 2 agents, 2 bash, 4 sleeps
    return driver, procs


def _alive(proc: psutil.Process) -> bool:
    """Running and not a zombie; a process that exits between the two questions is gone."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _assert_all_gone(procs: list[psutil.Process], within_s: float) -> None:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        alive = [p for p in procs if _alive(p)]
        if not alive:
            return
        time.sleep(0.1)
    raise AssertionError(f"still running: {[p.pid for p in alive]}")


def test_ctrl_c_leaves_no_child_process(tmp_path):
    driver, procs = _start_driver(tmp_path)
    driver.send_signal(signal.SIGINT)
    driver.wait(timeout=60)  # the agents end their trials and write their records: 20 s ran out in CI beside a heavy file
    _assert_all_gone(procs, within_s=5)
    records = [json.loads(p.read_text()) for p in tmp_path.glob("*.json")]
    assert sorted(r["status"] for r in records) == ["cancelled", "cancelled"]  # t2 never started


def test_killed_launcher_leaves_no_child_process(tmp_path):
    driver, procs = _start_driver(tmp_path)
    driver.kill()  # no chance to clean up: the agents notice their parent is gone
    driver.wait(timeout=10)
    _assert_all_gone(procs, within_s=10)
