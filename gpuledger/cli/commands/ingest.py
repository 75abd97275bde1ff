"""`gpuledger ingest [DIR]`: ingest the result records of a landing folder into the warehouse.

DIR defaults to the project's landing folder (`.gpuledger/landing/`, `gpuledger.settings`). Only result
records are touched (`*.json` whose content is a record: `gpuledger.warehouse.ingest.is_record_shaped`); any
other file (`package.json`, a JSON Schema) stays where it is and is named. Valid records are
written (one transaction per batch of files) and their files moved to `DIR/ingested/`; refused ones
are moved to `DIR/rejected/` with a `.reason.txt` beside each (a list file with some refused items
is split: only those go to rejected/). Idempotent: re-ingesting a run replaces it. Exits 0 when
every record landed, 1 when any was refused (each named on stderr with its reason).
"""

from __future__ import annotations

import argparse
import sys


def run(args: argparse.Namespace) -> int:
    import dataclasses
    import json

    from gpuledger import settings
    from gpuledger.warehouse import Warehouse

    landing = args.landing if args.landing is not None else settings.current().landing_dir
    with Warehouse.open() as wh:
        result = wh.ingest_landing(landing)
        where = wh.path
    if getattr(args, "json", False):
        print(json.dumps({**dataclasses.asdict(result), "landing": str(landing), "warehouse": str(where)}, indent=2))
        return 1 if result.rejected else 0
    print(f"{result.summary()} -> {where}")
    for rej in result.rejected:
        print(f"rejected {rej.source}: {rej.reason}", file=sys.stderr)
    if result.skipped:
        names = ", ".join(result.skipped[:10]) + (f", ... ({len(result.skipped)} in all)" if len(result.skipped) > 10 else "")
        print(f"left in place (not result records): {names}")
    return 1 if result.rejected else 0
