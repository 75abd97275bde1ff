"""`gpuledger plan SPEC [--json]`: the plan (GPU, count, spot, cost per trial; schedule; what-if).

Exit 0 within budget; 3 when the budget guard refuses (with --json the plan is printed first).
Nothing is launched and no warehouse file is created. What the planner learns from outside comes
through `gpuledger.api.Ledger.plan` (the sweep's own set-up, `gpuledger.runtime.accepted.prepare`) from
`gpuledger.inputs.ledger.planning_inputs`: this machine's stored speed (measured once, on first
use), spot preemptions and measured runs from an existing warehouse.
"""

from __future__ import annotations

import sys


def run(args) -> int:
    from gpuledger.api import Ledger
    from gpuledger.plan import render_plan

    verdict = Ledger().plan(args.spec)
    if args.json:
        print(verdict.plan.to_json_text())
    else:
        print(render_plan(verdict.plan), end="")
    if verdict.refusal is not None:
        print(f"gpuledger plan: {verdict.refusal}", file=sys.stderr)
    return verdict.exit_code
