"""Running one sweep's trials: register, recover, launch on a plain thread pool, store, stop at the budget.

    sweep = prepare(spec_path)                           # gpuledger.runtime.accepted: spec, trials, plan
    execute(SweepRun(sweep, summary=sweep.new_summary()), hooks)  # -> the SweepSummary, filled in

What `execute` does, in order (every step says what it did through `hooks.log`):
1. registers the sweep, its spec, plan and prices, and its trials in the warehouse; stores the
   records an earlier, killed run left in the sweep's landing folder; skips trials the warehouse
   holds as succeeded (a re-run continues a sweep) and trials the plan found infeasible
   (`gpuledger.runtime.registration`: the sweep's lease too);
2. (steps 2-5: `gpuledger.runtime.launch_loop`) launches the rest, at most `cap` at once, each on a thread of a plain `ThreadPoolExecutor`
   (`gpuledger.runtime.launching.run_trial`: submit, poll, collect, retrying launcher errors);
   before each launch, the budget rule (`gpuledger.runtime.budget`) may stop launching: the rest
   are marked `skipped-budget` and `hooks.budget_stopped(stop, trial_ids)` is called;
3. hands each finished trial's records to the writer thread (`gpuledger.runtime.writer`), which
   stores them in batches while launching goes on;
4. on Ctrl-C: stops launching, cancels what runs (the launcher's records say `cancelled`), and
   still stores every record that finished; the run is `interrupted`;
5. adaptive search (`search.strategy: tpe | asha`, `gpuledger.search`): instead of the planned
   order, the next trial comes from the sweep's Optuna study whenever a slot frees (a point of a
   tpe range that no plan foresaw is first planned and registered, `gpuledger.runtime.admit`;
   over a tpe range step 1 registers none of the plan's representative points); each running
   trial's new objective values (the launcher's `progress`) are reported to the study, a trial the
   pruner stops is cancelled through the launcher, billed for what it ran (its record says
   `cancelled`) and marked `pruned`; one suspended at an undecided rung is cancelled the same way and
   relaunched (or dropped) once its rung is decided (`gpuledger.runtime.search_marks`); every end is told
   to the study;
6. at the end: the writer stores everything queued (retrying once what failed), the sweep's final
   status is written, and what is still waiting in the landing folder is counted and named in the
   summary (status `unrecorded`, exit 1) for the next run or `gpuledger ingest` to store.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuledger import vocabulary
from gpuledger.plan.model import Plan, PlannedTrial
from gpuledger.record import ResultRecord
from gpuledger.runtime import landing
from gpuledger.runtime.accepted import AcceptedSweep
from gpuledger.runtime.accrual import MoneyWatch, accrue_interval_s, alert_failures
from gpuledger.runtime.budget import BudgetStop
from gpuledger.runtime.events import notify
from gpuledger.runtime.launch_loop import INTERRUPT_GRACE_S, LaunchLoop
from gpuledger.runtime.launching import LAUNCH_RETRY_DELAYS_S, make_launcher
from gpuledger.runtime.registration import LEASE_TTL_S, lease_holder, register, sweep_fields
from gpuledger.runtime.requests import LaunchRequest
from gpuledger.runtime.search_marks import mark_left_suspended, mark_unasked
from gpuledger.runtime.summary import SweepSummary
from gpuledger.runtime.writer import Writer
from gpuledger.search import AdaptiveSearch, asks_new_points, is_adaptive
from gpuledger.search.values import objective_values
from gpuledger.spec.expand import Trial
from gpuledger.spec.models import SweepSpec


class Hooks:
    """What a caller (the Prefect flow, a test) adds to a run; the defaults log to `logging`."""

    def __init__(self, log: Any = None) -> None:
        self.log = log or logging.getLogger("gpuledger.sweep")

    def progress(self, done: int, total: int, final: bool = False) -> None:
        """Trials finished so far (stored or not)."""

    def budget_stopped(self, stop: BudgetStop, trial_ids: list[str]) -> None:
        """Launching stopped at the budget; `trial_ids` were not launched."""


@dataclass
class ProbeLaunch:
    """One probe (docs/probes.md): a trial of the sweep launched with its probe environment (purpose
    `probe`, its shape, the stop rule), and the shape its record carries."""

    trial: Trial
    request: LaunchRequest
    shape: dict[str, Any]

    @property
    def trial_id(self) -> str:
        return self.trial.trial_id


@dataclass
class ProbeBatch:
    """What makes a run of a sweep a probe run (`gpuledger.runtime.probe`): these launches instead of the
    plan's trials; `then(records so far)` returns the launches that follow once they ended (the warm
    start-ups of the local launcher), or none. A probe run registers the sweep only when it is new (status
    `planned`), never skips or marks a trial, never finishes the sweep, and its records carry purpose
    `probe`: probe spend is the sweep's spend, never a trial's result."""

    launches: list[ProbeLaunch]
    then: Callable[[list[ResultRecord]], list[ProbeLaunch]] | None = None


@dataclass
class SweepRun:
    """One run of an accepted (planned, guarded) sweep: the `AcceptedSweep`, the summary it fills in,
    how it launches. `rows`: the planned trial of each trial id, the plan's and those an adaptive
    search admits later (`gpuledger.runtime.admit`). `probes`: a probe run (`ProbeBatch`); `records`:
    the records a probe run took (its probes are read back by their run ids)."""

    sweep: AcceptedSweep
    summary: SweepSummary
    rows: dict[str, PlannedTrial] = field(default_factory=dict)
    launcher_factory: Any = make_launcher
    retry_delays_s: tuple[float, ...] = LAUNCH_RETRY_DELAYS_S
    holder: str = field(default_factory=lease_holder)
    lease_ttl_s: float = LEASE_TTL_S
    probes: ProbeBatch | None = None
    records: list[ResultRecord] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.rows:
            self.rows = {t.trial_id: t for t in self.sweep.plan.planned_trials}

    @property
    def spec(self) -> SweepSpec:
        return self.sweep.spec

    @property
    def spec_path(self) -> Path:
        return self.sweep.spec_path

    @property
    def sweep_id(self) -> str:
        return self.sweep.sweep_id

    @property
    def trials(self) -> tuple[Trial, ...]:
        return self.sweep.trials

    @property
    def plan(self) -> Plan:
        return self.sweep.plan

    @property
    def cap(self) -> int:
        return self.sweep.cap

    @property
    def launcher(self) -> str:
        return self.sweep.launcher

    @property
    def landing_dir(self) -> Path:
        """The run's landing folder: the sweep's, or `probes/SWEEP_ID/` beside it (a probe's records never
        sit in the sweep's own)."""
        if self.probes is not None:
            return landing.landing_dir_for("probes") / self.sweep_id
        return landing.landing_dir_for(self.sweep_id)

    def notify(self, kind: str, **data: Any) -> None:
        """A progress event of the sweep (`gpuledger.runtime.events`); a probe run sends none (the sweep's
        own progress counts its trials)."""
        if self.probes is None:
            notify(kind, **data)

    @property
    def in_flight(self) -> int:  # trials at once: `cap` slots of `sweep.pack` trials each (packed trials)
        return self.sweep.cap * max(1, self.sweep.pack)


def _pool_usage(launcher: Any, summary: SweepSummary, hooks: Hooks) -> None:
    """The SkyPilot pools the launcher tore down: what their workers cost beyond the trials' own records."""
    for usage in getattr(launcher, "pool_usage", None) or []:
        data = usage.to_json()
        summary.pools.append(data)
        saving = data.get("saving_usd")
        hooks.log.info("Pool %s: %d worker(s), %.0f worker-s, %.0f s of trials, %.0f s start-up and idle tail "
                       "($%.4f, the sweep's)%s", data["name"], data["workers"], data["worker_s"], data["busy_s"],
                       data["idle_s"], data["idle_usd"],
                       "" if saving is None else f"; ${saving:.4f} saved against per-trial jobs")


def execute(run: SweepRun, hooks: Hooks | None = None) -> SweepSummary:
    """Registers and runs the sweep's trials (steps 1-5 above); returns its summary."""
    from gpuledger.warehouse import SweepBusy, Warehouse

    hooks = hooks or Hooks()
    summary = run.summary
    summary.landing = str(landing_dir := run.landing_dir)
    probing = run.probes is not None
    try:
        todo, meter = register(run, hooks, landing_dir)
    except Exception as err:
        if not isinstance(err, SweepBusy):  # ours: give it back (SweepBusy: another run's)
            with contextlib.suppress(Exception), Warehouse.open(migrate=False) as wh:
                wh.release_lease(run.sweep_id, run.holder)
        raise
    search = None
    if is_adaptive(run.spec) and not probing:  # a probe run launches its probes, in order
        from gpuledger.search.extrapolate import cost_stopper_for

        stopper = cost_stopper_for(run.spec, run.sweep.curves, float(run.plan.total_est_cost_usd or 0.0))
        search = AdaptiveSearch.open(run.spec, run.sweep_id, [] if asks_new_points(run.spec) else run.trials,
                                     stopper=stopper, planned=run.rows)
        hooks.log.info("Adaptive search (%s): study %s in %s; at most %d trial(s).", run.spec.search.strategy,
                       run.sweep_id, search.path, search.n_trials)
    admission = None
    to_run = len(todo)
    if search is not None and asks_new_points(run.spec):  # before the writer opens the warehouse
        from gpuledger.runtime.admit import Admission

        admission = Admission.for_run(run, hooks)
        summary.skipped_done = len(search.asked)  # asked, and finished or pruned, by earlier runs
        to_run = max(0, search.n_trials - summary.skipped_done)
    total = (len(todo) if probing else len(run.trials)) if admission is None else search.n_trials
    counter = {"done": summary.skipped_done}
    pruned_ids: set[str] = set()
    hooks.progress(counter["done"], total)
    run.notify("planned", sweep_id=run.sweep_id, total=total, todo=to_run, done_before=summary.skipped_done,
               max_parallel=run.cap)

    unkept: dict[str, str] = {}  # run_id -> why its record could not be kept in landing (a full disk)

    def stored(records: list[ResultRecord], errors: dict[str, str], ok: bool) -> None:
        for trial_id, status, cost, lost in (
                [(r.trial_id, vocabulary.PRUNED if r.trial_id in pruned_ids else r.status, r.cost_usd, unkept.get(r.run_id))
                 for r in records] + [(t, vocabulary.FAILED, 0.0, None) for t in errors]):
            counter["done"] += 1
            run.notify("result", trial_id=trial_id, status=status, cost_usd=cost, done=counter["done"], total=total,
                       spent_usd=summary.spent_usd, stored=ok, kept=lost is None, not_kept=lost, sweep_id=run.sweep_id)
        hooks.progress(counter["done"], total)

    # a probe run stores its records here and now (its caller reads them back), never through the ingest service
    writer = Writer(run.sweep_id, landing_dir, hooks.log, stored, lease=(run.holder, run.lease_ttl_s),
                    **({"service": False} if probing else {}))
    try:
        launcher = run.launcher_factory(run.launcher, run.spec, run.cap, landing_dir,
                                        **({"pack": run.sweep.pack} if run.sweep.pack > 1 else {}))
    except BaseException:  # a launcher that cannot start (a UserError): nothing ran; the lease goes back
        writer.close()
        with contextlib.suppress(Exception), Warehouse.open(migrate=False) as wh:
            wh.release_lease(run.sweep_id, run.holder)
        raise
    # the running trials' accruals and the envelopes' stop; a probe run's estimate is held by its caller
    money = None if probing else MoneyWatch(run.sweep_id, accrue_interval_s(), writer, hooks.log, dict(run.rows)).start()
    status = vocabulary.SWEEP_FAILED
    try:
        loop = LaunchLoop(run, hooks, launcher, writer, meter, todo, search, pruned_ids, admission, money)
        loop.unkept = unkept
        loop.loop()
        if search is not None and admission is None and not summary.interrupted:
            mark_unasked(search, run.spec.search.strategy, todo, writer, hooks, summary)
        mark_left_suspended(search, writer, summary, hooks.log)
        status = ""
    finally:
        if money is not None:
            money.close()
        close = getattr(launcher, "close", None)
        if callable(close):
            with contextlib.suppress(Exception):
                close()
        _pool_usage(launcher, summary, hooks)
        while True:  # everything queued is stored (or left in landing) before the status is written
            try:
                writer.close()
                break
            except KeyboardInterrupt:  # Ctrl-C again: the records that finished are still stored first
                summary.interrupted = True
                hooks.log.warning("Interrupted: storing the finished trials' records before stopping ...")
        with contextlib.suppress(OSError):  # files a trial dropped during the run are never stored
            refused = landing.quarantine_unsigned(landing_dir)
            if refused:
                hooks.log.warning("%d file(s) appeared in %s that gpuledger's launcher did not write (unsigned); "
                                  "moved to %s, not stored: %s", len(refused), landing_dir, landing_dir / landing.REJECTED,
                                  ", ".join(refused[:10]))
        summary.ingest_landing, summary.awaiting_ingest = writer.await_ingest() if writer.landed else (None, 0)
        waiting = landing.waiting(landing_dir)
        lost = {run_id: why for run_id, why in unkept.items() if run_id in writer.unstored}
        summary.lost = [f"{run_id}: {why}" for run_id, why in lost.items()]
        summary.unrecorded = len(waiting) + len(lost) + summary.awaiting_ingest
        summary.unrecorded_files = [str(p) for p in waiting]
        if lost:
            hooks.log.error("%d result record(s) are LOST: the warehouse could not store them (%s) and they could "
                            "not be kept in %s: %s", len(lost), writer.last_error or "unknown error", landing_dir,
                            "; ".join(summary.lost[:10]))
        if waiting:
            hooks.log.error("%d result record(s) could not be stored in the warehouse (%s); they stay in %s and "
                            "the next run of this sweep, or `gpuledger ingest %s`, stores them: %s", len(waiting),
                            writer.last_error or "unknown error", landing_dir, landing_dir,
                            ", ".join(p.name for p in waiting[:10]) + (" ..." if len(waiting) > 10 else ""))
        status = status or summary.final_status()
        summary.status = status
        try:
            with Warehouse.open(migrate=False) as wh:
                for run_id, why in lost.items():  # ran, but nothing of it is kept: not `pending` for ever
                    wh.mark_trials(run.sweep_id, [writer.unstored[run_id].trial_id], vocabulary.FAILED,
                                   reason=f"its result record {run_id} was lost ({why}); run it again")
                for usage in summary.pools:  # the pools' start-up and idle tail: the sweep's, beside its runs
                    wh.record_pool_usage(run.sweep_id, usage)
                if not probing:  # probes leave the sweep as it was (`planned` when they registered it)
                    wh.finish_sweep(run.sweep_id, status=status)
                    wh.stop_accruals(run.sweep_id)  # its runs' records count now; what it still holds goes back
                    wh.release_budget(run.sweep_id, f"sweep ended {status}")
                wh.release_lease(run.sweep_id, run.holder)
        except Exception as err:  # noqa: BLE001 - said, and the summary's status already tells the truth
            hooks.log.error("Could not write the final status %r of %s (its lease expires by itself in %g s): %s",
                            status, run.sweep_id, run.lease_ttl_s, err)
    if probing:
        summary.failures += [f"not stored: {why}" for why in writer.rejected.values()]
    else:
        alert_failures(run.sweep_id, summary)
    hooks.progress(total, total, final=True)
    return summary


def best_recipe(sweep_id: str) -> dict[str, Any] | None:
    """Returns the sweep's best recipe (trial_id, params, metric_name, best_metric, time_to_recipe_s,
    cost_to_recipe_usd, total_cost_usd) from v_sweep_roi, or None when no trial has the metric."""
    from gpuledger.warehouse import Warehouse

    with Warehouse.open(read_only=True) as wh:
        rows = wh.query_named("sweep_best_recipe", {"sweep_id": sweep_id}).to_dicts()
    return rows[0] if rows else None


__all__ = ["INTERRUPT_GRACE_S", "LEASE_TTL_S", "Hooks", "ProbeBatch", "ProbeLaunch", "SweepRun", "best_recipe", "execute", "lease_holder",
           "objective_values", "register", "sweep_fields"]
