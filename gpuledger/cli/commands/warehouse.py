"""`gpuledger warehouse push FILE`: a local ledger into the team warehouse (DuckLake);
`gpuledger warehouse maintain`: compaction, expired snapshots, downsampled old metric points;
`gpuledger warehouse ingest`: the ingest service's batches (what the deployment ingest/team runs)."""

from __future__ import annotations

import argparse
import json

from gpuledger.errors import UserError


def run(args: argparse.Namespace) -> int:
    if args.warehouse_action == "maintain":
        return _maintain(args)
    if args.warehouse_action == "ingest":
        return _ingest(args)
    from gpuledger import settings
    from gpuledger.settings import ENV_PATH
    from gpuledger.warehouse import lake

    target = settings.current().get("paths.warehouse") or ""  # $GPULEDGER_WAREHOUSE or the project's
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


def _maintain(args: argparse.Namespace) -> int:
    from gpuledger.api import Ledger

    result = Ledger().maintain_warehouse(metrics_older_than_days=args.metrics_older_than_days, every=args.every,
                                         expire_older_than_days=args.expire_older_than_days)
    if getattr(args, "json", False):
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print(result.summary())
    return 0 if result.ok else 1


def _ingest(args: argparse.Namespace) -> int:
    from gpuledger.api import Ledger

    result = Ledger().ingest_service(seconds=args.seconds, max_records=args.batch_records, landing=args.landing)
    if getattr(args, "json", False):
        print(json.dumps(result.to_dict(), indent=2, default=str))
    else:
        print(result.summary())
    return 0
