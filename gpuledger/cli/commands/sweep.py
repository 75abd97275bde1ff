"""`gpuledger sweep SPEC [--launcher local|skypilot] [--max-parallel N] [--dry-run] [--force] [--json]`.

Runs the Prefect flow `sweep` (gpuledger/flows/sweep.py) in this process, through `gpuledger.api.Ledger.sweep`
(the CLI calls the application layer, never the flows themselves). The flow talks to the configured
Prefect server when one answers (`gpuledger serve`, or PREFECT_API_URL), else to a temporary server
started for this run (Prefect's ephemeral mode). Progress: a rich progress bar on a terminal, one
line per finished trial otherwise. Exit 0 when every launched trial succeeded and every record is
stored (also after a budget stop); 1 when some failed, or when some records could not be stored
(they are counted and named, and stay in the sweep's landing folder for the next run or
`gpuledger ingest`); 3 when the budget guard refuses (before anything is launched); 130 when
interrupted (finished trials' records are stored first).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuledger.errors import UserError

if TYPE_CHECKING:
    from gpuledger.runtime.summary import SweepSummary


class _Lines:
    """Plain progress lines (not a terminal: logs, CI, tests); on stderr under --json."""

    def __init__(self, stream: Any = None) -> None:
        self.stream = stream

    def __call__(self, event: dict[str, Any]) -> None:
        kind = event["kind"]
        if kind == "planned":
            print(f"gpuledger sweep: {event['sweep_id']}: {event['todo']} to run, {event['done_before']} done "
                  f"before, of {event['total']} (at most {event['max_parallel']} at once)", file=self.stream or sys.stdout, flush=True)
        elif kind == "result":
            if event.get("stored", True):
                stored = "stored"
            elif event.get("kept", True):
                stored = "NOT stored (kept in landing)"
            else:
                stored = f"NOT stored and NOT kept: LOST ({event.get('not_kept')})"
            print(f"gpuledger sweep: trial {event['trial_id']} {event['status']} {stored} "
                  f"({event['done']}/{event['total']}, spent ${event['spent_usd']:.4f})", file=self.stream or sys.stdout, flush=True)
        elif kind == "skipped-budget":
            print(f"gpuledger sweep: budget stop: {len(event['trial_ids'])} trial(s) skipped", file=self.stream or sys.stdout, flush=True)
        elif kind in ("awaiting_approval", "approval_decided"):
            print(f"gpuledger sweep: {approval_line(event)}", file=self.stream or sys.stdout, flush=True)


class _Bar:
    """A rich progress bar of finished trials, with the spend so far, on ONE console with Prefect's logs.

    While the bar runs, every Prefect console log handler prints through the bar's console, so log
    lines appear above the bar instead of glued to it; they get their own consoles back afterwards.
    """

    def __init__(self) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[spent]}"), TimeElapsedColumn(), transient=False)
        self.task = None
        self.swapped: list[tuple[Any, Any]] = []

    def __enter__(self) -> _Bar:
        self.progress.start()
        for handler in _console_handlers():
            self.swapped.append((handler, handler.console))
            handler.console = self.progress.console
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()
        for handler, console in self.swapped:
            handler.console = console

    def __call__(self, event: dict[str, Any]) -> None:
        kind = event["kind"]
        if kind == "planned":
            self.task = self.progress.add_task(event["sweep_id"], total=event["total"],
                                               completed=event["done_before"], spent="$0.0000")
        elif kind == "result" and self.task is not None:
            self.progress.update(self.task, completed=event["done"], spent=f"${event['spent_usd']:.4f}")
        elif kind == "skipped-budget" and self.task is not None:
            self.progress.update(self.task, description="budget stop")
        elif kind in ("awaiting_approval", "approval_decided"):
            self.progress.console.print(f"gpuledger sweep: {approval_line(event)}")


def approval_line(event: dict[str, Any]) -> str:
    """The CLI's line for a sweep waiting for (or given) approval past an envelope's soft threshold."""
    if event["kind"] == "approval_decided":
        return f"{event['sweep_id']} {'approved' if event.get('approved') else 'rejected'} by {event.get('by')}"
    who = ", ".join(event.get("approvers") or []) or "anyone who can run `gpuledger approve` here"
    return (f"{event['sweep_id']} WAITS FOR APPROVAL by {who}: {event.get('reason')}. Run `gpuledger approve "
            f"{event.get('sweep_name')}` (or `gpuledger reject {event.get('sweep_name')}`), or Resume in the Prefect UI; "
            "this command waits")


def _console_handlers() -> list[Any]:
    """Returns the logging handlers that print Prefect's logs with a rich console (`.console`)."""
    import logging

    loggers = [logging.getLogger()] + [logging.getLogger(name) for name in list(logging.root.manager.loggerDict)
                                       if name.startswith("prefect")]
    found = []
    for lg in loggers:
        for handler in getattr(lg, "handlers", []):
            if hasattr(handler, "console") and handler not in found:
                found.append(handler)
    return found


def run(args) -> int:
    from gpuledger.api import Ledger
    from gpuledger.runtime.events import progress_listener
    from gpuledger.spec import load_spec

    spec_path = Path(args.spec)
    spec = load_spec(spec_path)  # fast, located errors before any server starts
    if spec.kind != "sweep":
        raise UserError(f"{args.spec} is a `kind: {spec.kind}` spec; `gpuledger sweep` runs sweeps "
                        f"(try `gpuledger capacity {args.spec}`)")

    def say(msg: str) -> None:
        print(f"gpuledger sweep: {msg}", file=sys.stderr, flush=True)

    as_json = bool(getattr(args, "json", False))
    params = dict(launcher=args.launcher, max_parallel=args.max_parallel, dry_run=bool(args.dry_run),
                  force=bool(args.force), resume=not bool(getattr(args, "new", False)),  # continues the last sweep
                  prefect_port=getattr(args, "prefect_port", None), say=say)
    if sys.stdout.isatty() and not args.dry_run and not as_json:
        with _Bar() as bar, progress_listener(bar):
            summary = Ledger().sweep(spec_path, **params)
    else:
        with progress_listener(_Lines(sys.stderr if as_json else None)):
            summary = Ledger().sweep(spec_path, **params)
    if as_json:
        print(json.dumps(summary.to_dict(), indent=2, default=str))
        return 0 if summary.dry_run else summary.exit_code()
    return _report(summary)


def _report(summary: SweepSummary) -> int:
    s = summary.to_dict()
    if s.get("dry_run"):
        print(f"gpuledger sweep: dry run of {s['sweep_id']}: {s['trials']} trials planned, nothing launched")
        return 0
    print(f"gpuledger sweep: {s['sweep_id']} {s['status']}: {s['launched']} launched, {s['succeeded']} succeeded, "
          f"{s['failed'] + s['launcher_errors']} failed, {s['skipped_budget']} skipped (budget), "
          f"{s['skipped_done']} done before; spent ${s['spent_usd']:.4f} of ${s['budget_usd']:.2f}")
    if s.get("not_asked"):
        print(f"  {s['not_asked']} candidate point(s) not asked for by the search (n_trials reached): `not-asked`")
    details = {d["trial_id"]: d for d in s.get("failure_details") or []}
    for line in s.get("failures", [])[:20]:
        print(f"  failed: {line}")
        detail = details.pop(line.split(":", 1)[0], None)
        if detail is not None:
            if detail.get("log_path"):
                print(f"    log: {detail['log_path']}")
            if detail.get("stderr_lines"):
                print("    stderr (last lines):")
                for text in detail["stderr_lines"]:
                    print(f"      | {text}")
    if s.get("forced"):
        print("  forced past the budget guard (recorded in the warehouse)")
    best = s.get("best")
    if best:
        tt = best.get("time_to_recipe_s")
        print(f"Best recipe: trial {best['trial_id']} {best.get('params') or ''}: {best.get('metric_name')} = "
              f"{best['best_metric']:.4g}; time-to-recipe {'-' if tt is None else f'{tt:.1f} s'}, "
              f"cost-to-recipe ${float(best.get('cost_to_recipe_usd') or 0):.4f} "
              f"(of ${float(best.get('total_cost_usd') or 0):.4f} spent in all)")
    elif not s.get("dry_run"):
        print("Best recipe: none yet (no succeeded trial reported the objective metric)")
    if s.get("report_html"):
        print(f"Report:    {s['report_html']}")
    if s.get("warehouse"):
        print(f"Warehouse: {s['warehouse']}")
    lost = s.get("lost") or []
    if lost:
        print(f"  LOST: {len(lost)} result record(s) could not be written to the warehouse NOR kept in "
              f"{s['landing']} (free disk space; these trials must be run again):")
        for line in lost[:20]:
            print(f"    {line}")
    if s.get("unrecorded_files"):
        print(f"  NOT STORED: {len(s['unrecorded_files'])} result record(s) could not be written to the warehouse; "
              f"they stay in {s['landing']} and the next run of this sweep, or `gpuledger ingest {s['landing']}`, "
              f"stores them:")
        for name in s.get("unrecorded_files", [])[:20]:
            print(f"    {name}")
    return summary.exit_code()
