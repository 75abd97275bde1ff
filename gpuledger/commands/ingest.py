"""`gpuledger ingest [DIR]`: ingest the result records of a landing folder into the warehouse.

DIR defaults to `landing/` beside the warehouse file (`warehouse/landing/`). Valid records are
written in one transaction and their files moved to `DIR/ingested/`; invalid ones are moved to
`DIR/rejected/` with a `.reason.txt` beside each. Idempotent: re-ingesting a run replaces it.
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
    return 0
