"""`gpuledger plan SPEC [--json]`: the plan (GPU, count, spot, cost per trial; schedule; what-if).

Exit 0 within budget; 3 when the budget guard refuses (with --json the plan is printed first).
Nothing is launched and no warehouse file is created. What the planner learns from outside comes
from `gpuledger.inputs.ledger.planning_inputs`: this machine's stored speed (measured once, on first
use), spot preemptions and measured runs from an existing warehouse.
"""

from __future__ import annotations

import sys

from gpuledger.errors import BudgetExceeded, UserError


def run(args) -> int:
    from gpuledger.plan import budget_guard, plan_sweep, render_plan
    from gpuledger.spec import CapacitySpec, load_spec

    spec = load_spec(args.spec)
    if isinstance(spec, CapacitySpec):
        raise UserError(
            f"{args.spec} is a capacity spec (kind: capacity); `gpuledger plan` plans sweeps. "
            f"Use `gpuledger capacity {args.spec}` for GPUs and $/month to serve it."
        )
    from gpuledger.inputs.ledger import planning_inputs

    plan = plan_sweep(spec, **planning_inputs(spec))
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
