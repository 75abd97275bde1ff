"""The planner: trials × offers → GPU choice, spot decision, schedule, budget guard, what-if.

A package of small pure modules, each step a function named after what it returns (the names below
are served from the package, each module imported on first use):

    model.py        PlanningInputs (what it is given), Plan (what it returns), PlannedTrial (one
                    trial as placed: feasible, reason, placement, estimates; what the runtime reads)
    settings.py     constants (each an assumption the plan states) and PlanSettings
    estimates.py    trial_estimates(spec, trials, gpu_counts), compute_times(...) (the estimator's time),
                    accelerator_table(...)  (memory, time factor)
    candidates.py   candidate_offers(offers, gpu_counts, settings)  (exact dominance pruning)
    local.py        the local launcher's one offer: this machine, from its stored measured speed
    throughput_calibration.py  measured runs → a calibrated time factor per accelerator, a trial's
                    own measured time
    compute_table.py KeyCompute: each scoring key's compute seconds per accelerator, read from the
                    times frame (a block layout without a copy, any layout by a join)
    scoring.py      timing(...), deadline_met(...) (time, expected cost with spot preemptions, deadline
                    test: the formulas), best_per_key(...) (each distinct workload's best candidate, no
                    cross join: what the choice reads), scored_candidates(...) (every fitting pair: pools)
    preemption.py   poisson_cdf, poisson_quantile
    schedule.py     list_schedule(durations, slots), list_starts(durations, slots) (starts only)
    whatif.py       WHAT_IF_KS, what_if_curve(durations_s, costs_usd, ...)
    choice.py       plan_from_estimates(estimates, offers, settings) -> Plan
    alternatives.py what the budget guard quotes
    pools.py        with_pool(plan, ...): SkyPilot pools of K workers priced against per-trial jobs
    pruning.py      pruned_spend(...): the expected spend of a sweep that prunes
    prices.py       the local rate, prices_used, warehouse_trial_rows
    formats.py      fmt_duration, fmt_usd (seconds and dollars as text: the one place)
    render.py       render_plan(plan), budget_guard(plan)
    sweep.py        plan_sweep(spec, ...), settings_for(spec), with_cloud_equivalent(plan, ...)

One time unit inside: seconds. Nothing here writes anywhere, launches or measures anything, or
imports Prefect/SkyPilot/DuckDB: this machine's speed (`gpuledger.inputs.machine`) and the warehouse's
measurements are passed in, so two plans of the same inputs are identical.
"""

import importlib

#: what the package serves, and the module each comes from: imported on first use (PEP 562), so that
#: `gpuledger validate` can use `gpuledger.plan.workloads` without importing the planner (and polars)
_EXPORTS = {
    "Plan": "gpuledger.plan.model",
    "PlanSettings": "gpuledger.plan.settings",
    "PlannedTrial": "gpuledger.plan.model",
    "PlanningInputs": "gpuledger.plan.model",
    "WHAT_IF_KS": "gpuledger.plan.whatif",
    "accelerator_table": "gpuledger.plan.estimates",
    "budget_guard": "gpuledger.plan.render",
    "candidate_offers": "gpuledger.plan.candidates",
    "fmt_duration": "gpuledger.plan.formats",
    "list_schedule": "gpuledger.plan.schedule",
    "local_rate": "gpuledger.plan.prices",
    "plan_from_estimates": "gpuledger.plan.choice",
    "plan_sweep": "gpuledger.plan.sweep",
    "poisson_cdf": "gpuledger.plan.preemption",
    "poisson_quantile": "gpuledger.plan.preemption",
    "prices_used": "gpuledger.plan.prices",
    "render_plan": "gpuledger.plan.render",
    "scored_candidates": "gpuledger.plan.scoring",
    "settings_for": "gpuledger.plan.sweep",
    "trial_estimates": "gpuledger.plan.estimates",
    "warehouse_trial_rows": "gpuledger.plan.prices",
    "what_if_curve": "gpuledger.plan.whatif",
}


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'gpuledger.plan' has no attribute {name!r}")


__all__ = [
    "WHAT_IF_KS", "Plan", "PlanSettings", "PlannedTrial", "PlanningInputs", "accelerator_table", "budget_guard", "candidate_offers", "fmt_duration",
    "list_schedule", "local_rate", "plan_from_estimates", "plan_sweep", "poisson_cdf", "poisson_quantile", "prices_used",
    "render_plan", "scored_candidates", "settings_for", "trial_estimates", "warehouse_trial_rows", "what_if_curve",
]
