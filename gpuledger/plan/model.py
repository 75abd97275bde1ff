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
    alternatives: dict[str, Any] = field(default_factory=dict)
    deadline_s: float | None = None
    #: for a local plan: what the same trials would cost on the cloud GPU a cloud plan picks
    #: ({trial_id: {accelerator, gpus, cloud, region, instance_type, spot, wall_s, usd}}); see prices.py
    cloud_equivalent: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: strategy asha (or tpe with pruning): the expected spend under pruning and its source
    #: (`gpuledger.plan.pruning.PrunedSpend.to_json()`); the budget guard uses its expected_usd when known
    pruning: dict[str, Any] | None = None
    #: a cloud plan: per-trial managed jobs or a SkyPilot pool of K workers (`gpuledger.plan.pools`:
    #: used, workers, worker offer, start-up per worker, idle tail, saving against per-trial jobs)
    pool: dict[str, Any] | None = None
    #: the bands of the totals and the decision's quantile (gpuledger/plan/bands.py): total_cost_usd_p10,
    #: total_cost_usd_p90, makespan_s_p10, makespan_s_p90, confidence (p50 | p90), decided_usd (the spend
    #: the budget guard compares at that quantile), decided_usd_p50, decided_usd_p90
    bands: dict[str, Any] | None = None
    #: `resources.max_parallel: auto` (gpuledger/plan/parallel.py): auto, chosen, why, deadline_s,
    #: deadline_met, curve (per K: slots, makespan_s, cost_usd, meets_deadline, cost_source, chosen)
    parallel: dict[str, Any] | None = None
    #: a cloud plan with one-GPU trials: k trials per GPU beside one per GPU (gpuledger/plan/packing.py:
    #: options [{k, groups, makespan_s, cost_usd, per_trial_usd, fits}], recommended, why, basis)
    packing: dict[str, Any] | None = None
    #: a GRPO/PPO plan: each feasible trial's time and dollars by role ({trial_id: {placement, engine,
    #: async, steps, step_s, phases_s, groups, roles}}, gpuledger/plan/rl_roles.py); in `to_json` under
    #: each trial as `roles`
    roles: dict[str, Any] = field(default_factory=dict)

    @property
    def confidence(self) -> str:
        return (self.bands or {}).get("confidence", "p50")

    @property
    def decided_usd(self) -> float:
        """The spend the budget guard decides on, at the plan's confidence (`bands`, budget.confidence):
        the expected spend under pruning when the plan has one and it is known, else the total of the
        trials (the one home of this rule: `budget_guard`, `within_budget`, the MCP tools and `gpuledger
        plan --json`'s `decided_usd` read it)."""
        b = self.bands or {}
        if b.get("decided_usd") is not None:
            return float(b["decided_usd"])
        pr = self.pruning or {}
        return pr["expected_usd"] if pr.get("expected_usd") is not None else self.total_est_cost_usd

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
        return [PlannedTrial.from_row(r) for r in self.trials]

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
        prunes, pool for a cloud plan, parallel for `max_parallel: auto`, packing for a cloud plan of one-GPU trials; a GRPO/PPO trial's `roles`; the bands: total_cost_usd_p10, total_cost_usd_p90, makespan_s_p10,
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
            "alternatives": self.alternatives,
            "deadline_s": self.deadline_s,
            "cloud_equivalent": self.cloud_equivalent,
            **({"pruning": self.pruning} if self.pruning is not None else {}),
            **(self.bands or {}),
            **({"pool": self.pool} if self.pool is not None else {}),
            **({"parallel": self.parallel} if self.parallel is not None else {}),
            **({"packing": self.packing} if self.packing is not None else {}),
        }

    def to_json_text(self) -> str:
        return json.dumps(self.to_json(), indent=2, default=_json_default)


def _json_default(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, np.generic):
        return value.item()
    return str(value)
