"""A running sweep's live status, for `gpuledger status` while the sweep's process holds the warehouse.

DuckDB lets no other process open a file that one process writes, so while a sweep runs its warehouse
cannot be read by `gpuledger status`. The run therefore keeps `live/SWEEP_ID.json` beside the landing
folders (`gpuledger.settings.Settings.landing_dir`'s parent), written atomically at each launch and
each stored result, removed when the run ends (readers accrue the running trials to their own now):

    {"sweep_id", "sweep", "name", "state": "running", "pid", "host", "started_at", "updated_at",
     "trials": {state: n}, "spent_usd", "planned_usd", "budget_usd", "max_parallel", "eta_s", "eta_basis",
     "running_since": [{"trial_id", "since_epoch", "usd_per_hour"}]}  (readers accrue to their own now)

`spent_usd`: the stored results' cost plus the running trials' price x elapsed. `eta_s`: the planned
wall-clock of the trials still to run and of the running ones' remainder, scaled by how long the
finished ones took against their plan, over the parallel slots (gpuledger/runtime/sweep_progress.py
computes the same from the warehouse). `live_states()` returns the files whose process still lives.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpuledger.runtime.events import progress_listener


def live_dir() -> Path:
    """Returns the folder of the live status files (`live/` beside the landing folders)."""
    from gpuledger import settings

    return settings.current().landing_dir.parent / "live"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class LiveStatus:
    """The live status of one run of a sweep, fed by the runtime's progress events."""

    def __init__(self, run: Any) -> None:
        self.run = run
        self.path = live_dir() / f"{run.sweep_id}.json"
        self.lock = threading.Lock()
        self.started_at = _now()
        self.total = len(run.trials)
        self.done_before = 0
        self.started: dict[str, float] = {}  # trial_id -> monotonic launch time (running now)
        self.ended: dict[str, str] = {}  # trial_id -> status
        self.measured: list[tuple[float, float]] = []  # (measured s, planned s) of finished trials
        self.skipped = 0
        self.spent_usd = 0.0
        self.written = 0.0

    def __call__(self, event: dict[str, Any]) -> None:
        kind = event.get("kind")
        if event.get("sweep_id") not in (None, self.run.sweep_id):
            return
        with self.lock:
            if kind == "planned":
                self.total, self.done_before = int(event["total"]), int(event["done_before"])
            elif kind == "launched":
                self.started[event["trial_id"]] = time.monotonic()
            elif kind == "result":
                tid = event["trial_id"]
                began = self.started.pop(tid, None)
                row = self.run.rows.get(tid)
                if began is not None and row is not None and row.est_wall_s:
                    self.measured.append((time.monotonic() - began, float(row.est_wall_s)))
                self.ended[tid] = str(event["status"])
                self.spent_usd = float(event.get("spent_usd") or self.spent_usd)
            elif kind == "skipped-budget":
                self.skipped += len(event.get("trial_ids") or [])
            else:
                return
        # every event is written: a launch skipped by a throttle stayed unseen until the trial's result
        # (nothing else rewrites the file), so `status` showed no running trial and $0 accrued meanwhile
        self.write()

    def snapshot(self) -> dict[str, Any]:
        """Returns the live status now (see the module docstring)."""
        with self.lock:
            now = time.monotonic()
            counts: dict[str, int] = {}
            for status in self.ended.values():
                counts[status] = counts.get(status, 0) + 1
            if self.done_before:
                counts["succeeded"] = counts.get("succeeded", 0) + self.done_before
            if self.started:
                counts["running"] = len(self.started)
            if self.skipped:
                counts["skipped-budget"] = self.skipped
            pending = max(0, self.total - sum(counts.values()))
            if pending:
                counts["pending"] = pending
            rows = self.run.rows
            rates = {t: float(getattr(rows.get(t), "usd_per_hour", None) or 0.0) for t in self.started}
            accrued = sum(rates[t] * (now - t0) / 3600.0 for t, t0 in self.started.items())
            ratio, basis = 1.0, "the plan's wall-clock estimates (no trial finished yet)"
            if self.measured and sum(p for _, p in self.measured) > 0:
                ratio = sum(m for m, _ in self.measured) / sum(p for _, p in self.measured)
                basis = (f"the plan's wall-clock x {ratio:.2f} (the measured / planned wall-clock of "
                         f"{len(self.measured)} finished trial(s))")
            left_running = sum(max(0.0, float(getattr(rows.get(t), "est_wall_s", None) or 0.0) * ratio - (now - t0))
                               for t, t0 in self.started.items())
            seen = set(self.started) | set(self.ended)
            todo = [r for tid, r in rows.items() if tid not in seen and r.feasible][:pending]
            left_pending = sum(float(r.est_wall_s or 0.0) for r in todo) * ratio
            slots = max(1, int(self.run.cap or 1))
            eta = (left_running + left_pending) / slots
            if self.started:
                eta = max(eta, left_running / len(self.started))
            plan_total = getattr(self.run.plan, "total_est_cost_usd", None)
            sp = self.run.spec
            return {"sweep_id": self.run.sweep_id, "sweep": sp.name, "name": sp.name, "state": "running",
                    "status": "running", "pid": os.getpid(), "host": socket.gethostname(),
                    "started_at": self.started_at, "updated_at": _now(), "trials": counts,
                    "spent_usd": round(self.spent_usd + accrued, 6), "accrued_usd": round(self.spent_usd + accrued, 6),
                    "planned_usd": None if plan_total is None else round(float(plan_total), 6),
                    "budget_usd": float(sp.budget.max_usd), "max_parallel": slots,
                    "running_trials": len(self.started), "eta_s": round(eta, 1), "eta_basis": basis, "live": True,
                    "measured_usd": round(self.spent_usd, 6), "running_accrued_usd": round(accrued, 6),
                    "usd_per_hour": round(sum(rates.values()), 6), "over_estimate_trials": 0,
                    "awaiting_approval": None,
                    # what a reader needs to accrue the running trials up to its own now (`live_states`)
                    "running_since": [{"trial_id": t, "since_epoch": time.time() - (now - t0), "usd_per_hour": rates[t]}
                                      for t, t0 in self.started.items()]}

    def write(self, force: bool = True) -> None:
        """Writes the snapshot atomically (best effort: a full disk never stops a sweep)."""
        if not force:
            return
        with contextlib.suppress(OSError, ValueError):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(self.snapshot(), default=str), encoding="utf-8")
            os.replace(tmp, self.path)
            self.written = time.monotonic()

    def remove(self) -> None:
        with contextlib.suppress(OSError):
            self.path.unlink()


@contextlib.contextmanager
def live_status(run: Any) -> Iterator[LiveStatus]:
    """Keeps the live status file of `run` while the body runs it (see the module docstring)."""
    live = LiveStatus(run)
    live.write()
    try:
        with progress_listener(live):
            yield live
    finally:
        live.remove()


def live_states(sweep: str | None = None) -> list[dict[str, Any]]:
    """Returns the live statuses of the sweeps running now (their process alive on this host), newest
    first; `sweep`: only the one with that id or name."""
    from gpuledger.launch.procs import pid_alive

    folder = live_dir()
    out = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict) or (data.get("host") == socket.gethostname() and not pid_alive(data.get("pid"))):
            continue
        if sweep is None or sweep in (data.get("sweep_id"), data.get("name")):
            out.append(_accrued_to_now(data))
    return sorted(out, key=lambda d: str(d.get("started_at") or ""), reverse=True)


def _accrued_to_now(data: dict[str, Any]) -> dict[str, Any]:
    """The live status with its running trials' spend accrued up to now (price x elapsed since each
    launched): the file is written at launches and results, a reader asks in between."""
    running = data.get("running_since")
    if not isinstance(running, list):
        return data
    now = time.time()
    try:
        accrued = sum(max(0.0, now - float(r["since_epoch"])) * float(r["usd_per_hour"]) / 3600.0 for r in running)
        measured = float(data.get("measured_usd") or 0.0)
    except (KeyError, TypeError, ValueError):
        return data
    return {**data, "running_accrued_usd": round(accrued, 6), "accrued_usd": round(measured + accrued, 6),
            "spent_usd": round(measured + accrued, 6)}
