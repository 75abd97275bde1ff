"""`gpuledger plan SPEC [--json]`: the plan (GPU, count, spot, cost per trial; schedule; what-if).

Exit 0 within budget; 3 when the budget guard refuses (with --json the plan is printed first).
Pure: nothing is launched and nothing is written (no warehouse file is created). Spot preemption
rates measured in an existing warehouse replace the defaults once there are enough spot hours.
"""

from __future__ import annotations

import sys

from gpuledger.errors import BudgetExceeded, UserError


def _measured_preemption() -> dict | None:
    """Spot preemptions measured in the warehouse, if one exists (DuckDB is imported only then)."""
    from gpuledger.paths import resolve_path

    path = resolve_path()
    if not path.exists():
        return None
    from gpuledger.warehouse import measured_preemption_if_any

    return measured_preemption_if_any(path) or None


def run(args) -> int:
    from gpuledger.plan import budget_guard, plan_sweep, render_plan
    from gpuledger.spec import CapacitySpec, load_spec

    spec = load_spec(args.spec)
    if isinstance(spec, CapacitySpec):
        raise UserError(
            f"{args.spec} is a capacity spec (kind: capacity); `gpuledger plan` plans sweeps. "
            f"Use `gpuledger capacity {args.spec}` for GPUs and $/month to serve it."
        )
    plan = plan_sweep(spec, measured_preemption=_measured_preemption())
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
