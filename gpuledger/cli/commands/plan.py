"""`gpuledger plan SPEC [--json]`: the plan (GPU, count, spot, cost per trial; schedule; what-if).

Exit 0 within budget; 3 when the budget guard refuses (with --json the plan is printed first).
Nothing is launched and no warehouse file is created. What the planner learns from outside comes
through `gpuledger.runtime.accepted.prepare` (the sweep's own set-up) from
`gpuledger.inputs.ledger.planning_inputs`: this machine's stored speed (measured once, on first
use), spot preemptions and measured runs from an existing warehouse.
"""

from __future__ import annotations

import sys

from gpuledger.errors import BudgetExceeded


def run(args) -> int:
    from gpuledger.plan import budget_guard, render_plan
    from gpuledger.runtime.accepted import prepare

    plan = prepare(args.spec).plan
    if args.json:
        print(plan.to_json_text())
    else:
        print(render_plan(plan), end="")
    try:
        budget_guard(plan)
    except BudgetExceeded as err:
        print(f"gpuledger plan: {err}", file=sys.stderr)
        return err.exit_code
    return 0
