"""The budget meter of a running sweep and its mid-sweep stop rule.

Before each launch: when measured spend + the estimates of the trials in flight + this trial's
estimate would cross the budget, launching stops (the rest are `skipped-budget`). A trial's
estimate is max(its plan estimate, the mean measured cost of this sweep's finished, not cancelled
attempts), so a plan that was optimistic is corrected by what the sweep has measured. A forced
sweep (the person said to spend it) never stops.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpuledger.plan.model import PlannedTrial

#: Money below this is rounding (a trial exactly at the budget still launches).
EPSILON_USD = 1e-9


@dataclass
class BudgetStop:
    """Why launching stopped: the numbers of the rule at that moment."""

    spent_usd: float
    in_flight_est_usd: float
    next_est_usd: float
    budget_usd: float

    @property
    def reason(self) -> str:
        return (f"budget stop: measured ${self.spent_usd:.4f} + in flight ${self.in_flight_est_usd:.4f} + next "
                f"trial ${self.next_est_usd:.4f} would cross the ${self.budget_usd:.2f} budget")


@dataclass
class BudgetMeter:
    """Spend so far and the estimates the stop rule uses. Not thread-safe: one loop owns it."""

    budget_usd: float
    plan_costs_usd: dict[str, float] = field(default_factory=dict)  # trial_id -> plan estimate
    spent_usd: float = 0.0
    measured_usd: list[float] = field(default_factory=list)  # cost of each finished, not cancelled attempt
    forced: bool = False
    in_flight: set[str] = field(default_factory=set)

    @classmethod
    def for_plan(cls, budget_usd: float, rows: Mapping[str, PlannedTrial], *, spent_usd: float = 0.0,
                 measured_usd: list[float] | None = None, forced: bool = False) -> BudgetMeter:
        return cls(budget_usd=float(budget_usd), plan_costs_usd={k: r.cost_usd for k, r in rows.items()},
                   spent_usd=float(spent_usd), measured_usd=list(measured_usd or []), forced=forced)

    def estimate_usd(self, trial_id: str) -> float:
        est = self.plan_costs_usd.get(trial_id, 0.0)
        if self.measured_usd:
            est = max(est, sum(self.measured_usd) / len(self.measured_usd))
        return est

    def check(self, trial_id: str) -> BudgetStop | None:
        """Returns why `trial_id` must not launch, or None when it may."""
        if self.forced:
            return None
        in_flight = sum(self.estimate_usd(t) for t in self.in_flight)
        nxt = self.estimate_usd(trial_id)
        if self.spent_usd + in_flight + nxt > self.budget_usd + EPSILON_USD:
            return BudgetStop(self.spent_usd, in_flight, nxt, self.budget_usd)
        return None

    def launched(self, trial_id: str) -> None:
        self.in_flight.add(trial_id)

    def finished(self, trial_id: str, costs_usd: list[tuple[float, bool]]) -> None:
        """Books a finished trial: (cost, cancelled) per attempt."""
        self.in_flight.discard(trial_id)
        for cost, cancelled in costs_usd:
            self.spent_usd += cost
            if not cancelled:
                self.measured_usd.append(cost)


@dataclass
class EnvelopeStop(BudgetStop):
    """Launching stopped because a team envelope (gpuledger/runtime/accrual.py) would be crossed."""

    why: str = ""

    @property
    def reason(self) -> str:
        return self.why
