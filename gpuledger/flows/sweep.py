"""Flow `sweep`: plan, guard, run the trials, report; Prefect adds logs, artifacts and the budget event.

    sweep(spec="specs/lora-grid.yaml", launcher=None, max_parallel=None, dry_run=False, force=False,
          resume=None, new=False)

Which sweep a run is (`resume`, `gpuledger.runtime.ids.sweep_to_run`): unset (the deployment's
default) continues the spec's last sweep only while it is unfinished and starts a fresh one once it
ended, so `prefect deployment run sweep/lora-grid` runs a new sweep each time; `resume=True`
continues the last one (its succeeded trials skipped: what `gpuledger sweep` does); `resume=False`
(or `new=True`) always a fresh one.

The flow only orchestrates; what a sweep does lives in `gpuledger.runtime` (tested without Prefect):
1. task `plan-sweep`: loads the spec, expands and plans its trials (`gpuledger.plan`), logs the
   plan once and publishes it as the table artifact `sweep-NAME-plan`;
   With `search.probe: auto` and a plan above `search.probe_above_usd`, task `probe-shapes` first
   probes the shapes planned on estimates alone (gpuledger.runtime.probe) and the plan is made again
   on what they measured (docs/probes.md);
2. the budget guard (the plan's trials + what the sweep's probes spent already): over budget -> the run ends Failed with `BudgetExceeded` (exit 3 from the CLI)
   before anything is launched or written, unless `force` (then recorded as forced, and the
   runtime budget stop is off too). `dry_run` stops here;
3. task `run-trials`: `gpuledger.runtime.engine.execute` registers the sweep, stores leftovers of
   an earlier run, launches the trials on a plain thread pool (at most `max_parallel` at once; one
   Prefect task per trial costs ~150 ms of orchestration on a small machine, so trials are not
   tasks: each one's outcome is a log line, the `sweep-NAME-progress` artifact follows them),
   stores each result as it arrives, and stops at the budget, emitting the Prefect event
   `gpuledger.budget.exceeded` (payload: sweep, spent, budget, in_flight_est, skipped, ...);
4. task `write-report`: the ROI report (`gpuledger.report`), published as the artifacts
   `sweep-NAME-roi` (markdown), `sweep-NAME-report` (link) and `sweep-NAME-results` (table).
The flow returns the summary (`gpuledger.runtime.summary.SweepSummary`, typed); its `status`
and the CLI's exit code tell the truth (`unrecorded` when some records could not be stored), and so
does the flow run's state (`SweepSummary.outcome`, the rule of the exit code): `Completed` when the
CLI exits 0, `Failed` with the counts and the first failure when it exits 1 (a failed trial, a
record not stored), `Cancelled` when it was interrupted (exit 130); a refusal (the budget guard,
a spec the planner refuses, a sweep running elsewhere) is `Failed` with the refusal's message.
Each step is a verb of the application layer (`gpuledger.api.Ledger`: plan, run_trials, report_sweep,
best_recipe), as the CLI and the MCP tools call them; the flow adds Prefect's logs, artifacts, states
and the budget event.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gpuledger.flows  # noqa: F401  (telemetry off before Prefect is imported)

# isort: split
from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.events import emit_event
from prefect.states import Cancelled, Failed, State
from prefect.utilities.annotations import quote

from gpuledger import vocabulary
from gpuledger.api import Ledger, PlanVerdict
from gpuledger.errors import BudgetExceeded
from gpuledger.flows.approvals import guard_envelopes, release_unstarted_quietly
from gpuledger.flows.artifacts import Progress, artifact_key, publish_report, publish_table
from gpuledger.flows.refusals import Refused, failed, user_errors_as_refusals
from gpuledger.runtime.budget import BudgetStop
from gpuledger.runtime.engine import Hooks, SweepRun
from gpuledger.runtime.events import notify
from gpuledger.runtime.launching import make_launcher
from gpuledger.runtime.summary import SweepSummary

BUDGET_EVENT = "gpuledger.budget.exceeded"
PLAN_COLUMNS = ["trial_id", "params", "accelerator", "gpus", "cloud", "region", "instance_type", "spot",
                "est_memory_gib", "est_wall_s", "est_basis", "est_cost_usd", "feasible", "reason"]
#: How `run-trials` makes its launcher (tests swap it for a flaky one).
launcher_factory = make_launcher


class PrefectHooks(Hooks):
    """The runtime's hooks in a flow run: its logger, the progress artifact, the budget event."""

    def __init__(self, log: Any, name: str, sweep_id: str) -> None:
        super().__init__(log)
        self.name, self.sweep_id = name, sweep_id
        self.bar: Progress | None = None

    def progress(self, done: int, total: int, final: bool = False) -> None:
        if self.bar is None:
            self.bar = Progress(artifact_key("sweep", self.name, "progress"), total, done,
                                f"trials of {self.sweep_id} finished, of {total}")
        self.bar.update(done, force=final)

    def budget_stopped(self, stop: BudgetStop, trial_ids: list[str]) -> None:
        emit_event(
            event=BUDGET_EVENT,
            resource={"prefect.resource.id": f"gpuledger.sweep.{self.sweep_id}", "prefect.resource.name": self.name},
            payload={"sweep": self.sweep_id, "spent": round(stop.spent_usd, 6), "budget": stop.budget_usd,
                     "in_flight_est": round(stop.in_flight_est_usd, 6), "skipped": len(trial_ids),
                     "skipped_trial_ids": trial_ids},
        )


@task(name="plan-sweep", persist_result=False, cache_policy=NO_CACHE)
@user_errors_as_refusals
def plan_sweep_task(spec: str, launcher: str | None, max_parallel: int | None, resume: bool | None = True,
                    sweep_id: str | None = None) -> PlanVerdict:
    """Plans the spec and asks the budget guard, counting what the sweep's probes spent
    (`Ledger.plan(with_probes=True)`); logs and publishes the plan once; returns the verdict (its
    `sweep` is what the run takes). `sweep_id`: the sweep being planned again (after its probes)."""
    from gpuledger.plan import render_plan

    log = get_run_logger()
    verdict = Ledger().plan(spec, launcher=launcher, max_parallel=max_parallel, resume=resume, sweep_id=sweep_id,
                            with_probes=True)
    sweep = verdict.sweep
    if sweep.chosen:
        log.info("Sweep %s: %s", sweep.sweep_id, sweep.chosen)
    log.info("Plan of sweep %s (%d trials, at most %d at once):\n%s", sweep.sweep_id, len(sweep.trials), sweep.cap,
             render_plan(sweep.plan))
    publish_table(artifact_key("sweep", sweep.spec.name, "plan"), sweep.plan.to_json()["trials"],
                  f"Plan of {sweep.sweep_id}: {len(sweep.trials)} trials, est. ${sweep.plan.total_est_cost_usd:.2f}"
                  f" of ${float(sweep.spec.budget.max_usd):.2f} budget, max_parallel {sweep.cap}", PLAN_COLUMNS)
    return verdict


@task(name="probe-shapes", persist_result=False, cache_policy=NO_CACHE)
def probe_task(spec: str, accepted: Any) -> bool:
    """`search.probe: auto` (gpuledger.runtime.probe.auto_probe); returns whether to plan again."""
    from gpuledger.runtime.probe import auto_probe

    return auto_probe(Path(spec), accepted, get_run_logger(), launcher_factory)


@task(name="run-trials", persist_result=False, cache_policy=NO_CACHE)
@user_errors_as_refusals
def run_trials_task(run: SweepRun) -> SweepSummary:
    """Registers the sweep and runs its trials (`gpuledger.runtime.engine.execute`), keeping its live
    status for `gpuledger status` meanwhile (`gpuledger.runtime.live`)."""
    from gpuledger.runtime.live import live_status

    log = get_run_logger()
    with live_status(run):
        return Ledger().run_trials(run, PrefectHooks(log, run.spec.name, run.sweep_id))


@task(name="write-report", persist_result=False, cache_policy=NO_CACHE)
@user_errors_as_refusals
def write_report_task(name: str, summary: SweepSummary) -> SweepSummary:
    """Writes the ROI report; publishes markdown, link and trial-results artifacts; names the best recipe."""
    log = get_run_logger()
    ledger = Ledger()
    files = ledger.report_sweep(name, sweep_id=summary.sweep_id)
    results = ledger.trial_results(summary.sweep_id).to_dicts()
    summary.report_html = str(files.html.resolve())
    summary.report_markdown = str(files.markdown)
    publish_report(files, artifact_key("sweep", name, "roi"), f"ROI report of {summary.sweep_id}",
                   link_key=artifact_key("sweep", name, "report"))
    publish_table(artifact_key("sweep", name, "results"), results,
                  f"Trial results of {summary.sweep_id} (v_trial_results)")
    summary.best = ledger.best_recipe(summary.sweep_id)
    log.info("ROI report of %s: %s", summary.sweep_id, summary.report_html)
    return summary


@flow(name="sweep", persist_result=False)
def sweep(spec: str, launcher: str | None = None, max_parallel: int | None = None, dry_run: bool = False,
          force: bool = False, resume: bool | None = None, new: bool = False) -> SweepSummary | State:
    """Plans, guards, runs and reports one sweep; returns its summary (`SweepSummary`), or a Failed or
    Cancelled state with the summary as data when the CLI would exit non-zero.

    A budget refusal (no `force`) ends the run Failed with the guard's message: calling the flow
    raises `BudgetExceeded` (exit 3 from the CLI). `resume`: unset, continue the spec's last sweep
    only while it is unfinished, else start a fresh one; true: continue it; false: a fresh one.
    `new`: as `resume=False`.
    """
    log = get_run_logger()
    verdict = plan_sweep_task(spec, launcher, max_parallel, False if new and not dry_run else resume)
    if isinstance(verdict, Refused):  # a spec the planner refuses: one line in the log, not a traceback
        return failed(verdict)
    if not dry_run and probe_task(spec, quote(verdict.sweep)):  # search.probe auto: measure first, then plan again
        verdict = plan_sweep_task(spec, launcher, max_parallel, sweep_id=verdict.sweep_id)
        if isinstance(verdict, Refused):
            return failed(verdict)
    accepted = verdict.sweep
    sp, sweep_id = accepted.spec, accepted.sweep_id
    summary = accepted.new_summary(dry_run=dry_run)
    if not verdict.accepted:  # the guard counted the plan's trials + what the sweep's probes spent already
        if not force:
            # a refusal is an answer, not a crash: a Failed state with the message (no traceback in the logs)
            log.error("Budget guard refused sweep %s (nothing launched, nothing written): %s", sweep_id, verdict.refusal)
            err = BudgetExceeded(verdict.refusal or "refused by the budget guard")
            return Failed(message=str(err), data=err)
        summary.forced = True
        log.warning("Budget guard refused sweep %s but force=True: launching anyway (recorded as forced). %s",
                    sweep_id, verdict.refusal)
    refusal = guard_envelopes(accepted, dry_run, log)  # team envelopes ([[budgets]]): reserve, or refuse, or wait
    if refusal is not None:
        return refusal
    if dry_run:
        summary.status = vocabulary.SWEEP_DRY_RUN
        log.info("Dry run: nothing launched, nothing written.")
        notify("finished", summary=summary.to_dict())
        return summary

    run = SweepRun(accepted, summary=summary, launcher_factory=launcher_factory)
    summary = run_trials_task(quote(run))  # quote: Prefect passes the objects as they are
    if isinstance(summary, Refused):
        release_unstarted_quietly(accepted, summary.error)
        return failed(summary)
    summary = write_report_task(sp.name, quote(summary))
    if isinstance(summary, Refused):
        return failed(summary)
    kind, message = summary.outcome()
    (log.info if kind == "COMPLETED" else log.error)("Sweep %s", message)
    notify("finished", summary=summary.to_dict())
    return ended(kind, message, summary)


def ended(kind: str, message: str, summary: SweepSummary) -> SweepSummary | State:
    """Returns what the flow returns for `SweepSummary.outcome()`'s (kind, message): the summary
    itself (Completed), or a Failed / Cancelled state carrying it."""
    if kind == "FAILED":
        return Failed(message=message, data=summary)
    if kind == "CANCELLED":
        return Cancelled(message=message, data=summary)
    return summary


def drain_prefect(timeout_s: float = 10.0) -> None:
    """Sends Prefect's queued logs and events before a (temporary) server goes away; best effort."""
    import contextlib

    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    for service in (APILogWorker, EventsWorker):
        with contextlib.suppress(Exception):  # never hide the sweep's own outcome
            service.drain_all(timeout=timeout_s)
