"""The sweep's one warehouse writer: a thread that stores finished trials' records in batches.

The launch loop hands it records (and launcher errors, and trials to mark) and goes on launching;
trials the adaptive search asked for are registered through it too (`register`, which waits);
the thread drains everything queued into ONE transaction per batch, opening the warehouse only
for that batch (so readers such as `gpuledger sql` get in between). While it writes, new results
queue up and form the next batch, so validation's fixed cost (~40 ms a frame, measured) is paid per
batch, not per trial. Stored records' files move to `landing/ingested/` (`gpuledger.runtime.landing`).
With `service=True` (`[warehouse] ingest = "service"`) the records are landed for the ingest service
instead (`gpuledger.warehouse.ingest_service.land`) and their files move to `ingested/` once landed.

A batch the warehouse cannot take (it retries while a reader holds the file, then raises) is not
lost: its records stay in the landing folder, its marks are kept, and `close()` tries once more
before the run ends; `failed_batches` and `last_error` say what happened, and the caller counts
what is still waiting in the landing folder. `on_stored(records, errors, stored)` is called after
each batch (progress, the CLI's lines).
"""

from __future__ import annotations

import contextlib
import contextvars
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpuledger import vocabulary
from gpuledger.record import ResultRecord
from gpuledger.runtime import landing

#: How long the writer gathers finished trials into one transaction (seconds).
WRITER_WINDOW_S = 0.3
#: How long `register` waits for its rows to be written (the warehouse's own lock wait is shorter).
REGISTER_WAIT_S = 120.0


class Writer:
    def __init__(self, sweep_id: str, landing_dir: Path, log: Any,
                 on_stored: Callable[[list[ResultRecord], dict[str, str], bool], None] | None = None,
                 window_s: float = WRITER_WINDOW_S, lease: tuple[str, float] | None = None,
                 service: bool | None = None) -> None:
        self.sweep_id = sweep_id
        self.landing_dir = landing_dir
        self.log = log
        self.on_stored = on_stored
        self.window_s = window_s
        self.lease = lease  # (holder, ttl_s): renewed with every batch and every ttl/3 while idle
        #: `[warehouse] ingest = "service"` (None: the setting): records are landed for ingest/team, not written here
        if service is None:
            from gpuledger.warehouse.ingest_service import mode

            service = mode() == "service"
        self.service = service
        self.landed: set[str] = set()  # run ids landed for the service (the sweep waits for them at its end)
        self.lost_lease: str | None = None  # why this run no longer holds the sweep's lease
        self.failed_batches = 0
        self.last_error: str | None = None
        self.rejected: dict[str, str] = {}  # run_id -> why the warehouse refused the record
        #: records of batches the warehouse could not take (run_id -> record): retried by `close()`
        #: from memory (never re-read from the landing folder, which a trial can write)
        self.unstored: dict[str, ResultRecord] = {}
        self._unwritten_marks: list[tuple[list[str], str, str, str | None]] = []
        self._ended: set[str] = set()  # trials whose record (or launcher error) this writer took
        self._closing = False
        self._retried = False
        self._queue: queue.Queue[Any] = queue.Queue()
        # a copy of the caller's context: a Prefect logger keeps working from the thread
        self._thread = threading.Thread(target=contextvars.copy_context().run, args=(self._loop,),
                                        name=f"gpuledger-writer-{sweep_id}", daemon=True)
        self._thread.start()

    def results(self, records: list[ResultRecord], errors: dict[str, str]) -> None:
        """Queues finished trials: their records, and {trial_id: launcher error} for those that have none."""
        self._queue.put(("results", records, errors))

    def register(self, rows: list[dict[str, Any]]) -> bool:
        """Stores `trials` rows (trials the search asked for, `Warehouse.upsert_trials`) ahead of the
        records of the same batch and waits until they are written; returns False when the warehouse
        could not take them (`last_error` says why)."""
        done = threading.Event()
        outcome: dict[str, bool] = {}
        self._queue.put(("trials", rows, done, outcome))
        done.wait(REGISTER_WAIT_S)
        return outcome.get("stored", False)

    def accruals(self, rows: list[dict[str, Any]]) -> None:
        """Queues running attempts' spend so far (`trial_accruals` rows, gpuledger/runtime/accrual.py)."""
        self._queue.put(("accruals", rows))

    def mark(self, trial_ids: list[str], status: str, reason: str, stop_rule: str | None = None) -> None:
        """Queues a status for trials that did not run (`skipped-budget`, ...) or were stopped (`pruned`,
        `stop_rule`: rung | curve, migration 042)."""
        self._queue.put(("mark", trial_ids, status, reason, stop_rule))

    def close(self) -> None:
        """Writes everything queued, retries what failed once, then stops the thread. Safe to call
        again (after a Ctrl-C interrupted it): it goes on where it was."""
        if not self._closing:
            self._closing = True
            self._queue.put(None)
        self._thread.join()
        if not self._retried and (self.unstored or self._unwritten_marks):
            self._retried = True
            self._retry_leftovers()

    # -- the thread -------------------------------------------------------------------------

    def _loop(self) -> None:
        stop = False
        idle_s = None if self.lease is None else max(1.0, self.lease[1] / 3)
        while not stop:
            try:
                items = [self._queue.get(timeout=idle_s)]
            except queue.Empty:
                self._renew()
                continue
            window_end = time.monotonic() + self.window_s
            # a registration is waited for (a trial launches after it): the batch is written once one arrives
            while items[-1] is not None and items[-1][0] != "trials":
                try:
                    items.append(self._queue.get(timeout=max(0.0, window_end - time.monotonic())))
                except queue.Empty:
                    break
            if None in items:
                stop = True
                items = [i for i in items if i is not None]
            if items:
                self._write(items)

    def _write(self, items: list[Any]) -> None:
        records = [r for kind, *rest in items if kind == "results" for r in rest[0]]
        errors = {k: v for kind, *rest in items if kind == "results" for k, v in rest[1].items()}
        marks = [(ids, vocabulary.FAILED, reason[:2000], None) for ids, reason in (([t], r) for t, r in errors.items())]
        marks += [tuple(rest) for kind, *rest in items if kind == "mark"]
        registered = [item for item in items if item[0] == "trials"]
        self._ended.update(r.trial_id for r in records)
        self._ended.update(errors)
        # a tick computed before a trial ended must not make it run again (its record counts now)
        accrued = {(r["trial_id"], r["launch_no"]): r for kind, *rest in items if kind == "accruals" for r in rest[0]
                   if r["trial_id"] not in self._ended}
        stored = False
        try:
            self._store(records, marks, [row for item in registered for row in item[1]], list(accrued.values()))
            stored = True
        except Exception as err:  # noqa: BLE001 - the records stay in landing; close() retries, the run says so
            self.failed_batches += 1
            self.unstored.update((r.run_id, r) for r in records)
            self.last_error = " ".join(str(err).split())[:500]
            self._unwritten_marks.extend(marks)  # type: ignore[arg-type]
            self.log.error("Could not store %d result record(s) in the warehouse (kept in %s unless a line above "
                           "says it could not be): %s",
                           len(records), self.landing_dir, self.last_error)
        for _kind, _rows, done, outcome in registered:
            outcome["stored"] = stored
            done.set()
        if self.on_stored is not None:
            with contextlib.suppress(Exception):
                self.on_stored(records, errors, stored)

    def _store(self, records: list[ResultRecord], marks: list[Any], trials: list[dict[str, Any]] | None = None,
               accruals: list[dict[str, Any]] | None = None) -> None:
        from gpuledger.warehouse import Warehouse

        with Warehouse.open(migrate=False) as wh:
            self._renew(wh)
            if accruals:  # before the records: a record stored in this batch ends its trial's accrual
                try:
                    wh.write_accruals(accruals)
                except Exception as err:  # noqa: BLE001 - accruals are a view of the moment: the next tick writes again
                    self.log.warning("Could not write the running trials' accrued spend: %s", err)
            if trials:
                wh.upsert_trials(self.sweep_id, trials)
            rejected = {}
            if records and self.service:
                self._land(records)
            elif records:
                result = wh.ingest_records(records, sources=[r.run_id for r in records])
                rejected = {rej.source: rej.reason for rej in result.rejected}
                for run_id, reason in rejected.items():
                    self.log.error("Result record %s rejected by the warehouse: %s", run_id, reason)
                self.rejected.update(rejected)
            for ids, status, reason, rule in marks:
                wh.mark_trials(self.sweep_id, ids, status, reason=reason, stop_rule=rule)
        landing.settle(self.landing_dir, [r.run_id for r in records if r.run_id not in rejected], rejected)

    def _land(self, records: list[ResultRecord]) -> None:
        """Service mode: lands the records for ingest/team (`gpuledger.warehouse.ingest_service`); raises
        when the landing cannot take them (the batch then fails: its records stay in the local folder)."""
        from gpuledger.warehouse import ingest_service

        ingest_service.land(records)
        self.landed.update(r.run_id for r in records)

    def await_ingest(self) -> tuple[str, int]:
        """Service mode, after `close()`: waits (`[warehouse] ingest_wait_s`) until ingest/team has stored
        the records this run landed, so that the sweep's status, report and budget see them; returns
        (the landing, how many it had not stored in time: they stay landed, nothing is lost)."""
        from gpuledger import settings
        from gpuledger.warehouse import ingest_service, landing_store

        wait_s = float(settings.current().values.get("warehouse.ingest_wait_s") or 0.0)
        where = landing_store.default_landing()
        self.log.info("Landed %d result record(s) in %s; waiting up to %g s for ingest/team to store them ...",
                      len(self.landed), where, wait_s)
        missing = ingest_service.wait_stored(sorted(self.landed), wait_s)
        if missing:
            self.log.error("%d of %d landed result record(s) were not stored by ingest/team within %g s; they stay "
                           "in %s (the service stores them when it runs; `gpuledger warehouse ingest` does it now): "
                           "%s", len(missing), len(self.landed), wait_s, where, ", ".join(sorted(missing)[:10]))
        return where, len(missing)

    def _renew(self, wh: Any = None) -> None:
        """Renews the sweep's lease (opening the warehouse when `wh` is None); a busy warehouse is
        tried again next time, a lease another run took over is remembered in `lost_lease`."""
        if self.lease is None or self.lost_lease:
            return
        from gpuledger.warehouse import SweepBusy, Warehouse

        try:
            if wh is not None:
                wh.renew_lease(self.sweep_id, *self.lease)
                return
            with Warehouse.open(migrate=False) as own:
                own.renew_lease(self.sweep_id, *self.lease)
        except SweepBusy as err:
            self.lost_lease = str(err)
            self.log.error("This run lost the lease of sweep %s: %s", self.sweep_id, err)
        except Exception as err:  # noqa: BLE001 - busy warehouse: renewed with the next batch or tick
            if wh is not None:
                raise
            self.log.warning("Could not renew the lease of sweep %s (tried again shortly): %s", self.sweep_id, err)

    def _retry_leftovers(self) -> None:
        """One more try for what failed: the records of failed batches (from memory), and the marks."""
        from gpuledger.warehouse import Warehouse

        try:
            with Warehouse.open(migrate=False) as wh:
                if self.unstored and self.service:
                    records = list(self.unstored.values())
                    self._land(records)
                    self.log.info("Landed the records of the failed batches for the ingest service: %d", len(records))
                    self.unstored.clear()
                    landing.settle(self.landing_dir, [r.run_id for r in records], {})
                elif self.unstored:
                    records = list(self.unstored.values())
                    result = wh.ingest_records(records, sources=[r.run_id for r in records])
                    rejected = {rej.source: rej.reason for rej in result.rejected}
                    self.rejected.update(rejected)
                    self.log.info("Stored the records of the failed batches: %s", result.summary())
                    self.unstored.clear()
                    landing.settle(self.landing_dir, [r.run_id for r in records if r.run_id not in rejected], rejected)
                for ids, status, reason, rule in self._unwritten_marks:
                    wh.mark_trials(self.sweep_id, ids, status, reason=reason, stop_rule=rule)
            self._unwritten_marks.clear()
        except Exception as err:  # noqa: BLE001 - counted and named by the caller
            self.last_error = " ".join(str(err).split())[:500]
            self.log.error("The warehouse is still unavailable: %s", self.last_error)
