"""The agent budget: what sweeps launched through `gpuledger mcp` may spend in total.

Counted from the ledger (table `agent_launches`), so it holds across tool calls and server
restarts: a launch whose sweep is still running counts the larger of its planned and its measured
spend; a launch whose sweep ended (or whose process is gone) counts what its runs were billed.
Pure functions here; the server reads the launches inside the same writer transaction that records
a new one, so two servers cannot both spend the last dollar.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from gpuledger.errors import BudgetExceeded
from gpuledger.vocabulary import SWEEP_PLANNED, SWEEP_RUNNING

#: sweep statuses under which a launch still spends (its planned spend is held)
OPEN_SWEEP_STATUSES = (SWEEP_PLANNED, SWEEP_RUNNING)
#: a launch whose sweep has not registered yet holds its planned spend at least this long, even
#: when its process is not seen (another host, or the pid not recorded yet)
REGISTRATION_GRACE = timedelta(minutes=10)


@dataclass(frozen=True)
class LaunchSpend:
    """What one launch counts against the budget, and why."""

    launch_id: str
    sweep_id: str
    counted_usd: float
    open: bool
    planned_usd: float
    measured_usd: float


@dataclass(frozen=True)
class AgentBudget:
    """The agent budget now: its cap, what the ledger holds against it, what is left."""

    budget_usd: float
    committed_usd: float
    launches: tuple[LaunchSpend, ...]

    @property
    def remaining_usd(self) -> float:
        return max(0.0, self.budget_usd - self.committed_usd)

    @property
    def open_launches(self) -> int:
        return sum(1 for launch in self.launches if launch.open)

    def to_json(self) -> dict:
        return {"budget_usd": self.budget_usd, "committed_usd": round(self.committed_usd, 6),
                "remaining_usd": round(self.remaining_usd, 6), "launches": len(self.launches),
                "open_launches": self.open_launches}


def launch_is_open(*, sweep_status: str | None, pid: int | None, host: str | None, launched_at: datetime,
                   this_host: str, now: datetime, alive: Callable[[int | None], bool]) -> bool:
    """Returns whether a launch may still spend: its sweep is planned/running (or not registered yet)
    and its process is alive, or it cannot be checked from here (another host, no pid yet) and the
    launch is recent."""
    if sweep_status is not None and sweep_status not in OPEN_SWEEP_STATUSES:
        return False
    if host == this_host and pid is not None:
        return alive(pid)
    return sweep_status in OPEN_SWEEP_STATUSES or now - launched_at < REGISTRATION_GRACE


def agent_budget(budget_usd: float, launches: Iterable, *, this_host: str, alive: Callable[[int | None], bool],
                 now: datetime | None = None) -> AgentBudget:
    """Returns the budget with every launch's counted spend (`launches`: `AgentLaunch` rows)."""
    at = now or datetime.now(UTC).replace(tzinfo=None)
    spends = []
    for launch in launches:
        is_open = launch_is_open(sweep_status=launch.sweep_status, pid=launch.pid, host=launch.host,
                                 launched_at=launch.launched_at, this_host=this_host, now=at, alive=alive)
        measured = float(launch.measured_usd or 0.0)
        counted = max(float(launch.planned_usd), measured) if is_open else measured
        spends.append(LaunchSpend(launch.launch_id, launch.sweep_id, counted, is_open, float(launch.planned_usd),
                                  measured))
    return AgentBudget(budget_usd=budget_usd, committed_usd=sum(s.counted_usd for s in spends),
                       launches=tuple(spends))


def check_launch(budget: AgentBudget, planned_usd: float, sweep_name: str) -> None:
    """Raises `BudgetExceeded` naming the numbers when launching `planned_usd` would cross the budget."""
    if budget.committed_usd + planned_usd > budget.budget_usd + 1e-9:
        raise BudgetExceeded(
            f"refused before launch: sweep {sweep_name} is planned at ${planned_usd:.2f}, and sweeps launched "
            f"by agents already hold ${budget.committed_usd:.2f} of the agent budget of ${budget.budget_usd:.2f} "
            f"(${budget.remaining_usd:.2f} left; {budget.open_launches} still running). Make the sweep "
            f"cheaper (fewer trials, fewer tokens, spot) or ask a person to raise [agent] budget_usd")
