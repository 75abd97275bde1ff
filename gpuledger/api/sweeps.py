"""One run of a sweep in this process, without Prefect (`Ledger.run`): the steps the Prefect flow
`sweep` takes as tasks, in the same order, through the same Ledger verbs.

plan (`Ledger.plan`, the guard adding the sweep's probe spend) -> `search.probe: auto` probes and a
second plan -> the budget guard's answer (`BudgetExceeded` unless `force`) -> the trials
(`gpuledger.runtime.engine.execute`) -> the ROI report (`Ledger.report_sweep`) and the best recipe.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path
from typing import Any

from gpuledger import vocabulary
from gpuledger.errors import BudgetExceeded
from gpuledger.runtime.summary import SweepSummary


def run_sweep(ledger: Any, spec: str | os.PathLike[str], *, launcher: str | None = None, max_parallel: int | None = None,
              dry_run: bool = False, force: bool = False, resume: bool | None = True, hooks: Any = None,
              launcher_factory: Any = None, report: bool = True) -> SweepSummary:
    """Plans, guards, runs and reports one sweep (see the module); returns its summary."""
    from gpuledger.runtime import money
    from gpuledger.runtime.engine import Hooks, SweepRun
    from gpuledger.runtime.events import notify
    from gpuledger.runtime.launching import make_launcher
    from gpuledger.runtime.probe import auto_probe

    hooks = hooks or Hooks()
    factory = launcher_factory or make_launcher
    verdict = ledger.plan(spec, launcher=launcher, max_parallel=max_parallel, resume=resume if not dry_run else True,
                          with_probes=True)
    if not dry_run and auto_probe(Path(spec), verdict.sweep, hooks.log, factory):
        verdict = ledger.plan(spec, launcher=launcher, max_parallel=max_parallel, sweep_id=verdict.sweep_id,
                              with_probes=True)
    summary = verdict.sweep.new_summary(dry_run=dry_run)
    if not verdict.accepted:
        if not force:
            raise BudgetExceeded(verdict.refusal or "refused by the budget guard")
        summary.forced = True
        hooks.log.warning("budget guard refused sweep %s but force=True: launching anyway (recorded as forced)",
                          verdict.sweep_id)
    reserved_usd = reserve_envelopes(verdict.sweep, dry_run)
    if dry_run:
        summary.status = vocabulary.SWEEP_DRY_RUN
        notify("finished", summary=summary.to_dict())
        return summary
    try:
        summary = ledger.run_trials(SweepRun(verdict.sweep, summary=summary, launcher_factory=factory), hooks)
    except BaseException as err:
        with contextlib.suppress(Exception):  # the error is the outcome; a busy warehouse releases later
            money.release_unstarted(verdict.sweep_id, reserved_usd, err, f"sweep did not run: {err}")
        raise
    if report:
        files = ledger.report_sweep(verdict.sweep.spec.name, sweep_id=summary.sweep_id)
        summary.report_html, summary.report_markdown = str(files.html.resolve()), str(files.markdown)
        summary.best = ledger.best_recipe(summary.sweep_id)
    logging.getLogger("gpuledger.sweep").info("sweep %s %s", summary.sweep_id, summary.status)
    notify("finished", summary=summary.to_dict())
    return summary


def reserve_envelopes(accepted: Any, dry_run: bool) -> float:
    """The team's envelopes ([[budgets]], `gpuledger.runtime.money`): a dry run checks; a run reserves the
    plan's spend. Returns what it reserved in each envelope (0 for a dry run). Raises `BudgetExceeded`
    when one refuses, and when a launch needs a person's approval (which only a Prefect flow run can
    wait for: `Ledger.sweep`), releasing what it reserved."""
    from gpuledger.runtime import money
    from gpuledger.runtime.envelopes import spender_for

    sweep_id = accepted.sweep_id
    spender, plan_json = spender_for(accepted.spec), accepted.plan.to_json()
    if dry_run:
        decision = money.check(plan_json, spender, what=f"sweep {sweep_id}")
        if decision.refused:
            raise BudgetExceeded(decision.refusal(f"sweep {sweep_id}"))
        return 0.0
    decision = money.reserve(sweep_id, f"sweep {sweep_id}", plan_json, spender)
    if decision.needs_approval:
        _release(sweep_id, "needs approval; not run in this process")
        raise BudgetExceeded(f"sweep {sweep_id} needs approval ({decision.approval_words()}): run it with "
                             "`gpuledger sweep` (or Ledger.sweep), whose flow run waits for `gpuledger approve`")
    return decision.plan_usd if decision.uses else 0.0


def _release(sweep_id: str, note: str) -> None:
    import contextlib

    from gpuledger.runtime import money

    with contextlib.suppress(Exception):  # the run's outcome is already said; a busy warehouse releases later
        money.release(sweep_id, note)
