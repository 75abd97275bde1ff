"""How the Ledger runs a sweep as a Prefect flow run and serves the deployments (`Ledger.sweep`,
`Ledger.serve`, named by `gpuledger.api.ledger.PREFECT_RUNNER`): the flows are a face of the Ledger,
and this is the one door from the application layer into Prefect.

`run_sweep_flow` runs flow `sweep` (gpuledger/flows/sweep.py) in this process against the configured
Prefect server when one answers (`gpuledger serve`, or PREFECT_API_URL), else against a temporary
server started for this run (`gpuledger.flows.server.prefect_api`), sends Prefect's queued logs and
events before that server goes away, and returns the flow's `SweepSummary`; a refusal (the budget
guard: `BudgetExceeded`, exit 3; a spec the planner refuses: `UserError`) is raised as such.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from gpuledger.runtime.summary import SweepSummary


def run_sweep_flow(spec: str | os.PathLike[str], *, launcher: str | None = None, max_parallel: int | None = None,
                   dry_run: bool = False, force: bool = False, resume: bool | None = True, prefect_port: int | None = None,
                   say: Callable[[str], None] | None = None) -> SweepSummary:
    """Runs flow `sweep` (see the module); returns its summary or raises its refusal."""
    from gpuledger.flows.server import prefect_api

    with prefect_api(say=say, port=prefect_port):
        from gpuledger.flows.sweep import drain_prefect, sweep

        try:
            state = sweep(spec=str(spec), launcher=launcher, max_parallel=max_parallel, dry_run=bool(dry_run),
                          force=bool(force), resume=resume, return_state=True)
        finally:
            drain_prefect()
    summary = state.result(raise_on_failure=False)
    if isinstance(summary, BaseException):  # UserError / BudgetExceeded: one message, its exit code
        raise summary
    if isinstance(summary, dict):  # a flow run of an older gpuledger (the flow returns the summary itself)
        summary = SweepSummary(**summary)
    return summary


def serve(port: int | None = None, metrics_port: int | None = None, say: Callable[[str], None] | None = None) -> int:
    """Runs this project's local Prefect server, worker and deployments until interrupted (`gpuledger serve`)."""
    from gpuledger.flows.server import serve as serve_local

    return serve_local(say=say or (lambda msg: print(msg, flush=True)), port=port, metrics_port=metrics_port)


def serve_worker(say: Callable[[str], None] | None = None, limit: int | None = None) -> int:
    """Runs one more worker for the (team) Prefect server PREFECT_API_URL names (`gpuledger serve --worker-only`)."""
    from gpuledger.flows.server import serve_worker as worker

    return worker(say=say or (lambda msg: print(msg, flush=True)), limit=limit)


def decide_approval(sweep: str, *, approve: bool, note: str = "") -> dict:
    """Resumes a sweep's flow run paused for approval with the decision (`gpuledger approve|reject`,
    `gpuledger.flows.approvals.resume`); returns what was decided."""
    from gpuledger.flows.approvals import resume

    return resume(sweep, approve=approve, note=note)
