"""`gpuledger export --parquet DIR`: write every warehouse table to DIR/<table>.parquet."""

from __future__ import annotations

import argparse


def run(args: argparse.Namespace) -> int:
    from gpuledger.warehouse import Warehouse

    with Warehouse.open(read_only=True) as wh:
        files = wh.export_parquet(args.parquet)
    if getattr(args, "json", False):
        import json

        print(json.dumps({"folder": str(args.parquet), "files": [str(f) for f in files]}, indent=2))
        return 0
    for f in files:
        print(f)
    print(f"{len(files)} tables exported to {args.parquet}")
    return 0
