"""`gpuledger ingest [DIR]`: ingest the result records of a landing folder into the warehouse.

DIR defaults to `landing/` beside the warehouse file (`warehouse/landing/`). Valid records are
written (one transaction per batch of files) and their files moved to `DIR/ingested/`; refused ones
are moved to `DIR/rejected/` with a `.reason.txt` beside each (a list file with some refused items
is split: only those go to rejected/). Idempotent: re-ingesting a run replaces it. Exits 0 when
every record landed, 1 when any was refused (each named on stderr with its reason).
"""

from __future__ import annotations

import argparse
import sys


def run(args: argparse.Namespace) -> int:
    from gpuledger.warehouse import Warehouse

    with Warehouse.open() as wh:
        result = wh.ingest_landing(args.landing)
        where = wh.path
    print(f"{result.summary()} -> {where}")
    for rej in result.rejected:
        print(f"rejected {rej.source}: {rej.reason}", file=sys.stderr)
    return 1 if result.rejected else 0
