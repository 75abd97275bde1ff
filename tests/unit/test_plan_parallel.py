"""`resources.max_parallel: auto` (gpuledger/plan/parallel.py): the least expected cost among the slot
counts whose makespan meets the deadline, worked out on hand-made plans at each K."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

from gpuledger.plan.parallel import choose_parallel
from gpuledger.plan.pruning import PrunedSpend
from gpuledger.plan.sections import ParallelChoice, PlanBands


@dataclass
class _Plan:  # the fields of gpuledger.plan.model.Plan that the choice reads
    max_parallel: int
    makespan_s: float
    decided_usd: float
    pruning: PrunedSpend | None = None
    bands: PlanBands | None = None
    confidence: str = "p50"
    assumptions: list[str] = field(default_factory=list)
    parallel: ParallelChoice | None = None


def _spec(deadline_s):
    return SimpleNamespace(budget=SimpleNamespace(deadline_s=deadline_s))


# K slots: makespan 1000 s / K; cost grows with K (under pruning more slots promote trials before the best is known)
def _at(k: int) -> _Plan:
    return _Plan(max_parallel=k, makespan_s=1000.0 / k, decided_usd=1.0 + 0.1 * k)


def test_the_cheapest_k_that_meets_the_deadline():
    plan = choose_parallel(_spec(300.0), 16, _at)  # 1000/K <= 300: K >= 4; cheapest of those: 4
    assert plan.max_parallel == 4 and plan.parallel.chosen == 4 and plan.parallel.deadline_met
    assert [r.slots for r in plan.parallel.curve] == [1, 2, 4, 8, 16]
    assert [r.meets_deadline for r in plan.parallel.curve] == [False, False, True, True, True]
    assert "1, 2 slot(s) cost less but miss it" in plan.parallel.why and plan.parallel.why in plan.assumptions


def test_no_deadline_is_the_cheapest_and_none_met_is_the_fastest():
    assert choose_parallel(_spec(None), 16, _at).max_parallel == 1
    fastest = choose_parallel(_spec(10.0), 16, _at)
    assert fastest.max_parallel == 16 and not fastest.parallel.deadline_met
    assert "no slot count meets" in fastest.parallel.why


def test_the_makespan_under_pruning_and_capped_ks_count_once():
    def at(k):  # a local plan capped at 2 cores; pruning halves the makespan
        return _Plan(max_parallel=min(k, 2), makespan_s=1000.0 / min(k, 2), decided_usd=1.0,
                     pruning=PrunedSpend(source="measured", expected_usd=1.0, full_usd=2.0, basis="hand-made",
                                         makespan_fraction=0.5))

    plan = choose_parallel(_spec(300.0), 8, at)  # 1000 / 2 * 0.5 = 250 s <= 300
    assert [r.slots for r in plan.parallel.curve] == [1, 2] and plan.max_parallel == 2
    assert plan.parallel.curve[1].makespan_s == 250.0 and plan.parallel.curve[1].cost_source == "measured"
