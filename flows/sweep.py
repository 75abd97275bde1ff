"""Flow `sweep`: plan, guard, launch, ingest as results arrive, stop at the budget, report.

    sweep(spec="specs/lora-grid.yaml", launcher=None, max_parallel=None, dry_run=False, force=False)

What one run does, in order (every step logs what it did):
1. Loads the spec and expands its trials; plans them (`gpuledger.plan`), logs the plan's human
   table and publishes it as a table artifact `sweep-NAME-plan`.
2. The budget guard: over budget -> `BudgetExceeded` (exit 3 from the CLI) before anything is
   launched and before any warehouse write, unless `force` (then the sweep is recorded as forced
   and the runtime budget stop is off too: the person said to spend it). `dry_run` stops here.
3. Registers the sweep, its spec, plan and price snapshot, and its trials in the warehouse.
   Result records left in the sweep's landing folder by an earlier, killed run are ingested
   first; trials the warehouse holds as succeeded are skipped (a re-run continues a sweep).
4. Launches the trials through the launcher (`gpuledger.launch`), each as a Prefect task run, at
   most `max_parallel` in flight. The cap is Prefect-native: the tasks run on a
   `ThreadPoolTaskRunner(max_workers=max_parallel)`, and the flow never submits more than that
   many (with `launcher: local` the plan already capped `max_parallel` to what this machine fits).
5. Ingests each result as it arrives. One writer thread of the flow is DuckDB's only writer: tasks
   only return the records that jobs left as JSON in the landing folder; the main thread consumes
   completed futures (spend, budget, logs) and hands the records to the writer, which writes
   whatever has queued in one transaction per batch, opening the warehouse only for that write (so
   `gpuledger sql` can read between batches) while launching goes on.
6. Before each launch: when measured spend + the estimates of the trials in flight + this trial's
   estimate would cross `budget.max_usd`, stops launching, marks the rest `skipped-budget` and emits
   the Prefect event `gpuledger.budget.exceeded` (payload: sweep, spent, budget, ...). A trial's
   estimate is max(plan estimate, mean measured cost of this sweep's finished trials).
7. Writes the ROI report (`gpuledger.report`) and publishes its markdown, a table of the trial
   results and a link to the HTML as artifacts.

Errors: an exception from the launcher itself (submit/poll/collect) is retried by Prefect with
backoff (`LAUNCH_RETRY_DELAYS_S`); a trial that ran and failed is a result (recorded, not retried).
Progress: a Prefect progress artifact, and `progress_listener(...)` for the CLI's progress bar.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import json
import math
import os
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any

import flows  # noqa: F401  (telemetry off before Prefect is imported)

# isort: split
from prefect import flow, get_run_logger, task
from prefect.artifacts import (
    create_progress_artifact,
    create_table_artifact,
    update_progress_artifact,
)
from prefect.cache_policies import NO_CACHE
from prefect.events import emit_event
from prefect.states import Failed, State
from prefect.task_runners import ThreadPoolTaskRunner

from gpuledger.errors import BudgetExceeded, UserError
from gpuledger.launch.base import TERMINAL, LaunchRequest
from gpuledger.record import ResultRecord

#: Backoff between attempts when the launcher itself raises (not the trial): 3 retries.
LAUNCH_RETRY_DELAYS_S = [2.0, 10.0, 30.0]
BUDGET_EVENT = "gpuledger.budget.exceeded"
#: How long the writer gathers finished trials into one warehouse transaction (seconds). Pandera's
#: validation costs ~40 ms per frame whatever its size (measured), so batching is what keeps ingest
#: cheap when many short trials finish close together.
WRITER_WINDOW_S = 0.3

# -- progress listeners (the CLI's progress bar) ----------------------------------------------

_listeners: list[Callable[[dict[str, Any]], None]] = []
_listeners_lock = threading.Lock()


@contextlib.contextmanager
def progress_listener(fn: Callable[[dict[str, Any]], None]) -> Iterator[None]:
    """Calls `fn(event)` for each progress event of sweeps run in this process while inside.

    Events are dicts with `kind`: `planned` (total, todo, done_before), `launched` (trial_id),
    `result` (trial_id, status, cost_usd, done, total), `skipped-budget` (trial_ids), `finished`
    (the summary). `result` comes after the record is committed to the warehouse (from the writer
    thread); the others from the flow's main thread. Exceptions in `fn` are ignored.
    """
    with _listeners_lock:
        _listeners.append(fn)
    try:
        yield
    finally:
        with _listeners_lock:
            _listeners.remove(fn)


def _notify(kind: str, **data: Any) -> None:
    with _listeners_lock:
        listeners = list(_listeners)
    for fn in listeners:
        with contextlib.suppress(Exception):
            fn({"kind": kind, **data})


# -- launchers shared by the task runs of one flow run -----------------------------------------

_launchers: dict[str, Any] = {}
_launcher_ids = itertools.count(1)


def _register_launcher(launcher: Any) -> str:
    key = f"launcher-{os.getpid()}-{next(_launcher_ids)}"
    _launchers[key] = launcher
    return key


def poll_interval_s(launcher: Any) -> float:
    """Returns how often to poll a launcher: fast locally (subprocesses), slowly for clouds."""
    explicit = getattr(launcher, "poll_interval_s", None)
    if explicit is not None:
        return float(explicit)
    return 0.02 if getattr(launcher, "name", "") == "local" else 10.0


def launch_and_collect(launcher: Any, request: LaunchRequest) -> list[ResultRecord]:
    """Submits one trial, polls it to a terminal status, returns its result records.

    A trial's own failure is a normal return (a record with status failed/oom/...). Only the
    launcher raising (cannot submit, cannot poll) raises here; the attempt is cancelled first so a
    retry does not leave a twin running.
    """
    handle = launcher.submit(request)
    try:
        interval = poll_interval_s(launcher)
        while launcher.poll(handle) not in TERMINAL:
            time.sleep(interval)
        return launcher.collect(handle)
    except BaseException:
        with contextlib.suppress(Exception):
            launcher.cancel(handle)
        raise


@task(
    name="run-trial",
    task_run_name="trial-{request.trial_id}",
    retries=len(LAUNCH_RETRY_DELAYS_S),
    retry_delay_seconds=LAUNCH_RETRY_DELAYS_S,
    retry_jitter_factor=0.2,
    persist_result=False,
    cache_policy=NO_CACHE,
)
def run_trial(launcher_key: str, request: LaunchRequest) -> list[ResultRecord]:
    """Runs one trial through the flow's launcher; returns its result records (one per attempt)."""
    return launch_and_collect(_launchers[launcher_key], request)


# -- plain helpers -------------------------------------------------------------------------------


@dataclass
class SweepSummary:
    """What one run of the flow did (the flow's return value, as a dict)."""

    sweep_id: str
    name: str
    dry_run: bool = False
    forced: bool = False
    trials: int = 0
    max_parallel: int = 0
    skipped_done: int = 0  # succeeded in an earlier run of the same sweep
    launched: int = 0
    succeeded: int = 0
    failed: int = 0
    launcher_errors: int = 0
    skipped_budget: int = 0
    not_feasible: int = 0
    spent_usd: float = 0.0
    budget_usd: float | None = None
    budget_stopped: bool = False
    status: str = "planned"
    report_html: str | None = None
    report_markdown: str | None = None
    warehouse: str | None = None
    failures: list[str] = field(default_factory=list)


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict | list):
        return json.dumps(value, default=str)
    return value


def _table_rows(rows: list[dict[str, Any]], columns: list[str] | None = None) -> list[dict[str, Any]]:
    """Returns rows with JSON-friendly cells (what a Prefect table artifact can show)."""
    out = []
    for row in rows:
        keys = columns if columns is not None else list(row)
        out.append({k: _jsonable(row.get(k)) for k in keys})
    return out


def _artifact_key(*parts: str) -> str:
    """Returns an artifact key: lowercase letters, digits and dashes only (Prefect's rule)."""
    text = "-".join(parts).lower()
    return "".join(c if c.isalnum() or c == "-" else "-" for c in text)[:200]


def _est_cost(row: dict[str, Any]) -> float:
    value = row.get("est_cost_usd")
    try:
        value = float(value)
    except (TypeError, ValueError):
        return 0.0
    return value if math.isfinite(value) else 0.0


def _record_cost(record: ResultRecord) -> float:
    return float(record.cost_usd)


def landing_dir_for(sweep_id: str) -> Path:
    """Returns the sweep's landing folder: `landing/SWEEP_ID/` beside the warehouse file."""
    from gpuledger.warehouse import resolve_path

    return resolve_path().resolve().parent / "landing" / sweep_id


def _make_launcher(name: str, spec: Any, max_parallel: int, landing: Path) -> Any:
    from gpuledger.launch import get_launcher
    from gpuledger.plan import local_rate

    if name == "local":
        return get_launcher(
            "local",
            max_parallel=max_parallel,
            landing_dir=landing,
            usd_per_hour=local_rate(spec).usd_per_hour,
            default_timeout_s=spec.local.trial_timeout,
        )
    return get_launcher(name, landing_dir=landing)


def _requests(spec: Any, trials: list[Any], rows: dict[str, dict[str, Any]], sweep_id: str,
              launcher_name: str) -> dict[str, LaunchRequest]:
    workdir = (Path.cwd() / spec.task.workdir).resolve()
    out = {}
    for t in trials:
        row = rows.get(t.trial_id, {})
        local = launcher_name == "local"
        rate = float(row.get("usd_per_hour") or 0.0)  # local: the plan's local rate (spec or reference)
        out[t.trial_id] = LaunchRequest(
            sweep_id=sweep_id,
            sweep_name=spec.name,
            trial_id=t.trial_id,
            params=dict(t.params),
            run=t.run,
            setup=t.setup,
            workdir=workdir,
            env=dict(spec.task.env),
            timeout_s=spec.local.trial_timeout if local else None,
            accelerator=None if local else row.get("accelerator"),
            gpus=0 if local else int(row.get("gpus") or 0),
            cloud=None if local else row.get("cloud"),
            region=None if local else row.get("region"),
            instance_type=None if local else row.get("instance_type"),
            spot=False if local else bool(row.get("spot")),
            usd_per_hour=rate,
            on_demand_usd_per_hour=row.get("on_demand_usd_per_hour"),
            price_source="local" if local else "catalog",
        )
    return out


class _Progress:
    """The Prefect progress artifact of one flow run (best effort: a failed update never fails a sweep).

    Updated at most once a second (each update is an API call), and always at the end.
    """

    MIN_INTERVAL_S = 1.0

    def __init__(self, key: str, total: int, done: int) -> None:
        self.total = max(total, 1)
        self.id = None
        self.last = -1.0
        self.last_t = 0.0
        with contextlib.suppress(Exception):
            self.id = create_progress_artifact(progress=100.0 * done / self.total, key=key,
                                               description=f"trials finished of {total}")

    def update(self, done: int, force: bool = False) -> None:
        pct = round(100.0 * min(done, self.total) / self.total, 1)
        now = time.monotonic()
        if self.id is None or pct == self.last or (not force and now - self.last_t < self.MIN_INTERVAL_S):
            return
        self.last, self.last_t = pct, now
        with contextlib.suppress(Exception):
            update_progress_artifact(artifact_id=self.id, progress=pct)


class _Writer:
    """The sweep's one DuckDB writer: a thread that ingests what finished trials left, in batches.

    The flow's launch loop hands it records (and launcher errors, and trials to mark) and goes on
    launching; the thread drains everything queued into ONE transaction per batch, opening the
    warehouse only for that batch (so `gpuledger sql` readers get in between). While it writes, new
    results queue up and form the next batch, so validation's fixed cost is paid per batch, not per
    trial. `on_ingested(records, errors)` is called after each commit (progress, the CLI's lines).
    Runs in a copy of the flow's context so Prefect's logger and artifacts work from it.
    """

    def __init__(self, sweep_id: str, log: Any, on_ingested: Callable[[list[Any], dict[str, str]], None]) -> None:
        self.sweep_id = sweep_id
        self.log = log
        self.on_ingested = on_ingested
        self.queue: queue.Queue[Any] = queue.Queue()
        self.thread = threading.Thread(target=contextvars.copy_context().run, args=(self._loop,),
                                       name=f"gpuledger-writer-{sweep_id}", daemon=True)
        self.thread.start()

    def results(self, records: list[ResultRecord], errors: dict[str, str]) -> None:
        self.queue.put(("results", records, errors))

    def mark(self, trial_ids: list[str], status: str, reason: str) -> None:
        self.queue.put(("mark", trial_ids, status, reason))

    def close(self) -> None:
        """Writes everything queued, then stops the thread."""
        self.queue.put(None)
        self.thread.join()

    def _loop(self) -> None:
        from gpuledger.warehouse import Warehouse

        stop = False
        while not stop:
            items = [self.queue.get()]
            # gather what else finishes within a short window: one transaction (and one validation,
            # whose cost is mostly fixed per batch) for all of it; results still land within a second
            window_end = time.monotonic() + WRITER_WINDOW_S
            while items[-1] is not None:
                try:
                    items.append(self.queue.get(timeout=max(0.0, window_end - time.monotonic())))
                except queue.Empty:
                    break
            if None in items:
                stop = True
                items = [i for i in items if i is not None]
            if not items:
                continue
            records = [r for kind, *rest in items if kind == "results" for r in rest[0]]
            errors = {k: v for kind, *rest in items if kind == "results" for k, v in rest[1].items()}
            try:
                with Warehouse.open(migrate=False) as wh:
                    if records:
                        result = wh.ingest_records(records)
                        for rej in result.rejected:
                            self.log.error("Result record rejected by the warehouse: %s: %s", rej.source, rej.reason)
                    for trial_id, reason in errors.items():
                        wh.mark_trials(self.sweep_id, [trial_id], "failed", reason=reason[:2000])
                    for kind, *rest in items:
                        if kind == "mark":
                            wh.mark_trials(self.sweep_id, rest[0], rest[1], reason=rest[2])
            except Exception as err:  # the records stay in the landing folder; a re-run ingests them
                self.log.error("Could not write %d result(s) to the warehouse (they stay in the landing folder "
                               "and are ingested by the next run): %s", len(records), err)
            with contextlib.suppress(Exception):
                self.on_ingested(records, errors)


# -- the flow --------------------------------------------------------------------------------------


@flow(name="sweep", persist_result=False)
def sweep(
    spec: str,
    launcher: str | None = None,
    max_parallel: int | None = None,
    dry_run: bool = False,
    force: bool = False,
) -> dict[str, Any] | State:
    """Plans, guards, launches, ingests and reports one sweep; returns its summary (a dict).

    A budget refusal (no `force`) ends the run Failed with the guard's message: calling the flow
    raises `BudgetExceeded` (exit 3 from the CLI).
    """
    from gpuledger.plan import budget_guard, plan_sweep, render_plan
    from gpuledger.spec import expand_trials, load_spec, sweep_id_for

    log = get_run_logger()
    spec_path = Path(spec)
    sp = load_spec(spec_path)
    if sp.kind != "sweep":
        raise UserError(f"{spec}: kind is {sp.kind!r}; the sweep flow runs `kind: sweep` specs "
                        f"(use `gpuledger capacity` for capacity specs)")
    launcher_name = launcher or sp.launcher
    if launcher_name not in ("local", "skypilot"):
        raise UserError(f"unknown launcher {launcher_name!r}: use local or skypilot")
    sweep_id = sweep_id_for(sp)
    trials = expand_trials(sp)

    # 1. plan
    from gpuledger.planning import planning_inputs

    plan = plan_sweep(sp, trials, max_parallel=max_parallel, launcher=launcher_name,
                      **planning_inputs(sp, launcher_name))
    plan_json = plan.to_json()
    rows = {r["trial_id"]: r for r in plan_json.get("trials", [])}
    cap = int(plan_json.get("max_parallel") or max_parallel or sp.resources.max_parallel or 1)
    cap = max(1, min(cap, max_parallel or cap))
    log.info("Plan of sweep %s (%d trials, at most %d at once):\n%s", sweep_id, len(trials), cap,
             render_plan(plan))
    plan_columns = ["trial_id", "params", "accelerator", "gpus", "cloud", "region", "instance_type", "spot",
                    "est_memory_gib", "est_wall_s", "est_basis", "est_cost_usd", "feasible", "reason"]
    with contextlib.suppress(Exception):
        create_table_artifact(
            key=_artifact_key("sweep", sp.name, "plan"),
            table=_table_rows(list(rows.values()), plan_columns),
            description=(f"Plan of {sweep_id}: {len(trials)} trials, est. "
                         f"${float(plan_json.get('total_est_cost_usd') or 0):.2f} of "
                         f"${float(sp.budget.max_usd):.2f} budget, max_parallel {cap}"),
        )

    summary = SweepSummary(sweep_id=sweep_id, name=sp.name, dry_run=dry_run, forced=False,
                           trials=len(trials), max_parallel=cap, budget_usd=float(sp.budget.max_usd))

    # 2. the budget guard: before any launch and any warehouse write
    try:
        budget_guard(plan)
    except BudgetExceeded as err:
        if not force:
            # a refusal is an answer, not a crash: a Failed state with the message (no traceback in
            # the logs); callers get the BudgetExceeded back from the state (see gpuledger sweep)
            log.error("Budget guard refused sweep %s (nothing launched, nothing written): %s", sweep_id, err)
            return Failed(message=str(err), data=err)
        summary.forced = True
        log.warning("Budget guard refused sweep %s but force=True: launching anyway (recorded as forced). %s",
                    sweep_id, err)
    if dry_run:
        summary.status = "dry-run"
        log.info("Dry run: nothing launched, nothing written.")
        _notify("finished", summary=asdict(summary))
        return asdict(summary)

    return _run(sp, spec_path, sweep_id, trials, plan_json, rows, cap, launcher_name, summary, log)


def _run(sp: Any, spec_path: Path, sweep_id: str, trials: list[Any], plan_json: dict[str, Any],
         rows: dict[str, dict[str, Any]], cap: int, launcher_name: str, summary: SweepSummary,
         log: Any) -> dict[str, Any]:
    from gpuledger.warehouse import Warehouse

    forced = summary.forced
    budget = float(sp.budget.max_usd)
    landing = landing_dir_for(sweep_id)

    # 3. register; recover records an earlier (killed) run left behind; what is already done
    from gpuledger.plan import prices_used, warehouse_trial_rows

    with Warehouse.open() as wh:
        summary.warehouse = str(wh.path)
        wh.register_sweep(
            sweep_id=sweep_id, name=sp.name, project=sp.project, owner=sp.owner, kind="sweep",
            method=sp.method, model=sp.model, launcher=launcher_name,
            objective_metric=sp.search.objective.metric, objective_goal=sp.search.objective.goal,
            objective_target=sp.search.objective.target, budget_usd=budget,
            deadline_s=sp.budget.deadline_s,
            max_parallel=cap, forced=forced, spec_path=str(spec_path),
            spec_yaml=_read_text(spec_path), spec_json=sp.model_dump(mode="json"),
            plan_json=plan_json, prices=prices_used(plan_json),
        )
        wh.upsert_trials(sweep_id, [{**r, "status": "pending"} for r in warehouse_trial_rows(plan_json, trials)])
        if landing.is_dir() and any(landing.glob("*.json")):
            recovered = wh.ingest_landing(landing)
            log.info("Recovered result records an earlier run left in %s: %s", landing, recovered.summary())
        done_ids = wh.succeeded_trial_ids(sweep_id)
        spent = float(wh.scalar("SELECT coalesce(sum(cost_usd), 0) FROM runs WHERE sweep_id = ?", [sweep_id]) or 0.0)
        measured_costs = [float(c) for c in wh.query(
            "SELECT cost_usd FROM runs WHERE sweep_id = ? AND status <> 'cancelled'", [sweep_id]
        )["cost_usd"].to_list()]

    todo = []
    for t in trials:
        if t.trial_id in done_ids:
            summary.skipped_done += 1
            continue
        row = rows.get(t.trial_id, {})
        if row and row.get("feasible") is False:
            summary.not_feasible += 1
            log.warning("Trial %s is not launched: %s", t.trial_id, row.get("reason") or "no offer fits")
            continue
        todo.append(t)
    if summary.skipped_done:
        log.info("%d trial(s) already succeeded in an earlier run of %s; skipping them.", summary.skipped_done,
                 sweep_id)
    requests = _requests(sp, todo, rows, sweep_id, launcher_name)
    total = len(trials)
    finished = summary.skipped_done
    progress = _Progress(_artifact_key("sweep", sp.name, "progress"), total, finished)
    _notify("planned", sweep_id=sweep_id, total=total, todo=len(todo), done_before=summary.skipped_done,
            max_parallel=cap)

    def trial_estimate(trial_id: str) -> float:
        est = _est_cost(rows.get(trial_id, {}))
        if measured_costs:
            est = max(est, sum(measured_costs) / len(measured_costs))
        return est

    # 4-6. launch with at most `cap` in flight; ingest each result as it arrives (writer thread)
    pending = deque(todo)
    inflight: dict[Any, Any] = {}  # future -> trial
    done_q: queue.Queue[Any] = queue.Queue()
    summary.spent_usd = spent
    launcher_obj = _make_launcher(launcher_name, sp, cap, landing)
    key = _register_launcher(launcher_obj)
    final_status = "failed"
    counter = {"finished": finished}

    def ingested(records: list[ResultRecord], errors: dict[str, str]) -> None:
        for rec in records:
            counter["finished"] += 1
            _notify("result", trial_id=rec.trial_id, status=rec.status, cost_usd=_record_cost(rec),
                    done=counter["finished"], total=total, spent_usd=summary.spent_usd)
        for trial_id in errors:
            counter["finished"] += 1
            _notify("result", trial_id=trial_id, status="failed", cost_usd=0.0, done=counter["finished"],
                    total=total, spent_usd=summary.spent_usd)
        progress.update(counter["finished"])

    writer = _Writer(sweep_id, log, ingested)
    try:
        with ThreadPoolTaskRunner(max_workers=cap) as runner:
            while pending or inflight:
                while pending and len(inflight) < cap and not summary.budget_stopped:
                    t = pending[0]
                    in_flight_est = sum(trial_estimate(x.trial_id) for x in inflight.values())
                    if not forced and spent + in_flight_est + trial_estimate(t.trial_id) > budget + 1e-9:
                        summary.budget_stopped = True
                        _budget_stop(sweep_id, sp.name, spent, in_flight_est, budget, pending, summary, log, writer)
                        _notify("skipped-budget", trial_ids=[x.trial_id for x in pending])
                        pending.clear()
                        break
                    pending.popleft()
                    fut = runner.submit(run_trial, {"launcher_key": key, "request": requests[t.trial_id]})
                    fut.add_done_callback(done_q.put)
                    inflight[fut] = t
                    summary.launched += 1
                    _notify("launched", trial_id=t.trial_id)
                if not inflight:
                    break
                batch = [done_q.get()]
                with contextlib.suppress(queue.Empty):
                    while True:
                        batch.append(done_q.get_nowait())
                records: list[ResultRecord] = []
                errors: dict[str, str] = {}
                for fut in batch:
                    t = inflight.pop(fut)
                    fut.wait()  # sets the future's final state (the callback can run before)
                    if fut.state.is_completed():
                        records.extend(fut.result())
                    else:
                        exc = fut.result(raise_on_failure=False)
                        errors[t.trial_id] = f"launcher error after {len(LAUNCH_RETRY_DELAYS_S)} retries: {exc}"
                writer.results(records, errors)
                for rec in records:
                    cost = _record_cost(rec)
                    spent += cost
                    if rec.status != "cancelled":
                        measured_costs.append(cost)
                    ok = rec.status == "succeeded"
                    summary.succeeded += ok
                    summary.failed += not ok
                    if not ok:
                        summary.failures.append(f"{rec.trial_id}: {rec.status}: {rec.reason}")
                        log.warning("Trial %s %s: %s", rec.trial_id, rec.status, rec.reason)
                    else:
                        log.info("Trial %s succeeded in %.1f s (%s)", rec.trial_id,
                                 float(rec.wall_s), _fmt_metrics(rec.final_metrics))
                for trial_id, reason in errors.items():
                    summary.launcher_errors += 1
                    summary.failures.append(f"{trial_id}: {reason}")
                    log.error("Trial %s: %s", trial_id, reason)
                summary.spent_usd = spent
        final_status = ("budget-stopped" if summary.budget_stopped
                        else "succeeded" if summary.failed == 0 and summary.launcher_errors == 0
                        and summary.not_feasible == 0 else "partial")
    finally:
        _launchers.pop(key, None)
        close = getattr(launcher_obj, "close", None)
        if callable(close):
            with contextlib.suppress(Exception):
                close()
        writer.close()  # everything queued is written before the sweep is marked finished
        with contextlib.suppress(Exception), Warehouse.open(migrate=False) as wh:
            wh.finish_sweep(sweep_id, status=final_status)
    summary.status = final_status
    progress.update(total, force=True)

    # 7. the ROI report and its artifacts
    _report(sp.name, sweep_id, summary, log)
    log.info("Sweep %s %s: %d launched, %d succeeded, %d failed, %d skipped (budget), %d done before; "
             "spent $%.4f of $%.2f", sweep_id, final_status, summary.launched, summary.succeeded,
             summary.failed + summary.launcher_errors, summary.skipped_budget, summary.skipped_done,
             summary.spent_usd, budget)
    _notify("finished", summary=asdict(summary))
    return asdict(summary)


def _budget_stop(sweep_id: str, name: str, spent: float, in_flight_est: float, budget: float,
                 pending: deque[Any], summary: SweepSummary, log: Any, writer: _Writer) -> None:
    """Marks the trials not launched `skipped-budget` and emits `gpuledger.budget.exceeded`."""
    ids = [t.trial_id for t in pending]
    reason = (f"budget stop: measured ${spent:.4f} + in flight ${in_flight_est:.4f} + next trial would "
              f"cross the ${budget:.2f} budget")
    writer.mark(ids, "skipped-budget", reason)
    summary.skipped_budget = len(ids)
    log.warning("Stopping launches of %s: %s; %d trial(s) marked skipped-budget.", sweep_id, reason, len(ids))
    emit_event(
        event=BUDGET_EVENT,
        resource={"prefect.resource.id": f"gpuledger.sweep.{sweep_id}", "prefect.resource.name": name},
        payload={"sweep": sweep_id, "spent": round(spent, 6), "budget": budget,
                 "in_flight_est": round(in_flight_est, 6), "skipped": len(ids), "skipped_trial_ids": ids},
    )


def _report(name: str, sweep_id: str, summary: SweepSummary, log: Any) -> None:
    """Writes the ROI report; publishes markdown, trial-results table and HTML link artifacts."""
    from flows.artifacts import publish_report
    from gpuledger.report import write_sweep_report
    from gpuledger.warehouse import Warehouse

    with Warehouse.open(read_only=True) as wh:
        files = write_sweep_report(wh, name=name, sweep_id=sweep_id)
        results = wh.query("SELECT * FROM v_trial_results WHERE sweep_id = ?", [sweep_id]).to_dicts()
    summary.report_html = str(files.html.resolve())
    summary.report_markdown = str(files.markdown)
    publish_report(files, _artifact_key("sweep", name, "roi"), f"ROI report of {sweep_id}",
                   link_key=_artifact_key("sweep", name, "report"))
    with contextlib.suppress(Exception):
        create_table_artifact(key=_artifact_key("sweep", name, "results"), table=_table_rows(results),
                              description=f"Trial results of {sweep_id} (v_trial_results)")
    log.info("ROI report of %s: %s", sweep_id, summary.report_html)


def _fmt_metrics(metrics: Any) -> str:
    if not metrics:
        return "no metrics"
    return ", ".join(f"{k}={v:.4g}" if isinstance(v, int | float) else f"{k}={v}" for k, v in metrics.items())


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return None


if __name__ == "__main__":  # python flows/sweep.py SPEC
    import sys

    print(json.dumps(sweep(sys.argv[1] if len(sys.argv) > 1 else "specs/lora-grid.yaml"), indent=2))
