"""Pruning settings that keep the recipe: which (min_steps, reduction_factor) a sweep that prunes runs,
and why (the plan says it; `gpuledger.runtime.accepted.prepare` hands the chosen settings to the study).

    choice = choose_pruning(spec, curves, slots=2)          # curves: {params key: Curve}, the warehouse's
    choice.min_steps, choice.reduction_factor, choice.source, choice.why

- With measured learning curves of the same kind (the warehouse's curves of the same model, method,
  objective and training settings, `gpuledger.inputs.ledger.measured_curves`; the sweep's own points
  when at least MIN_CHECK_CURVES of them ran to their end, else every curve of the kind), the requested
  settings (the spec's `search.pruning`, else `COLD_DEFAULT`) are checked by
  `gpuledger.search.recipe.check_recipe`: synchronous successive halving, the outcome
  `gpuledger.search.rungs.RungPruner` reaches in every arrival order, must keep the best measured
  curve even with its values `RECIPE_MARGIN` worse. When it does not, `search.pruning.unsafe` decides:
  `correct` (the default) runs the cheapest replayed setting that keeps it (source `corrected`; none
  keeps it: no pruning, source `unpruned`); `keep` runs the spec's settings, with the plan's warning.
- Without such curves: the requested settings as they are (source `spec` or `default`), unchecked:
  `COLD_DEFAULT` (min_steps 2, reduction_factor 5) kept the demo grid's recipe in every replayed
  arrival order (docs/search.md, benchmarks/search_replay.py), where Optuna's customary 2 and 3 dropped
  it at its 6th value (it is second until its 16th).
- The cost-aware stopping rule (`search.stopping: cost`, the default; `gpuledger.search.extrapolate`) is
  checked on the same curves (`check_cost_stopping`): the chosen settings plus the rule, replayed over
  `COST_CHECK_ORDERS` seeded arrival orders with each curve left out of its own references, must keep
  the best measured curve (within `RECIPE_MARGIN`) in every one; when it does not (curves that cross, or
  bloom late, where a forecast from other curves is wrong), the sweep stops by the rungs alone
  (`stopping` "rungs", `stopping_why` says why). Unchecked (fewer than MIN_CHECK_CURVES): the rule runs
  on the sweep's own ended trials, as the spec says.
- Every replay here (the rung check's safer settings, the cost-aware rule's check) runs the sweep's
  suspension at undecided rungs when it suspends (`gpuledger.search.suspension.suspends`, read from the
  spec by `choose_pruning`; the lower functions take `suspend` and have no default): the settings and the
  level chosen are those of the search that runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpuledger.search.recipe import RECIPE_MARGIN, check_recipe


@dataclass(frozen=True)
class Settings:
    min_steps: int
    reduction_factor: int


#: the settings of a bare `strategy: asha` (spec.models.Pruning's defaults are these)
COLD_DEFAULT = Settings(min_steps=2, reduction_factor=5)
#: the fewest complete curves the check rests on (the sweep's own points alone, else every curve of the kind)
MIN_CHECK_CURVES = 3

SPEC, DEFAULT, CORRECTED, UNPRUNED, UNSAFE_KEPT = "spec", "default", "corrected", "unpruned", "unsafe-kept"


@dataclass(frozen=True)
class PruningChoice:
    """The settings a sweep prunes with, and why."""

    min_steps: int
    reduction_factor: int
    source: str  # spec | default | corrected | unpruned | unsafe-kept
    requested_min_steps: int
    requested_reduction_factor: int
    checked_curves: int  # complete measured curves the check used (0: unchecked)
    kept: bool | None  # the requested settings keep the measured best (None: unchecked)
    replay_fraction: float | None  # the chosen settings' replayed trial-seconds / the curves' measured ones
    why: str
    #: the stopping rule the sweep runs (`cost` | `rungs`: see `check_cost_stopping`), and why; None: the spec's
    stopping: str | None = None
    stopping_why: str | None = None
    #: stopping `cost`: the rule's level the check chose (`gpuledger.search.extrapolate.LEVELS`); None: the spec's
    stopping_level: str | None = None
    #: the replays behind the choice suspend at undecided rungs, as the sweep does (`suspension.suspends`)
    suspend: bool = False

    @property
    def changed(self) -> bool:
        return (self.min_steps, self.reduction_factor) != (self.requested_min_steps, self.requested_reduction_factor)

    def to_json(self) -> dict[str, Any]:
        return {"min_steps": self.min_steps, "reduction_factor": self.reduction_factor, "source": self.source,
                "requested": {"min_steps": self.requested_min_steps,
                              "reduction_factor": self.requested_reduction_factor},
                "checked_curves": self.checked_curves, "kept": self.kept,
                "replay_fraction": self.replay_fraction, "why": self.why, "suspend": self.suspend,
                **({"stopping": self.stopping, "stopping_why": self.stopping_why} if self.stopping else {}),
                **({"stopping_level": self.stopping_level} if self.stopping_level else {})}


def _requested(spec: Any) -> tuple[int, int, bool, str]:
    p = spec.search.pruning
    if p is None:
        return COLD_DEFAULT.min_steps, COLD_DEFAULT.reduction_factor, False, "correct"
    explicit = bool({"min_steps", "reduction_factor"} & set(p.model_fields_set))
    return p.min_steps, p.reduction_factor, explicit, getattr(p, "unsafe", "correct")


def choose_pruning_for_curves(curves: Sequence[Any], *, goal: str, slots: int, suspend: bool,
                              order: Sequence[str] | None = None, requested: tuple[int, int] | None = None,
                              explicit: bool = False, unsafe: str = "correct") -> PruningChoice:
    """Returns the choice of the module's docstring for measured `curves` (asha_replay.Curve); `suspend`: the
    replays suspend at undecided rungs (`suspension.suspends` of the sweep)."""
    from dataclasses import replace

    return replace(_choose_rungs(curves, goal=goal, slots=slots, suspend=suspend, order=order, requested=requested,
                                 explicit=explicit, unsafe=unsafe), suspend=suspend)


def _replayed(suspend: bool) -> str:
    return "replayed with suspension at undecided rungs" if suspend else "replayed without suspension"


def _choose_rungs(curves: Sequence[Any], *, goal: str, slots: int, suspend: bool, order: Sequence[str] | None,
                  requested: tuple[int, int] | None, explicit: bool, unsafe: str) -> PruningChoice:
    ms, eta = requested or (COLD_DEFAULT.min_steps, COLD_DEFAULT.reduction_factor)
    src = SPEC if explicit else DEFAULT
    named = f"min_steps {ms}, reduction_factor {eta}" + ("" if explicit else " (the default)")
    complete = [c for c in curves if c.complete and c.values and not c.failed]
    if len(complete) < MIN_CHECK_CURVES:
        return PruningChoice(ms, eta, src, ms, eta, 0, None, None,
                             f"{named}: unchecked, {len(complete) or 'no'} measured learning curve(s) of this kind "
                             f"ran to their end (the check needs {MIN_CHECK_CURVES})")
    from gpuledger.search import asha_replay

    if len(curves) > asha_replay.MAX_REPLAY_CURVES:
        return PruningChoice(ms, eta, src, ms, eta, 0, None, None,
                             f"{named}: unchecked, {len(curves):,} measured curves are more than the "
                             f"{asha_replay.MAX_REPLAY_CURVES:,} a replay takes in bounded time")
    ids = [c.trial_id for c in curves]
    check = check_recipe(list(curves), min_steps=ms, reduction_factor=eta, goal=goal, slots=max(1, slots),
                         order=list(order) if order else sorted(ids), suspend=suspend)
    if check is None:
        return PruningChoice(ms, eta, src, ms, eta, 0, None, None, f"{named}: unchecked")
    n = len(complete)
    best = f"the best of {n} measured curve(s) ({check.best_value:.4g})"
    if check.kept:
        return PruningChoice(ms, eta, src, ms, eta, n, True, check.replay_fraction,
                             f"{named}: keep {best} even {RECIPE_MARGIN:.0%} worse, in any arrival order "
                             f"({_replayed(suspend)}: {check.replay_fraction:.0%} of their measured seconds)")
    lost = f"{named} would drop {best} at its value {check.dropped_at_step}"
    if unsafe == "keep":
        return PruningChoice(ms, eta, UNSAFE_KEPT, ms, eta, n, False, check.replay_fraction,
                             f"{lost}; run as written (search.pruning.unsafe: keep)")
    if check.safer:
        s = check.safer
        return PruningChoice(int(s["min_steps"]), int(s["reduction_factor"]), CORRECTED, ms, eta, n, False,
                             float(s["replay_fraction"]),
                             f"{lost}; corrected to min_steps {s['min_steps']}, reduction_factor "
                             f"{s['reduction_factor']}, the cheapest replayed setting that keeps it "
                             f"({_replayed(suspend)}: {s['replay_fraction']:.0%} of their measured seconds)")
    longest = max(len(c.values) for c in complete)
    return PruningChoice(longest + 1, eta, UNPRUNED, ms, eta, n, False, 1.0,
                         f"{lost}, and no setting tried keeps it: no pruning (every trial runs to its end)")


def choose_pruning(spec: Any, curves: Mapping[str, Any] | None, *, slots: int,
                   order_of: Mapping[str, str] | None = None) -> PruningChoice | None:
    """Returns the settings a sweep of `spec` prunes with (None: it does not prune). `curves`: {params key:
    Curve} of the spec's kind; `order_of`: {params key: trial id} of the sweep's points in launch order
    (its own curves are checked alone when MIN_CHECK_CURVES of them ran to their end)."""
    from dataclasses import replace

    from gpuledger.search import prunes
    from gpuledger.search.suspension import spec_suspends

    if not prunes(spec):
        return None
    ms, eta, explicit, unsafe = _requested(spec)
    suspend = spec_suspends(spec)
    curves = dict(curves or {})
    own = [replace(curves[k], trial_id=tid) for k, tid in (order_of or {}).items() if k in curves]
    own_complete = [c for c in own if c.complete and c.values and not c.failed]
    if len(own_complete) >= MIN_CHECK_CURVES:
        use, order = own, [c.trial_id for c in own]
    else:
        use, order = list(curves.values()), None
    choice = choose_pruning_for_curves(use, goal=spec.search.objective.goal, slots=slots, suspend=suspend,
                                       order=order, requested=(ms, eta), explicit=explicit, unsafe=unsafe)
    every = bool(order_of) and use is own and len(own_complete) == len(order_of)  # each point's own curve
    return with_checked_stopping(choice, use, goal=spec.search.objective.goal, slots=slots, suspend=suspend,
                                 stopping=getattr(spec.search, "stopping", "cost"),
                                 level=getattr(spec.search, "stopping_level", None), every_point=every)


def with_chosen_pruning(spec: Any, chosen: Mapping[str, Any] | None) -> Any:
    """Returns `spec` with `search.pruning` set to the settings the plan chose (`Plan.pruning.settings`:
    `PruningChoice.to_json()`), unchanged when the plan chose none or the spec's own: the study prunes with
    what the plan printed, and the stored spec (the report's settings) says what ran."""
    if not chosen or spec.search.strategy not in ("asha", "tpe"):
        return spec
    from gpuledger.spec.models import Pruning

    if chosen.get("stopping") == "rungs" and spec.search.stopping != "rungs":  # the check turned the rule off
        spec = spec.model_copy(update={"search": spec.search.model_copy(update={"stopping": "rungs"})})
    level = chosen.get("stopping_level")
    if chosen.get("stopping") == "cost" and level and getattr(spec.search, "stopping_level", None) != level:
        spec = spec.model_copy(update={"search": spec.search.model_copy(update={"stopping_level": level})})
    cur = spec.search.pruning
    if cur is not None and (cur.min_steps, cur.reduction_factor) == (chosen["min_steps"], chosen["reduction_factor"]):
        return spec
    cur = cur or Pruning()  # written out even when they are the defaults: the stored spec says what ran
    new = cur.model_copy(update={"min_steps": int(chosen["min_steps"]),
                                 "reduction_factor": int(chosen["reduction_factor"])})
    return spec.model_copy(update={"search": spec.search.model_copy(update={"pruning": new})})


#: the arrival orders the cost-aware rule is checked over before launch (each a seeded shuffle and stretch),
#: and their seed: not the replay harness's (seed 0), so a check never passes on the orders it is judged on
COST_CHECK_ORDERS = 16
COST_CHECK_SEED = 7
#: the most complete curves the rule is checked on (each forecast reads every reference: the check grows
#: with the cube of the curves; 12 curves x 16 orders take about 0.3 s on the 2-core dev VM)
COST_CHECK_MAX_CURVES = 200


def check_cost_stopping(curves: Sequence[Any], *, goal: str, slots: int, min_steps: int, reduction_factor: int,
                        suspend: bool, orders: int = COST_CHECK_ORDERS, level: str | None = None) -> tuple[bool, str]:
    """Returns (the cost-aware rule at `level` (default: the unchecked one) keeps the best of the complete
    `curves` in every replayed order, why); `suspend`: the replays suspend at undecided rungs, as the sweep.
    Prices: one rate for every second (the rule weighs a trial's seconds left against the value of a better
    recipe, here the curves' total seconds: the plan's full spend at one price); each trial's own curve is
    left out of its references (the runtime may hold it, as the warehouse's curve of the same point)."""
    from gpuledger.search.extrapolate import UNCHECKED_LEVEL
    from gpuledger.search.replay import replay_settings

    level = level or UNCHECKED_LEVEL
    rate = {c.trial_id: 1.0 for c in curves}
    summ = replay_settings(list(curves), rate, slots=max(1, slots), goal=goal, min_steps=min_steps,
                           reduction_factor=reduction_factor, cost_stopping=level, orders=orders,
                           seed=COST_CHECK_SEED, suspend=suspend)
    if summ is None:
        return True, "cost-aware stopping unchecked (fewer than 2 complete curves)"
    kept = summ.recipe_kept
    n = len(summ.outcomes)
    how = "with suspension at undecided rungs" if suspend else "without suspension"
    if kept >= 1.0:
        return True, (f"cost-aware stopping ({level}) kept the best measured curve in {n} of {n} replayed arrival "
                      f"orders {how} ({summ.ratio('trial_s').get('median', 0):.0%} of their seconds, median)")
    return False, (f"cost-aware stopping ({level}) would lose the best measured curve in {round((1 - kept) * n)} of {n} "
                   f"replayed arrival orders {how} (their curves cross or bloom late, where a forecast from other "
                   "curves is wrong): stopping by the rungs alone")


def with_checked_stopping(choice: PruningChoice, curves: Sequence[Any], *, goal: str, slots: int, suspend: bool,
                          stopping: str, level: str | None = None, every_point: bool = False) -> PruningChoice:
    """Returns `choice` with the stopping rule the sweep runs: the spec's `stopping` when it is `rungs`, or
    when the settings were not checked on measured curves; else `cost` at the boldest level of
    `extrapolate.LEVELS` that `check_cost_stopping` finds keeping the best measured curve in every
    replayed order, and `rungs` when none does. The bolder levels are tried only when `every_point`: the
    curves are those of every point the sweep runs (replayed with their own curves left out, the bolder
    levels kept every held-out grid's recipe; checked on another sweep's curves of the kind, they lost it
    in 40% of the replays against 23% at `half`: docs/search.md); else `half` alone. `level` (the spec's
    `stopping_level`): only that one. `suspend`: the check's replays suspend at undecided rungs, as the sweep."""
    from dataclasses import replace

    if stopping != "cost" or not choice.checked_curves or choice.source == UNPRUNED:
        return choice
    complete = [c for c in curves if c.complete and c.values and not c.failed]
    if len(complete) > COST_CHECK_MAX_CURVES:
        return replace(choice, stopping="cost", stopping_why=(
            f"cost-aware stopping unchecked: {len(complete):,} measured curves are more than the "
            f"{COST_CHECK_MAX_CURVES} its check replays in bounded time"))
    from gpuledger.search.extrapolate import LEVEL, LEVELS, UNCHECKED_LEVEL

    whys = []
    for lv in [LEVEL[level]] if level else LEVELS if every_point else [LEVEL[UNCHECKED_LEVEL]]:
        ok, why = check_cost_stopping(complete, goal=goal, slots=slots, min_steps=choice.min_steps,
                                      reduction_factor=choice.reduction_factor, level=lv.name, suspend=suspend)
        whys.append(why)
        if ok:
            return replace(choice, stopping="cost", stopping_level=lv.name, stopping_why="; ".join(whys))
    return replace(choice, stopping="rungs", stopping_why="; ".join(whys))
