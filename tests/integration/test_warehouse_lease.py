"""Sweep leases: one live run per sweep id; expired or dead-pid leases are taken over."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from helpers.warehouse_template import fresh_warehouse

from gpuledger.errors import UserError
from gpuledger.warehouse import SweepBusy, Warehouse

REPO = Path(__file__).resolve().parents[2]

HOLDER = textwrap.dedent("""
    import sys, time, pathlib
    from gpuledger.warehouse import Warehouse
    with Warehouse.open(sys.argv[1]) as wh:
        wh.acquire_lease("s-1", "run-A", 3600)
    print("LEASED", flush=True)
    release = pathlib.Path(sys.argv[2])
    while not release.exists():
        time.sleep(0.05)
""")


def test_a_live_holder_in_another_process_refuses_a_second_run_until_it_dies(tmp_path):
    path = fresh_warehouse(tmp_path / "w.duckdb")
    release = tmp_path / "release"
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(path), str(release)], stdout=subprocess.PIPE,
                            text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        assert proc.stdout.readline().strip() == "LEASED"
        with Warehouse.open(path) as wh:
            with pytest.raises(SweepBusy) as err:
                wh.acquire_lease("s-1", "run-B", 60)
            e = err.value
            assert e.exit_code == 4 and isinstance(e, UserError)
            assert (e.holder, e.pid, e.host) == ("run-A", proc.pid, socket.gethostname())
            msg = str(e)
            assert "sweep s-1 is already running" in msg and "run-A" in msg and f"pid {proc.pid}" in msg
            assert socket.gethostname() in msg and "since" in msg
            wh.acquire_lease("s-2", "run-B", 60)  # another sweep id is free
        proc.kill()  # kill -9: the lease stays in the table, but its pid is dead on this host
        proc.wait(timeout=30)
        with Warehouse.open(path) as wh:
            wh.acquire_lease("s-1", "run-B", 60)
            lease = wh.lease("s-1")
            assert lease["holder"] == "run-B" and lease["pid"] == os.getpid()
    finally:
        release.touch()
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)


def test_expiry_renew_and_release(tmp_path):
    with Warehouse.open(fresh_warehouse(tmp_path / "w.duckdb")) as wh:
        wh.acquire_lease("s", "A", 0.3)
        wh.acquire_lease("s", "A", 0.3)  # the same holder again: a renewal
        first = wh.lease("s")
        with pytest.raises(SweepBusy):
            wh.acquire_lease("s", "B", 10)  # A's pid (this process) is alive and A has not expired
        wh.renew_lease("s", "A", 0.3)
        assert wh.lease("s")["acquired_at"] == first["acquired_at"]
        assert wh.lease("s")["expires_at"] >= first["expires_at"]
        time.sleep(0.4)  # A stopped renewing
        wh.acquire_lease("s", "B", 10)
        with pytest.raises(SweepBusy) as err:
            wh.renew_lease("s", "A", 10)  # A lost it: it must stop launching
        assert err.value.holder == "B"
        wh.release_lease("s", "A")  # not A's: nothing happens
        assert wh.lease("s")["holder"] == "B"
        wh.release_lease("s", "B")
        assert wh.lease("s") is None
        wh.acquire_lease("s", "A", 10)


@pytest.mark.parametrize("ttl", [0, -1, float("nan"), float("inf"), "10", True])
def test_bad_ttl_is_a_clear_error(tmp_path, ttl):
    with Warehouse.open(fresh_warehouse(tmp_path / "w.duckdb")) as wh, pytest.raises(UserError, match="ttl_s must be a positive"):
        wh.acquire_lease("s", "A", ttl)
