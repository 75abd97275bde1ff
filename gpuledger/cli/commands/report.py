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
    from gpuledger.api import Ledger

    kind = args.report_kind
    ledger = Ledger()
    if kind == "capacity":
        from gpuledger.spec import load_spec

        spec = load_spec(args.spec)
        if getattr(spec, "kind", None) != "capacity":
            raise UserError(f"{args.spec} is a {getattr(spec, 'kind', 'different')} spec; "
                            f"`report capacity` needs a spec with `kind: capacity`")
        files = ledger.report_capacity(args.spec, out=args.out)
    elif kind == "sweep":
        files = ledger.report_sweep(args.name, sweep_id=args.sweep_id, out=args.out)
    elif kind == "weekly":
        files = ledger.report_weekly(args.week, out=args.out)
    else:
        raise UserError(f"unknown report kind {kind!r}; one of sweep, weekly, capacity")
    _print(files, bool(getattr(args, "json", False)))
    return 0
