"""A real PostgreSQL for tests: a fresh cluster in a temporary folder on a free loopback port
(`postgres_cluster`), and a Prefect server on a database of it (`prefect_on_postgres`).

Uses Debian's server binaries (`postgresql` package: /usr/lib/postgresql/<version>/bin); `.ci/run`
installs them. Where they are absent the tests skip with that message, except under CI=true, where
they fail. As root the cluster runs as the `postgres` (else `nobody`) user, since PostgreSQL refuses
to run as root.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from helpers.ports import free_port


def _bin_dir() -> str | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return os.path.dirname(found[-1]) if found else None




@contextmanager
def postgres_cluster(dbname: str = "gpuledger") -> Iterator[str]:
    """Yields a libpq connection string to a new database of a new cluster; removes it afterwards."""
    bindir = _bin_dir()
    if bindir is None:
        message = "PostgreSQL server binaries are absent (apt-get install postgresql; .ci/run does)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    run_as: list[str] = []
    user = None
    if os.geteuid() == 0:
        for name in ("postgres", "nobody"):
            try:
                user = pwd.getpwnam(name)
                break
            except KeyError:
                continue
        run_as = ["runuser", "-u", user.pw_name, "--"] if user else []
    root = tempfile.mkdtemp(prefix="gpuledger-pg-")
    if user:
        os.chown(root, user.pw_uid, user.pw_gid)
    data, port = os.path.join(root, "data"), free_port()
    env = {**os.environ, "LC_ALL": "C"}
    try:
        subprocess.run([*run_as, f"{bindir}/initdb", "-D", data, "-A", "trust", "-U", "postgres", "-E", "UTF8"],
                       check=True, capture_output=True, env=env, timeout=120)
        subprocess.run([*run_as, f"{bindir}/pg_ctl", "-D", data, "-w", "-t", "120", "-l", os.path.join(root, "log"),
                        "-o", f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off", "start"],
                       check=True, capture_output=True, env=env, timeout=180)
        subprocess.run([f"{bindir}/createdb", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", dbname],
                       check=True, capture_output=True, env=env, timeout=60)
        yield f"dbname={dbname} host=127.0.0.1 port={port} user=postgres"
    finally:
        subprocess.run([*run_as, f"{bindir}/pg_ctl", "-D", data, "-m", "immediate", "stop"],
                       capture_output=True, env=env, timeout=60)
        shutil.rmtree(root, ignore_errors=True)


@contextmanager
def prefect_on_postgres(conn: str, home: Path) -> Iterator[str]:
    """A Prefect server on a new database `prefect` of the cluster `conn` (Prefect's production setting: a
    SQLite-backed server wedges under 8 concurrent sweeps' flow runs, measured in test_team_s3), started as
    `gpuledger serve` starts it (uvicorn); yields its API URL."""
    import psycopg2

    from gpuledger.flows.server import api_healthy, stop_process

    pg = psycopg2.connect(conn)
    pg.autocommit = True
    with pg.cursor() as cur:
        cur.execute("CREATE DATABASE prefect")
    pg.close()
    parts = dict(p.split("=", 1) for p in conn.split())
    port = free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_API_URL": api, "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "PREFECT_API_DATABASE_CONNECTION_URL":
               f"postgresql+asyncpg://{parts['user']}@{parts['host']}:{parts['port']}/prefect",
           "DO_NOT_TRACK": "1"}
    log = open(home / "server.log", "wb")  # noqa: SIM115 - the child's log
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "--factory", "prefect.server.api.server:create_app",
                             "--host", "127.0.0.1", "--port", str(port), "--log-level", "error"],
                            env=env, stdout=subprocess.DEVNULL, stderr=log,
                            start_new_session=True)  # its own group: stop_process stops it and its children
    try:
        deadline = time.monotonic() + 300
        while not api_healthy(api, timeout_s=2.0):
            assert proc.poll() is None, (home / "server.log").read_text(errors="replace")[-2000:]
            assert time.monotonic() < deadline, "Prefect server on PostgreSQL did not answer in 300 s"
            time.sleep(1)
        yield api
    finally:
        stop_process(proc, grace_s=10.0)
        log.close()
