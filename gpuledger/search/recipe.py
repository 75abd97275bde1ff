"""Whether pruning settings keep the recipe: measured learning curves replayed and checked against
synchronous successive halving (`gpuledger.search.rungs`), the plan's warning and safer setting
(gpuledger/plan/pruning.py), and the successive-halving fraction of a run its formula uses."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuledger.search.rungs import synchronous_outcome


def successive_halving_fraction(values_per_trial: int, min_steps: int, reduction_factor: int) -> float:
    """The expected fraction of a full run a trial runs under synchronous successive halving (gpuledger/plan/pruning.py
    states the formula), at a constant time per value."""
    v, eta = int(values_per_trial), int(reduction_factor)
    rungs = []
    r = int(min_steps)
    while r < v:
        rungs.append(r)
        r *= eta
    if not rungs:
        return 1.0
    run = float(rungs[0])
    for i in range(1, len(rungs)):
        run += eta ** -i * (rungs[i] - rungs[i - 1])
    run += eta ** -len(rungs) * (v - rungs[-1])
    return run / v


@dataclass(frozen=True)
class RecipeCheck:
    """Whether pruning settings keep the best of measured curves (`check_recipe`)."""

    best_trial_id: str
    best_value: float
    kept: bool  # synchronous successive halving keeps it even RECIPE_MARGIN worse: so does `RungPruner`, in any order
    dropped_at_step: int | None
    replay_best_value: float | None  # the best the replay at the plan's slots ends with
    replay_fraction: float | None  # the replay's trial-seconds / the curves' measured seconds
    safer: dict[str, float] | None = None  # {min_steps, reduction_factor, replay_fraction} keeping the best

    def to_json(self) -> dict[str, Any]:
        return {"best_trial_id": self.best_trial_id, "best_value": self.best_value, "kept": self.kept,
                "dropped_at_step": self.dropped_at_step, "replay_best_value": self.replay_best_value,
                "replay_fraction": None if self.replay_fraction is None else round(self.replay_fraction, 4),
                "safer": self.safer}


#: How much worse the best's values may turn out (relative) and still be kept: a check that passes only by
#: a hair would fail on a machine whose float rounding, or a run whose data order, moves a value slightly.
RECIPE_MARGIN = 0.02

#: Settings the safer-setting search tries: reduction factors 2..MAX_SEARCH_ETA, first rungs below the
#: curves' length; the MAX_SAFER_REPLAYS cheapest by the successive-halving formula are replayed.
MAX_SEARCH_ETA = 12
MAX_SAFER_REPLAYS = 4


def check_recipe(curves, *, min_steps: int, reduction_factor: int, goal: str, slots: int,
                 order: list[str], suspend: bool, replay=None) -> RecipeCheck | None:
    """Returns whether (min_steps, reduction_factor) keep the best of the complete measured `curves`
    (`gpuledger.search.asha_replay.Curve`, in `order`) under synchronous successive halving even with its
    values RECIPE_MARGIN worse, and when not, the cheapest setting that does: among those that keep it,
    the MAX_SAFER_REPLAYS cheapest by the formula,
    replayed at `slots` (`replay`: a `simulate_asha` result of the given settings, reused), suspending at
    undecided rungs when `suspend` (the sweep's `suspension.suspends`: the replay of the search that runs);
    None with fewer than 2 complete curves. Whether the best is kept is synchronous successive halving's
    outcome, the same with or without suspension; the replayed seconds (which safer setting is cheapest)
    are not."""
    from gpuledger.search.asha_replay import simulate_asha

    complete = {c.trial_id: list(c.values) for c in curves if c.complete and not c.failed and c.values}
    if len(complete) < 2:
        return None
    sign = 1.0 if goal == "minimize" else -1.0
    best = min(complete, key=lambda t: (sign * complete[t][-1], t))
    measured_s = sum(c.wall_s for c in curves) or 1.0
    # the best's curve RECIPE_MARGIN worse at every value (by its magnitude, in the bad direction)
    worse = {**complete, best: [v + sign * RECIPE_MARGIN * abs(v) for v in complete[best]]}

    def dropped_at(ms: int, eta: int) -> int | None:
        return synchronous_outcome(worse, ms, eta, goal, len(curves))[best]

    def replayed(ms: int, eta: int):
        return simulate_asha(list(curves), slots=slots, min_steps=ms, reduction_factor=eta, goal=goal, order=order,
                             suspend=suspend)

    dropped = dropped_at(min_steps, reduction_factor)
    sim = replay or replayed(min_steps, reduction_factor)
    safer = None
    if dropped is not None:
        length = max(len(v) for v in complete.values())
        options = sorted((successive_halving_fraction(length, ms, eta), ms, eta)
                         for eta in range(2, MAX_SEARCH_ETA + 1) for ms in range(1, length)
                         if dropped_at(ms, eta) is None)
        tried = []
        for _, ms, eta in options[:MAX_SAFER_REPLAYS]:
            r = replayed(ms, eta)
            tried.append((r.trial_seconds, ms, eta))
        if tried:
            secs, ms, eta = min(tried)
            safer = {"min_steps": ms, "reduction_factor": eta, "replay_fraction": round(secs / measured_s, 4)}
    return RecipeCheck(best_trial_id=best, best_value=complete[best][-1], kept=dropped is None, dropped_at_step=dropped,
                       replay_best_value=sim.best_value, replay_fraction=sim.trial_seconds / measured_s, safer=safer)
