"""Approval of a launch past an envelope's soft threshold: the sweep's flow run pauses until a person decides.

The flow (gpuledger/flows/sweep.py) has reserved the plan's spend (the money is held while it waits),
records the request (table `budget_approvals`: the flow run, the Prefect API it waits on, who must
approve), then pauses with Prefect's `pause_flow_run(wait_for_input=Approval)`: the process keeps
running and polls the server, so it works the same for `gpuledger sweep` (the flow in the CLI's own
process, against the project's server or a temporary one) and for a deployment run by a worker.

    gpuledger approve SWEEP [--note TEXT]     # resumes it: Approval(approve=True, by=OS user)
    gpuledger reject SWEEP [--note TEXT]      # resumes it with approve=False: the flow ends, money released

The Prefect UI's Resume shows the same form (approve, by, note). When the envelope names
`approvers`, `approve`/`reject` refuse anyone else (the OS user, `gpuledger.runtime.envelopes.observed_owner`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from typing import Any

import gpuledger.flows  # noqa: F401  (telemetry off before Prefect is imported)

# isort: split
from prefect.input import RunInput
from prefect.states import Failed, State

from gpuledger.errors import BudgetExceeded, UserError
from gpuledger.runtime.envelopes import observed_owner, usd

#: how often the paused flow asks the server whether it was resumed (seconds)
POLL_INTERVAL_S = 2
#: how long `approve` waits for a flow run that recorded its request but has not paused yet (seconds)
PAUSE_WAIT_S = 60.0


class Approval(RunInput):
    """What resumes a paused sweep (also the Prefect UI's form: tick `approve` to launch). A resume that
    carries no decision is a rejection: nothing is spent without an explicit yes."""

    approve: bool = False
    by: str = ""
    note: str = ""


def await_approval(*, sweep_id: str, sweep_name: str, decision: Any, owner: str, log: Any,
                   timeout_s: float) -> tuple[bool, str]:
    """Records the request, pauses the current flow run until `approve`/`reject` (or the UI) resumes
    it; returns (approved, words for the log and the refusal)."""
    from prefect.context import FlowRunContext
    from prefect.exceptions import FlowPauseTimeout
    from prefect.flow_runs import pause_flow_run
    from prefect.settings import PREFECT_API_URL

    from gpuledger.runtime.events import notify
    from gpuledger.warehouse import Warehouse

    ctx = FlowRunContext.get()
    flow_run_id = str(ctx.flow_run.id) if ctx and ctx.flow_run else None
    api_url = PREFECT_API_URL.value()
    env = decision.soft[0].envelope
    reason = decision.approval_words()
    with Warehouse.open() as wh:
        approval_id = wh.request_approval(sweep_id=sweep_id, sweep_name=sweep_name, budget=env.name,
                                          approvers=decision.approvers(), reserved_usd=decision.plan_usd,
                                          reason=reason, flow_run_id=flow_run_id, api_url=api_url, owner=owner)
    how = f"`gpuledger approve {sweep_name}` (or reject), or Resume in the Prefect UI (flow run {flow_run_id})"
    log.warning("Sweep %s waits for approval: %s. Approve with %s.", sweep_id, reason, how)
    notify("awaiting_approval", sweep_id=sweep_id, sweep_name=sweep_name, reason=reason, how=how,
           approvers=decision.approvers(), flow_run_id=flow_run_id)
    try:
        answer = pause_flow_run(wait_for_input=Approval, timeout=max(1, int(timeout_s)), poll_interval=POLL_INTERVAL_S,
                                key=f"approval-{approval_id}")
    except FlowPauseTimeout:
        _decide(approval_id, "expired", None)
        return False, f"no approval within {timeout_s:.0f} s (money.approval_timeout_s): {reason}"
    except BaseException:  # the process stopped waiting (Ctrl-C, a termination signal): nobody can decide any more
        _decide(approval_id, "expired", None)
        raise
    approved = bool(getattr(answer, "approve", False))
    by = (getattr(answer, "by", "") or "the Prefect UI").strip()[:100]
    note = (getattr(answer, "note", "") or "").strip()[:500]
    _decide(approval_id, "approved" if approved else "rejected", by)
    notify("approval_decided", sweep_id=sweep_id, approved=approved, by=by)
    words = f"{'approved' if approved else 'rejected'} by {by}" + (f" ({note})" if note else "")
    log.info("Sweep %s %s", sweep_id, words)
    return approved, words


def _decide(approval_id: str, state: str, by: str | None) -> None:
    from gpuledger.warehouse import Warehouse

    with contextlib.suppress(Exception), Warehouse.open() as wh:  # the flow's outcome says it too
        wh.decide_approval(approval_id, state, by)


def resume(sweep: str, *, approve: bool, note: str = "") -> dict[str, Any]:
    """`gpuledger approve|reject SWEEP`: resumes the sweep's paused flow run with the decision; returns
    what was decided. UserError when nothing of that name or id waits, or this user may not decide."""
    from gpuledger.warehouse import Warehouse

    with Warehouse.open(read_only=True) as wh:
        waiting = wh.awaiting_approvals(sweep)
    if not waiting:
        raise UserError(f"no sweep {sweep!r} is waiting for approval (`gpuledger status` lists the waiting ones)")
    row = waiting[0]
    user, _source = observed_owner()
    approvers = list(row.get("approvers") or [])
    if approvers and user not in approvers:
        raise UserError(f"sweep {row['sweep_id']} must be approved by {', '.join(approvers)} (envelope "
                        f"{row['budget']}); you are {user}")
    if not row.get("flow_run_id") or not row.get("api_url"):
        raise UserError(f"sweep {row['sweep_id']} waits without a Prefect flow run to resume; it cannot be approved")
    run_input = {"approve": bool(approve), "by": user, "note": note[:500]}
    _resume(row["api_url"], row["flow_run_id"], run_input)
    return {"sweep_id": row["sweep_id"], "sweep_name": row["sweep_name"], "budget": row["budget"],
            "approved": bool(approve), "by": user, "flow_run_id": row["flow_run_id"], "reserved_usd": row["reserved_usd"]}


def _flow_run_final(flow_run_id: str) -> bool:
    """Whether the flow run has ended (completed, failed, cancelled, crashed)."""
    from uuid import UUID

    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        state = client.read_flow_run(UUID(flow_run_id)).state
    return bool(state is not None and state.is_final())


def _resume(api_url: str, flow_run_id: str, run_input: dict[str, Any]) -> None:
    import time
    from uuid import UUID

    from prefect.exceptions import FlowPauseTimeout, NotPausedError
    from prefect.flow_runs import resume_flow_run
    from prefect.settings import PREFECT_API_URL, temporary_settings

    saved = os.environ.get("PREFECT_API_URL")
    os.environ["PREFECT_API_URL"] = api_url
    try:
        with temporary_settings({PREFECT_API_URL: api_url}):
            deadline = time.monotonic() + PAUSE_WAIT_S
            while True:
                try:
                    resume_flow_run(UUID(flow_run_id), run_input=run_input)
                    break
                except NotPausedError:
                    # the request is recorded just before the flow run proposes its Paused state: a decision
                    # that quick waits for the pause; a run that ended is told as such
                    if _flow_run_final(flow_run_id) or time.monotonic() > deadline:
                        raise
                    time.sleep(1.0)
    except NotPausedError:
        raise UserError(f"flow run {flow_run_id} is not paused any more (approved, rejected or timed out "
                        "already)") from None
    except FlowPauseTimeout:
        raise UserError(f"flow run {flow_run_id} waited too long and can no longer be resumed") from None
    except Exception as err:  # noqa: BLE001 - a server that went away: one line
        raise UserError(f"cannot reach the Prefect server {api_url} the sweep waits on ({type(err).__name__}: "
                        f"{str(err)[:200]}); is its `gpuledger sweep` or `gpuledger serve` still running?") from None
    finally:
        if saved is None:
            os.environ.pop("PREFECT_API_URL", None)
        else:
            os.environ["PREFECT_API_URL"] = saved


def guard_envelopes(accepted: Any, dry_run: bool, log: Any) -> State | None:
    """The team's envelopes (gpuledger/runtime/money.py): a dry run only checks; a run reserves the
    plan's spend (refused with the numbers when it would cross one: Failed, exit 3, nothing launched)
    and, past a soft threshold, pauses for approval (gpuledger/flows/approvals.py). Returns the Failed
    state of a refusal, else None."""
    from gpuledger import settings
    from gpuledger.runtime import money
    from gpuledger.runtime.envelopes import spender_for

    sweep_id, name = accepted.sweep_id, accepted.spec.name
    spender = spender_for(accepted.spec)
    plan_json = accepted.plan.to_json()
    try:
        waits = None if dry_run else money.adopted(accepted.spec_path, plan_json)  # launched by `gpuledger mcp`
        if waits is not None:  # the server reserved it already (with the launch record); hold to that
            decision = money.check(plan_json, spender, what=f"sweep {sweep_id}")
            log.info("Sweep %s was admitted by gpuledger mcp (its envelopes hold the reservation): %s", sweep_id,
                     "it waits for approval" if waits else "no approval needed")
            if not waits:
                return None
            decision = dataclasses.replace(decision, refused=(), soft=tuple(u for u in decision.uses
                                                                             if u.envelope.soft_usd is not None))
        elif dry_run:
            decision = money.check(plan_json, spender, what=f"sweep {sweep_id}")
            if decision.refused:
                raise BudgetExceeded(decision.refusal(f"sweep {sweep_id}"))
            if decision.needs_approval:
                log.warning("Dry run: a run would wait for approval: %s", decision.approval_words())
            return None
        else:
            decision = money.reserve(sweep_id, f"sweep {sweep_id}", plan_json, spender)
    except BudgetExceeded as err:
        if os.environ.get(money.ENV_LAUNCH_ID):  # the server's reservation for this launch goes back
            release_quietly(sweep_id, f"refused in the sweep process: {err}")
        log.error("Budget envelope refused sweep %s (nothing launched): %s", sweep_id, err)
        if not dry_run:  # a dry run is a question: no alert (nor its claim, which would silence the real refusal's)
            alert_quietly("failed", f"{sweep_id}:refused", f"sweep {sweep_id} refused before launch: {err}",
                          {"refused": True})
        return Failed(message=str(err), data=err)
    for u in decision.uses if waits is None else ():
        log.info("Envelope %s: reserved %s (%s) for %s, observed owner %s (spec claims %s); %s of %s left",
                 u.envelope.name, usd(decision.plan_usd), decision.basis, sweep_id, spender.owner, spender.owner_claimed,
                 usd(u.remaining_usd - decision.plan_usd), usd(u.envelope.limit_usd))
    if not decision.needs_approval:
        return None
    soft = decision.soft[0]
    alert_quietly("budget", f"{soft.envelope.name}:{soft.window_start.date()}:soft:{sweep_id}", f"sweep {sweep_id} waits for approval: {decision.approval_words()}",
           {"awaiting_approval": True})
    try:
        approved, words = await_approval(sweep_id=sweep_id, sweep_name=name, decision=decision, owner=spender.owner,
                                         log=log, timeout_s=float(settings.current().get("money.approval_timeout_s")))
    except BaseException:  # interrupted or crashed while it waited: nothing launched, the money goes back
        release_quietly(sweep_id, "the sweep stopped while it waited for approval")
        raise
    if approved:
        return None
    release_quietly(sweep_id, f"not approved: {words}")
    err = BudgetExceeded(f"sweep {sweep_id} was not launched: {words}")
    log.error("%s", err)
    return Failed(message=str(err), data=err)


def release_quietly(sweep_id: str, note: str) -> None:
    import contextlib

    from gpuledger.runtime import money

    with contextlib.suppress(Exception):  # the run's outcome is already said; a busy warehouse releases later
        money.release(sweep_id, note)


def release_unstarted_quietly(accepted: Any, error: BaseException) -> None:
    """The sweep did not start (`money.release_unstarted`): what this launch reserved goes back, and only
    that when another live run of the sweep holds its lease."""
    import contextlib

    from gpuledger.runtime import money

    with contextlib.suppress(Exception):  # the run's outcome is already said; a busy warehouse releases later
        money.release_unstarted(accepted.sweep_id, money.plan_reservation_usd(accepted.plan.to_json())[0], error,
                                f"sweep did not run: {error}")


def alert_quietly(kind: str, subject: str, text: str, data: dict[str, Any]) -> None:
    """An alert through `[[alerts]]` (gpuledger/runtime/alerts.py), never breaking the flow."""
    import contextlib

    with contextlib.suppress(Exception):
        from gpuledger.runtime.alerts import send

        send(kind, subject, text, data)
