"""A lease on a sweep id (table `sweep_leases`, migration 002): one run of a sweep at a time.

The run that launches a sweep's trials takes the lease (`acquire_lease`), renews it while it works
(`renew_lease`, before `ttl_s` runs out) and gives it back at the end (`release_lease`). A second run
of the same sweep meanwhile gets `SweepBusy` (exit code 4) naming the live holder. A lease is taken
over when its holder is past `expires_at` (it stopped renewing: killed, machine gone) or when its pid
is dead on this same host (killed -9 a moment ago). DuckDB admits one writing process at a time, so
the check-then-take runs atomically across processes inside one transaction.
"""

from __future__ import annotations

import math
import os
import socket
from datetime import datetime, timedelta
from typing import Any

from gpuledger.errors import UserError
from gpuledger.launch.procs import pid_alive
from gpuledger.warehouse.connect import now


class SweepBusy(UserError):
    """Another live run holds the sweep's lease."""

    exit_code = 4

    def __init__(self, message: str, *, holder: str, pid: int, host: str, since: datetime):
        super().__init__(message)
        self.holder, self.pid, self.host, self.since = holder, pid, host, since


def _host() -> str:
    return socket.gethostname()


def _ttl(ttl_s: float) -> timedelta:
    if isinstance(ttl_s, bool) or not isinstance(ttl_s, int | float) or not math.isfinite(ttl_s) or ttl_s <= 0:
        raise UserError(f"lease ttl_s must be a positive number of seconds, got {ttl_s!r}")
    return timedelta(seconds=float(ttl_s))


def _check_text(what: str, value: str) -> None:
    if not isinstance(value, str) or not value or len(value) > 500:
        raise UserError(f"lease {what} must be a non-empty string of at most 500 characters, got {value!r:.80}")


class LeaseMixin:
    """`Warehouse` methods for sweep leases (see `gpuledger.warehouse.core.WarehouseBase`)."""

    _require_writer: Any
    _run: Any
    transaction: Any

    def _lease_row(self, sweep_id: str) -> dict[str, Any] | None:
        rows = self._run("sweep_lease_get", {"sweep_id": sweep_id})
        if not rows:
            return None
        holder, pid, host, acquired_at, renewed_at, expires_at = rows[0]
        return {"holder": holder, "pid": pid, "host": host, "acquired_at": acquired_at,
                "renewed_at": renewed_at, "expires_at": expires_at}

    def lease(self, sweep_id: str) -> dict[str, Any] | None:
        """Returns the sweep's lease (holder, pid, host, acquired_at, renewed_at, expires_at) or None."""
        return self._lease_row(sweep_id)

    def _live_other(self, row: dict[str, Any] | None, holder: str, at: datetime) -> bool:
        """Returns whether `row` is a lease of another holder that is still live at `at`."""
        if row is None or row["holder"] == holder:
            return False
        if row["expires_at"] <= at:
            return False  # stopped renewing
        # on this host a dead pid frees it at once (killed -9 a moment ago)
        return not (row["host"] == _host() and not pid_alive(int(row["pid"])))

    def _busy(self, sweep_id: str, row: dict[str, Any]) -> SweepBusy:
        since = row["acquired_at"]
        return SweepBusy(
            f"sweep {sweep_id} is already running: its lease is held by {row['holder']} (pid {row['pid']} on "
            f"{row['host']}, since {since:%Y-%m-%d %H:%M:%S} UTC, renewed until "
            f"{row['expires_at']:%H:%M:%S} UTC); wait for that run to finish, or stop it - a lease whose "
            f"holder stops renewing is taken over once it expires",
            holder=row["holder"], pid=int(row["pid"]), host=row["host"], since=since)

    def acquire_lease(self, sweep_id: str, holder: str, ttl_s: float) -> None:
        """Takes the lease on `sweep_id` for `holder` until now + `ttl_s`.

        Re-acquiring by the same holder renews it. Raises `SweepBusy` (exit code 4) naming the live
        holder (pid, host, since) when another holder's lease is live; an expired lease, or one whose
        pid is dead on this host, is taken over.
        """
        self._require_writer("acquire_lease")
        _check_text("sweep_id", sweep_id)
        _check_text("holder", holder)
        ttl = _ttl(ttl_s)
        with self.transaction():
            at = now()
            row = self._lease_row(sweep_id)
            if self._live_other(row, holder, at):
                assert row is not None
                raise self._busy(sweep_id, row)
            acquired = row["acquired_at"] if row is not None and row["holder"] == holder else at
            self._run("sweep_lease_drop", {"sweep_id": sweep_id})
            self._run("sweep_lease_put", {"sweep_id": sweep_id, "holder": holder, "pid": os.getpid(),
                                          "host": _host(), "acquired_at": acquired, "renewed_at": at,
                                          "expires_at": at + ttl})

    def renew_lease(self, sweep_id: str, holder: str, ttl_s: float) -> None:
        """Extends `holder`'s lease on `sweep_id` to now + `ttl_s`.

        When the lease is gone or expired but nobody else took it, `holder` takes it again; when
        another holder took it over meanwhile, raises `SweepBusy` (this run lost the lease: stop
        launching).
        """
        self.acquire_lease(sweep_id, holder, ttl_s)

    def release_lease(self, sweep_id: str, holder: str) -> None:
        """Gives `holder`'s lease on `sweep_id` back (a no-op when `holder` does not hold it)."""
        self._require_writer("release_lease")
        with self.transaction():
            self._run("sweep_lease_release", {"sweep_id": sweep_id, "holder": holder})
