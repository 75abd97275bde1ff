"""The typed sections of a `Plan` (`gpuledger.plan.model.Plan`): the bands of its totals, what the
budget guard quotes, the SkyPilot pool, the cloud equivalent of a local plan, the `max_parallel: auto`
curve and the packing options. (The expected spend under pruning is `gpuledger.plan.pruning.PrunedSpend`.)

Each is a frozen dataclass read by attribute; `to_json()` gives the section as `gpuledger plan --json`
prints it (the same keys, in the same order, as docs/plan-json.md and the tests read them). Seconds
(`_s`), US dollars (`_usd`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class PlanBands:
    """The P10 / P90 of the plan's total cost and makespan (gpuledger/plan/bands.py) and the quantile the
    budget decision is taken at (`budget.confidence`, set by `bands.at_confidence`; None before). The
    spend decided on is not stored here: `Plan.decided_usd` / `Plan.spend_at` derive it."""

    total_cost_usd_p10: float
    total_cost_usd_p90: float
    makespan_s_p10: float
    makespan_s_p90: float
    confidence: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"total_cost_usd_p10": self.total_cost_usd_p10, "makespan_s_p10": self.makespan_s_p10,
                               "total_cost_usd_p90": self.total_cost_usd_p90, "makespan_s_p90": self.makespan_s_p90}
        if self.confidence is not None:
            out["confidence"] = self.confidence
        return out


@dataclass(frozen=True)
class CostTotal:
    """One alternative's total: what it costs, how many trials it places (`of`: of how many feasible)."""

    total_usd: float
    trials: int
    of: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"total_usd": self.total_usd, "trials": self.trials, **({"of": self.of} if self.of is not None else {})}


@dataclass(frozen=True)
class CostDriver:
    """One of the (accelerator, GPUs, spot, instance) groups that cost the plan the most."""

    accelerator: str | None
    gpus: int | None
    spot: bool | None
    instance_type: str | None
    trials: int
    cost_usd: float
    wall_s: float
    share: float

    def to_json(self) -> dict[str, Any]:
        return {"accelerator": self.accelerator, "gpus": self.gpus, "spot": self.spot, "instance_type": self.instance_type,
                "trials": self.trials, "cost_usd": self.cost_usd, "wall_s": self.wall_s, "share": self.share}


@dataclass(frozen=True)
class BudgetAlternatives:
    """What the budget guard quotes (gpuledger/plan/alternatives.py): how many trials fit the budget
    cheapest first, the top cost drivers, and, over budget with something that fits, the totals all
    spot, all on-demand, cheapest ignoring the deadline and per accelerator (None: not computed)."""

    trials_within_budget: int = 0
    trials_feasible: int = 0
    top_cost_drivers: tuple[CostDriver, ...] = ()
    cheapest_ignoring_deadline_usd: CostTotal | None = None
    all_spot_usd: CostTotal | None = None
    all_on_demand_usd: CostTotal | None = None
    by_accelerator: dict[str, CostTotal] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"trials_within_budget": self.trials_within_budget, "trials_feasible": self.trials_feasible,
                               "top_cost_drivers": [d.to_json() for d in self.top_cost_drivers]}
        for key in ("cheapest_ignoring_deadline_usd", "all_spot_usd", "all_on_demand_usd"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value.to_json()
        if self.by_accelerator is not None:
            out["by_accelerator"] = {acc: v.to_json() for acc, v in self.by_accelerator.items()}
        return out


#: the offer fields a pool's worker carries (a `candidate_offers` row's)
POOL_WORKER_FIELDS = ("cloud", "region", "instance_type", "accelerator", "gpus", "spot", "usd_per_hour",
                      "on_demand_usd_per_hour", "preemptions_per_hour", "price_source", "price_as_of")


@dataclass(frozen=True)
class PoolWorker:
    """The offer every worker of a pool runs on."""

    cloud: str | None
    region: str | None
    instance_type: str | None
    accelerator: str | None
    gpus: int | None
    spot: bool | None
    usd_per_hour: float | None
    on_demand_usd_per_hour: float | None
    preemptions_per_hour: float | None
    price_source: str | None
    price_as_of: str | None

    @classmethod
    def from_offer(cls, offer: Mapping[str, Any]) -> PoolWorker:
        return cls(**{key: offer.get(key) for key in POOL_WORKER_FIELDS})

    def to_json(self) -> dict[str, Any]:
        return {key: getattr(self, key) for key in POOL_WORKER_FIELDS}


@dataclass(frozen=True)
class PoolAssignment:
    """One worker's trials in launch order, its busy seconds and its idle tail to the teardown."""

    worker: int
    trials: tuple[str, ...]
    busy_s: float
    idle_tail_s: float

    def to_json(self) -> dict[str, Any]:
        return {"worker": self.worker, "trials": list(self.trials), "busy_s": self.busy_s, "idle_tail_s": self.idle_tail_s}


#: the priced pool's fields, in the order `plan --json` prints them
_POOL_PRICED = ("startup_s_per_worker", "startup_usd_per_worker", "startup_usd", "job_start_s", "teardown_s", "busy_s",
                "idle_tail_s", "idle_tail_usd", "worker_s", "cost_usd", "makespan_s", "makespan_at_confidence_s",
                "deadline_ok", "saving_usd", "saving_pct")


@dataclass(frozen=True)
class PoolPlan:
    """A cloud plan's choice between per-trial managed jobs and a SkyPilot pool of K workers
    (gpuledger/plan/pools.py): the mode, whether the pool is used and why, the per-trial jobs' cost and
    makespan; with a pool priced (`workers` not None) its worker offer, start-up, idle tail, money and
    each worker's trials."""

    mode: str
    used: bool
    reason: str
    name: str
    per_trial_jobs_usd: float
    per_trial_jobs_makespan_s: float
    workers: int | None = None
    worker: PoolWorker | None = None
    startup_s_per_worker: float | None = None
    startup_usd_per_worker: float | None = None
    startup_usd: float | None = None
    job_start_s: float | None = None
    teardown_s: float | None = None
    busy_s: float | None = None
    idle_tail_s: float | None = None
    idle_tail_usd: float | None = None
    worker_s: float | None = None
    cost_usd: float | None = None
    makespan_s: float | None = None
    makespan_at_confidence_s: float | None = None
    deadline_ok: bool | None = None
    saving_usd: float | None = None
    saving_pct: float | None = None
    assignments: tuple[PoolAssignment, ...] = ()

    @property
    def priced(self) -> bool:
        """True when a pool was priced (it has workers), used or not."""
        return self.workers is not None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"mode": self.mode, "used": self.used, "reason": self.reason, "name": self.name,
                               "per_trial_jobs_usd": self.per_trial_jobs_usd,
                               "per_trial_jobs_makespan_s": self.per_trial_jobs_makespan_s}
        if not self.priced:
            return out
        out["workers"] = self.workers
        out["worker"] = self.worker.to_json() if self.worker is not None else None
        out.update({key: getattr(self, key) for key in _POOL_PRICED})
        out["assignments"] = [a.to_json() for a in self.assignments]
        return out


@dataclass(frozen=True)
class CloudEquivalent:
    """What one trial of a local plan would cost on the cloud GPU a `launcher: skypilot` plan of the same
    spec picks (gpuledger.plan.sweep.with_cloud_equivalent)."""

    accelerator: str
    gpus: int
    cloud: str
    region: str
    instance_type: str
    spot: bool
    wall_s: float
    usd: float
    usd_per_hour: float
    price_source: str | None
    price_as_of: str | None
    price_snapshot: str

    def to_json(self) -> dict[str, Any]:
        return {"accelerator": self.accelerator, "gpus": self.gpus, "cloud": self.cloud, "region": self.region,
                "instance_type": self.instance_type, "spot": self.spot, "wall_s": self.wall_s, "usd": self.usd,
                "usd_per_hour": self.usd_per_hour, "price_source": self.price_source, "price_as_of": self.price_as_of,
                "price_snapshot": self.price_snapshot}


@dataclass(frozen=True)
class ParallelPoint:
    """One slot count `max_parallel: auto` planned: its makespan at the plan's confidence (under pruning
    when known), its decided spend and where that comes from, whether it meets the deadline."""

    slots: int
    requested: int
    makespan_s: float
    cost_usd: float
    meets_deadline: bool
    cost_source: str
    chosen: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"slots": self.slots, "requested": self.requested, "makespan_s": self.makespan_s, "cost_usd": self.cost_usd,
                "meets_deadline": self.meets_deadline, "cost_source": self.cost_source, "chosen": self.chosen}


@dataclass(frozen=True)
class ParallelChoice:
    """`resources.max_parallel: auto` (gpuledger/plan/parallel.py): the slots chosen, why, the deadline
    and whether it is met, and the curve of every slot count planned."""

    chosen: int
    why: str
    deadline_s: float | None
    curve: tuple[ParallelPoint, ...]
    deadline_met: bool
    auto: bool = True

    def to_json(self) -> dict[str, Any]:
        return {"auto": self.auto, "chosen": self.chosen, "why": self.why, "deadline_s": self.deadline_s,
                "curve": [p.to_json() for p in self.curve], "deadline_met": self.deadline_met}


@dataclass(frozen=True)
class PackingOption:
    """k one-GPU trials per GPU (gpuledger/plan/packing.py): when it fits, its jobs, makespan, cost and each
    trial's share; when not, why."""

    k: int
    fits: bool
    groups: int | None = None
    makespan_s: float | None = None
    cost_usd: float | None = None
    per_trial_usd: dict[str, float] | None = None
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        if not self.fits:
            return {"k": self.k, "fits": False, "reason": self.reason}
        if self.per_trial_usd is None:  # one per GPU, the option the others are compared with
            return {"k": self.k, "groups": self.groups, "makespan_s": self.makespan_s, "cost_usd": self.cost_usd,
                    "fits": True}
        return {"k": self.k, "fits": True, "groups": self.groups, "makespan_s": self.makespan_s,
                "cost_usd": self.cost_usd, "per_trial_usd": self.per_trial_usd}


@dataclass(frozen=True)
class PackingPlan:
    """A cloud plan of one-GPU trials: one per GPU beside k per GPU, the k recommended and why."""

    options: tuple[PackingOption, ...]
    recommended: int | None
    basis: str
    why: str = field(default="")
    #: what the sweep runs (`resources.trials_per_gpu`, gpuledger.runtime.accepted.choose_pack), and why
    chosen: int | None = None
    chosen_why: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"options": [o.to_json() for o in self.options], "recommended": self.recommended, "basis": self.basis,
                "why": self.why, **({"chosen": self.chosen, "chosen_why": self.chosen_why}
                                    if self.chosen is not None else {})}
