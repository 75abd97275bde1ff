"""Every search strategy replayed side by side over the same recorded curves and arrival orders
(`gpuledger.search.replay` explains one replay; this module adds the settings `gpuledger.search.safety`
chooses and checks, so the replay itself stays below the safety checks that run it)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpuledger.search.asha_replay import Curve
from gpuledger.search.recipe import RECIPE_MARGIN
from gpuledger.search.replay import (
    COST_AWARE_STRATEGY,
    DEFAULT_JITTER,
    NO_SUSPEND,
    STRATEGIES,
    ReplayReport,
    StrategySummary,
    _replay,
    plain_at_rate,
    replay_asks,
    strategy_suspends,
)
from gpuledger.search.safety import COLD_DEFAULT, choose_pruning_for_curves, with_checked_stopping


def replay_strategies(curves: Sequence[Curve], usd_per_s: Mapping[str, float], *, slots: int, goal: str,
                      orders: int = 40, seed: int = 0, jitter: float = DEFAULT_JITTER,
                      strategies: Sequence[str] = STRATEGIES,
                      params: Mapping[str, Mapping[str, Any]] | None = None, frontier: bool = False,
                      references: Sequence[Curve] | None = None) -> ReplayReport:
    """Returns each strategy replayed over `orders` arrival orders of the complete `curves` (see the
    module's docstring). `usd_per_s`: each trial's measured USD per second of its run. `params` ({trial id:
    params}): also the sequential asks of `ASK_STRATEGIES` (`replay_asks`, half the points each).
    `references`: the curves of another sweep of the kind (the warehouse before a sweep of new points): the
    settings are chosen and checked on them and the cost-aware rule forecasts from them, none of `curves`
    (default: chosen and checked on `curves`, each trial forecast from the others: leave one out)."""
    complete = [c for c in curves if c.complete and c.values and not c.failed]
    failed = [c for c in curves if c.complete and c.failed]
    pool = complete + failed
    if len(complete) < 2:
        raise ValueError(f"a replay needs at least 2 curves that ran to their end ({len(complete)} given)")
    if orders < 1 or slots < 1:
        raise ValueError("orders and slots must be >= 1")
    sign = 1.0 if goal == "minimize" else -1.0
    best = min(complete, key=lambda c: (sign * c.values[-1], c.trial_id))
    grid_best = best.values[-1]
    grid_usd_full = sum(c.wall_s * usd_per_s.get(c.trial_id, 0.0) for c in pool)
    known = pool if references is None else [c for c in references if c.complete]
    if references is not None and sum(1 for c in known if c.values and not c.failed) < 2:
        raise ValueError("references: at least 2 curves that ran to their end are needed")
    choices = {}

    def chosen(suspend: bool):  # the plan's choice and check, with the strategy's suspension (as the plan's)
        if suspend not in choices:
            choices[suspend] = with_checked_stopping(
                choose_pruning_for_curves(known, goal=goal, slots=slots, suspend=suspend), known, goal=goal,
                slots=slots, suspend=suspend, stopping="cost", every_point=references is None)
        return choices[suspend]

    cost_aware = (COST_AWARE_STRATEGY, COST_AWARE_STRATEGY + NO_SUSPEND)
    out = {name: StrategySummary(name) for name in strategies}
    runs = {}
    for name, summ in out.items():
        if name == "grid":
            continue
        suspend = strategy_suspends(name)
        base = name.removesuffix(NO_SUSPEND)
        if base == "asha-optuna":
            pr, ms, eta = "asha", 2, 3
        elif base == "asha-2-3":
            pr, ms, eta = "rungs", 2, 3
        elif base == "asha-cold":
            pr, ms, eta = "rungs", COLD_DEFAULT.min_steps, COLD_DEFAULT.reduction_factor
        elif base in ("asha-rungs", COST_AWARE_STRATEGY):
            pr, ms, eta = "rungs", chosen(suspend).min_steps, chosen(suspend).reduction_factor
        else:
            raise ValueError(f"unknown strategy {name!r} (gpuledger.search.replay.STRATEGIES)")
        choice = chosen(suspend) if name in cost_aware else None
        cost_on = choice is not None and choice.stopping != "rungs"  # the check may turn the rule off (crossing)
        summ.settings = {"pruner": "optuna-asha" if pr == "asha" else "rungs", "min_steps": ms,
                         "reduction_factor": eta,
                         **({"cost_stopping": cost_on, "stopping_level": choice.stopping_level,
                             "stopping_why": choice.stopping_why} if choice is not None else {}),
                         "suspend": suspend}
        runs[name] = (pr, ms, eta, (choice.stopping_level or True) if cost_on else False, suspend)
    choice = chosen(strategy_suspends(COST_AWARE_STRATEGY))
    floor: list[tuple[float, float]] = []
    _replay(pool, usd_per_s, out, runs, slots=slots, goal=goal, orders=orders, seed=seed, jitter=jitter,
            value_usd=grid_usd_full, best=best, references=known if references is not None else None, floor=floor)
    same_rate = None
    if frontier and COST_AWARE_STRATEGY in out:
        same_rate = plain_at_rate(pool, usd_per_s, out[COST_AWARE_STRATEGY].recipe_kept, slots=slots, goal=goal,
                                  orders=orders, seed=seed, jitter=jitter, best=best)
    if params:
        out.update(replay_asks(pool, usd_per_s, params, goal=goal, orders=orders, seed=seed))
    notes = [f"{len(pool)} recorded curves ({len(failed)} failed), {orders} arrival orders, {slots} slot(s), "
             f"each trial's times × exp(N(0, {jitter})) per order; recipe kept = best within "
             f"{RECIPE_MARGIN:.0%} of the grid's {grid_best:.5g} ({best.trial_id})",
             f"asha's settings: {choice.why}", f"asha's stopping: {choice.stopping_why}",
             "cost-aware references: " + (f"{len(known)} curves of another sweep (settings chosen and checked on "
                                          "them)" if references is not None else "the other curves (leave one out)")]
    if same_rate is not None:
        notes.append(f"plain ASHA at the cost-aware recipe rate: {same_rate['why']}")
    return ReplayReport(strategies=out, orders=orders, slots=slots, jitter=jitter, curves=len(pool),
                        grid_best_value=grid_best, grid_best_trial=best.trial_id, notes=notes, plain_same_rate=same_rate,
                        floor=floor, references="leave-one-out" if references is None else "another sweep")
