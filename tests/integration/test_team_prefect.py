"""Prefect for a team (issue 20): the server on PostgreSQL, Prefect's documented production setting
(PREFECT_API_DATABASE_CONNECTION_URL with asyncpg), with two workers serving one work pool.

Real parts: a PostgreSQL cluster (tests/helpers/postgres.py), the Prefect server as `gpuledger serve` starts
it (uvicorn), `prefect work-pool create` and two `prefect worker start` processes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from helpers.postgres import postgres_cluster

pytestmark = pytest.mark.slow


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, data: dict | None = None) -> object:
    req = urllib.request.Request(url, data=None if data is None else json.dumps(data).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST" if data is not None else "GET")
    with urllib.request.urlopen(req, timeout=10) as resp:  # loopback only
        return json.loads(resp.read() or b"null")


def test_prefect_server_on_postgresql_serves_one_pool_to_two_workers(tmp_path):
    with postgres_cluster("prefect") as conn:
        parts = dict(p.split("=", 1) for p in conn.split())
        db_url = f"postgresql+asyncpg://{parts['user']}@{parts['host']}:{parts['port']}/{parts['dbname']}"
        port = _free_port()
        api = f"http://127.0.0.1:{port}/api"
        env = {**os.environ, "PREFECT_HOME": str(tmp_path / "home"), "PREFECT_API_URL": api,
               "PREFECT_API_DATABASE_CONNECTION_URL": db_url, "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
               "DO_NOT_TRACK": "1", "PREFECT_WORKER_QUERY_SECONDS": "2"}
        procs: list[subprocess.Popen] = []
        try:
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "uvicorn", "--factory", "prefect.server.api.server:create_app",
                 "--host", "127.0.0.1", "--port", str(port), "--log-level", "error"],
                env=env, stdout=subprocess.DEVNULL, stderr=open(tmp_path / "server.log", "wb")))  # noqa: SIM115
            deadline = time.monotonic() + 300
            while True:
                try:
                    if _get(f"{api}/health") is True:
                        break
                except OSError:
                    pass
                assert procs[0].poll() is None, (tmp_path / "server.log").read_text()[-2000:]
                assert time.monotonic() < deadline, "Prefect server on PostgreSQL did not answer in 300 s"
                time.sleep(1)
            prefect = str(Path(sys.executable).parent / "prefect")
            subprocess.run([prefect, "work-pool", "create", "team-pool", "--type", "process"], env=env,
                           check=True, capture_output=True, timeout=180)
            for i in range(2):
                procs.append(subprocess.Popen([prefect, "worker", "start", "--pool", "team-pool", "--name", f"w{i}"],
                                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                              start_new_session=True))
            deadline = time.monotonic() + 240
            names: set[str] = set()
            while time.monotonic() < deadline and names != {"w0", "w1"}:
                workers = _get(f"{api}/work_pools/team-pool/workers/filter", {})
                names = {w["name"] for w in workers}  # type: ignore[union-attr]
                time.sleep(2)
            assert names == {"w0", "w1"}
            # the state lives in PostgreSQL, not in a SQLite file under PREFECT_HOME
            bindir = sorted(Path("/usr/lib/postgresql").glob("*/bin"))[-1]
            out = subprocess.run([str(bindir / "psql"), "-h", parts["host"], "-p", parts["port"], "-U", "postgres",
                                  "-d", "prefect", "-Atc", "select count(*) from worker"],
                                 capture_output=True, text=True, check=True, timeout=60).stdout
            assert int(out.strip()) == 2
            assert not list((tmp_path / "home").rglob("*.db"))
        finally:
            for p in reversed(procs):
                if p.poll() is None:
                    with_group = p.pid if p is not procs[0] else None
                    if with_group:
                        os.killpg(p.pid, signal.SIGTERM)
                    else:
                        p.terminate()
            for p in procs:
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
