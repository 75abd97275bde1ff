"""Each search strategy replayed over recorded learning curves across many arrival orders: what every
change to the search is judged on (`benchmarks/search_replay.py`, the ASHA report's comparison with the
grid, `resources.max_parallel: auto`); the strategies side by side in `gpuledger.search.comparison`.

    report = comparison.replay_strategies(curves, usd_per_s, slots=2, goal="minimize", orders=40)
    report.strategies["asha"].recipe_kept, .cost_vs_grid (median), .cost_vs_grid_range, ...

One replay = the curves' trials launched in one seeded order on `slots` slots (a freed slot takes the
next at once), each trial's times stretched by its own seeded factor exp(N(0, jitter)) (the load of a
shared machine moves which trial reaches a rung first: the arrival order; jitter 0 keeps the measured
times), replayed by `gpuledger.search.asha_replay.simulate_asha`. The grid of the same order and
factors runs every trial to its end. Per replay and strategy: the recipe is kept when the best final
value found is within `RECIPE_MARGIN` (2%) of the grid's best; trial-seconds and dollars (each trial's
seconds × its measured USD per second) are taken against the grid's of the same replay. Summaries:
the share of replays that kept the recipe, the median and the range (min, max) of each ratio.

Strategies (`STRATEGIES`). Every gpuledger rung strategy suspends at undecided rungs as the sweep runtime
does with `search.pruning.suspend` at its default (`gpuledger.search.suspension.suspends("asha")`:
`simulate_asha(suspend=True)`: a trial whose rung depends on trials not started yet stops there when
`suspension.suspend_pays`, and is relaunched from its start, its first values paid again, once confirmed
past it); each `-no-suspend` twin is the same with `suspend: false` (plain successive halving: a trial
undecided at its rung runs on):
- `grid`: every point to its end;
- `asha-optuna`: Optuna's asynchronous `SuccessiveHalvingPruner` (min_resource 2, reduction factor 3),
  ASHA as Optuna ships it: a trial is judged against whatever reached its rung before it (no suspension);
- `asha-2-3`: gpuledger's order-independent `RungPruner` at min_steps 2, reduction_factor 3 (the old
  default: it dropped the demo's recipe at its 6th value);
- `asha-cold` (`-no-suspend`): the cold default settings as they are (`safety.COLD_DEFAULT`), rungs only,
  unchecked: what a bare `strategy: asha` runs in a fresh project (no curves of its kind: the cost-aware
  rule has no references);
- `asha-rungs` (`-no-suspend`; plain gpuledger ASHA, `stopping: rungs`): the settings
  `gpuledger.search.safety.choose_pruning` picks for these curves (the cold default, checked on them, with
  the same suspension, and corrected when it would drop their best), rungs only;
- `asha` (`-no-suspend`; the default: what a bare `strategy: asha` runs): `asha-rungs` plus the cost-aware
  stopping rule (`gpuledger.search.extrapolate.CostStopper`, value of a better recipe = the grid's dollars,
  references = the other trials' curves: leave one out, so a trial is never forecast from its own curve,
  where the runtime would have the warehouse's curve of the same point), at the level its check (with
  the same suspension) chose.
Pure and deterministic (seeded).
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from gpuledger.search.asha_replay import Curve, SimResult, simulate_asha
from gpuledger.search.recipe import RECIPE_MARGIN

#: the strategies replayed, in the order reported
STRATEGIES = ("grid", "asha-optuna", "asha-2-3", "asha-cold", "asha-cold-no-suspend", "asha-rungs",
              "asha-rungs-no-suspend", "asha", "asha-no-suspend")
#: the twin's suffix: the same strategy with `search.pruning.suspend: false`
NO_SUSPEND = "-no-suspend"
#: the strategy a bare `strategy: asha` runs (checked settings, the cost-aware stopping rule, suspension)
DEFAULT_STRATEGY = "asha"
#: the cost-aware strategy (the default), and plain gpuledger ASHA beside it (`stopping: rungs`, the same
#: suspension), and plain successive halving (`stopping: rungs`, `suspend: false`)
COST_AWARE_STRATEGY = "asha"
PLAIN_STRATEGY = "asha-rungs"
PLAIN_NO_SUSPEND_STRATEGY = "asha-rungs" + NO_SUSPEND


def strategy_suspends(name: str) -> bool:
    """Whether strategy `name` suspends at undecided rungs: the runtime's rule (`suspension.suspends`) for
    `asha` at `search.pruning.suspend`'s default, or with `suspend: false` for a `-no-suspend` twin;
    Optuna's asynchronous pruner (`asha-optuna`) never."""
    from gpuledger.search.suspension import suspends

    if name == "asha-optuna":
        return False
    return suspends("asha", {"suspend": False} if name.endswith(NO_SUSPEND) else None)
#: the spread of each trial's times per replay (log-normal sigma): the load of the measured 2-core machine
#: moved one demo trial's wall-clock between 25 s and 58 s (docs/search.md), about exp(±0.4)
DEFAULT_JITTER = 0.25


@dataclass(frozen=True)
class Outcome:
    """One strategy in one replay."""

    kept: bool
    same_trial: bool
    best_value: float | None
    trial_s: float
    usd: float
    makespan_s: float
    pruned: int
    grid_trial_s: float
    grid_usd: float
    grid_makespan_s: float


def _range(xs: Sequence[float]) -> dict[str, float]:
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs)} if xs else {}


@dataclass
class StrategySummary:
    name: str
    outcomes: list[Outcome] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def recipe_kept(self) -> float:
        return sum(o.kept for o in self.outcomes) / len(self.outcomes) if self.outcomes else 0.0

    def ratio(self, what: str) -> dict[str, float]:
        if what == "usd":
            xs = [o.usd / o.grid_usd for o in self.outcomes if o.grid_usd > 0]
        elif what == "trial_s":
            xs = [o.trial_s / o.grid_trial_s for o in self.outcomes if o.grid_trial_s > 0]
        else:
            xs = [o.makespan_s / o.grid_makespan_s for o in self.outcomes if o.grid_makespan_s > 0]
        return _range(xs)

    def _ratios(self, what: str) -> list[float]:
        if what == "usd":
            return sorted(o.usd / o.grid_usd for o in self.outcomes if o.grid_usd > 0)
        return sorted(o.trial_s / o.grid_trial_s for o in self.outcomes if o.grid_trial_s > 0)

    def quantile(self, what: str, q: float) -> float:
        """The q-quantile (nearest rank) of the replays' ratio to the grid (`usd` or `trial_s`)."""
        xs = self._ratios(what)
        return xs[min(len(xs) - 1, max(0, math.ceil(q * len(xs)) - 1))] if xs else math.nan

    def share_over(self, what: str, bound: float) -> float:
        """The share of replays whose ratio to the grid (`usd` or `trial_s`) is over `bound`."""
        xs = self._ratios(what)
        return sum(x > bound for x in xs) / len(xs) if xs else 0.0

    def to_json(self) -> dict[str, Any]:
        usd, secs, span = self.ratio("usd"), self.ratio("trial_s"), self.ratio("makespan")
        out = self.outcomes
        return {
            "recipe_kept": round(self.recipe_kept, 4),
            "same_trial": round(sum(o.same_trial for o in out) / len(out), 4) if out else 0.0,
            "cost_vs_grid": round(usd.get("median", math.nan), 4),
            "cost_vs_grid_range": [round(usd.get("min", math.nan), 4), round(usd.get("max", math.nan), 4)],
            "trial_s_vs_grid": round(secs.get("median", math.nan), 4),
            "trial_s_vs_grid_range": [round(secs.get("min", math.nan), 4), round(secs.get("max", math.nan), 4)],
            "trial_s_vs_grid_p90": round(self.quantile("trial_s", 0.9), 4),
            "over_half_grid_trial_s": round(self.share_over("trial_s", 0.5), 4),
            "makespan_vs_grid": round(span.get("median", math.nan), 4),
            "usd": round(statistics.median([o.usd for o in out]), 6) if out else None,
            "usd_range": [round(min(o.usd for o in out), 6), round(max(o.usd for o in out), 6)] if out else None,
            "trial_s": round(statistics.median([o.trial_s for o in out]), 3) if out else None,
            "pruned": statistics.median([o.pruned for o in out]) if out else None,
            "replays": len(out),
            **({"settings": self.settings} if self.settings else {}),
        }


@dataclass
class ReplayReport:
    strategies: dict[str, StrategySummary]
    orders: int
    slots: int
    jitter: float
    curves: int
    grid_best_value: float
    grid_best_trial: str
    default: str = DEFAULT_STRATEGY
    notes: list[str] = field(default_factory=list)
    #: plain ASHA (Optuna's, no dollars) at the cost-aware strategy's recipe rate: `plain_at_rate`
    plain_same_rate: dict[str, Any] | None = None
    #: per order, `stopping_floor`'s (trial-seconds, dollars) over the grid's of the same order
    floor: list[tuple[float, float]] = field(default_factory=list)
    #: the cost-aware rule's references: "leave-one-out" (the other curves of these) or "another sweep"
    references: str = "leave-one-out"

    def stopping_floor(self) -> dict[str, Any]:
        """The oracle bound of `stopping_floor` over the orders: its dollars against the grid's (median, range)
        and against plain ASHA's (`vs_plain`: the least `cost_aware_vs_plain.vs_plain` a stopping rule that
        keeps the recipe can reach on these curves)."""
        from gpuledger.search.extrapolate import MIN_VALUES

        if not self.floor:
            return {}
        usd = [u for _, u in self.floor]
        out: dict[str, Any] = {"min_values": MIN_VALUES, "cost_vs_grid": round(statistics.median(usd), 4),
                               "cost_vs_grid_range": [round(min(usd), 4), round(max(usd), 4)],
                               "trial_s_vs_grid": round(statistics.median(s for s, _ in self.floor), 4)}
        pl_ = self.strategies.get(PLAIN_STRATEGY)
        if pl_ and pl_.outcomes and (b := pl_.to_json()["cost_vs_grid"]):
            out["vs_plain"] = round(out["cost_vs_grid"] / b, 4)
        return out

    def comparison(self) -> dict[str, Any]:
        """The cost-aware strategy's median dollars against plain ASHA's for the same recipe rate: gpuledger's
        rung pruner at the same checked settings (`plain`), and Optuna's ASHA at the cheapest setting that
        keeps the recipe as often (`plain_same_rate`)."""
        ca, pl_ = self.strategies.get(COST_AWARE_STRATEGY), self.strategies.get(PLAIN_STRATEGY)
        out: dict[str, Any] = {}
        if ca and pl_ and ca.outcomes and pl_.outcomes:
            a, b = ca.to_json(), pl_.to_json()
            out["vs_plain"] = round(a["cost_vs_grid"] / b["cost_vs_grid"], 4) if b["cost_vs_grid"] else None
            out["same_recipe_rate_as_plain"] = a["recipe_kept"] >= b["recipe_kept"]
        ns = self.strategies.get(PLAIN_NO_SUSPEND_STRATEGY)  # plain successive halving: no suspension either
        if ca and ns and ca.outcomes and ns.outcomes:
            a, b = ca.to_json(), ns.to_json()
            out["vs_plain_no_suspend"] = round(a["cost_vs_grid"] / b["cost_vs_grid"], 4) if b["cost_vs_grid"] else None
            out["same_recipe_rate_as_plain_no_suspend"] = a["recipe_kept"] >= b["recipe_kept"]
        fl = self.stopping_floor()
        if "vs_plain" in fl:
            out["floor_vs_plain"] = fl["vs_plain"]
        p = self.plain_same_rate
        if ca and ca.outcomes and p and p.get("cost_vs_grid"):  # not reached: Optuna's safest keeps it less often
            key = "vs_optuna_asha_same_rate" if p.get("reached") else "vs_optuna_asha_safest"
            out[key] = round(ca.to_json()["cost_vs_grid"] / p["cost_vs_grid"], 4)
        return out

    def to_json(self) -> dict[str, Any]:
        return {"strategies": {k: v.to_json() for k, v in self.strategies.items()}, "default": self.default,
                "cost_aware_vs_plain": self.comparison(), "plain_same_rate": self.plain_same_rate,
                "stopping_floor": self.stopping_floor(), "references": self.references,
                "cost_aware": COST_AWARE_STRATEGY, "plain": PLAIN_STRATEGY,
                "plain_no_suspend": PLAIN_NO_SUSPEND_STRATEGY, "orders": self.orders, "slots": self.slots, "jitter": self.jitter,
                "curves": self.curves, "grid_best_value": self.grid_best_value, "grid_best_trial": self.grid_best_trial,
                "recipe_margin": RECIPE_MARGIN, "notes": self.notes}


def _stretched(curves: Sequence[Curve], rng: random.Random, jitter: float) -> list[Curve]:
    if jitter <= 0:
        return list(curves)
    out = []
    for c in curves:
        f = math.exp(rng.gauss(0.0, jitter))
        out.append(replace(c, times_s=tuple(t * f for t in c.times_s), wall_s=c.wall_s * f))
    return out


def _better(goal: str) -> Callable[[float, float], bool]:
    return (lambda a, b: a < b) if goal == "minimize" else (lambda a, b: a > b)


def _kept(value: float | None, best: float, goal: str) -> bool:
    if value is None:
        return False
    sign = 1.0 if goal == "minimize" else -1.0
    return sign * value <= sign * best + RECIPE_MARGIN * abs(best)


def cost_stopper(curves: Sequence[Curve], usd_per_s: Mapping[str, float], goal: str, value_usd: float,
                 elapsed_scale: Mapping[str, float] | None = None,
                 references: Sequence[Curve] | None = None, level: str | None = None) -> Callable[..., bool]:
    """Returns a `simulate_asha` stopper: the cost-aware rule with the other trials' complete curves as
    references (leave one out), or the fixed `references` (curves of another sweep of the kind: what the
    warehouse holds before a sweep of new points; each trial of the sweep that ends is added to them, as
    the runtime's `AdaptiveSearch.tell` adds it: `stop.ended`, which `simulate_asha` calls), and each
    trial's dollars left from its own measured wall-clock. `level`: the rule's (`extrapolate.LEVELS`; default
    the unchecked one)."""
    from gpuledger.search.extrapolate import UNCHECKED_LEVEL, CostStopper

    level = level or UNCHECKED_LEVEL

    complete = {c.trial_id: c for c in curves if c.complete and not c.failed and c.values}
    fixed = None if references is None else [tuple(c.values) for c in references
                                             if c.complete and not c.failed and c.values]
    by_id = {c.trial_id: c for c in curves}

    def stop(trial_id: str, values: list[float], best: float | None, elapsed_s: float) -> bool:
        refs = list(fixed) if fixed is not None else [tuple(c.values) for t, c in complete.items() if t != trial_id]
        c = by_id[trial_id]
        left_s = max(0.0, c.wall_s - elapsed_s)
        d = CostStopper(refs, goal, value_usd, level=level).decide(values, best, left_s * usd_per_s.get(trial_id, 0.0))
        return bool(d and d.stop)

    if fixed is not None:
        stop.ended = lambda _trial_id, values: fixed.append(tuple(values))  # type: ignore[attr-defined]
    return stop


#: Optuna's ASHA settings searched for plain ASHA at the cost-aware strategy's recipe rate (min_resource,
#: reduction factor): the customary 1-3 / 3 and ever more careful ones
FRONTIER = ((1, 3), (2, 3), (2, 2), (3, 3), (4, 3), (4, 2), (6, 2), (8, 2), (6, 3), (8, 3))


def plain_at_rate(pool: Sequence[Curve], usd_per_s: Mapping[str, float], rate: float, *, slots: int, goal: str,
                  orders: int, seed: int, jitter: float, best: Curve) -> dict[str, Any]:
    """Returns the cheapest of Optuna's asynchronous ASHA settings (`FRONTIER`) that keeps the recipe in at
    least `rate` of the same replays (median dollars against the grid), or says none did."""
    found: dict[str, Any] | None = None
    tried = []
    for ms, eta in FRONTIER:
        out = {"this": StrategySummary("this")}
        _replay(pool, usd_per_s, out, {"this": ("asha", ms, eta, False)}, slots=slots, goal=goal, orders=orders,
                seed=seed, jitter=jitter, value_usd=0.0, best=best)
        j = out["this"].to_json()
        tried.append({"min_resource": ms, "reduction_factor": eta, "recipe_kept": j["recipe_kept"],
                      "cost_vs_grid": j["cost_vs_grid"]})
        if j["recipe_kept"] + 1e-9 >= rate and (found is None or j["cost_vs_grid"] < found["cost_vs_grid"]):
            found = tried[-1]
    reached = found is not None
    if found is None:  # none as safe: the safest (ties: the cheapest), a bound on the comparison
        found = max(tried, key=lambda t: (t["recipe_kept"], -t["cost_vs_grid"]))
    return {**found, "rate": rate, "reached": reached, "tried": tried,
            "why": (f"Optuna's ASHA at min_resource {found['min_resource']}, reduction factor "
                    f"{found['reduction_factor']}: the cheapest of {len(tried)} settings that keeps the recipe in "
                    f"{found['recipe_kept']:.0%} of the replays (>= {rate:.0%}), {found['cost_vs_grid']:.0%} of the "
                    "grid's dollars") if reached else
                   (f"none of {len(tried)} Optuna ASHA settings keeps the recipe in {rate:.0%} of the replays; the "
                    f"safest, min_resource {found['min_resource']}, reduction factor {found['reduction_factor']}, keeps "
                    f"it in {found['recipe_kept']:.0%} for {found['cost_vs_grid']:.0%} of the grid's dollars")}


def stopping_floor(run: Sequence[Curve], usd_per_s: Mapping[str, float], best_id: str,
                   min_values: int) -> tuple[float, float]:
    """Returns (trial-seconds, dollars) of the cheapest search of `run` that keeps the recipe with a rule that
    sees a trial's first `min_values` values before it may stop it (an oracle: it knows which trial is
    the recipe): the recipe (`best_id`) run to its end, every other trial stopped at its `min_values`-th
    value (a curve with fewer values, or failed without values, to its end). No stopping rule of the
    replay, cost-aware or not, can keep the recipe for less: the bound every ratio is read against."""
    secs = usd = 0.0
    for c in run:
        s = c.wall_s if c.trial_id == best_id or len(c.values) <= min_values else c.times_s[min_values - 1]
        secs += s
        usd += s * usd_per_s.get(c.trial_id, 0.0)
    return secs, usd


def _replay(pool: Sequence[Curve], usd_per_s: Mapping[str, float], out: dict[str, StrategySummary],
            runs: Mapping[str, tuple[Any, ...]], *, slots: int, goal: str, orders: int, seed: int,
            jitter: float, value_usd: float, best: Curve, references: Sequence[Curve] | None = None,
            floor: list[tuple[float, float]] | None = None) -> None:
    """Fills `out` (a summary per name; "grid" runs every trial to its end) with `orders` replays of each
    of `runs` ({name: (pruner, min_steps, reduction_factor, cost stopping: False, True or a level
    name[, suspend?])}); the cost-aware
    rule's references: leave one out, or the fixed `references`. `floor`: a list to append each order's
    `stopping_floor` to (trial-seconds and dollars over the grid's of the same order)."""
    from gpuledger.search.extrapolate import MIN_VALUES

    grid_best = best.values[-1]
    ids = sorted(c.trial_id for c in pool)
    for o in range(orders):
        rng = random.Random(seed * 1_000_003 + o)
        order = list(ids)
        rng.shuffle(order)
        run = _stretched(pool, rng, jitter)
        g_s = sum(c.wall_s for c in run)
        g_usd = sum(c.wall_s * usd_per_s.get(c.trial_id, 0.0) for c in run)
        g_span = simulate_asha(run, slots=slots, min_steps=10**9, reduction_factor=2, goal=goal, order=order,
                               pruner="none").makespan_s
        if floor is not None and g_s > 0 and g_usd > 0:
            f_s, f_usd = stopping_floor(run, usd_per_s, best.trial_id, MIN_VALUES)
            floor.append((f_s / g_s, f_usd / g_usd))
        for name, summ in out.items():
            if name == "grid":
                summ.outcomes.append(Outcome(True, True, grid_best, g_s, g_usd, g_span, 0, g_s, g_usd, g_span))
                continue
            pr, ms, eta, cost, *more = runs[name]
            stopper = (cost_stopper(run, usd_per_s, goal, value_usd, references=references,
                                    level=cost if isinstance(cost, str) else None) if cost else None)
            sim: SimResult = simulate_asha(run, slots=slots, min_steps=ms, reduction_factor=eta, goal=goal,
                                           order=order, pruner=pr, stopper=stopper, suspend=bool(more and more[0]))
            usd = sum(t.seconds * usd_per_s.get(t.trial_id, 0.0) for t in sim.trials)
            summ.outcomes.append(Outcome(
                kept=_kept(sim.best_value, grid_best, goal), same_trial=sim.best_trial_id == best.trial_id,
                best_value=sim.best_value, trial_s=sim.trial_seconds, usd=usd, makespan_s=sim.makespan_s,
                pruned=sim.pruned, grid_trial_s=g_s, grid_usd=g_usd, grid_makespan_s=g_span))


def replay_settings(curves: Sequence[Curve], usd_per_s: Mapping[str, float], *, slots: int, goal: str,
                    min_steps: int, reduction_factor: int, suspend: bool, cost_stopping: bool | str = False,
                    value_usd: float | None = None,
                    orders: int = 40, seed: int = 0, jitter: float = DEFAULT_JITTER) -> StrategySummary | None:
    """Returns one setting (the rung pruner at min_steps, reduction_factor; with the cost-aware rule when
    `cost_stopping`: True, or the name of its level) replayed over `orders` arrival orders of the complete `curves`, against their grid
    (the ASHA report's comparison, `resources.max_parallel: auto`); None with fewer than 2 complete curves.
    `value_usd`: the cost-aware rule's value of a better recipe (default: the grid's dollars). `suspend`:
    suspension at undecided rungs, as the sweep runtime does (`gpuledger.search.suspension`); no default:
    each caller passes the sweep's `suspension.suspends`."""
    complete = [c for c in curves if c.complete and c.values and not c.failed]
    pool = complete + [c for c in curves if c.complete and c.failed]
    if len(complete) < 2:
        return None
    sign = 1.0 if goal == "minimize" else -1.0
    best = min(complete, key=lambda c: (sign * c.values[-1], c.trial_id))
    grid_usd = sum(c.wall_s * usd_per_s.get(c.trial_id, 0.0) for c in pool)
    out = {"this": StrategySummary("this", settings={"pruner": "rungs", "min_steps": min_steps,
                                                      "reduction_factor": reduction_factor,
                                                      **({"cost_stopping": cost_stopping} if cost_stopping else {}),
                                                      "suspend": suspend})}
    _replay(pool, usd_per_s, out, {"this": ("rungs", min_steps, reduction_factor, cost_stopping, suspend)}, slots=slots,
            goal=goal, orders=orders, seed=seed, jitter=jitter,
            value_usd=grid_usd if value_usd is None else value_usd, best=best)
    return out["this"]


#: the sequential searches replayed (one slot, every asked point run to its end): Optuna's TPE, and
#: expected improvement per dollar (`gpuledger.search.acquisition`)
ASK_STRATEGIES = ("tpe", "tpe-ei-per-usd")


def replay_asks(curves: Sequence[Curve], usd_per_s: Mapping[str, float], params: Mapping[str, Mapping[str, Any]], *,
                goal: str, n_trials: int | None = None, orders: int = 40, seed: int = 0,
                strategies: Sequence[str] = ASK_STRATEGIES) -> dict[str, StrategySummary]:
    """Returns TPE and EI-per-dollar replayed over the complete `curves` of points `params` ({trial id:
    params}): each asks `n_trials` (default: half the points, rounded up) points one at a time, each run
    to its end at its measured cost, over `orders` seeds. Kept: the best asked is within 2% of the best."""
    import optuna

    from gpuledger.search.acquisition import next_point
    from gpuledger.search.space import suggest

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    complete = [c for c in curves if c.complete and c.values and not c.failed and c.trial_id in params]
    if len(complete) < 2:
        raise ValueError("a replay of asks needs at least 2 complete curves with their params")
    sign = 1.0 if goal == "minimize" else -1.0
    best = min(complete, key=lambda c: (sign * c.values[-1], c.trial_id))
    final = {c.trial_id: c.values[-1] for c in complete}
    cost = {c.trial_id: c.wall_s * usd_per_s.get(c.trial_id, 0.0) for c in complete}
    secs = {c.trial_id: c.wall_s for c in complete}
    key = {tuple(sorted((k, repr(v)) for k, v in params[t].items())): t for t in final}
    space: dict[str, list[Any]] = {}
    for t in final:
        for k, v in params[t].items():
            space.setdefault(k, [])
            if v not in space[k]:
                space[k].append(v)
    n = n_trials or math.ceil(len(final) / 2)
    g_usd, g_s = sum(cost.values()), sum(secs.values())
    out = {name: StrategySummary(name, settings={"n_trials": n, "slots": 1}) for name in strategies}
    for o in range(orders):
        for name, summ in out.items():
            asked: list[str] = []
            if name == "tpe":
                study = optuna.create_study(direction="minimize" if goal == "minimize" else "maximize",
                                            sampler=optuna.samplers.TPESampler(seed=seed * 1_000_003 + o,
                                                                               multivariate=True,
                                                                               n_startup_trials=max(2, min(10, n // 3))))
                for _ in range(n * 64):
                    if len(asked) >= n:
                        break
                    trial = study.ask()
                    tid = key.get(tuple(sorted((k, repr(v)) for k, v in suggest(trial, space).items())))
                    if tid is None:
                        study.tell(trial, state=optuna.trial.TrialState.FAIL)
                        continue
                    study.tell(trial, final[tid])
                    if tid not in asked:
                        asked.append(tid)
            else:
                while len(asked) < n:
                    free = [(t, params[t], cost[t]) for t in final if t not in asked]
                    tid = next_point(free, [(params[t], final[t]) for t in asked], space, goal=goal,
                                     seed=seed * 1_000_003 + o, n_trials=n)
                    if tid is None:
                        break
                    asked.append(tid)
            got = min((final[t] for t in asked), key=lambda v: sign * v, default=None)
            usd, s_ = sum(cost[t] for t in asked), sum(secs[t] for t in asked)
            summ.outcomes.append(Outcome(kept=_kept(got, best.values[-1], goal), same_trial=best.trial_id in asked,
                                         best_value=got, trial_s=s_, usd=usd, makespan_s=s_, pruned=0,
                                         grid_trial_s=g_s, grid_usd=g_usd, grid_makespan_s=g_s))
    return out
