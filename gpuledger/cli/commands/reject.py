"""`gpuledger reject SWEEP [--note TEXT]`: end a sweep that waits for approval; its reservation is released
(gpuledger/flows/approvals.py, docs/budgets.md)."""

from __future__ import annotations


def run(args) -> int:
    from gpuledger.cli.commands.approve import decide

    return decide(args, approve=False)
