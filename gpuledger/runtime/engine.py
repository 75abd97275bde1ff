"""Running one sweep's trials: register, recover, launch on a plain thread pool, store, stop at the budget.

    sweep = prepare(spec_path)                           # gpuledger.runtime.accepted: spec, trials, plan
    execute(SweepRun(sweep, summary=sweep.new_summary()), hooks)  # -> the SweepSummary, filled in

What `execute` does, in order (every step says what it did through `hooks.log`):
1. registers the sweep, its spec, plan and prices, and its trials in the warehouse; stores the
   records an earlier, killed run left in the sweep's landing folder; skips trials the warehouse
   holds as succeeded (a re-run continues a sweep) and trials the plan found infeasible;
2. launches the rest, at most `cap` at once, each on a thread of a plain `ThreadPoolExecutor`
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
import math
import os
import queue
import secrets
import socket
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuledger import vocabulary
from gpuledger.plan.model import Plan, PlannedTrial
from gpuledger.record import ResultRecord
from gpuledger.runtime import landing
from gpuledger.runtime.accepted import AcceptedSweep
from gpuledger.runtime.accrual import ENVELOPE_STOP, MoneyWatch, accrue_interval_s, alert_failures
from gpuledger.runtime.budget import BudgetMeter, BudgetStop, EnvelopeStop
from gpuledger.runtime.events import notify
from gpuledger.runtime.launching import LAUNCH_RETRY_DELAYS_S, TrialOutcome, make_launcher, run_trial
from gpuledger.runtime.requests import launch_requests
from gpuledger.runtime.search_marks import mark_dropped, mark_left_suspended, mark_stopped, mark_unasked
from gpuledger.runtime.summary import SweepSummary
from gpuledger.runtime.trial_lines import _one_line, ended_text, failure_detail, started_text
from gpuledger.runtime.writer import Writer
from gpuledger.search import AdaptiveSearch, asks_new_points, is_adaptive
from gpuledger.search.values import objective_values
from gpuledger.spec.expand import Trial
from gpuledger.spec.models import SweepSpec

#: After Ctrl-C: how long the trials being cancelled get to hand in their records (seconds).
INTERRUPT_GRACE_S = 15.0
#: The sweep's lease (one run of a sweep at a time) lasts this long unless renewed; the writer
#: renews it with every batch and at least every third of it.
LEASE_TTL_S = 120.0


def lease_holder() -> str:
    """Returns a name for this run as a lease holder: host, pid and a random tag."""
    return f"gpuledger sweep on {socket.gethostname()} pid {os.getpid()} run {secrets.token_hex(4)}"


class Hooks:
    """What a caller (the Prefect flow, a test) adds to a run; the defaults log to `logging`."""

    def __init__(self, log: Any = None) -> None:
        self.log = log or logging.getLogger("gpuledger.sweep")

    def progress(self, done: int, total: int, final: bool = False) -> None:
        """Trials finished so far (stored or not)."""

    def budget_stopped(self, stop: BudgetStop, trial_ids: list[str]) -> None:
        """Launching stopped at the budget; `trial_ids` were not launched."""


@dataclass
class SweepRun:
    """One run of an accepted (planned, guarded) sweep: the `AcceptedSweep`, the summary it fills in,
    how it launches. `rows`: the planned trial of each trial id, the plan's and those an adaptive
    search admits later (`gpuledger.runtime.admit`)."""

    sweep: AcceptedSweep
    summary: SweepSummary
    rows: dict[str, PlannedTrial] = field(default_factory=dict)
    launcher_factory: Any = make_launcher
    retry_delays_s: tuple[float, ...] = LAUNCH_RETRY_DELAYS_S
    holder: str = field(default_factory=lease_holder)
    lease_ttl_s: float = LEASE_TTL_S

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
    def in_flight(self) -> int:  # trials at once: `cap` slots of `sweep.pack` trials each (packed trials)
        return self.sweep.cap * max(1, self.sweep.pack)


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return None


def sweep_fields(spec, spec_path: Path, plan_json: dict[str, Any], *, sweep_id: str, launcher: str,
                 cap: int) -> dict[str, Any]:
    """Returns the `Warehouse.register_sweep` fields of a sweep of `spec` planned as `plan_json` (the
    sweep itself and the probes that register it first share them)."""
    from gpuledger.plan import prices_used

    return dict(
        sweep_id=sweep_id, name=spec.name, project=spec.project, owner=spec.owner, kind="sweep",
        method=spec.method, model=spec.model, launcher=launcher,
        objective_metric=spec.search.objective.metric, objective_goal=spec.search.objective.goal,
        objective_target=spec.search.objective.target, budget_usd=float(spec.budget.max_usd),
        deadline_s=spec.budget.deadline_s, max_parallel=cap, spec_path=str(spec_path),
        spec_yaml=_read_text(Path(spec_path)), spec_json=spec.model_dump(mode="json"),
        plan_json=plan_json, prices=prices_used(plan_json),
    )


def register(run: SweepRun, hooks: Hooks, landing_dir: Path) -> tuple[list[Any], BudgetMeter]:
    """Step 1: registers the sweep and its trials, stores leftovers; returns (trials to run, meter)."""
    from gpuledger.plan import warehouse_trial_rows
    from gpuledger.warehouse import Warehouse

    sp, summary = run.spec, run.summary
    plan_json = run.plan.to_json()  # the warehouse edge: the plan as stored
    with Warehouse.open() as wh:
        summary.warehouse = str(wh.path)
        # a second run of the same sweep meanwhile refuses here (SweepBusy, exit 4, naming this holder)
        wh.acquire_lease(run.sweep_id, run.holder, run.lease_ttl_s)
        wh.register_sweep(**sweep_fields(sp, run.spec_path, plan_json, sweep_id=run.sweep_id, launcher=run.launcher,
                                         cap=run.cap), forced=summary.forced)
        planned = [] if asks_new_points(sp) else run.trials  # tpe over a range: each one registered when asked
        wh.upsert_trials(run.sweep_id, [{**r, "status": vocabulary.PENDING} for r in warehouse_trial_rows(plan_json, planned)])
        try:
            refused = landing.quarantine_unsigned(landing_dir)
        except OSError as err:  # a full disk: the key cannot be made; nothing unchecked is stored
            refused = None
            hooks.log.warning("Cannot check the records in %s (%s); leaving them for the next run", landing_dir,
                              err.strerror or err)
        if refused:
            hooks.log.warning("%d file(s) in %s were not written by gpuledger's launcher (unsigned); moved to %s, "
                              "not stored: %s", len(refused), landing_dir, landing_dir / landing.REJECTED, ", ".join(refused[:10]))
        if refused is not None and landing.waiting(landing_dir):
            recovered = wh.ingest_landing(landing_dir)
            hooks.log.info("Stored the result records an earlier run left in %s: %s", landing_dir, recovered.summary())
        done_ids = wh.succeeded_trial_ids(run.sweep_id)
        spent = float(wh.query_named("sweep_spent", {"sweep_id": run.sweep_id})["spent_usd"][0] or 0.0)
        measured = [float(c) for c in wh.query_named("runs_measured_costs", {"sweep_id": run.sweep_id})["cost_usd"]]
    todo = []
    for t in planned:
        row = run.rows.get(t.trial_id)
        if t.trial_id in done_ids:
            summary.skipped_done += 1
        elif row is not None and not row.feasible:
            summary.not_feasible += 1
            hooks.log.warning("Trial %s is not launched: %s", t.trial_id, row.reason or "no offer fits")
        else:
            todo.append(t)
    if summary.skipped_done:
        hooks.log.info("%d trial(s) already succeeded in an earlier run of %s; skipping them.",
                       summary.skipped_done, run.sweep_id)
    meter = BudgetMeter.for_plan(float(sp.budget.max_usd), run.rows, spent_usd=spent, measured_usd=measured,
                                 forced=summary.forced)
    summary.spent_usd = spent
    return todo, meter


class _Loop:
    """Steps 2-4: the launch loop of one run (owned by the calling thread)."""

    def __init__(self, run: SweepRun, hooks: Hooks, launcher: Any, writer: Writer, meter: BudgetMeter,
                 todo: list[Any], search: Any = None, pruned_ids: set[str] | None = None,
                 admission: Any = None, money: MoneyWatch | None = None) -> None:
        self.run, self.hooks, self.launcher, self.writer, self.meter = run, hooks, launcher, writer, meter
        self.money = money  # accruals and the envelopes' stop (gpuledger/runtime/accrual.py)
        self.summary = run.summary
        self.requests = launch_requests(run.spec, todo, run.rows, sweep_id=run.sweep_id, launcher=run.launcher)
        self.search = search  # gpuledger.search.AdaptiveSearch: the next trial comes from its study
        self.admission = admission  # gpuledger.runtime.admit.Admission: plans and registers unforeseen trials
        self.pruned_ids = pruned_ids if pruned_ids is not None else set()
        todo_ids = {t.trial_id for t in todo}
        planned = run.trials if admission is None else []  # tpe over a range: the plan's points are not candidates
        self.skip = {t.trial_id for t in planned if t.trial_id not in todo_ids}
        self.pending = deque(todo if search is None else [])
        self.inflight: dict[Future[TrialOutcome], Any] = {}
        self.unkept: dict[str, str] = {}  # run_id -> why its record could not be written to landing
        self.seen_runs: set[str] = set()  # run ids of the records this run took
        self.done_q: queue.Queue[Future[TrialOutcome]] = queue.Queue()
        self._envelope_cancelled: set[str] = set()

    def _on_retry(self, trial_id: str, retry: int, err: BaseException) -> None:
        self.hooks.log.warning("Launcher error on trial %s (retry %d): %s", trial_id, retry, err)

    def _launch(self, pool: ThreadPoolExecutor) -> None:
        if self.writer.lost_lease and self.pending:
            self.hooks.log.error("Stopping launches of %s: this run lost the sweep's lease (%s); %d trial(s) not "
                                 "launched.", self.run.sweep_id, self.writer.lost_lease, len(self.pending))
            self.summary.failures.append(f"lost the sweep's lease: {self.writer.lost_lease}")
            self.summary.interrupted = True
            self.pending.clear()
        while len(self.inflight) < self.run.in_flight and not self.summary.budget_stopped:
            if not self.pending and self.search is not None and not self.summary.interrupted:
                asked = self.search.ask(self.skip)
                mark_dropped(self.search, self.writer, self.summary, self.pruned_ids, self.hooks.log)
                if asked is not None and asked.trial_id not in self.requests and not self._admit(asked):
                    continue
                if asked is not None:
                    self.pending.append(asked)
            if not self.pending:
                return
            t = self.pending[0]
            stop = self.meter.check(t.trial_id)
            if stop is None and self.money is not None and self.money.stop_reason:
                stop = EnvelopeStop(self.meter.spent_usd, 0.0, self.meter.estimate_usd(t.trial_id),
                                    self.meter.budget_usd, why=self.money.stop_reason)
            if stop is not None:
                self._budget_stop(stop)
                return
            self.pending.popleft()
            request = self.requests[t.trial_id]
            fut = pool.submit(run_trial, self.launcher, request, on_retry=self._on_retry,
                              delays_s=self.run.retry_delays_s, watch=self._watches(t.trial_id))
            self.inflight[fut] = t
            self.meter.launched(t.trial_id)
            if self.money is not None:
                rate, k = request.usd_per_hour, self.run.sweep.pack  # a packed trial accrues ~ its share
                self.money.launched(t.trial_id, rate / k if rate else rate, self.launcher)
            self.summary.launched += 1
            fut.add_done_callback(self.done_q.put)
            self.hooks.log.info("%s", started_text(t.trial_id, self.run.rows.get(t.trial_id), len(self.inflight),
                                                   self.summary.launched, self.meter.spent_usd))
            notify("launched", trial_id=t.trial_id, sweep_id=self.run.sweep_id)

    def _watches(self, trial_id: str) -> Any:
        """A running trial's watch: the pruner's (adaptive search) and the envelopes' stop."""
        pruning = self._watch_for(trial_id) if self.search is not None else None
        return pruning if self.money is None else self.money.watching(pruning)

    def _admit(self, trial: Any) -> bool:
        """A trial the search asked that no plan foresaw: planned and registered before it may launch
        (`gpuledger.runtime.admit`); one that may not is told failed to the study."""
        if self.admission is not None and self.admission.admit(trial, self.writer, self.meter, self.requests):
            return True
        self.search.tell(trial.trial_id, None)
        return False

    def _watch_for(self, trial_id: str) -> Any:
        """Returns the pruning watch of one trial: its new objective values (`objective_values`, over
        all its attempts) go to the study; answers why to stop it when the pruner says so."""
        metric = self.search.metric
        offsets: dict[int, int] = {}  # id(handle) -> where `progress` reads on (per attempt)
        high: list[float] = [-math.inf]  # the highest step reported for this trial, over its attempts

        def watch(launcher: Any, handle: Any) -> str | None:
            progress = getattr(launcher, "progress", None)
            if progress is None:
                return None
            points, offsets[id(handle)] = progress(handle, offsets.get(id(handle), 0))
            values, high[0] = objective_values(points, metric, high[0])
            if self.search.report(trial_id, values):
                return self.search.why.get(trial_id, ("rung", f"pruned after {self.search.rungs_of(trial_id)} "
                                                              f"value(s) of {metric}"))[1]
            return None

        return watch

    def _budget_stop(self, stop: BudgetStop) -> None:
        ids = [t.trial_id for t in self.pending]
        if self.search is not None:
            for tid in ids:
                self.search.tell(tid, None)
        self.pending.clear()
        self.summary.budget_stopped = True
        self.summary.skipped_budget = len(ids)
        self.writer.mark(ids, vocabulary.SKIPPED_BUDGET, stop.reason)
        self.hooks.log.warning("Stopping launches of %s: %s; %d trial(s) marked skipped-budget.",
                               self.run.sweep_id, stop.reason, len(ids))
        with contextlib.suppress(Exception):
            self.hooks.budget_stopped(stop, ids)
        notify("skipped-budget", trial_ids=ids, reason=stop.reason)

    def _consume(self, futures: list[Future[TrialOutcome]]) -> None:
        records: list[ResultRecord] = []
        errors: dict[str, str] = {}
        pruned: dict[str, str] = {}
        for fut in futures:
            t = self.inflight.pop(fut)
            try:
                outcome = fut.result()
            except BaseException as err:  # noqa: BLE001 - run_trial only lets interrupts through
                outcome = TrialOutcome(t.trial_id, [], error=f"{type(err).__name__}: {err}")
            outcome.records = self._launched_only(t.trial_id, outcome.records)
            self.money.finished(t.trial_id) if self.money is not None else None
            if outcome.pruned and outcome.pruned.startswith(ENVELOPE_STOP):  # stopped by an envelope, not pruned
                self.summary.budget_stopped, outcome.pruned = True, None
                self.summary.budget_cancelled += 1
                self._envelope_cancelled.add(t.trial_id)
            for rec in outcome.records:
                try:
                    landing.keep(self.writer.landing_dir, rec)
                except OSError as err:  # a full disk: said now, and counted as lost unless the warehouse takes it
                    self.unkept[rec.run_id] = f"could not keep it in {self.writer.landing_dir}: {err.strerror or err}"
                    self.hooks.log.error("Result record %s of trial %s %s", rec.run_id, rec.trial_id,
                                         self.unkept[rec.run_id])
            self.meter.finished(t.trial_id, [(rec.cost_usd, rec.status == vocabulary.CANCELLED) for rec in outcome.records])
            if outcome.error is not None:
                errors[t.trial_id] = outcome.error
                self.summary.launcher_errors += 1
                self.summary.failures.append(f"{t.trial_id}: {outcome.error}")
                self.hooks.log.error("Trial %s: %s", t.trial_id, outcome.error)
            self._tell(t.trial_id, outcome)
            for i, rec in enumerate(outcome.records):
                records.append(rec)
                if rec.status == vocabulary.PREEMPTED and i < len(outcome.records) - 1:  # recovered: a later attempt
                    self.hooks.log.info("Trial %s: attempt %d preempted after %.1f s; recovered", rec.trial_id,
                                        rec.attempt, rec.wall_s)
                elif outcome.pruned and rec.status == vocabulary.CANCELLED:  # pruned, or suspended at a rung
                    held = self.search is not None and self.search.is_suspended(rec.trial_id)
                    self.summary.suspended += held
                    self.summary.pruned += not held
                    pruned[rec.trial_id] = outcome.pruned
                    if not held:
                        self.pruned_ids.add(rec.trial_id)
                    self.hooks.log.info("Trial %s %s after %.1f s", rec.trial_id, outcome.pruned, rec.wall_s)
                elif rec.status == vocabulary.CANCELLED and t.trial_id in self._envelope_cancelled:
                    self.hooks.log.warning("Trial %s stopped after %.1f s: %s", rec.trial_id, rec.wall_s,
                                           self.money.stop_reason if self.money else "budget envelope")
                elif rec.status == vocabulary.SUCCEEDED:
                    self.summary.succeeded += 1
                    self.hooks.log.info("%s", ended_text(rec, self.meter.spent_usd))
                else:
                    self.summary.failed += 1
                    self.summary.failures.append(f"{rec.trial_id}: {rec.status}: {_one_line(rec.reason)}")
                    self.summary.failure_details.append(failure_detail(rec))
                    self.hooks.log.warning("%s", ended_text(rec, self.meter.spent_usd, self.summary.failure_details[-1]))
        self.summary.spent_usd = self.meter.spent_usd
        self.writer.results(records, errors)
        mark_stopped(self.search, self.writer, pruned)  # after their records: `pruned` (`cancelled`: suspended)

    def _launched_only(self, trial_id: str, records: list[ResultRecord]) -> list[ResultRecord]:
        """Returns the records that are of what this run launched (this sweep, this trial, one run id
        each); another one (a launcher handing back a record it did not make for this request) is
        said and never stored."""
        kept: list[ResultRecord] = []
        for rec in records:
            if rec.sweep_id != self.run.sweep_id or rec.trial_id != trial_id or rec.run_id in self.seen_runs:
                self.hooks.log.error("Refusing a record the launcher returned for trial %s: it is of sweep %s, trial "
                                     "%s, run %s (not what this run launched)", trial_id, _one_line(rec.sweep_id, 80),
                                     _one_line(rec.trial_id, 80), _one_line(rec.run_id, 80))
                self.summary.failures.append(f"{trial_id}: a record of something this run did not launch was refused")
                continue
            self.seen_runs.add(rec.run_id)
            kept.append(rec)
        return kept

    def _tell(self, trial_id: str, outcome: TrialOutcome) -> None:
        """Tells the study how the trial ended: pruned (or suspended), its final objective value, or failed; a
        trial that ended by itself before its stop took effect (its record `succeeded`) is told its value."""
        if self.search is None:
            return
        ok = [r for r in outcome.records if r.status == vocabulary.SUCCEEDED]
        if outcome.pruned and not ok:
            self.search.tell_pruned(trial_id)
            return
        value = ok[-1].final_metrics.get(self.search.metric) if ok else None
        self.search.tell(trial_id, value)

    def loop(self) -> None:
        pool = ThreadPoolExecutor(max_workers=self.run.in_flight, thread_name_prefix=f"trial-{self.run.sweep_id[:24]}")
        try:
            while True:
                self._launch(pool)
                if not self.inflight:
                    break
                batch = [self.done_q.get()]
                with contextlib.suppress(queue.Empty):
                    while True:
                        batch.append(self.done_q.get_nowait())
                self._consume(batch)
        except KeyboardInterrupt:
            self._interrupted()
        finally:
            pool.shutdown(wait=False, cancel_futures=True)

    def _interrupted(self) -> None:
        self.summary.interrupted = True
        self.pending.clear()
        self.hooks.log.warning("Interrupted: cancelling %d running trial(s); finished trials' records are stored.",
                               len(self.inflight))
        with contextlib.suppress(Exception):
            close = getattr(self.launcher, "close", None)
            if callable(close):
                close()
        done, _ = wait_futures(list(self.inflight), timeout=INTERRUPT_GRACE_S)
        if done:
            self._consume(list(done))


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
    summary.landing = str(landing_dir := landing.landing_dir_for(run.sweep_id))
    try:
        todo, meter = register(run, hooks, landing_dir)
    except Exception as err:
        if not isinstance(err, SweepBusy):  # ours: give it back (SweepBusy: another run's)
            with contextlib.suppress(Exception), Warehouse.open(migrate=False) as wh:
                wh.release_lease(run.sweep_id, run.holder)
        raise
    search = None
    if is_adaptive(run.spec):
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
    total = len(run.trials) if admission is None else search.n_trials
    counter = {"done": summary.skipped_done}
    pruned_ids: set[str] = set()
    hooks.progress(counter["done"], total)
    notify("planned", sweep_id=run.sweep_id, total=total, todo=to_run, done_before=summary.skipped_done,
           max_parallel=run.cap)

    unkept: dict[str, str] = {}  # run_id -> why its record could not be kept in landing (a full disk)

    def stored(records: list[ResultRecord], errors: dict[str, str], ok: bool) -> None:
        for trial_id, status, cost, lost in (
                [(r.trial_id, vocabulary.PRUNED if r.trial_id in pruned_ids else r.status, r.cost_usd, unkept.get(r.run_id))
                 for r in records] + [(t, vocabulary.FAILED, 0.0, None) for t in errors]):
            counter["done"] += 1
            notify("result", trial_id=trial_id, status=status, cost_usd=cost, done=counter["done"], total=total,
                   spent_usd=summary.spent_usd, stored=ok, kept=lost is None, not_kept=lost, sweep_id=run.sweep_id)
        hooks.progress(counter["done"], total)

    writer = Writer(run.sweep_id, landing_dir, hooks.log, stored, lease=(run.holder, run.lease_ttl_s))
    launcher = run.launcher_factory(run.launcher, run.spec, run.cap, landing_dir, **({"pack": run.sweep.pack} if run.sweep.pack > 1 else {}))
    money = MoneyWatch(run.sweep_id, accrue_interval_s(), writer, hooks.log, dict(run.rows)).start()
    status = vocabulary.SWEEP_FAILED
    try:
        loop = _Loop(run, hooks, launcher, writer, meter, todo, search, pruned_ids, admission, money)
        loop.unkept = unkept
        loop.loop()
        if search is not None and admission is None and not summary.interrupted:
            mark_unasked(search, run.spec.search.strategy, todo, writer, hooks, summary)
        mark_left_suspended(search, writer, summary, hooks.log)
        status = ""
    finally:
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
                wh.finish_sweep(run.sweep_id, status=status)
                wh.stop_accruals(run.sweep_id)  # its runs' records count now; what it still holds goes back
                wh.release_budget(run.sweep_id, f"sweep ended {status}")
                wh.release_lease(run.sweep_id, run.holder)
        except Exception as err:  # noqa: BLE001 - said, and the summary's status already tells the truth
            hooks.log.error("Could not write the final status %r of %s (its lease expires by itself in %g s): %s",
                            status, run.sweep_id, run.lease_ttl_s, err)
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


__all__ = ["Hooks", "SweepRun", "best_recipe", "execute", "register"]
