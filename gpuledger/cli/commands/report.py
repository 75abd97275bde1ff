"""`gpuledger report sweep NAME [--sweep-id ID] [--out DIR]`, `report weekly [--week YYYY-Www] [--out DIR]`,
`report capacity SPEC [--out DIR]`: write a report and print where its files are (`--json`: as an
object {html, markdown, csv, notes}). Without --out a report goes under the project's `reports/`."""

from __future__ import annotations

import argparse
import json

from gpuledger.errors import UserError


def _print(files, as_json: bool = False) -> None:
    if as_json:
        print(json.dumps({"html": str(files.html), "markdown": str(files.markdown),
                          "csv": [str(c) for c in files.csv], "notes": files.notes}, indent=2))
        return
    for note in files.notes:
        print(note)
    print(f"html:     {files.html}")
    print(f"markdown: {files.markdown}")
    if files.csv:
        print(f"csv:      {files.csv_dir}/ ({len(files.csv)} tables)")


def run(args: argparse.Namespace) -> int:
    """Writes the report of `args.report_kind` (sweep | weekly | capacity); returns the exit code."""
    kind = args.report_kind
    as_json = bool(getattr(args, "json", False))
    if kind == "capacity":
        from gpuledger.report.capacity import write_capacity_report
        from gpuledger.serving.capacity_from_sweep import plan_capacity_measured
        from gpuledger.spec import load_spec

        spec = load_spec(args.spec)
        if getattr(spec, "kind", None) != "capacity":
            raise UserError(f"{args.spec} is a {getattr(spec, 'kind', 'different')} spec; "
                            f"`report capacity` needs a spec with `kind: capacity`")
        _print(write_capacity_report(plan_capacity_measured(spec), out_dir=args.out), as_json)
        return 0

    from gpuledger.warehouse import Warehouse

    with Warehouse.open(read_only=True) as wh:
        if kind == "sweep":
            from gpuledger.report.sweep import write_sweep_report

            files = write_sweep_report(wh, name=args.name, sweep_id=args.sweep_id, out_dir=args.out)
        elif kind == "weekly":
            from gpuledger.report.weekly import write_weekly_report

            files = write_weekly_report(wh, week=args.week, out_dir=args.out)
        else:
            raise UserError(f"unknown report kind {kind!r}; one of sweep, weekly, capacity")
    _print(files, as_json)
    return 0
