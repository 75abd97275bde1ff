"""`gpuledger probe SPEC [--trial ID] [--steps N | --seconds S] [--launcher L] [--max-parallel N] [--json]`.

Runs one brief probe per distinct shape of the sweep (`gpuledger.runtime.probe.run_probes`, no
Prefect), stores them in the warehouse (runs with purpose 'probe'), and prints what each measured and
what the plan now says. Exit 0 when every probe measured a steady state; 1 when one did not (it is
stored, the plan keeps the estimate for its shape); 3 when the probes would cross the budget.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from gpuledger.errors import UserError


def _trial_ids(spec, given: list[str] | None) -> list[str] | None:
    """Returns the trial ids `--trial` names (an id, or an index from 0)."""
    if not given:
        return None
    from gpuledger.spec import expand_trials

    trials = expand_trials(spec)
    ids = []
    for g in given:
        hit = next((t.trial_id for t in trials if t.trial_id == g), None)
        if hit is None and g.isdigit() and int(g) < len(trials):
            hit = trials[int(g)].trial_id
        if hit is None:
            raise UserError(f"--trial {g}: no such trial id or index (0..{len(trials) - 1}) in {spec.name}")
        ids.append(hit)
    return ids


def run(args) -> int:
    from gpuledger.api import Ledger
    from gpuledger.runtime.probe import probe_lines
    from gpuledger.spec import load_spec

    spec_path = Path(args.spec)
    spec = load_spec(spec_path)
    if spec.kind != "sweep":
        raise UserError(f"{args.spec} is a `kind: {spec.kind}` spec; probes measure a sweep's trials")

    def say(msg: str) -> None:
        print(f"gpuledger probe: {msg}", file=sys.stderr, flush=True)

    ledger = Ledger()
    summary = ledger.probe(spec_path, trial_ids=_trial_ids(spec, args.trial), steps=args.steps, seconds=args.seconds,
                           launcher=args.launcher, max_parallel=args.max_parallel, say=say)
    plan = ledger.plan(spec_path, launcher=args.launcher, max_parallel=args.max_parallel).plan
    usable = [p for p in summary.probes if p.get("usable")]
    if args.json:
        print(json.dumps({**summary.to_dict(), "plan": {
            "total_est_cost_usd": round(plan.total_est_cost_usd, 4), "makespan_s": round(plan.makespan_s, 3),
            "trials": [{k: getattr(t, k) for k in ("trial_id", "est_wall_s", "est_memory_gib", "est_cost_usd", "est_basis")}
                       for t in plan.planned_trials]}}, default=str, indent=1))
    else:
        for line in probe_lines(summary):
            print(line)
        probed = sum(1 for t in plan.planned_trials if str(t.est_basis or "").startswith("probe "))
        print(f"{summary.sweep_id}: {len(summary.probes)} probe(s) of {summary.shapes} shape(s), spent "
              f"${summary.cost_usd:.4f} (estimated ${summary.est_cost_usd:.4f}; counted in the sweep's budget)")
        print(f"plan now: {probed} of {len(plan.planned_trials)} trial(s) extrapolated from a probe; total "
              f"${plan.total_est_cost_usd:.4f}, makespan {plan.makespan_s:.1f} s "
              f"(`gpuledger plan {args.spec}` shows it)")
        for f in summary.failures:
            print(f"  {f}")
    usable_shapes = {json.dumps(p.get("probe_shape"), sort_keys=True, default=str) for p in usable}  # copies share one
    return 0 if len(usable_shapes) == summary.shapes and not summary.failures else 1
