"""What each sweep is doing now and what it has cost so far: `gpuledger status`, the metrics, the MCP status.

    sweep_states(sweep=None) -> [{"sweep_id", "name", "sweep", "state", "status", "started_at", "ended_at",
                                  "runs", "accrued_usd", "spent_usd",
                                  "measured_usd", "running_accrued_usd", "running_trials", "usd_per_hour",
                                  "over_estimate_trials", "awaiting_approval": {...} | None, "trials": {state: n},
                                  "planned_usd", "eta_s", "eta_basis", ...}]

`state`: `awaiting_approval` (the flow paused past an envelope's soft threshold, with who must approve),
else the sweep's status (`running`, `planned`, `succeeded`, `budget-stopped`, ...). `accrued_usd` is
the spend so far: the measured cost of its stored runs plus what its running trials have accrued
(price x elapsed: written every `money.accrue_interval_s`, and read up to now from the last write, at
most 180 s past it; docs/budgets.md); `spent_usd` the same number, final once the sweep ended (`finished`:
its status is one a sweep ends with and no trial accrues: `gpuledger status` then states the final numbers,
not "so far"); `runs` its stored runs, `ended_at` when it ended. `trials`, `planned_usd` (the plan's
total), `eta_s` and `eta_basis` (running sweeps only): gpuledger/runtime/sweep_progress.py.
"""

from __future__ import annotations

from typing import Any

#: the state of a sweep waiting for a person's approval
AWAITING_APPROVAL = "awaiting_approval"


def _iso(value: Any) -> Any:
    return value.isoformat() if hasattr(value, "isoformat") else value


def sweep_states(sweep: str | None = None, *, limit: int = 20) -> list[dict[str, Any]]:
    """Returns the sweeps (one by id or name, else the latest `limit`), waiting ones first; [] without a warehouse."""
    from gpuledger.runtime.live import live_states
    from gpuledger.settings import warehouse_if_any
    from gpuledger.warehouse import Warehouse, WarehouseBusy

    live = live_states(sweep)  # sweeps running now: their process holds the warehouse (gpuledger/runtime/live.py)
    target = warehouse_if_any()
    if target is None:
        return live[:limit]
    from gpuledger.runtime.envelopes import now_utc
    from gpuledger.runtime.sweep_progress import progress

    try:
        with Warehouse.open(target, read_only=True, lock_timeout_s=1.0 if live else None) as wh:
            rows = wh.query_named("sweeps_accrued", {"sweep": sweep, "now": now_utc()}).to_dicts()[:limit]
            waiting = wh.awaiting_approvals(sweep)
            done = progress(wh, [r["sweep_id"] for r in rows], {r["sweep_id"]: r["status"] for r in rows})
    except WarehouseBusy:
        if not live:
            raise
        return live[:limit]  # what runs now; the rest once the running sweep lets the warehouse go
    out: list[dict[str, Any]] = []
    by_id = {r["sweep_id"]: r for r in rows}
    for w in waiting:  # a waiting sweep is not registered yet: it has launched nothing
        row = by_id.pop(w["sweep_id"], None) or {"sweep_id": w["sweep_id"], "name": w["sweep_name"], "status": None,
                                                   "started_at": None, "budget_usd": None, "measured_usd": 0.0,
                                                   "running_accrued_usd": 0.0, "running_trials": 0,
                                                   "usd_per_hour": 0.0, "over_estimate_trials": 0}
        approvers = list(w.get("approvers") or [])
        out.append(_state(row, AWAITING_APPROVAL, {
            "budget": w["budget"], "reason": w["reason"], "reserved_usd": w["reserved_usd"],
            "requested_at": _iso(w["requested_at"]), "owner": w["owner"], "flow_run_id": w["flow_run_id"],
            "approvers": approvers,
            "who": ", ".join(approvers) if approvers else "anyone who can run `gpuledger approve` in this project",
            "approve": f"gpuledger approve {w['sweep_name']}", "reject": f"gpuledger reject {w['sweep_name']}"}))
    out += [_state(r, r["status"] or "unknown", None) for r in rows if r["sweep_id"] in by_id]
    for s in out:  # gpuledger/runtime/sweep_progress.py: trials by state, the plan's total, the ETA
        s.update({"trials": {}, "planned_usd": None, "eta_s": None, "eta_basis": None}, **done.get(s["sweep_id"], {}))
    by_live = {d["sweep_id"]: d for d in live}
    out = [({**s, **by_live.pop(s["sweep_id"])} if s["sweep_id"] in by_live and s["state"] != AWAITING_APPROVAL
            else s) for s in out]  # a running sweep's own process knows its trials and spend best
    return list(by_live.values()) + out


def finished(s: dict[str, Any]) -> bool:
    """True when sweep state `s` (of `sweep_states`) has ended and none of its trials still accrues: its spend is final."""
    from gpuledger.vocabulary import SWEEP_PLANNED, SWEEP_RUNNING, SWEEP_STATUSES

    return (s["state"] in SWEEP_STATUSES and s["state"] not in (SWEEP_PLANNED, SWEEP_RUNNING)
            and not s["running_trials"])


def _state(row: dict[str, Any], state: str, waiting: dict[str, Any] | None) -> dict[str, Any]:
    measured = float(row.get("measured_usd") or 0.0)
    running = float(row.get("running_accrued_usd") or 0.0)
    return {"sweep_id": row["sweep_id"], "name": row["name"], "sweep": row["name"], "state": state,
            "status": row.get("status"),
            "started_at": _iso(row.get("started_at")), "ended_at": _iso(row.get("ended_at")),
            "runs": int(row.get("runs") or 0), "budget_usd": row.get("budget_usd"),
            "accrued_usd": round(measured + running, 6), "spent_usd": round(measured + running, 6),
            "measured_usd": round(measured, 6),
            "running_accrued_usd": round(running, 6), "running_trials": int(row.get("running_trials") or 0),
            "usd_per_hour": round(float(row.get("usd_per_hour") or 0.0), 6),
            "over_estimate_trials": int(row.get("over_estimate_trials") or 0), "awaiting_approval": waiting}
