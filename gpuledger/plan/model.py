"""`Plan`: what the planner returns (a polars frame of trials + totals), and its JSON form."""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl


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

    @functools.cached_property
    def trials(self) -> list[dict[str, Any]]:
        out = []
        for r in self.trials_frame.iter_rows(named=True):
            p = r.get("params")
            r["params"] = json.loads(p) if isinstance(p, str) else (p or {})
            out.append(r)
        return out

    @property
    def feasible_trials(self) -> list[dict[str, Any]]:
        return [t for t in self.trials if t["feasible"]]

    def to_json(self) -> dict[str, Any]:
        """Returns the plan as a JSON-ready dict (keys: sweep, trials, total_est_cost_usd,
        makespan_s, max_parallel, budget_usd, within_budget, price_snapshot, what_if, assumptions,
        launcher, launch_order, alternatives, deadline_s, cloud_equivalent, pruning for a sweep that
        prunes, pool for a cloud plan)."""
        budget = self.budget_usd if self.budget_usd is not None and math.isfinite(self.budget_usd) else None
        return {
            "sweep": self.sweep,
            "trials": self.trials,
            "total_est_cost_usd": round(self.total_est_cost_usd, 4),
            "makespan_s": round(self.makespan_s, 3),
            "max_parallel": self.max_parallel,
            "budget_usd": budget,
            "within_budget": self.within_budget,
            "price_snapshot": self.price_snapshot,
            "what_if": self.what_if,
            "assumptions": self.assumptions,
            "launcher": self.launcher,
            "launch_order": self.launch_order,
            "alternatives": self.alternatives,
            "deadline_s": self.deadline_s,
            "cloud_equivalent": self.cloud_equivalent,
            **({"pruning": self.pruning} if self.pruning is not None else {}),
            **({"pool": self.pool} if self.pool is not None else {}),
        }

    def to_json_text(self) -> str:
        return json.dumps(self.to_json(), indent=2, default=_json_default)


def _json_default(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, np.generic):
        return value.item()
    return str(value)
