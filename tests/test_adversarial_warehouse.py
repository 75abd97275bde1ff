"""Adversarial inputs of the warehouse side (issue #17): one test per attack, each reproducing it first.

A reader holding the file while a writer needs it (17.1), a second run of the same sweep (17.4, see
also tests/test_warehouse_lease.py), records that lie (17.5, 17.9), and "read-only" SQL that tries
to write files (17.7). Each is answered with one clear message, in bounded time and memory,
nothing stored lost, no traceback. Real second processes and real files throughout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from record_fixtures import example_record

from gpuledger.warehouse import Warehouse, WarehouseBusy

REPO = Path(__file__).resolve().parent.parent
GPULEDGER = [sys.executable, "-m", "gpuledger.cli"]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests")])}

# A reader that holds a read-only connection until a file appears (like `duckdb -readonly`, a notebook).
READER = textwrap.dedent("""
    import sys, time, pathlib, duckdb
    con = duckdb.connect(sys.argv[1], read_only=True)
    con.execute("select count(*) from runs").fetchall()
    print("READING", flush=True)
    release = pathlib.Path(sys.argv[2])
    while not release.exists():
        time.sleep(0.02)
    con.close()
    print("CLOSED", flush=True)
    time.sleep(30)
""")


@pytest.fixture
def ledger(tmp_path) -> Path:
    path = tmp_path / "ledger.duckdb"
    with Warehouse.open(path) as wh:
        wh.register_sweep(sweep_id="s-1", name="s", started_at="2026-01-05T09:00:00")
        wh.upsert_trials("s-1", [{"trial_id": "t1", "index": 0}, {"trial_id": "t2", "index": 1}])
        wh.ingest_records([example_record("r1", "t1", sweep_id="s-1", usd_per_hour=6.0, wall_s=600)])
    return path


class _Reader:
    def __init__(self, path: Path, tmp: Path):
        self.release = tmp / f"release-{time.monotonic_ns()}"
        self.proc = subprocess.Popen([sys.executable, "-c", READER, str(path), str(self.release)],
                                     stdout=subprocess.PIPE, text=True, env=ENV)
        assert self.proc.stdout.readline().strip() == "READING"

    def let_go(self) -> None:
        self.release.touch()
        assert self.proc.stdout.readline().strip() == "CLOSED"

    def stop(self) -> None:
        self.release.touch()
        self.proc.kill()
        self.proc.wait(timeout=30)


@pytest.mark.slow
def test_writer_waits_for_a_reader_and_then_writes(ledger, tmp_path):
    reader = _Reader(ledger, tmp_path)
    try:
        import threading

        threading.Timer(1.0, reader.let_go).start()  # the reader lets go while the writer waits
        t0 = time.monotonic()
        with Warehouse.open(ledger, lock_timeout_s=30) as wh:
            waited = time.monotonic() - t0
            assert wh.ingest_records([example_record("r2", "t2", sweep_id="s-1")]).new == 1
        assert 0.9 <= waited < 10
    finally:
        reader.stop()
    with Warehouse.open(ledger, read_only=True) as wh:
        assert wh.scalar("select count(*) from runs") == 2


@pytest.mark.slow
def test_a_reader_that_never_lets_go_is_named_as_a_reader(ledger, tmp_path, monkeypatch):
    reader = _Reader(ledger, tmp_path)
    try:
        t0 = time.monotonic()
        with pytest.raises(WarehouseBusy) as err:
            Warehouse.open(ledger, lock_timeout_s=0.5)
        assert 0.5 <= time.monotonic() - t0 < 5  # it retried, within the bound
        msg = str(err.value)
        assert err.value.holder_mode == "reader" and err.value.holder_pid == reader.proc.pid
        assert f"process {reader.proc.pid}" in msg and "read-only" in msg and "writing" not in msg
        assert "GPULEDGER_LOCK_TIMEOUT_S" in msg and "0.5 s" in msg

        # the same through the CLI: one line, no traceback, the bound from the environment
        land = tmp_path / "landing"
        land.mkdir()
        (land / "a.json").write_text(json.dumps(example_record("r3", "t2", sweep_id="s-1")))
        cli = subprocess.run([*GPULEDGER, "ingest", str(land)], capture_output=True, text=True, timeout=120,
                             env={**ENV, "GPULEDGER_WAREHOUSE": str(ledger), "GPULEDGER_LOCK_TIMEOUT_S": "0.3"})
        assert cli.returncode != 0 and "Traceback" not in cli.stderr
        assert cli.stderr.startswith("gpuledger ingest: warehouse ") and "read-only" in cli.stderr
        assert (land / "a.json").exists()  # nothing moved: the next ingest picks it up
    finally:
        reader.stop()


def test_a_bad_lock_timeout_is_a_clear_error(ledger, monkeypatch):
    from gpuledger.errors import UserError

    for bad in ("soon", "-1", "nan", "inf"):
        monkeypatch.setenv("GPULEDGER_LOCK_TIMEOUT_S", bad)
        with pytest.raises(UserError, match="GPULEDGER_LOCK_TIMEOUT_S"):
            Warehouse.open(ledger)
