"""`gpuledger approve SWEEP [--note TEXT]`: resume a sweep that waits for approval past an envelope's soft
threshold (its Prefect flow run is paused; gpuledger/flows/approvals.py, docs/budgets.md)."""

from __future__ import annotations

import json


def run(args) -> int:
    return decide(args, approve=True)


def decide(args, *, approve: bool) -> int:
    from gpuledger.api import Ledger

    done = Ledger().approve(args.sweep, approve=approve, note=args.note or "")
    if args.json:
        print(json.dumps(done, indent=2, default=str))
    else:
        verb = "approved" if approve else "rejected"
        then = "it launches now" if approve else "it ends without launching and its reservation is released"
        print(f"gpuledger {'approve' if approve else 'reject'}: sweep {done['sweep_id']} {verb} by {done['by']} "
              f"(envelope {done['budget']}, ${float(done['reserved_usd']):.4f} reserved); {then}")
    return 0
