"""`gpuledger warehouse push FILE`: a local ledger into the team warehouse (DuckLake)."""

from __future__ import annotations

import argparse
import json
import os

from gpuledger.errors import UserError


def run(args: argparse.Namespace) -> int:
    from gpuledger.settings import ENV_PATH
    from gpuledger.warehouse import lake

    target = os.environ.get(ENV_PATH, "")
    if not lake.is_lake(target):
        raise UserError(f"{ENV_PATH} must name the team warehouse (ducklake:postgres:<connection string>, "
                        f"with {lake.ENV_DATA}=<path or s3://...>); it is {target or 'not set'}")
    result = lake.push_ledger(args.file, target)
    if getattr(args, "json", False):
        print(json.dumps({"file": result.file, "target": lake.redact(result.target), "rows": result.rows,
                          "attempts": result.attempts}, indent=2))
        return 0
    print(result.summary())
    return 0
