"""Steps 2-5 of a run of a sweep (`gpuledger.runtime.engine`): the launch loop. It launches the trials
at most `in_flight` at once on a plain `ThreadPoolExecutor`, checks the budget rule before each launch,
asks an adaptive search for the next trial, watches running trials (the pruner, the envelopes' stop),
hands finished trials' records to the writer, and on Ctrl-C cancels what runs and keeps what finished.
"""

from __future__ import annotations

import contextlib
import math
import queue
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from typing import Any

from gpuledger import vocabulary
from gpuledger.record import ResultRecord
from gpuledger.runtime import landing
from gpuledger.runtime.accrual import ENVELOPE_STOP, MoneyWatch
from gpuledger.runtime.budget import BudgetMeter, BudgetStop, EnvelopeStop
from gpuledger.runtime.launching import TrialOutcome, run_trial
from gpuledger.runtime.requests import launch_requests
from gpuledger.runtime.search_marks import mark_dropped, mark_stopped
from gpuledger.runtime.trial_lines import _one_line, ended_text, failure_detail, started_text
from gpuledger.runtime.writer import Writer
from gpuledger.search.values import objective_points

#: After Ctrl-C: how long the trials being cancelled get to hand in their records (seconds).
INTERRUPT_GRACE_S = 15.0


class LaunchLoop:
    """Steps 2-4: the launch loop of one run (owned by the calling thread)."""

    def __init__(self, run: Any, hooks: Any, launcher: Any, writer: Writer, meter: BudgetMeter,
                 todo: list[Any], search: Any = None, pruned_ids: set[str] | None = None,
                 admission: Any = None, money: MoneyWatch | None = None) -> None:
        self.run, self.hooks, self.launcher, self.writer, self.meter = run, hooks, launcher, writer, meter
        self.money = money  # accruals and the envelopes' stop (gpuledger/runtime/accrual.py)
        self.summary = run.summary
        self.probes = run.probes  # a probe run: its launches (`ProbeLaunch`: each its own request) in order
        self.requests = {} if self.probes is not None else launch_requests(run.spec, todo, run.rows, sweep_id=run.sweep_id,
                                                                           launcher=run.launcher)
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
            request = t.request if self.probes is not None else self.requests[t.trial_id]
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
            self.run.notify("launched", trial_id=t.trial_id, sweep_id=self.run.sweep_id)

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
        """Returns the pruning watch of one trial: its new objective values (`objective_points`, over
        all its attempts) go to the study; answers why to stop it when the pruner says so."""
        metric = self.search.metric
        offsets: dict[int, int] = {}  # id(handle) -> where `progress` reads on (per attempt)
        high: list[float] = [-math.inf]  # the highest step reported for this trial, over its attempts

        def watch(launcher: Any, handle: Any) -> str | None:
            progress = getattr(launcher, "progress", None)
            if progress is None:
                return None
            points, offsets[id(handle)] = progress(handle, offsets.get(id(handle), 0))
            kept, high[0] = objective_points(points, metric, high[0])
            if self.search.report(trial_id, [float(p["value"]) for p in kept], [p.get("t_s") for p in kept]):
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
        self.run.notify("skipped-budget", trial_ids=ids, reason=stop.reason)

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
            if self.probes is not None:  # the stored form of a probe: its purpose and shape (kept so, signed)
                outcome.records = [r.model_copy(update={"purpose": vocabulary.PROBE_PURPOSE, "probe_shape": t.shape})
                                   for r in outcome.records]
                self.run.records += outcome.records
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
                self.summary.failures.append(f"{'trial ' if self.probes is not None else ''}{t.trial_id}: {outcome.error}")
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
                    self.summary.failures.append(f"probe of trial {rec.trial_id} {rec.status}: {_one_line(rec.reason)}"
                                                 if self.probes is not None else
                                                 f"{rec.trial_id}: {rec.status}: {_one_line(rec.reason)}")
                    self.summary.failure_details.append(failure_detail(rec))
                    self.hooks.log.warning("%s", ended_text(rec, self.meter.spent_usd, self.summary.failure_details[-1]))
        self.summary.spent_usd = self.meter.spent_usd
        self.writer.results(records, {} if self.probes is not None else errors)  # a probe's error fails no trial
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
                if not self.inflight and self._then():
                    continue
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

    def _then(self) -> bool:
        """A probe run whose launches all ended: queues the launches that follow (`ProbeBatch.then`, once);
        returns True when there are some."""
        if self.probes is None or self.probes.then is None or self.summary.interrupted:
            return False
        then, self.probes.then = self.probes.then, None
        self.pending.extend(then(list(self.run.records)))
        return bool(self.pending)

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
