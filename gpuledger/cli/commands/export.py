"""`gpuledger export --parquet DIR`: write every warehouse table to DIR/<table>.parquet."""

from __future__ import annotations

import argparse


def run(args: argparse.Namespace) -> int:
    from gpuledger.warehouse import Warehouse

    with Warehouse.open(read_only=True) as wh:
        files = wh.export_parquet(args.parquet)
    for f in files:
        print(f)
    print(f"{len(files)} tables exported to {args.parquet}")
    return 0
