"""Spend while a sweep runs: its running trials accrue price x elapsed, and the envelopes hold while they do.

A `MoneyWatch` belongs to one run of a sweep (`gpuledger.runtime.engine` starts it). Every
`money.accrue_interval_s` (60 s by default) it hands the writer thread one `trial_accruals` row per
running attempt (the launch's price per hour x the seconds since it was submitted: a spot attempt's
restarts are inside that time, since the managed job keeps running through them), flags a trial whose
accrued spend passes its estimate (the plan's P90 when it has one, else its P50; alert
`over_estimate`), and looks at the envelopes the sweep reserved in (`v_budgets`): when what the
sweep measured and accrued would cross one before the next look, it says why in `stop_reason`, the
launch loop stops launching and every running trial's watch cancels it (docs/budgets.md).
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from gpuledger.runtime.envelopes import EPSILON_USD, now_utc

#: what a stop by an envelope says first (the engine tells it from a pruner's stop by it)
ENVELOPE_STOP = "budget envelope stop"


@dataclass
class _Running:
    trial_id: str
    launch_no: int
    started: float  # time.monotonic()
    started_at: datetime
    usd_per_hour: float
    est_cost_usd: float | None
    est_basis: str
    over: bool = False


def estimate_of(row: Any) -> tuple[float | None, str]:
    """The estimate a running trial is held to: its P90 cost when the plan has one, else its P50."""
    p90 = getattr(row, "est_cost_usd_p90", None)
    if isinstance(p90, (int, float)) and p90 > 0:
        return float(p90), "P90"
    p50 = getattr(row, "est_cost_usd", None)
    if isinstance(p50, (int, float)) and p50 > 0:
        return float(p50), "P50 (the plan has no P90)"
    return None, "no estimate"


@dataclass
class MoneyWatch:
    """The accruals and the envelope stop of one run of a sweep."""

    sweep_id: str
    interval_s: float
    writer: Any = None  # gpuledger.runtime.writer.Writer: the one thread that writes
    log: Any = None
    rows: dict[str, Any] = field(default_factory=dict)  # trial_id -> PlannedTrial
    stop_reason: str | None = None
    _running: dict[str, _Running] = field(default_factory=dict)
    _launches: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> MoneyWatch:
        self._thread = threading.Thread(target=contextvars.copy_context().run, args=(self._loop,),
                                        name=f"gpuledger-money-{self.sweep_id[:24]}", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def launched(self, trial_id: str, usd_per_hour: float | None, launcher: Any = None) -> None:
        """A trial was submitted at the plan's price (None: the launcher's own rate)."""
        if usd_per_hour is None:
            usd_per_hour = getattr(launcher, "usd_per_hour", 0.0)
        est, basis = estimate_of(self.rows.get(trial_id))
        with self._lock:
            n = self._launches.get(trial_id, 0) + 1
            self._launches[trial_id] = n
            self._running[trial_id] = _Running(trial_id, n, time.monotonic(), now_utc(), float(usd_per_hour or 0.0),
                                               est, basis)
        self.tick(only=trial_id)

    def finished(self, trial_id: str) -> None:
        with self._lock:
            self._running.pop(trial_id, None)

    def watch(self, launcher: Any, handle: Any) -> str | None:
        """A running trial's watch: why to cancel it (an envelope would be crossed), else None."""
        return self.stop_reason

    def watching(self, pruning: Any = None) -> Any:
        """The watch of a running trial: this envelope stop first, then `pruning` (the search's)."""

        def watch(launcher: Any, handle: Any) -> str | None:
            return self.stop_reason or (pruning(launcher, handle) if pruning is not None else None)

        return watch

    def usd_per_hour(self) -> float:
        with self._lock:
            return sum(r.usd_per_hour for r in self._running.values())

    # -- the thread -------------------------------------------------------------------------
    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            with contextlib.suppress(Exception):  # never stops the sweep; the next tick tries again
                self.tick()

    def tick(self, only: str | None = None) -> None:
        """Writes the accruals (through the writer), flags trials past their estimate, checks the envelopes."""
        now_m = time.monotonic()
        with self._lock:
            running = [r for r in self._running.values() if only is None or r.trial_id == only]
        rows, over = [], []
        for r in running:
            elapsed = max(0.0, now_m - r.started)
            accrued = r.usd_per_hour * elapsed / 3600.0
            flag = r.est_cost_usd is not None and accrued > r.est_cost_usd + EPSILON_USD
            if flag and not r.over:
                r.over = True
                over.append((r, accrued))
            rows.append({"sweep_id": self.sweep_id, "trial_id": r.trial_id, "launch_no": r.launch_no,
                         "started_at": r.started_at, "usd_per_hour": r.usd_per_hour, "elapsed_s": round(elapsed, 3),
                         "accrued_usd": accrued, "est_cost_usd": r.est_cost_usd, "est_basis": r.est_basis,
                         "over_estimate": r.over, "running": True})
        if rows and self.writer is not None:
            self.writer.accruals(rows)
        for r, accrued in over:
            text = (f"trial {r.trial_id} of sweep {self.sweep_id} has accrued ${accrued:.4f}, past its estimate "
                    f"${r.est_cost_usd:.4f} ({r.est_basis}); it is still running")
            if self.log is not None:
                self.log.warning("%s", text)
            with contextlib.suppress(Exception):
                from gpuledger.runtime.alerts import send

                send("over_estimate", f"{self.sweep_id}:{r.trial_id}:{r.launch_no}", text,
                     {"sweep_id": self.sweep_id, "trial_id": r.trial_id, "accrued_usd": round(accrued, 6),
                      "estimate_usd": r.est_cost_usd, "estimate_basis": r.est_basis})
        if only is None and self.stop_reason is None:
            self._check_envelopes()

    def _check_envelopes(self) -> None:
        """Sets `stop_reason` when an envelope the sweep reserved in would be crossed before the next look."""
        from gpuledger.warehouse import Warehouse, WarehouseBusy

        try:
            with Warehouse.open(migrate=False, lock_timeout_s=2.0) as wh:
                holds = wh.budget_holds(self.sweep_id)
                uses = [(h, wh.budget_window_use(h["budget"], h["window_start"])) for h in holds]
        except WarehouseBusy:
            return
        next_usd = self.usd_per_hour() * self.interval_s / 3600.0
        for h, use in uses:
            limit = use["limit_usd"]
            if limit is None:
                continue
            if use["used_usd"] + next_usd > limit + EPSILON_USD:
                self.stop_reason = (
                    f"{ENVELOPE_STOP}: envelope {h['budget']} has ${use['used_usd']:.4f} used (spent "
                    f"${use['spent_usd']:.4f}, accrued ${use['accrued_usd']:.4f} by running trials) of "
                    f"${limit:.2f}; the next {self.interval_s:.0f} s of the running trials (${next_usd:.4f}) would "
                    "cross it: no more launches, running trials stopped")
                if self.log is not None:
                    self.log.error("Sweep %s: %s", self.sweep_id, self.stop_reason)
                return


def accrue_interval_s() -> float:
    """How often running trials' accrued spend is written (setting `money.accrue_interval_s`)."""
    from gpuledger import settings

    return max(0.2, float(settings.current().get("money.accrue_interval_s") or 60.0))


def alert_failures(sweep_id: str, summary: Any) -> None:
    """Alerts of a run's end (`[[alerts]]`, gpuledger/runtime/alerts.py): `idle` for its GPU runs never seen
    busy, `failed` once for a run with failed trials."""
    failed = summary.failed + summary.launcher_errors
    from gpuledger import vocabulary

    with contextlib.suppress(Exception):
        from gpuledger.runtime.alerts import alert_idle_gpus

        alert_idle_gpus(sweep_id)
    if not failed and summary.status != vocabulary.SWEEP_FAILED:
        return
    with contextlib.suppress(Exception):
        from gpuledger.runtime.alerts import send

        send("failed", f"{sweep_id}:{summary.status}:{failed}",
             f"sweep {sweep_id} ended {summary.status}: {failed} trial(s) failed of {summary.launched} launched; "
             + "; ".join(summary.failures[:5]),
             {"sweep_id": sweep_id, "status": summary.status, "failed": failed, "launched": summary.launched,
              "spent_usd": round(summary.spent_usd, 6)})
