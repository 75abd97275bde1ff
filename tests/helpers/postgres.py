"""A real PostgreSQL for tests: a fresh cluster in a temporary folder on a free loopback port.

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
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

import pytest


def _bin_dir() -> str | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return os.path.dirname(found[-1]) if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
    data, port = os.path.join(root, "data"), _free_port()
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
