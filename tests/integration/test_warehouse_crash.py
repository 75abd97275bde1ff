"""Real second processes: SIGKILL in the middle of an ingest, and a reader while a writer holds the lock."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from helpers.record_fixtures import example_record, ingest_known

from gpuledger.errors import UserError
from gpuledger.warehouse import Warehouse

REPO = Path(__file__).resolve().parents[2]
N_RECORDS, N_POINTS = 200, 500  # 100,000 metric rows in one batch

WRITER = textwrap.dedent(f"""
    import sys, time
    from gpuledger.warehouse import Warehouse
    from helpers.record_fixtures import example_record, ingest_known
    path, mode = sys.argv[1], sys.argv[2]
    recs = [example_record(f"big{{i}}", f"t{{i}}", sweep_id="s",
                           metrics=[{{"name": "loss", "value": float(j), "step": j}} for j in range({N_POINTS})])
            for i in range({N_RECORDS})]
    if mode == "hook":
        def hook(op):
            print("IN_TXN", flush=True)
            time.sleep(120)
        Warehouse._before_commit = hook
    with Warehouse.open(path) as wh:
        print("OPEN", flush=True)
        ingest_known(wh, recs)
    print("DONE", flush=True)
""")


def _state(path: Path) -> tuple:
    with Warehouse.open(path, read_only=True) as wh:
        return tuple(wh.scalar(f"select count(*) from {t}") for t in ("runs", "metrics", "billing", "final_metrics")) + (
            wh.scalar("select coalesce(sum(value), 0) from metrics"),)


def _spawn(args: list[str], **kw) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests")])}
    return subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE, text=True, cwd=REPO, env=env, **kw)


def _wait_for(proc: subprocess.Popen, word: str) -> None:
    for line in proc.stdout:
        if line.strip() == word:
            return
    raise AssertionError(f"process ended (rc {proc.wait()}) before printing {word}")


@pytest.fixture
def seeded(tmp_path) -> Path:
    path = tmp_path / "ledger.duckdb"
    with Warehouse.open(path) as wh:
        ingest_known(wh, [example_record(f"old{i}", "t", sweep_id="s",
                                          metrics=[{"name": "loss", "value": 1.0}]) for i in range(3)])
    return path


@pytest.mark.slow
def test_sigkill_inside_the_transaction_leaves_the_warehouse_as_before(seeded):
    before = _state(seeded)
    proc = _spawn(["-c", WRITER, str(seeded), "hook"])
    try:
        _wait_for(proc, "IN_TXN")  # every row is written, COMMIT not yet reached
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert _state(seeded) == before
    with Warehouse.open(seeded) as wh:  # and the file is still a healthy, writable warehouse
        assert ingest_known(wh, [example_record("after", "t", sweep_id="s")]).new == 1


@pytest.mark.slow
def test_sigkill_at_any_moment_is_all_or_nothing(seeded):
    before = _state(seeded)
    proc = _spawn(["-c", WRITER, str(seeded), "plain"])
    try:
        _wait_for(proc, "OPEN")
        time.sleep(0.3)  # somewhere in validation / the insert / the commit
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    full = (before[0] + N_RECORDS, before[1] + N_RECORDS * N_POINTS, before[2] + N_RECORDS,
            before[3], before[4] + N_RECORDS * sum(range(N_POINTS)))
    assert _state(seeded) in (before, full)


HOLDER = textwrap.dedent("""
    import sys, time, pathlib
    from gpuledger.warehouse import Warehouse
    wh = Warehouse.open(sys.argv[1])
    print("HOLDING", flush=True)
    release = pathlib.Path(sys.argv[2])
    while not release.exists():
        time.sleep(0.05)
    wh.close()
""")


@pytest.mark.slow
def test_reader_while_a_writer_holds_the_lock(tmp_path, seeded):
    release = tmp_path / "release"
    proc = _spawn(["-c", HOLDER, str(seeded), str(release)])
    try:
        _wait_for(proc, "HOLDING")
        t0 = time.monotonic()
        with pytest.raises(UserError) as err:
            Warehouse.open(seeded, read_only=True, lock_timeout_s=0.5)
        assert time.monotonic() - t0 >= 0.5  # it retried first
        msg = str(err.value)
        assert f"locked by process {proc.pid}" in msg and "python" in msg and "retry" in msg

        cli = subprocess.run([sys.executable, "-m", "gpuledger.cli", "sql", "select count(*) from runs"],
                             capture_output=True, text=True, cwd=REPO,
                             env={**os.environ, "PYTHONPATH": str(REPO), "GPULEDGER_WAREHOUSE": str(seeded),
                                  "GPULEDGER_LOCK_TIMEOUT_S": "0.3"})
        assert cli.returncode == 1
        assert cli.stderr.startswith("gpuledger sql: warehouse ") and f"process {proc.pid}" in cli.stderr
        assert "Traceback" not in cli.stderr

        release.touch()  # the writer lets go while the reader is still retrying: the reader gets in
        with Warehouse.open(seeded, read_only=True, lock_timeout_s=30) as wh:
            assert wh.scalar("select count(*) from runs") == 3
    finally:
        release.touch()
        proc.wait(timeout=30)
