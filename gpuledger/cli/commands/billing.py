"""`gpuledger billing ingest PATH...`: the cloud's own bill (FOCUS exports) into the warehouse.

Every file is read and validated before anything is written; then each lands in its own transaction
(whole or not at all). A malformed file is one line naming file, row and column (exit 1) and nothing
stored changes. Re-ingesting a file changes nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys


def run(args: argparse.Namespace) -> int:
    if args.billing_action != "ingest":  # argparse allows only the known actions
        raise AssertionError(args.billing_action)
    from gpuledger.billing import FocusError, read_focus
    from gpuledger.billing.schema import validate_line_items
    from gpuledger.warehouse import Warehouse

    files = []
    failed = 0
    for path in args.paths:
        try:
            ff = read_focus(path)
            validate_line_items(ff.frame, path)
            files.append(ff)
        except FocusError as err:
            print(f"gpuledger billing ingest: {err}", file=sys.stderr)
            failed += 1
    if failed:
        print(f"gpuledger billing ingest: {failed} of {len(args.paths)} files refused; nothing was stored",
              file=sys.stderr)
        return 1
    as_json = bool(getattr(args, "json", False))
    results = []
    with Warehouse.open() as wh:
        for ff in files:
            result = wh.ingest_billing_file(ff, export_name=args.export_name)
            results.append(dataclasses.asdict(result))
            if as_json:
                continue
            print(result.summary())
            if result.absent_columns and not result.already_ingested:
                print(f"  absent FOCUS columns (stored as null): {', '.join(result.absent_columns)}")
        where = wh.path
    if as_json:
        print(json.dumps({"files": results, "warehouse": str(where)}, indent=2))
        return 0
    print(f"-> {where}")
    return 0
