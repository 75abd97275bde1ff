"""A fake, deterministic, in-process launcher: fast flow tests and the flow-overhead benchmark.
Not part of gpuledger: `register()` (tests/conftest.py, benchmarks/flow_overhead.py) makes
`gpuledger.launch.get_launcher("fake")` return one, planned as `local`.

    launcher = FakeLauncher(landing_dir=tmp, wall_s=2.0, outcome=lambda req: {"status": "failed"}
                            if req.params["x"] == 0.5 else {})

Nothing runs: `submit` makes the attempt's record at once, from the request alone, so the same
requests always give the same records (run ids, times, metrics, costs), whatever the machine:
- `run_id` = `<trial_id>-a<attempt>-fake`, attempts counted per trial by this launcher;
- times on a virtual clock: attempt n (in submission order) starts at `start + n * wall_s` and
  lasts `wall_s` (simulated seconds; nothing sleeps unless `sleep_s` is given);
- `final_metrics` from `metrics(request)`, by default `eval_loss` = 1 + a stable hash of the
  params in [0, 1) (so a grid has a deterministic best);
- billing: the request's `usd_per_hour` (else `usd_per_hour`) for `wall_s`, from the request's
  price source and description;
- `outcome(request)` may override any record field (`status`, `reason`, `exit_code`, `wall_s`,
  `final_metrics`, ...); `submit_errors` makes the first N `submit` calls raise (a launcher error);
- `curve(request)`: the metric points ({name, value, step, t_s}) the trial reports while it runs, one
  per `poll` (read by `progress`, as the pruner reads a local trial's metrics file, every poll:
  `progress_interval_s` 0), so an adaptive sweep prunes on the same values without a trial process or
  a sleep; the attempt lasts its last point's t_s, and one cancelled (pruned) keeps the points shown.
Records say `launcher: fake` and are written to `landing_dir/<run_id>.json` like the local
launcher's, so the sweep stores them the same way.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from gpuledger import protocol, vocabulary
from gpuledger.launch.base import LaunchRequest, TrialStatus
from gpuledger.record import ResultRecord

#: The virtual clock's default start (fixed: the records do not depend on when a test runs).
DEFAULT_START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def stable_fraction(params: dict[str, Any]) -> float:
    """Returns a number in [0, 1) that depends only on `params` (sha256 of their sorted JSON)."""
    digest = hashlib.sha256(json.dumps(params, sort_keys=True, default=str).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def default_metrics(request: LaunchRequest) -> dict[str, float]:
    return {"eval_loss": round(1.0 + stable_fraction(request.params), 6)}


@dataclass
class FakeHandle:
    request: LaunchRequest
    record: ResultRecord
    ready_at: float  # monotonic time the attempt "ends" (sleep_s after submit)
    cancelled: bool = False
    points: list[dict[str, Any]] = field(default_factory=list)  # `curve`: reported one per poll
    shown: int = 0

    @property
    def ended(self) -> bool:
        return self.shown >= len(self.points) and time.monotonic() >= self.ready_at


class FakeLauncher:
    """See the module docstring. Thread-safe; `close()` cancels what has not ended."""

    name = "fake"
    poll_interval_s = 0.0
    progress_interval_s = 0.0

    def __init__(self, landing_dir: Path | str | None = None, *, wall_s: float = 1.0, usd_per_hour: float = 0.0,
                 start: datetime = DEFAULT_START, sleep_s: float = 0.0,
                 metrics: Callable[[LaunchRequest], dict[str, float]] = default_metrics,
                 outcome: Callable[[LaunchRequest], dict[str, Any]] | None = None, submit_errors: int = 0,
                 write_landing: bool = True, curve: Callable[[LaunchRequest], list[dict[str, Any]]] | None = None,
                 **_ignored: Any) -> None:
        self.landing_dir = Path(landing_dir) if landing_dir is not None else None
        self.wall_s = float(wall_s)
        self.usd_per_hour = float(usd_per_hour)
        self.start = start
        self.sleep_s = float(sleep_s)
        self.metrics = metrics
        self.outcome = outcome
        self.submit_errors = int(submit_errors)
        self.curve = curve
        self.write_landing = write_landing and self.landing_dir is not None
        self.submitted = 0
        self._attempts: dict[str, int] = {}
        self._handles: list[FakeHandle] = []
        self._lock = threading.Lock()

    def __enter__(self) -> FakeLauncher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def submit(self, request: LaunchRequest) -> FakeHandle:
        with self._lock:
            self.submitted += 1
            if self.submit_errors > 0:
                self.submit_errors -= 1
                raise ConnectionError("fake launcher: submit refused (simulated launcher error)")
            attempt = self._attempts.get(request.trial_id, 0) + 1
            self._attempts[request.trial_id] = attempt
            slot = len(self._handles)
            points = [dict(p) for p in self.curve(request)] if self.curve is not None else []
            handle = FakeHandle(request, self._record(request, attempt, slot, points), time.monotonic() + self.sleep_s,
                                points=points)
            self._handles.append(handle)
        return handle

    def poll(self, handle: FakeHandle) -> TrialStatus:
        if handle.cancelled:
            return "cancelled"
        if handle.shown < len(handle.points):
            handle.shown += 1
            return "running"
        if time.monotonic() < handle.ready_at:
            return "running"
        return vocabulary.launch_status_of(handle.record.status)  # type: ignore[return-value]

    def progress(self, handle: FakeHandle, offset: int = 0) -> tuple[list[dict[str, Any]], int]:
        """Returns (the curve's points shown since `offset`, the new offset), like the local launcher's."""
        return handle.points[offset:handle.shown], handle.shown

    def cancel(self, handle: FakeHandle) -> None:
        with self._lock:
            if handle.cancelled or handle.ended:
                return
            handle.cancelled = True
            kept = handle.points[:handle.shown]
            update: dict[str, Any] = {"status": vocabulary.CANCELLED, "reason": "cancelled", "final_metrics": {},
                                      "metrics": kept}
            if handle.points:
                wall_s = float(kept[-1]["t_s"]) if kept else 0.0
                update.update(wall_s=wall_s, ended_at=handle.record.started_at + timedelta(seconds=wall_s))
            data = handle.record.to_json()
            if handle.points:  # billed for the time it ran
                update["billing"] = [{**b, "hours": update["wall_s"] / 3600.0,
                                      "cost_usd": b["usd_per_hour"] * update["wall_s"] / 3600.0} for b in data["billing"]]
            handle.record = ResultRecord.model_validate({**data, **update})

    def collect(self, handle: FakeHandle) -> list[ResultRecord]:
        record = handle.record
        if self.write_landing:
            from gpuledger.files import write_json_atomic

            write_json_atomic(self.landing_dir / f"{record.run_id}.json", record.to_json())
        return [record]

    def close(self) -> None:
        for handle in list(self._handles):
            self.cancel(handle)

    def _record(self, req: LaunchRequest, attempt: int, slot: int, points: list[dict[str, Any]]) -> ResultRecord:
        fields: dict[str, Any] = {"status": vocabulary.SUCCEEDED, "exit_code": 0, "wall_s": self.wall_s,
                                  "final_metrics": self.metrics(req)}
        if points:  # the curve's last value of each metric, at its last point's time
            fields.update(final_metrics={p["name"]: p["value"] for p in points}, wall_s=float(points[-1]["t_s"]))
        if self.outcome is not None:
            fields.update(self.outcome(req) or {})
        if fields["status"] != vocabulary.SUCCEEDED:
            fields.setdefault("reason", f"{fields['status']} (fake outcome)")
            if fields.get("exit_code") == 0:
                fields["exit_code"] = 1
        wall_s = float(fields["wall_s"])
        started = self.start + timedelta(seconds=slot * self.wall_s)
        rate = self.usd_per_hour if req.usd_per_hour is None else float(req.usd_per_hour)
        hours = wall_s / 3600.0
        data = {
            "schema": protocol.SCHEMA, "run_id": f"{req.trial_id}-a{attempt}-fake", "sweep_id": req.sweep_id,
            "trial_id": req.trial_id, "attempt": attempt, "launcher": "fake", "cloud": req.cloud,
            "region": req.region, "instance_type": req.instance_type, "accelerator": req.accelerator,
            "gpus": req.gpus if req.accelerator else 0, "spot": req.spot, "started_at": started,
            "ended_at": started + timedelta(seconds=wall_s), "hostname": "fake", "command": req.run,
            "params": dict(req.params),
            "metrics": points or [{"name": k, "value": v, "step": 1, "t_s": wall_s} for k, v in fields["final_metrics"].items()],
            "billing": [{"source": req.price_source, "description": req.price_description or "fake launcher rate",
                         "usd_per_hour": rate, "hours": hours, "cost_usd": rate * hours, "spot": req.spot,
                         "on_demand_usd_per_hour": req.on_demand_usd_per_hour if req.spot else rate}],
            **fields,
        }
        return ResultRecord.model_validate(data)


def register() -> None:
    """Registers this launcher as `fake` (planned as `local`) with `gpuledger.launch`."""
    from gpuledger.launch import register_launcher

    register_launcher("fake", FakeLauncher, plans_as="local")
