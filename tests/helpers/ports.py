"""The one free-port helper of the tests (servers started on loopback: PostgreSQL, S3, Prefect, metrics)."""

from __future__ import annotations

import socket


def free_port() -> int:
    """Returns a TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
