"""What the planner takes and returns, typed: `PlanningInputs` (what it learns from outside),
`Plan` (a polars frame of trials + totals, and its JSON form), `PlannedTrial` (one trial as placed)."""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

if TYPE_CHECKING:
    from gpuledger.catalog.pricing import BilledRates
    from gpuledger.inputs.machine import MachineSpeed
    from gpuledger.plan.pruning import PrunedSpend
    from gpuledger.plan.sections import (
        BudgetAlternatives,
        CloudEquivalent,
        PackingPlan,
        ParallelChoice,
        PlanBands,
        PoolPlan,
    )
    from gpuledger.search.asha_replay import Curve


@dataclass(frozen=True)
class PlanningInputs:
    """What the pure planner is given from outside (`gpuledger.inputs.ledger.planning_inputs` reads
    them; `plan_sweep(spec, inputs=...)` takes them). Each None: not known, the documented defaults.

    - `machine`: this machine's stored speed, needed to plan `launcher: local`;
    - `measured_preemption`: {(cloud, accelerator): (spot_hours, preemptions)} from the warehouse;
    - `measurements`: the named query `plan_measurements` for the spec's model and method;
    - `curves`: {params key: learning curve} of earlier runs (a sweep that prunes);
    - `billed_rates`: rates learned from the FOCUS bill;
    - `probes`: usable probes of the spec's model and method (the named query `plan_probes`);
    - `band_runs`: the team's succeeded runs with their estimates (the named query `estimate_runs`, as
      `gpuledger.estimate.calibration.load_runs` gives them): they join their cells' bands."""

    machine: MachineSpeed | None = None
    measured_preemption: dict[tuple[str, str], tuple[float, float]] | None = None
    measurements: pl.DataFrame | None = None
    curves: dict[str, Curve] | None = None
    billed_rates: BilledRates | None = None
    probes: pl.DataFrame | None = None
    band_runs: list[dict] | None = None


@dataclass(frozen=True)
class PlannedTrial:
    """One trial as the plan placed it: a row of `Plan.trials_frame`, typed (`Plan.planned_trials`).

    `feasible` False: no offer fits and `reason` says why (the placement fields are then None).
    Seconds (`_s`), US dollars (`_usd`), GiB (`_gib`); `flops_total` the trial's FLOPs as planned;
    `est_basis` where its duration comes from (measured, calibrated on N runs, estimate)."""

    trial_id: str
    trial_index: int
    params: dict[str, Any]
    feasible: bool
    reason: str | None = None
    accelerator: str | None = None
    gpus: int | None = None
    sharding: str | None = None
    cloud: str | None = None
    region: str | None = None
    instance_type: str | None = None
    spot: bool | None = None
    usd_per_hour: float | None = None
    on_demand_usd_per_hour: float | None = None
    price_source: str | None = None
    price_as_of: str | None = None
    est_memory_gib: float | None = None
    flops_total: float | None = None
    #: the compute seconds of the trial's work on its placement (no start-up, no preemption)
    compute_s: float | None = None
    est_wall_s: float | None = None
    est_cost_usd: float | None = None
    est_basis: str | None = None
    est_pruned_cost_usd: float | None = None
    start_s: float | None = None
    #: the band (gpuledger/plan/bands.py): P10 / P90 of the wall-clock and cost, P90 of the peak memory
    est_wall_s_p10: float | None = None
    est_wall_s_p90: float | None = None
    est_cost_usd_p10: float | None = None
    est_cost_usd_p90: float | None = None
    mem_gib_p10: float | None = None
    mem_gib_p90: float | None = None
    #: the chance its peak memory exceeds the usable memory of its placement (from the memory band), and
    #: where that placement is at risk (P90 over the usable memory) the words saying so
    oom_risk: float | None = None
    memory_note: str | None = None
    #: a trial placed on a SkyPilot pool (`gpuledger.plan.pools`): the pool's name and its workers
    pool: str | None = None
    pool_workers: int | None = None
    #: an RL trial whose rollouts run on an instance of their own (`train.rollout_gpu`): that instance as the
    #: plan priced it ({accelerator, gpus, cloud, instance_type, usd_per_hour}; `usd_per_hour` above is the
    #: two instances' sum), from the trial's `roles` (gpuledger/plan/rl_roles.py); None for any other trial
    rollout: dict[str, Any] | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> PlannedTrial:
        """Returns the typed trial of one row of `Plan.trials` (columns it does not name stay in the plan)."""
        values = {f.name: row[f.name] for f in fields(cls) if f.name in row}
        values["feasible"] = bool(row.get("feasible"))
        values["params"] = dict(row.get("params") or {})
        return cls(**values)

    @property
    def cost_usd(self) -> float:
        """The estimated cost the budget meter counts: `est_cost_usd` when finite and positive, else 0."""
        value = self.est_cost_usd
        return float(value) if value is not None and math.isfinite(value) and value > 0 else 0.0


@dataclass
class Plan:
    """A sweep's plan. `to_json()` gives the documented JSON object.

    `trials` (list of dicts, one per trial in trial order) is built on first use from
    `trials_frame` (a polars frame with the same columns; `params` as JSON text there).
    Durations are seconds (`_s`); money US dollars (`_usd`)."""

    sweep: str
    trials_frame: pl.DataFrame = field(repr=False)
    total_est_cost_usd: float
    makespan_s: float
    max_parallel: int
    budget_usd: float | None
    within_budget: bool
    price_snapshot: str
    what_if: list[dict[str, float]]
    assumptions: list[str]
    launcher: str = "skypilot"
    launch_order: list[str] = field(default_factory=list)
    #: what the budget guard quotes (gpuledger/plan/alternatives.py); None: not computed (`{}` in the JSON)
    alternatives: BudgetAlternatives | None = None
    deadline_s: float | None = None
    #: for a local plan: what the same trials would cost on the cloud GPU a cloud plan picks
    #: ({trial_id: CloudEquivalent}); see prices.py
    cloud_equivalent: dict[str, CloudEquivalent] = field(default_factory=dict)
    #: strategy asha (or tpe with pruning): the expected spend under pruning and its source; the
    #: budget guard decides on its expected_usd when known (`decided_usd`)
    pruning: PrunedSpend | None = None
    #: a cloud plan: per-trial managed jobs or a SkyPilot pool of K workers (`gpuledger.plan.pools`:
    #: used, workers, worker offer, start-up per worker, idle tail, saving against per-trial jobs)
    pool: PoolPlan | None = None
    #: the bands of the totals and the decision's quantile (gpuledger/plan/bands.py): P10 / P90 of the
    #: total cost and makespan, confidence (p50 | p90); the spend decided on is `decided_usd`
    bands: PlanBands | None = None
    #: `resources.max_parallel: auto` (gpuledger/plan/parallel.py): chosen, why, deadline_s,
    #: deadline_met, curve (per K: slots, makespan_s, cost_usd, meets_deadline, cost_source, chosen)
    parallel: ParallelChoice | None = None
    #: a cloud plan with one-GPU trials: k trials per GPU beside one per GPU (gpuledger/plan/packing.py:
    #: options [{k, groups, makespan_s, cost_usd, per_trial_usd, fits}], recommended, why, basis)
    packing: PackingPlan | None = None
    #: a GRPO/PPO plan: each feasible trial's time and dollars by role ({trial_id: {placement, engine,
    #: async, steps, step_s, phases_s, groups, roles}}, gpuledger/plan/rl_roles.py); in `to_json` under
    #: each trial as `roles`
    roles: dict[str, Any] = field(default_factory=dict)
    #: a local plan: how busy the machine was at plan time and the share of a core each trial was
    #: planned with (`gpuledger.inputs.machine.MachineLoad.to_json`: load_1m, load_5m, logical_cores,
    #: measured_at, parallel, cpu_share, method)
    machine_load: dict[str, Any] | None = None

    @property
    def confidence(self) -> str:
        """The quantile the budget decision is taken at (`budget.confidence`; p50 before `at_confidence`)."""
        return (self.bands.confidence if self.bands is not None else None) or "p50"

    @property
    def pruned_expected_usd(self) -> float | None:
        """The expected spend under pruning at P50, when the plan prunes and it is known; else None."""
        return self.pruning.expected_usd if self.pruning is not None else None

    def spend_at(self, quantile: str) -> float:
        """The spend the budget guard would decide on at `quantile` (p50 | p90): the expected spend under
        pruning when known, else the total of the trials; at p90 scaled by the plan's total P90 / P50
        ratio (the bands). The one home of this rule."""
        total = self.total_est_cost_usd
        p50 = self.pruned_expected_usd if self.pruned_expected_usd is not None else total
        if quantile == "p50":
            return p50
        p90_total = self.bands.total_cost_usd_p90 if self.bands is not None else total
        return p50 * (p90_total / total if total > 0 else 1.0)

    @property
    def decided_usd(self) -> float:
        """The spend the budget guard decides on (`spend_at` the plan's `confidence`), to the 1/100 cent as
        `gpuledger plan --json` prints it: `budget_guard`, `within_budget`, the MCP tools, the Python API's
        `PlanVerdict.decided_usd` and `plan --json`'s `decided_usd` all read it."""
        return round(self.spend_at(self.confidence), 4)

    def bands_json(self) -> dict[str, Any]:
        """The bands as `plan --json` prints them (flat): the totals' P10 / P90 and, once decided, the
        confidence with `decided_usd` and the spend at each quantile (`decided_usd_p50`, `decided_usd_p90`)."""
        if self.bands is None:
            return {}
        out = self.bands.to_json()
        if self.bands.confidence is not None:
            out.update(decided_usd=self.decided_usd, decided_usd_p50=round(self.spend_at("p50"), 4),
                       decided_usd_p90=round(self.spend_at("p90"), 4))
        return out

    @functools.cached_property
    def trials(self) -> list[dict[str, Any]]:
        out = []
        for r in self.trials_frame.iter_rows(named=True):
            p = r.get("params")
            r["params"] = json.loads(p) if isinstance(p, str) else (p or {})
            out.append(r)
        return out

    @functools.cached_property
    def planned_trials(self) -> list[PlannedTrial]:
        """The trials as typed values, in trial order (what the runtime reads)."""
        def rollout(tid: str) -> dict[str, Any] | None:  # the rollouts' own instance (docs/rl.md)
            g = ((self.roles.get(tid) or {}).get("groups") or {}).get("rollout") or {}
            return dict(g) if "usd_per_hour" in g else None  # set only for an instance of its own

        return [PlannedTrial.from_row({**r, "rollout": rollout(r["trial_id"])}) for r in self.trials]

    def planned(self, trial_id: str) -> PlannedTrial | None:
        """Returns the planned trial `trial_id`, or None when the plan has no such trial."""
        return next((t for t in self.planned_trials if t.trial_id == trial_id), None)

    @property
    def feasible_trials(self) -> list[dict[str, Any]]:
        return [t for t in self.trials if t["feasible"]]

    def to_json(self) -> dict[str, Any]:
        """Returns the plan as a JSON-ready dict (keys: sweep, trials, total_est_cost_usd,
        makespan_s, max_parallel, budget_usd, within_budget, decided_usd, price_snapshot, what_if, assumptions,
        launcher, launch_order, alternatives, deadline_s, cloud_equivalent, pruning for a sweep that
        prunes, pool for a cloud plan, parallel for `max_parallel: auto`, packing for a cloud plan of one-GPU trials; machine_load for a local plan; a GRPO/PPO trial's `roles`; the bands: total_cost_usd_p10, total_cost_usd_p90, makespan_s_p10,
        makespan_s_p90, confidence, decided_usd, decided_usd_p50, decided_usd_p90)."""
        budget = self.budget_usd if self.budget_usd is not None and math.isfinite(self.budget_usd) else None
        return {
            "sweep": self.sweep,
            "trials": [{**tr, "roles": self.roles[tr["trial_id"]]} if tr["trial_id"] in self.roles else tr
                       for tr in self.trials],
            "total_est_cost_usd": round(self.total_est_cost_usd, 4),
            "makespan_s": round(self.makespan_s, 3),
            "max_parallel": self.max_parallel,
            "budget_usd": budget,
            "within_budget": self.within_budget,
            "decided_usd": round(self.decided_usd, 4),
            "price_snapshot": self.price_snapshot,
            "what_if": self.what_if,
            "assumptions": self.assumptions,
            "launcher": self.launcher,
            "launch_order": self.launch_order,
            "alternatives": self.alternatives.to_json() if self.alternatives is not None else {},
            "deadline_s": self.deadline_s,
            "cloud_equivalent": {tid: eq.to_json() for tid, eq in self.cloud_equivalent.items()},
            **({"pruning": self.pruning.to_json()} if self.pruning is not None else {}),
            **self.bands_json(),
            **({"pool": self.pool.to_json()} if self.pool is not None else {}),
            **({"parallel": self.parallel.to_json()} if self.parallel is not None else {}),
            **({"packing": self.packing.to_json()} if self.packing is not None else {}),
            **({"machine_load": self.machine_load} if self.machine_load is not None else {}),
        }

    def to_json_text(self) -> str:
        return json.dumps(self.to_json(), indent=2, default=_json_default)


def _json_default(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, np.generic):
        return value.item()
    return str(value)
