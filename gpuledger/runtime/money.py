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

import hashlib
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
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
    usd,
)

#: what the MCP server tells the sweep process it starts (gpuledger/mcp_server/agent_money.py; a trial never
#: sees GPULEDGER_* variables): its launch, the planned spec's sha256, what it reserved, whether it waits
ENV_LAUNCH_ID = "GPULEDGER_AGENT_LAUNCH_ID"
ENV_SPEC_SHA256 = "GPULEDGER_AGENT_SPEC_SHA256"
ENV_PLANNED_USD = "GPULEDGER_AGENT_PLANNED_USD"
ENV_NEEDS_APPROVAL = "GPULEDGER_AGENT_NEEDS_APPROVAL"
#: a re-plan in the sweep process may cost this much more than what was reserved (rounding of the JSON)
REPRICE_TOLERANCE = 1.001


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
            also: Callable[[Any], None] | None = None, before: Callable[[Any], None] | None = None,
            note: str | None = None) -> Decision:
    """Reserves the plan's spend (`plan_reservation_usd`, or `plan_usd`) in every envelope the launch falls
    under, in one transaction with `before(wh)` (first) and `also(wh)` (last). Raises `BudgetExceeded` (exit 3), naming the envelope,
    spent, reserved, this plan and what would fit, when it would cross any: nothing is written then.
    Returns the decision (its `needs_approval`: past a soft threshold; the money is held meanwhile)."""
    from gpuledger.settings import resolve_path
    from gpuledger.warehouse import Warehouse, reserve_lock

    usd, why = plan_reservation_usd(plan_json)
    if plan_usd is not None:
        usd, why = float(plan_usd), basis or "planned"
    envs = applying(spender, envelopes)
    if not envs and also is None and before is None:
        return decide(usd, why, [])
    with reserve_lock(resolve_path()), Warehouse.open() as wh, wh.transaction():
        if before is not None:  # a check of the caller's own, in the same transaction (the agent budget's)
            before(wh)
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


def release_unstarted(sweep_id: str, reserved_usd: float, error: BaseException | None, note: str) -> float:
    """A launch that did not start gives back what it reserved; returns the dollars released. When it did
    not start because another live run of the same sweep holds its lease (`SweepBusy`), only this launch's
    reservation (`reserved_usd`) goes back, in the envelope windows of now (those this launch reserved
    in; a hold of an earlier window is the running run's): the rest of the sweep's hold and its running
    trials' accruals are that run's. Otherwise everything the sweep holds goes back (a run that was killed
    left its hold behind). A busy or missing warehouse releases nothing."""
    from gpuledger.settings import warehouse_if_any
    from gpuledger.warehouse import Warehouse
    from gpuledger.warehouse.lease import SweepBusy

    if not isinstance(error, SweepBusy):
        return release(sweep_id, note)
    target = warehouse_if_any()
    if target is None or reserved_usd <= 0:
        return 0.0
    with Warehouse.open(target) as wh, wh.transaction():
        return wh.release_budget(sweep_id, note, at_most_usd=reserved_usd, within=now_utc())


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


def adopted(spec_path: str | Path, plan_json: dict[str, Any], environ: Mapping[str, str] | None = None) -> bool | None:
    """In a sweep process the MCP server started: checks that the spec is the planned bytes and the plan
    costs no more than the server reserved; returns whether it waits for approval (None: not an agent
    launch, the flow reserves itself). Raises BudgetExceeded (exit 3) otherwise."""
    env = os.environ if environ is None else environ
    launch_id = env.get(ENV_LAUNCH_ID)
    if not launch_id:
        return None
    expected = env.get(ENV_SPEC_SHA256, "")
    actual = hashlib.sha256(Path(spec_path).read_bytes()).hexdigest()
    if actual != expected:
        raise BudgetExceeded(f"refused: {spec_path} is not the spec the agent's plan priced (sha256 {actual[:12]}, "
                             f"planned {expected[:12]}); nothing launched. Plan it again")
    planned = float(env.get(ENV_PLANNED_USD) or 0.0)
    now_usd, basis = plan_reservation_usd(plan_json)
    if now_usd > planned * REPRICE_TOLERANCE + 1e-9:
        raise BudgetExceeded(f"refused: re-priced at {usd(now_usd)} ({basis}), more than the {usd(planned)} the agent "
                             f"budget reserved for launch {launch_id}; nothing launched. Plan it again")
    return env.get(ENV_NEEDS_APPROVAL) == "1"
