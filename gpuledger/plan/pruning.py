"""The expected spend of an adaptive sweep under pruning (`strategy: asha`, or `tpe` with
`search.pruning`), and its source. Pure: the measured curves are passed in.

    spend = pruned_spend(plan.trials, spec, max_parallel=plan.max_parallel, overhead_s=s.overhead_s,
                         curves=curves)        # curves: {canonical params JSON: Curve} (gpuledger.inputs.ledger)
    spend.source, spend.expected_usd, spend.full_usd, spend.per_trial_usd, spend.basis

Three sources, the first that applies:
- `measured`: earlier learning curves of the same model, method, objective metric and train settings
  that ran to their end, for points of this sweep (a grid that ran): the runtime's pruner
  (`gpuledger.search.rungs.RungPruner`) replayed over them
  (`gpuledger.search.asha_replay.simulate_asha`) at the plan's max_parallel, in the order the sweep will
  try them (asha: `gpuledger.search.launch_order`; tpe: plan order, TPE's own order being unknown
  beforehand). A point's fraction = its replayed seconds / its measured wall-clock; a point without a
  curve takes the mean fraction of the replay (its seconds over the curves' seconds). The same curves
  check the settings (`recipe`, `gpuledger.search.recipe.check_recipe`): when synchronous successive
  halving would drop the best measured point (with its values 2% worse), `PrunedSpend.warning` says so
  and names the cheapest replayed setting that keeps it. The replay runs the stopping the sweep runs: the
  rungs plus the cost-aware rule (`search.stopping: cost`, unless the check on these curves turned it off,
  `gpuledger.search.safety.check_cost_stopping`), and suspends trials at undecided rungs as the sweep does
  when it suspends (`gpuledger.search.suspension.spec_suspends`: `strategy: asha` with
  `search.pruning.suspend`, default true; false: plain successive halving, no suspension): every replay
  here, the launch order's, the arrival orders', the rung check's and the cost rule's check. With at least 3 curves it is also replayed over
  `PLAN_ORDERS` arrival orders (launch order shuffled, each trial's times stretched by exp(N(0, 0.25)): the
  shared machine's load): the expected spend is their median (each point's launch-order fraction scaled to
  it) and the makespan fraction their 90th percentile (at least the launch order's): what `max_parallel:
  auto` holds against the deadline, so the K it picks meets it in 9 of 10 replayed orders.
  At most `asha_replay.MAX_REPLAY_CURVES` curves are replayed (a replay grows with the square of the
  trials); with more, the formula below over their median length, said in the basis.
- `formula` (`gpuledger.search.rungs.successive_halving_fraction`): synchronous successive halving: with V values per full trial and rungs at
  r_i = min_steps * eta**i < V, every trial runs to r_0 and a fraction eta**-i of them from r_{i-1}
  on to r_i (the last fraction to V): fraction = (r_0 + sum_i eta**-i (r_i - r_{i-1}) + eta**-m (V -
  r_{m-1})) / V of the run, at a constant time per value. V: the median length of the measured
  complete curves of the model (same method, metric, train settings), else
  `search.pruning.values_per_trial`. ASHA promotes the first trials at a rung and, with more slots,
  trials before better ones report, so it prunes somewhat less than this; the mid-sweep budget stop
  (gpuledger/runtime/budget.py, on full estimates) still holds the real budget.
- `unknown`: neither: the budget guard uses the full spend and the plan says why.

Each trial's overhead (provisioning + set-up, `PlanSettings.overhead_s`) is paid in full; only the
run part (est_wall_s - overhead_s) shrinks by the fraction: expected = cost × (1 - run share × (1 -
fraction)). `n_trials` below the candidates: asha runs the first n_trials of its order, tpe n_trials
trials at the mean expected cost.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

MEASURED = "measured"
FORMULA = "formula"
UNKNOWN = "unknown"


@dataclass(frozen=True)
class PrunedSpend:
    """The expected spend under pruning (None when unknown) beside the full, unpruned one."""

    source: str  # measured | formula | unknown
    expected_usd: float | None
    full_usd: float
    basis: str  # where the number comes from, in words
    run_fraction: float | None = None  # the run part a trial runs under pruning, on average (0..1)
    per_trial_usd: dict[str, float] = field(default_factory=dict)  # trial_id -> expected cost
    values_per_trial: int | None = None
    curves: int = 0  # measured curves the replay used
    #: measured source: do the settings keep the best of the measured curves (`gpuledger.search.recipe.check_recipe`)
    recipe: dict[str, Any] | None = None
    #: the settings the sweep prunes with and why (`gpuledger.search.safety.PruningChoice.to_json()`)
    settings: dict[str, Any] | None = None
    #: the makespan under pruning over the unpruned one (measured: both replayed at the plan's slots;
    #: formula: the run fraction; None: unknown)
    makespan_fraction: float | None = None
    #: the replays suspend trials at undecided rungs, as the sweep (`gpuledger.search.suspension.spec_suspends`)
    suspend: bool = False

    @property
    def warning(self) -> str | None:
        """The plan's warning when the replay shows the best measured trial pruned, with the safer setting
        (only when the settings run as written: `search.pruning.unsafe: keep`; else they were corrected)."""
        r = self.recipe
        if not r or r["kept"] or (self.settings and self.settings.get("source") != "unsafe-kept"):
            return None
        safer = r.get("safer")
        fix = (f"; min_steps {safer['min_steps']} and reduction_factor {safer['reduction_factor']} keep it (replayed: "
               f"{safer['replay_fraction']:.0%} of the measured seconds)" if safer else "; no setting tried keeps it")
        return (f"WARNING pruning: these settings drop the best measured point ({r['best_trial_id']}, "
                f"{r['best_value']:.4g}) at step {r['dropped_at_step']} of synchronous successive halving, so a sweep "
                f"may keep it only by timing{fix} (search.pruning)")

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "expected_usd": None if self.expected_usd is None else round(self.expected_usd, 6),
                "full_usd": round(self.full_usd, 6), "basis": self.basis,
                "run_fraction": None if self.run_fraction is None else round(self.run_fraction, 6),
                "values_per_trial": self.values_per_trial, "curves": self.curves,
                **({"recipe": self.recipe, "warning": self.warning} if self.recipe is not None else {}),
                **({"settings": self.settings} if self.settings is not None else {}),
                "makespan_fraction": None if self.makespan_fraction is None else round(self.makespan_fraction, 4),
                "suspend": self.suspend}


def params_key(params: Mapping[str, Any]) -> str:
    """The canonical JSON of a point's params: how a measured curve is matched to a planned trial."""
    return json.dumps(dict(params), sort_keys=True, separators=(",", ":"), default=str)


def _settings(spec: Any) -> tuple[int, int, int | None]:
    from gpuledger.spec.models import Pruning

    p = spec.search.pruning or Pruning()
    return p.min_steps, p.reduction_factor, p.values_per_trial


def _cost_at(row: Mapping[str, Any], fraction: float, overhead_s: float) -> float:
    cost, wall = float(row.get("est_cost_usd") or 0.0), float(row.get("est_wall_s") or 0.0)
    if wall <= 0:
        return cost
    run_share = max(0.0, wall - overhead_s) / wall
    return cost * (1.0 - run_share * (1.0 - fraction))


def pruned_spend(trials: Sequence[Mapping[str, Any]], spec: Any, *, max_parallel: int, overhead_s: float,
                 curves: Mapping[str, Any] | None = None) -> PrunedSpend | None:
    """Returns the expected spend under pruning of a plan's `trials` (rows of `Plan.trials`), or None
    when the sweep does not prune. `curves`: {params_key: Curve} of earlier runs of the same model,
    method, objective metric and train settings (`gpuledger.inputs.ledger`)."""
    from gpuledger.search import launch_order, prunes
    from gpuledger.search.suspension import spec_suspends
    from gpuledger.spec.expand import has_ranges

    if not prunes(spec):
        return None
    suspend = spec_suspends(spec)  # the runtime's rule: the replays below suspend when the sweep does

    s = spec.search
    _ms, _eta, spec_values = _settings(spec)
    feasible = [t for t in trials if t.get("feasible")]
    ids = [t["trial_id"] for t in trials]
    n_trials = min(s.n_trials or len(ids), len(ids))
    if s.strategy == "asha":
        order = launch_order(ids, s.seed, ranged=has_ranges(spec))
        run_ids = set(order[:n_trials])
    else:
        run_ids = {t["trial_id"] for t in feasible}
        order = [t["trial_id"] for t in sorted(trials, key=lambda t: t.get("trial_index") or 0)]
    from gpuledger.search.safety import MIN_CHECK_CURVES, choose_pruning

    by_id = {t["trial_id"]: t for t in trials}
    choice = choose_pruning(spec, curves, slots=max(1, int(max_parallel)),
                            order_of={params_key(by_id[tid]["params"]): tid for tid in order})
    min_steps, eta = choice.min_steps, choice.reduction_factor
    settings = choice.to_json()
    running = [t for t in feasible if t["trial_id"] in run_ids]
    full = sum(float(t.get("est_cost_usd") or 0.0) for t in running)
    if s.strategy != "asha" and n_trials < len(feasible) and feasible:
        full = full / len(feasible) * n_trials
    curves = dict(curves or {})
    complete = {k: c for k, c in curves.items() if c.complete and c.values}
    matched = {t["trial_id"]: complete[params_key(t["params"])] for t in running if params_key(t["params"]) in complete}
    fractions: dict[str, float]
    recipe = None
    from gpuledger.search.asha_replay import MAX_REPLAY_CURVES

    if 2 <= len(matched) <= MAX_REPLAY_CURVES:
        from dataclasses import replace

        from gpuledger.search.asha_replay import simulate_asha

        sim_curves = [replace(c, trial_id=tid) for tid, c in matched.items()]
        sim_order = [tid for tid in order if tid in matched]
        cost_on = (choice.stopping or getattr(s, "stopping", "cost")) == "cost"
        level = choice.stopping_level or getattr(s, "stopping_level", None)  # the rule's level, as the sweep runs it
        stopper = None
        if cost_on:  # the sweep's cost-aware rule, as the sweep runs it (references: the other curves)
            from gpuledger.search.replay import cost_stopper

            stopper = cost_stopper(sim_curves, {c.trial_id: 1.0 for c in sim_curves}, s.objective.goal,
                                   float(s.stopping_value_usd or 0.0) / full * sum(c.wall_s for c in sim_curves)
                                   if s.stopping_value_usd and full > 0 else sum(c.wall_s for c in sim_curves),
                                   level=level)
        sim = simulate_asha(sim_curves, slots=max(1, int(max_parallel)), min_steps=min_steps, reduction_factor=eta,
                            goal=s.objective.goal, order=sim_order, stopper=stopper, suspend=suspend)
        unpruned = simulate_asha(sim_curves, slots=max(1, int(max_parallel)), min_steps=min_steps,
                                 reduction_factor=eta, goal=s.objective.goal, order=sim_order, pruner="none")
        span = min(1.0, sim.makespan_s / unpruned.makespan_s) if unpruned.makespan_s > 0 else 1.0
        orders = (_replayed_orders(sim_curves, max(1, int(max_parallel)), min_steps, eta, s.objective.goal,
                                   (level or True) if cost_on else False, suspend=suspend)
                  if len(matched) >= MIN_CHECK_CURVES else None)  # fewer: the launch order alone
        if orders is not None:  # the arrival orders a shared machine's load makes: the median, and a P90 span
            span = max(span, orders["makespan_p90"])
        from gpuledger.search.recipe import check_recipe

        check = check_recipe(sim_curves, min_steps=min_steps, reduction_factor=eta, goal=s.objective.goal,
                             slots=max(1, int(max_parallel)), order=sim_order, replay=sim, suspend=suspend)
        recipe = check.to_json() if check is not None else None
        # each trial's replayed seconds over all its attempts (a suspended and relaunched one pays its first
        # values twice, so it may run more than its measured wall-clock: capped there only without suspension)
        fractions = {}
        for tid, c in matched.items():
            raw = sim.seconds_of(tid) / c.wall_s if sim.attempts(tid) and c.wall_s > 0 else 1.0
            fractions[tid] = raw if suspend else min(1.0, raw)
        measured_s = sum(c.wall_s for c in matched.values())
        mean = min(1.0, sim.trial_seconds / measured_s) if measured_s > 0 else 1.0
        if orders is not None and mean > 0:  # each trial's launch-order fraction scaled to the orders' median
            scale = orders["trial_s_median"] / mean
            fractions = {tid: min(max(1.0, f), f * scale) for tid, f in fractions.items()}
            mean = orders["trial_s_median"]
        source, values = MEASURED, None
        basis = (f"successive halving replayed (gpuledger.search.asha_replay, RungPruner"
                 f"{' and the cost-aware stopping rule' if cost_on else ''}, {_suspension_words(suspend)}) over "
                 f"{len(matched)} measured learning "
                 f"curve(s) of {s.objective.metric} of this model, method and train settings at "
                 f"{max(1, int(max_parallel))} slot(s): {sim.pruned} pruned in the launch order"
                 + (f"; over {orders['orders']} arrival orders a median {mean:.0%} of their measured seconds, makespan "
                    f"at most {span:.0%} of the unpruned in 9 of 10" if orders is not None else
                    f", {mean:.0%} of their measured seconds")
                 + (f"; the {len(running) - len(matched)} point(s) without a curve at that mean fraction"
                    if len(running) > len(matched) else ""))
    else:
        lengths = [len(c.values) for c in complete.values()]
        if lengths:
            values = int(statistics.median_low(lengths))
            where = f"the median length of {len(lengths)} measured complete curve(s) of this model"
            if len(matched) > MAX_REPLAY_CURVES:
                where += (f"; {len(matched):,} of them match this sweep's points, more than the "
                          f"{MAX_REPLAY_CURVES:,} a replay takes in bounded time")
        elif spec_values:
            values, where = int(spec_values), "search.pruning.values_per_trial"
        else:
            return PrunedSpend(
                source=UNKNOWN, expected_usd=None, full_usd=full, basis=(
                    f"unknown: no earlier learning curves of {s.objective.metric} for model {spec.model}, method "
                    f"{spec.method} and these train settings, and no search.pruning.values_per_trial; the budget "
                    "guard uses the full spend"), settings=settings, suspend=suspend)
        from gpuledger.search.recipe import successive_halving_fraction

        mean = successive_halving_fraction(values, min_steps, eta)
        span = mean
        fractions = {}
        source = FORMULA
        basis = (f"successive-halving formula: {values} value(s) per full trial ({where}), rungs at "
                 f"min_steps {min_steps} x reduction_factor {eta}**i: a trial runs {mean:.0%} of its run part on "
                 "average; set-up paid in full"
                 + ("; suspension at undecided rungs (search.pruning.suspend) reaches this outcome sooner but "
                    "relaunches a suspended survivor from its start, which the formula does not count (no curves "
                    "to replay)" if suspend else "; without suspension (search.pruning.suspend: false) ASHA "
                    "decides later than this"))
    per_trial = {t["trial_id"]: _cost_at(t, fractions.get(t["trial_id"], mean), overhead_s) for t in running}
    expected = sum(per_trial.values())
    if s.strategy != "asha" and n_trials < len(running) and running:
        expected = expected / len(running) * n_trials
    return PrunedSpend(source=source, expected_usd=expected, full_usd=full, basis=basis,
                       run_fraction=mean, per_trial_usd=per_trial,
                       values_per_trial=values, curves=len(matched) if source == MEASURED else 0, recipe=recipe,
                       settings=settings, makespan_fraction=span, suspend=suspend)


#: the arrival orders the plan replays a measured sweep over (`gpuledger.search.replay.replay_settings`:
#: launch order shuffled, each trial's times stretched by exp(N(0, 0.25))): its expected spend is their
#: median, its makespan (what `max_parallel: auto` holds against the deadline) their 90th percentile
PLAN_ORDERS = 8


def _suspension_words(suspend: bool) -> str:
    return ("with suspension at undecided rungs as the sweep runs it (search.pruning.suspend; a suspended "
            "survivor relaunched from its start)" if suspend else
            "without suspension (search.pruning.suspend false, or not asha): a trial undecided at its rung runs on")


def _replayed_orders(curves: Sequence[Any], slots: int, min_steps: int, eta: int, goal: str,
                     cost_on: bool | str, *, suspend: bool) -> dict[str, float] | None:
    """Returns {orders, trial_s_median, makespan_p90} (fractions of the unpruned grid's) of `curves` replayed
    over PLAN_ORDERS arrival orders (suspending at undecided rungs when `suspend`, as the sweep), or None with
    fewer than 2 complete curves."""
    import math

    from gpuledger.search.replay import replay_settings

    summ = replay_settings(list(curves), {c.trial_id: 1.0 for c in curves}, slots=slots, goal=goal,
                           min_steps=min_steps, reduction_factor=eta, cost_stopping=cost_on, orders=PLAN_ORDERS,
                           suspend=suspend)
    if summ is None or not summ.outcomes:
        return None
    spans = sorted(min(1.0, o.makespan_s / o.grid_makespan_s) for o in summ.outcomes if o.grid_makespan_s > 0)
    secs = sorted(min(1.0, o.trial_s / o.grid_trial_s) for o in summ.outcomes if o.grid_trial_s > 0)
    if not spans or not secs:
        return None
    return {"orders": len(summ.outcomes), "trial_s_median": statistics.median(secs),
            "makespan_p90": spans[min(len(spans) - 1, math.ceil(0.9 * len(spans)) - 1)]}
