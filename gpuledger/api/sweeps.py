"""One run of a sweep in this process, without Prefect (`Ledger.run`): the steps the Prefect flow
`sweep` takes as tasks, in the same order, through the same Ledger verbs.

plan (`Ledger.plan`, the guard adding the sweep's probe spend) -> `search.probe: auto` probes and a
second plan -> the budget guard's answer (`BudgetExceeded` unless `force`) -> the trials
(`gpuledger.runtime.engine.execute`) -> the ROI report (`Ledger.report_sweep`) and the best recipe.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from gpuledger import vocabulary
from gpuledger.errors import BudgetExceeded
from gpuledger.runtime.summary import SweepSummary


def run_sweep(ledger: Any, spec: str | os.PathLike[str], *, launcher: str | None = None, max_parallel: int | None = None,
              dry_run: bool = False, force: bool = False, new: bool = False, hooks: Any = None,
              launcher_factory: Any = None, report: bool = True) -> SweepSummary:
    """Plans, guards, runs and reports one sweep (see the module); returns its summary."""
    from gpuledger.runtime.engine import Hooks, SweepRun, best_recipe, execute
    from gpuledger.runtime.events import notify
    from gpuledger.runtime.launching import make_launcher
    from gpuledger.runtime.probe import auto_probe

    hooks = hooks or Hooks()
    factory = launcher_factory or make_launcher
    verdict = ledger.plan(spec, launcher=launcher, max_parallel=max_parallel, new=new and not dry_run, with_probes=True)
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
    if dry_run:
        summary.status = vocabulary.SWEEP_DRY_RUN
        notify("finished", summary=summary.to_dict())
        return summary
    summary = execute(SweepRun(verdict.sweep, summary=summary, launcher_factory=factory), hooks)
    if report:
        files = ledger.report_sweep(verdict.sweep.spec.name, sweep_id=summary.sweep_id)
        summary.report_html, summary.report_markdown = str(files.html.resolve()), str(files.markdown)
        summary.best = best_recipe(summary.sweep_id)
    logging.getLogger("gpuledger.sweep").info("sweep %s %s", summary.sweep_id, summary.status)
    notify("finished", summary=summary.to_dict())
    return summary
