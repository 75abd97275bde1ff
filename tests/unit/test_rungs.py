"""Successive halving that does not depend on arrival order (gpuledger/search/rungs.py): the synchronous
outcome by hand, the RungPruner never contradicting it in any order on any number of slots, and the
plan's recipe check with its safer setting."""

from __future__ import annotations

import itertools

import pytest

from gpuledger.search.asha_replay import Curve, simulate_asha
from gpuledger.search.recipe import RECIPE_MARGIN, check_recipe
from gpuledger.search.rungs import keep_at, rung_steps, synchronous_outcome


def _curve(tid: str, values, dt: float = 1.0) -> Curve:
    times = tuple(dt * (i + 1) for i in range(len(values)))
    return Curve(tid, tuple(float(v) for v in values), times, times[-1] + 0.5, True)


HAND = {"A": [5, 4, 3, 2], "B": [6, 5, 4, 3], "C": [4, 3, 2, 1], "D": [7, 6, 5, 4]}
# like the demo grid: "best" is second at every value but the last; "fast" leads until then
LATE = {"fast": [9, 5, 3, 2.0, 1.0, 0.80, 0.79], "best": [9, 6, 4, 2.5, 1.2, 0.85, 0.77],
        **{f"p{i}": [9, 7 + i, 6 + i, 5 + i, 4 + i, 3 + i, 2 + i] for i in range(6)}}


def test_rungs_and_keep():
    assert rung_steps(2, 3, 17) == [2, 6] and rung_steps(1, 2, 4) == [1, 2, 4] and rung_steps(5, 2, 4) == []
    assert [keep_at(12, 3, i) for i in range(3)] == [4, 1, 1]
    assert [keep_at(12, 5, i) for i in range(2)] == [2, 1]


def test_synchronous_outcome_by_hand():
    # min_steps 1, eta 2, 4 trials: step 1 keeps 2 (C 4, A 5), step 2 keeps 1 (C 3 < A 4), step 4 keeps C
    assert synchronous_outcome(HAND, 1, 2, "minimize") == {"A": 2, "B": 1, "C": None, "D": 1}
    flipped = {k: [-v for v in vals] for k, vals in HAND.items()}
    assert synchronous_outcome(flipped, 1, 2, "maximize") == {"A": 2, "B": 1, "C": None, "D": 1}


@pytest.mark.parametrize("curves", [HAND, LATE], ids=["hand", "late"])
def test_no_order_and_no_slot_count_prunes_what_synchronous_halving_keeps(curves):
    ms, eta = (1, 2) if curves is HAND else (2, 3)
    sync = synchronous_outcome(curves, ms, eta, "minimize")
    ids = list(curves)
    orders = list(itertools.permutations(ids))[::5] if len(ids) <= 4 else [ids, ids[::-1]]
    outcomes = set()
    for order in orders:
        for slots in (1, 3):
            sim = simulate_asha([_curve(t, v) for t, v in curves.items()], slots=slots, min_steps=ms,
                                reduction_factor=eta, goal="minimize", order=list(order))
            for t in sim.trials:
                if sync[t.trial_id] is None:
                    assert t.status == "completed", (order, slots, t)
                elif t.status == "pruned":  # pruned only where the synchronous outcome drops it, or later
                    assert t.values_reported >= sync[t.trial_id], (order, slots, t)
            outcomes.add(frozenset(t.trial_id for t in sim.trials if t.status == "completed"))
    # the trials kept to the end always include the synchronous survivors, whatever the order
    kept = {t for t, step in sync.items() if step is None}
    assert all(kept <= o for o in outcomes)


def test_recipe_check_warns_and_names_a_safer_setting():
    curves = [_curve(t, v) for t, v in LATE.items()]
    order = list(LATE)
    bad = check_recipe(curves, min_steps=2, reduction_factor=3, goal="minimize", slots=2, order=order, suspend=False)
    assert bad.best_trial_id == "best" and not bad.kept and bad.dropped_at_step == 6
    safer = bad.safer
    assert safer is not None
    assert synchronous_outcome(LATE, safer["min_steps"], safer["reduction_factor"], "minimize")["best"] is None
    again = check_recipe(curves, min_steps=safer["min_steps"], reduction_factor=safer["reduction_factor"],
                         goal="minimize", slots=2, order=order, suspend=False)
    assert again.kept and again.safer is None and again.replay_best_value == pytest.approx(0.77)
    # kept only by a hair is not kept: the best's values RECIPE_MARGIN worse must still survive
    close = {**LATE, "best": [9, 6, 4, 2.5, 1.2, 0.85, 0.77], "p0": [9, 6.05, 6, 5, 4, 3, 2]}
    hair = check_recipe([_curve(t, v) for t, v in close.items()], min_steps=2, reduction_factor=4, goal="minimize",
                        slots=1, order=list(close), suspend=False)
    assert 6 * (1 + RECIPE_MARGIN) > 6.05 and not hair.kept
