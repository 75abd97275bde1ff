"""The planner: trials × offers → GPU choice, spot decision, schedule, budget guard, what-if.

A package of small pure modules, each step a function named after what it returns:

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

from gpuledger.plan.candidates import candidate_offers
from gpuledger.plan.choice import plan_from_estimates
from gpuledger.plan.estimates import accelerator_table, trial_estimates
from gpuledger.plan.formats import fmt_duration
from gpuledger.plan.model import Plan, PlannedTrial, PlanningInputs
from gpuledger.plan.preemption import poisson_cdf, poisson_quantile
from gpuledger.plan.prices import local_rate, prices_used, warehouse_trial_rows
from gpuledger.plan.render import budget_guard, render_plan
from gpuledger.plan.schedule import list_schedule
from gpuledger.plan.scoring import scored_candidates
from gpuledger.plan.settings import PlanSettings
from gpuledger.plan.sweep import plan_sweep, settings_for
from gpuledger.plan.whatif import WHAT_IF_KS, what_if_curve

__all__ = [
    "WHAT_IF_KS", "Plan", "PlanSettings", "PlannedTrial", "PlanningInputs", "accelerator_table", "budget_guard", "candidate_offers", "fmt_duration",
    "list_schedule", "local_rate", "plan_from_estimates", "plan_sweep", "poisson_cdf", "poisson_quantile", "prices_used",
    "render_plan", "scored_candidates", "settings_for", "trial_estimates", "warehouse_trial_rows", "what_if_curve",
]
