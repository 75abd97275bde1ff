"""Learning-curve extrapolation and the cost-aware stopping rule (`search.stopping: cost`, the default of a
sweep that prunes; `stopping: rungs` turns it off).

    stopper = CostStopper(references, goal="minimize", value_usd=0.02)   # references: complete curves
    decision = stopper.decide(trial_id, values, best=0.77, usd_left=0.0012)
    decision.stop, decision.p_beat, decision.reason

`forecast(values, best, references, goal)`: the probability that a trial whose objective values so far
are `values` ends better than `best`, from the learning curves of similar trials that ran to their end
(the warehouse's curves of the same model, method, objective and training settings:
`gpuledger.inputs.ledger.measured_curves`, plus the sweep's own trials as they end). Each reference r
longer than k (k = the values the trial reported) predicts this trial's final value from its own change
after step k: final = v_k × r_final / r_k when every value is positive (a loss falling by the same
factor), else v_k + (r_final − r_k). A prediction beats `best` when it is better than best made
`RECIPE_MARGIN` worse (a forecast tie stays). p_beat = (hits + a) / (n + 2a) over the n references
(a: the level's `prior`, 0.5 by default: never 0 or 1 on finitely many).

The stopping rule (a one-step value-of-information test, as in CARBS and Gittins-index stopping): stop
when p_beat × value_usd < usd_left, i.e. when the chance of a better recipe times what a better recipe
is worth is less than the money the trial still costs. `value_usd`: `search.stopping_value_usd`, else
the plan's full spend of the sweep (what the user planned to pay to find the recipe). `best`: the best
final value of the sweep's trials that ended, else (none yet) the best final value of the references.
Guards, because a forecast from other curves cannot see a curve that bends late (the demo grid's recipe
is second from its 4th value to its 14th): no decision before `min_values` values, with fewer than
MIN_REFERENCES references, and none for a trial whose value at step k is as good as the references'
`guard` quantile there. The rule's `level` (LEVELS) sets that quantile and the smoothing's pseudo-count:
`half` (the median stopping rule's guard, Jeffreys' (hits + 0.5) / (n + 1)), `third`, `fifth` (bolder:
stops trials of the better half, and at a smaller P). Which runs is decided before launch on the measured
curves of the kind (`gpuledger.search.safety.with_checked_stopping`: the boldest that keeps the best
measured curve in every replayed order; none: rungs only); `half` without such curves.
Over 40 replayed arrival orders of the demo grid's curves, leaving each trial's own curve out of its
references, the checked level kept the recipe every time (docs/search.md).
Pure: nothing is read or written.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpuledger.search.recipe import RECIPE_MARGIN

#: the fewest references a forecast rests on (with fewer, no curve stopping; rungs only)
MIN_REFERENCES = 3
#: the fewest values a trial reports before the curve rule may stop it (step 0 of the demo trainer is the
#: base model's value, the same for every trial: the first informative value is the second)
MIN_VALUES = 2


@dataclass(frozen=True)
class Level:
    """How boldly the rule stops: `guard`, the quantile of the references' values at the trial's step at or
    better than which it is never stopped (0.5: the median); `prior`, the pseudo-count a of the smoothed
    share (hits + a) / (n + 2a)."""

    name: str
    guard: float
    prior: float


#: the rule's levels, boldest first, named by the share of references a trial must be as good as to be
#: never stopped by its curve: the check before launch (`gpuledger.search.safety`) runs the first one that
#: keeps the best measured curve in every replayed order; `half` is the rule as it was before the levels
#: (the median guard, Jeffreys' a = 0.5) and what runs unchecked (no curves of the kind: a cold project).
#: Set on the demo grid and synthetic seeds 0-2 only (benchmarks/search_holdout.py holds others out)
LEVELS = (Level("fifth", guard=0.2, prior=0.1), Level("third", guard=1 / 3, prior=0.25),
          Level("half", guard=0.5, prior=0.5))
LEVEL = {lv.name: lv for lv in LEVELS}
UNCHECKED_LEVEL = "half"


@dataclass(frozen=True)
class Forecast:
    p_beat: float  # probability the trial ends better than `best` (Laplace-smoothed share of references)
    references: int  # references the forecast used
    predicted: float  # the median predicted final value


def forecast(values: Sequence[float], best: float, references: Sequence[Sequence[float]], goal: str,
             margin: float = RECIPE_MARGIN, prior: float = 0.5) -> Forecast | None:
    """Returns the forecast of the module's docstring, or None without MIN_REFERENCES usable references."""
    k = len(values)
    if k < 1 or any(not math.isfinite(v) for v in values):
        return None
    usable = [tuple(r) for r in references if len(r) > k and all(math.isfinite(x) for x in r)]
    if len(usable) < MIN_REFERENCES:
        return None
    v = values[-1]
    ratio = v > 0 and all(x > 0 for r in usable for x in (r[k - 1], r[-1]))
    preds = sorted(v * r[-1] / r[k - 1] if ratio else v + (r[-1] - r[k - 1]) for r in usable)
    sign = 1.0 if goal == "minimize" else -1.0
    threshold = best + sign * margin * abs(best)  # best made `margin` worse: a forecast tie counts as a beat
    hits = sum(1 for p in preds if sign * p < sign * threshold)
    return Forecast(p_beat=(hits + prior) / (len(usable) + 2 * prior), references=len(usable),
                    predicted=preds[len(preds) // 2])


@dataclass(frozen=True)
class StopDecision:
    stop: bool
    p_beat: float
    value_usd: float
    usd_left: float
    references: int
    predicted: float

    @property
    def reason(self) -> str:
        """One line for the trial's record (`trials.reason`): why the rule stopped (or kept) it."""
        verb = "stopped" if self.stop else "kept"
        cmp = "<" if self.stop else ">="
        return (f"{verb} by its learning curve: P(beats the best) {self.p_beat:.3f} from {self.references} similar "
                f"curves (forecast final {self.predicted:.4g}) × value ${self.value_usd:.4g} {cmp} ${self.usd_left:.4g} "
                "it still costs")


@dataclass
class CostStopper:
    """The cost-aware stopping rule over `references` (complete curves' values, in order reported)."""

    references: list[tuple[float, ...]]
    goal: str
    value_usd: float
    min_values: int = MIN_VALUES
    level: str = UNCHECKED_LEVEL  # a name of LEVELS

    def add(self, values: Sequence[float]) -> None:
        """A trial of the sweep ran to its end: its curve is a reference from now on."""
        if values:
            self.references.append(tuple(float(v) for v in values))

    def decide(self, values: Sequence[float], best: float | None, usd_left: float) -> StopDecision | None:
        """Returns the decision for a trial with `values` so far (None: no decision, it runs on; see the
        module's docstring for `best` and the guards)."""
        k = len(values)
        if k < self.min_values or usd_left <= 0:
            return None
        lv = LEVEL[self.level]
        sign = 1.0 if self.goal == "minimize" else -1.0
        at = sorted(sign * r[k - 1] for r in self.references if len(r) > k)
        if len(at) < MIN_REFERENCES or sign * values[-1] <= at[int((len(at) - 1) * lv.guard)]:
            return None  # too few references, or as good as the guard's quantile at its step: left to the rungs
        if best is None:
            best = min((r[-1] for r in self.references), key=lambda x: sign * x)
        f = forecast(values, best, self.references, self.goal, prior=lv.prior)
        if f is None:
            return None
        return StopDecision(stop=f.p_beat * self.value_usd < usd_left, p_beat=f.p_beat, value_usd=self.value_usd,
                            usd_left=usd_left, references=f.references, predicted=f.predicted)


def cost_stopper_for(spec: Any, curves: Mapping[str, Any] | None, full_usd: float) -> CostStopper | None:
    """Returns the cost-aware rule of a sweep with `search.stopping: cost` (None otherwise): the references
    are the complete measured `curves` of its kind ({params key: Curve}, `gpuledger.inputs.ledger`), the
    value of a better recipe `search.stopping_value_usd`, else `full_usd` (the plan's full spend)."""
    from gpuledger.search.study import prunes

    s = getattr(spec, "search", None)
    if getattr(s, "stopping", "cost") != "cost" or not prunes(spec):
        return None
    refs = [tuple(c.values) for c in (curves or {}).values() if c.complete and not c.failed and c.values]
    return CostStopper(refs, s.objective.goal, float(s.stopping_value_usd or full_usd),
                       level=getattr(s, "stopping_level", None) or UNCHECKED_LEVEL)
