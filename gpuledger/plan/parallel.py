"""`resources.max_parallel: auto`: the parallel slots that meet the deadline at the least expected cost.

    plan = choose_parallel(spec, n_points, plan_at)      # plan_at(k) -> the Plan at k slots

The sweep is planned at each K of `AUTO_KS` up to its number of points (a local plan caps K at this
machine's cores; the same effective K is planned once). Per K: the expected cost under the chosen
strategy (the plan's decided spend: under pruning the replay of the measured curves at K slots,
`gpuledger.plan.pruning`, where more slots promote trials before the best is known and prune less; a
pool's start-up per worker; else the trials' total) and the makespan at the plan's confidence (its
P90 when the plan decides at P90, else P50) × the makespan under pruning over the unpruned one (the
replay's, or the successive-halving fraction). The choice: the least cost among the Ks whose makespan
meets `budget.deadline` (no deadline: all), ties to fewer slots; none meets it: the fastest, and the
plan says the deadline is not met. The chosen plan carries `Plan.parallel` (`auto`, `chosen`, `why`,
`curve`: one row per K with slots, makespan_s, cost_usd, meets_deadline) and an assumption line.
Pure: the caller's `plan_at` does the planning.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from gpuledger.plan.sections import ParallelChoice, ParallelPoint

#: the slot counts `max_parallel: auto` plans (and the sweep's number of points)
AUTO_KS = (1, 2, 4, 8, 16, 32, 64, 128)


def _row(plan: Any, k: int, deadline_s: float | None) -> ParallelPoint:
    span = float(plan.makespan_s)
    if plan.confidence == "p90" and plan.bands is not None:
        span = float(plan.bands.makespan_s_p90)
    frac = plan.pruning.makespan_fraction if plan.pruning is not None else None
    if frac is not None:
        span *= float(frac)
    return ParallelPoint(slots=int(plan.max_parallel), requested=k, makespan_s=round(span, 3),
                         cost_usd=round(float(plan.decided_usd), 6), meets_deadline=deadline_s is None or span <= deadline_s,
                         cost_source=(plan.pruning.source if plan.pruning is not None else None) or "plan")


def choose_parallel(spec: Any, n_points: int, plan_at: Callable[[int], Any]) -> Any:
    """Returns the plan at the chosen K (see the module's docstring)."""
    deadline_s = float(spec.budget.deadline_s) if spec.budget.deadline_s else None
    n = max(1, int(n_points))
    ks = sorted({k for k in AUTO_KS if k < n} | {min(n, AUTO_KS[-1])})
    plans: dict[int, Any] = {}
    rows: list[ParallelPoint] = []
    for k in ks:
        plan = plan_at(k)
        eff = int(plan.max_parallel)
        if eff in plans:  # capped (a local plan: this machine's cores): the same plan again
            continue
        plans[eff] = plan
        rows.append(_row(plan, k, deadline_s))
    meets = [r for r in rows if r.meets_deadline]
    if meets:
        best = min(meets, key=lambda r: (r.cost_usd, r.slots))
        cheaper = [r for r in rows if r.cost_usd < best.cost_usd - 1e-9]
        why = (f"max_parallel auto: {best.slots} slot(s), the least expected cost (${best.cost_usd:.4g}, "
               f"{best.cost_source}) whose makespan ({best.makespan_s / 60:.1f} min at {plans[best.slots].confidence}) "
               + (f"meets the {deadline_s / 60:.1f} min deadline" if deadline_s else "is within no deadline (none set)")
               + (f"; {', '.join(str(r.slots) for r in cheaper)} slot(s) cost less but miss it" if cheaper else "")
               + f"; planned at {', '.join(str(r.slots) for r in rows)} slot(s)")
    else:
        best = min(rows, key=lambda r: (r.makespan_s, r.cost_usd))
        why = (f"max_parallel auto: no slot count meets the {deadline_s / 60:.1f} min deadline; {best.slots} slot(s) "
               f"is the fastest ({best.makespan_s / 60:.1f} min, ${best.cost_usd:.4g}); planned at "
               f"{', '.join(str(r.slots) for r in rows)} slot(s)")
    chosen = plans[best.slots]
    curve = tuple(replace(r, chosen=r.slots == best.slots) for r in rows)
    parallel = ParallelChoice(chosen=best.slots, why=why, deadline_s=deadline_s, curve=curve, deadline_met=bool(meets))
    return replace(chosen, parallel=parallel, assumptions=[*chosen.assumptions, why])
