"""Team money at run time: a launch reserves against its envelopes, a sweep's running trials accrue,
what is left is released at the end (docs/budgets.md).

    decision = reserve(sweep_id, "lora-grid", plan.to_json(), spender_for(spec))   # refuses: BudgetExceeded
    ... run ...                                                                      # runs commit (ingest)
    release(sweep_id, "sweep ended succeeded")

The envelopes come from `gpuledger.runtime.envelopes`; the money from the warehouse's `budget_ledger`
(`gpuledger.warehouse.budget_ledger`). The check of every envelope and the reservation rows (and,
for an agent, its launch record: `also`) are ONE transaction under the warehouse's money lock, so
two launches (threads, processes, servers) can never both take the last dollar.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from gpuledger.errors import BudgetExceeded
from gpuledger.runtime.envelopes import (
    Decision,
    Envelope,
    EnvelopeUse,
    Spender,
    current_envelopes,
    decide,
    now_utc,
    plan_reservation_usd,
)


def _uses(wh: Any, envelopes: Sequence[Envelope], at: Any) -> list[EnvelopeUse]:
    uses = []
    for env in envelopes:
        start, end = env.bounds(at)
        u = wh.budget_window_use(env.name, start)
        uses.append(EnvelopeUse(env, start, end, spent_usd=u["spent_usd"], reserved_usd=u["reserved_usd"],
                                accrued_usd=u["accrued_usd"], used_usd=u["used_usd"]))
    return uses


def applying(spender: Spender, envelopes: Sequence[Envelope] | None = None) -> list[Envelope]:
    """The envelopes a launch by `spender` falls under (of the settings in force unless given)."""
    return [e for e in (current_envelopes() if envelopes is None else envelopes) if e.applies(spender)]


def check(plan_json: dict[str, Any], spender: Spender, *, envelopes: Sequence[Envelope] | None = None,
          what: str = "this sweep") -> Decision:
    """Returns the decision a reservation of this plan would meet, writing nothing (a dry run, `plan`)."""
    from gpuledger.settings import warehouse_if_any
    from gpuledger.warehouse import Warehouse

    usd, basis = plan_reservation_usd(plan_json)
    envs = applying(spender, envelopes)
    target = warehouse_if_any()
    if not envs or target is None:
        return decide(usd, basis, [EnvelopeUse(e, *e.bounds(now_utc())) for e in envs])
    with Warehouse.open(target, read_only=True) as wh:
        return decide(usd, basis, _uses(wh, envs, now_utc()))


def reserve(sweep_id: str, what: str, plan_json: dict[str, Any], spender: Spender, *,
            envelopes: Sequence[Envelope] | None = None, plan_usd: float | None = None, basis: str | None = None,
            also: Callable[[Any], None] | None = None, note: str | None = None) -> Decision:
    """Reserves the plan's spend (`plan_reservation_usd`, or `plan_usd`) in every envelope the launch falls
    under, in one transaction with `also(wh)`. Raises `BudgetExceeded` (exit 3), naming the envelope,
    spent, reserved, this plan and what would fit, when it would cross any: nothing is written then.
    Returns the decision (its `needs_approval`: past a soft threshold; the money is held meanwhile)."""
    from gpuledger.settings import resolve_path
    from gpuledger.warehouse import Warehouse, reserve_lock

    usd, why = plan_reservation_usd(plan_json)
    if plan_usd is not None:
        usd, why = float(plan_usd), basis or "planned"
    envs = applying(spender, envelopes)
    if not envs and also is None:
        return decide(usd, why, [])
    with reserve_lock(resolve_path()), Warehouse.open() as wh, wh.transaction():
        at = now_utc()
        decision = decide(usd, why, _uses(wh, envs, at))
        if decision.refused:
            raise BudgetExceeded(decision.refusal(what))
        for u in decision.uses:
            wh.upsert_budget_envelope(u.envelope.to_json())
            wh.add_budget_entry(budget=u.envelope.name, window_start=u.window_start, window_end=u.window_end,
                                kind="reserve", sweep_id=sweep_id, reserved_usd=usd, owner=spender.owner,
                                owner_claimed=spender.owner_claimed, project=spender.project,
                                launched_by=spender.launched_by, note=note or f"{what}: {why}")
        if also is not None:
            also(wh)
    return decision


def release(sweep_id: str, note: str) -> float:
    """Releases what the sweep still holds in every envelope (it ended, or was refused); returns the
    dollars released. A busy or missing warehouse releases nothing (the next release does)."""
    from gpuledger.settings import warehouse_if_any
    from gpuledger.warehouse import Warehouse

    target = warehouse_if_any()
    if target is None:
        return 0.0
    with Warehouse.open(target) as wh, wh.transaction():
        wh.stop_accruals(sweep_id)
        return wh.release_budget(sweep_id, note)


def envelope_rows() -> list[dict[str, Any]]:
    """Every envelope of the settings in force with its current window's money (for status, metrics)."""
    from gpuledger.settings import warehouse_if_any
    from gpuledger.warehouse import Warehouse

    envs = current_envelopes()
    if not envs:
        return []
    target = warehouse_if_any()
    at = now_utc()
    if target is None:
        return [EnvelopeUse(e, *e.bounds(at)).to_json() for e in envs]
    with Warehouse.open(target, read_only=True) as wh:
        return [u.to_json() for u in _uses(wh, envs, at)]
