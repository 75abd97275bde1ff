"""Team money in the warehouse (migration 041; docs/budgets.md): the envelopes' ledger (`budget_ledger`,
view `v_budgets`), approvals of launches past a soft threshold, running trials' accrued spend and
the alerts sent. Plain values in and out; the rules live in `gpuledger.runtime.envelopes` and
`gpuledger.runtime.money`.

Reserving is the one movement that must not race: `reserve_lock(path)` is a lock file beside the
warehouse file (fcntl, across processes) and a lock of this process (across threads), held around
the read of the envelopes' use and the write of the reservation (and, for an agent, the launch
record) in ONE transaction.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from gpuledger.warehouse.connect import now

_process_lock = threading.Lock()


@contextlib.contextmanager
def reserve_lock(warehouse_path: str | os.PathLike[str]) -> Iterator[None]:
    """Holds the money lock of the warehouse `warehouse_path` (this process's threads and every other
    process on this machine): the check of an envelope and the reservation happen under it."""
    target = Path(warehouse_path)
    lock_file = target.with_name(target.name + ".money.lock")
    with _process_lock:
        lock_file.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


class BudgetLedgerMixin:
    """`Warehouse` methods for envelopes, approvals, accruals and alerts."""

    _require_writer: Any
    _run: Any
    query_named: Any

    # -- envelopes and the ledger ---------------------------------------------------------------
    def upsert_budget_envelope(self, envelope: dict[str, Any]) -> None:
        """Stores an envelope as configured now (name, scope, window, limit_usd, soft_usd, approvers)."""
        self._require_writer("upsert_budget_envelope")
        self._run("budget_envelope_upsert", {
            "budget": envelope["name"], "scope": envelope["scope"], "window": envelope["window"],
            "limit_usd": float(envelope["limit_usd"]), "soft_usd": envelope.get("soft_usd"),
            "approvers": json.dumps(list(envelope.get("approvers") or [])), "updated_at": now()})

    def budget_window_use(self, budget: str, window_start: datetime) -> dict[str, float]:
        """Returns spent_usd, reserved_usd, accrued_usd, used_usd of one envelope window (zeros when empty)
        and limit_usd (the limit last stored; None when nothing counted there yet)."""
        df = self.query_named("budget_window_use", {"budget": budget, "window_start": window_start})
        if df.is_empty():
            return {"spent_usd": 0.0, "reserved_usd": 0.0, "accrued_usd": 0.0, "used_usd": 0.0, "limit_usd": None}
        row = df.row(0, named=True)
        out: dict[str, Any] = {k: float(row[k] or 0.0) for k in ("spent_usd", "reserved_usd", "accrued_usd", "used_usd")}
        out["limit_usd"] = None if row["limit_usd"] is None else float(row["limit_usd"])
        return out

    def add_budget_entry(self, *, budget: str, window_start: datetime, window_end: datetime, kind: str,
                         sweep_id: str, reserved_usd: float = 0.0, spent_usd: float = 0.0, run_id: str | None = None,
                         owner: str | None = None, owner_claimed: str | None = None, project: str | None = None,
                         launched_by: str | None = None, note: str | None = None,
                         entry_id: str | None = None) -> str:
        """Writes one movement of money (an entry id already written is not written again); returns its id."""
        self._require_writer("add_budget_entry")
        entry = entry_id or f"{kind}:{uuid.uuid4().hex}"
        self._run("budget_entry_insert", {
            "entry_id": entry, "recorded_at": now(), "budget": budget, "window_start": window_start, "window_end": window_end,
            "kind": kind, "sweep_id": sweep_id, "run_id": run_id, "reserved_usd": float(reserved_usd),
            "spent_usd": float(spent_usd), "owner": owner, "owner_claimed": owner_claimed, "project": project,
            "launched_by": launched_by, "note": (note or "")[:2000] or None})
        return entry

    def budget_holds(self, sweep_id: str) -> list[dict[str, Any]]:
        """Returns each envelope window the sweep reserved in, with what it still holds (held_usd)."""
        return self.query_named("budget_sweep_holds", {"sweep_id": sweep_id}).to_dicts()

    def commit_budget_runs(self, sweep_id: str, runs: list[tuple[str, float]]) -> int:
        """Commits each stored run's measured cost ((run_id, cost_usd)) to every envelope window the sweep
        reserved in: spent + cost, held - min(cost, what is held). Idempotent per run. Returns rows written."""
        holds = self.budget_holds(sweep_id)
        written = 0
        for h in holds:
            held = float(h["held_usd"] or 0.0)
            for run_id, cost in runs:
                cost = max(0.0, float(cost or 0.0))
                take = min(cost, held)
                held -= take
                self.add_budget_entry(
                    budget=h["budget"], window_start=h["window_start"], window_end=h["window_end"], kind="commit",
                    sweep_id=sweep_id, run_id=run_id, reserved_usd=-take, spent_usd=cost, owner=h["owner"],
                    owner_claimed=h["owner_claimed"], project=h["project"], launched_by=h["launched_by"],
                    entry_id=f"commit:{h['budget']}:{h['window_start'].isoformat()}:{run_id}")
                written += 1
        return written

    def release_budget(self, sweep_id: str, note: str, at_most_usd: float | None = None,
                       within: datetime | None = None) -> float:
        """Releases what the sweep still holds in every envelope window (at most `at_most_usd` in each: one
        launch's reservation; only in the windows that hold the time `within`, naive UTC, when given: those
        a launch reserving at that time reserved in); returns the dollars released."""
        released = 0.0
        for h in self.budget_holds(sweep_id):
            if within is not None and not h["window_start"] <= within < h["window_end"]:
                continue  # an earlier (or later) window: what is held there is another launch's
            held = float(h["held_usd"] or 0.0)
            if at_most_usd is not None:
                held = min(held, max(0.0, float(at_most_usd)))
            if held <= 1e-12:
                continue
            self.add_budget_entry(
                budget=h["budget"], window_start=h["window_start"], window_end=h["window_end"], kind="release",
                sweep_id=sweep_id, reserved_usd=-held, owner=h["owner"], owner_claimed=h["owner_claimed"],
                project=h["project"], launched_by=h["launched_by"], note=note)
            released += held
        return released

    def reconcile_budget_with_bill(self) -> int:
        """Adds a reconcile row wherever a run's committed cost differs from its billed effective cost
        (after a FOCUS bill is ingested); returns the rows written."""
        rows = self.query_named("budget_runs_to_reconcile").to_dicts()
        for r in rows:
            self.add_budget_entry(
                budget=r["budget"], window_start=r["window_start"], window_end=r["window_end"], kind="reconcile",
                sweep_id=r["sweep_id"], run_id=r["run_id"], spent_usd=float(r["delta_usd"]), owner=r["owner"],
                owner_claimed=r["owner_claimed"], project=r["project"], launched_by=r["launched_by"],
                note=f"billed effective ${float(r['effective_usd']):.4f}, committed ${float(r['spent_usd']):.4f}")
        return len(rows)

    # -- approvals ------------------------------------------------------------------------------
    def request_approval(self, *, sweep_id: str, sweep_name: str, budget: str, approvers: list[str],
                         reserved_usd: float, reason: str, flow_run_id: str | None, api_url: str | None,
                         owner: str | None) -> str:
        """Records that a launch waits for approval; returns the approval id."""
        self._require_writer("request_approval")
        approval_id = uuid.uuid4().hex
        self._run("budget_approval_insert", {
            "approval_id": approval_id, "sweep_id": sweep_id, "sweep_name": sweep_name, "budget": budget,
            "approvers": json.dumps(approvers), "reserved_usd": float(reserved_usd), "reason": reason[:2000],
            "flow_run_id": flow_run_id, "api_url": api_url, "owner": owner, "requested_at": now()})
        return approval_id

    def decide_approval(self, approval_id: str, state: str, decided_by: str | None) -> None:
        self._require_writer("decide_approval")
        self._run("budget_approval_decide", {"approval_id": approval_id, "state": state, "decided_by": decided_by,
                                             "decided_at": now()})

    def awaiting_approvals(self, sweep: str | None = None) -> list[dict[str, Any]]:
        """Returns the launches waiting for approval (all, or of one sweep id or name), newest first."""
        rows = self.query_named("budget_approvals_awaiting", {"sweep": sweep}).to_dicts()
        for r in rows:
            r["approvers"] = json.loads(r["approvers"]) if isinstance(r["approvers"], str) else (r["approvers"] or [])
        return rows

    # -- accruals -------------------------------------------------------------------------------
    def write_accruals(self, rows: list[dict[str, Any]]) -> None:
        """Stores running attempts' spend so far (sweep_id, trial_id, launch_no, started_at, usd_per_hour,
        elapsed_s, accrued_usd, est_cost_usd, est_basis, over_estimate, running)."""
        self._require_writer("write_accruals")
        at = now()
        for r in rows:
            self._run("accrual_upsert", {**r, "updated_at": at})

    def stop_accruals(self, sweep_id: str) -> None:
        self._require_writer("stop_accruals")
        self._run("accruals_stop_sweep", {"sweep_id": sweep_id})

    # -- alerts ---------------------------------------------------------------------------------
    def claim_alert(self, *, alert_key: str, kind: str, subject: str, target: str, payload: dict[str, Any]) -> bool:
        """Claims an alert before it is sent; False when it was claimed (sent) before."""
        self._require_writer("claim_alert")
        rows = self._run("alert_claim", {"alert_key": alert_key, "kind": kind, "subject": subject[:500],
                                         "target": target[:500], "sent_at": now(),
                                         "payload": json.dumps(payload, default=str)})
        return bool(rows)

    def alert_done(self, alert_key: str, ok: bool, detail: str) -> None:
        self._require_writer("alert_done")
        self._run("alert_done", {"alert_key": alert_key, "ok": bool(ok), "detail": detail[:1000]})
