"""Issue 31: faults named for what they are, and bounded. A damaged warehouse is not "locked by
another process"; a file that is not DuckDB's is named by its header before DuckDB reads it (an
SQLite file would make DuckDB reach for its sqlite extension); no connection fetches or loads an
extension by itself; `gpuledger sql` stops at its time limit and at Ctrl-C; a password never
appears in a message, DuckDB's own error text included. Each beside a positive control."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from helpers.warehouse_template import fresh_warehouse

from gpuledger.errors import UserError
from gpuledger.warehouse import Warehouse

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def ledger(tmp_path) -> Path:
    return fresh_warehouse(tmp_path / "ledger.duckdb")  # migrated: the migrations are not what these test


def test_a_damaged_warehouse_is_named_damaged_at_once_not_locked(ledger, tmp_path, monkeypatch):
    monkeypatch.setenv("GPULEDGER_LOCK_TIMEOUT_S", "10")
    damaged = tmp_path / "damaged.duckdb"
    shutil.copy(ledger, damaged)
    with open(damaged, "r+b") as fh:  # a disk error in the middle of the file
        fh.seek(12288)
        fh.write(os.urandom(16384))
    started = time.monotonic()
    with pytest.raises(UserError) as info:
        Warehouse.open(damaged, read_only=True)
    text = str(info.value)
    assert time.monotonic() - started < 3 and "damaged" in text and "lock" not in text.replace("block", "")
    with Warehouse.open(ledger, read_only=True) as wh:  # positive control: the intact copy opens
        assert wh.query("select count(*) as n from runs")["n"][0] == 0


@pytest.mark.parametrize("kind", ["sqlite", "text", "parquet"])
def test_a_file_that_is_not_duckdb_is_named_by_its_header(tmp_path, kind):
    path = tmp_path / "ledger.duckdb"
    if kind == "sqlite":
        with sqlite3.connect(path) as con:
            con.execute("create table runs (x)")
    elif kind == "text":
        path.write_text("run_id,wall_s\nr1,1.0\n")
    else:
        path.write_bytes(b"PAR1" + b"\0" * 64)
    before = path.read_bytes()
    for read_only in (True, False):
        with pytest.raises(UserError) as info:
            Warehouse.open(path, read_only=read_only)
        assert "not a DuckDB" in str(info.value) and len(str(info.value).splitlines()) == 1
    assert path.read_bytes() == before  # untouched
    if kind == "sqlite":
        assert "SQLite" in str(info.value)


def test_no_connection_installs_or_loads_an_extension_by_itself(ledger):
    with Warehouse.open(ledger, read_only=True) as wh:
        settings = dict(wh.query("select name, value from duckdb_settings() where name in "
                                 "('autoinstall_known_extensions', 'autoload_known_extensions')").rows())
        assert settings == {"autoinstall_known_extensions": "false", "autoload_known_extensions": "false"}
        assert wh.query("select 1 as one")["one"][0] == 1  # positive control: it reads


def _sql(*args: str, env: dict | None = None, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "gpuledger.cli", "sql", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
                            **kw)


ENDLESS = "select count(*) from range(1000000000000) a"


def test_sql_stops_at_its_time_limit(ledger):
    started = time.monotonic()
    proc = _sql(ENDLESS, env={"GPULEDGER_WAREHOUSE": str(ledger), "GPULEDGER_SQL_TIMEOUT_S": "2"})
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1 and time.monotonic() - started < 30
    assert "longer than 2 s" in err and len(err.strip().splitlines()) == 1
    quick = _sql("select 42 as answer", env={"GPULEDGER_WAREHOUSE": str(ledger), "GPULEDGER_SQL_TIMEOUT_S": "2"})
    assert "42" in quick.communicate(timeout=60)[0] and quick.returncode == 0  # positive control


def _as_at_a_terminal() -> None:
    """Ctrl-C as a terminal delivers it: SIGINT at its default (a background job of a
    non-interactive shell, such as a CI step's, starts with SIGINT ignored, and Python then
    installs no KeyboardInterrupt handler)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _wait_until_open(pid: int, path: Path, within_s: float) -> None:
    """Waits until process `pid` holds `path` open."""
    proc, target = psutil.Process(pid), str(Path(path).resolve())
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if any(f.path == target for f in proc.open_files()):
            return
        time.sleep(0.1)
    raise AssertionError(f"pid {pid} did not open {target} within {within_s} s")


def test_sql_stops_at_ctrl_c(ledger):
    proc = _sql(ENDLESS, env={"GPULEDGER_WAREHOUSE": str(ledger)}, preexec_fn=_as_at_a_terminal)
    _wait_until_open(proc.pid, ledger, within_s=60)  # imported and opened (a fixed sleep loses to a busy machine)
    time.sleep(1)  # then deep in the query
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert time.monotonic() - sent < 10 and proc.returncode == 130
    assert "Traceback" not in err and "interrupted" in err


@pytest.mark.parametrize("after_s", [0.5, 1.0, 1.5, 2.0])
def test_sql_leaves_at_ctrl_c_whenever_it_comes(ledger, after_s):
    # while importing, opening the warehouse or starting the query: a KeyboardInterrupt raised inside
    # an extension's import or DuckDB's open can be swallowed, and the query then ran for its whole limit
    proc = _sql(ENDLESS, env={"GPULEDGER_WAREHOUSE": str(ledger)}, preexec_fn=_as_at_a_terminal)
    time.sleep(after_s)
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert time.monotonic() - sent < 10 and proc.returncode == 130, err[-500:]
    assert "Traceback" not in err and "interrupted" in err


def test_a_password_never_appears_in_a_message():
    secret = "Sup3r-Secret-pw"
    for target in (f"ducklake:postgres:dbname=nope host=127.0.0.1 port=1 user=x password={secret}",
                   f"ducklake:postgres:postgresql://x:{secret}@127.0.0.1:1/nope"):
        with pytest.raises(UserError) as info:
            Warehouse.open(target)
        assert secret not in str(info.value) and "127.0.0.1" in str(info.value)
