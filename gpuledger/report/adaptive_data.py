"""The adaptive sweep's (strategy tpe or asha) part of the ROI report: its data and the numbers
derived from it. No rendering here (`gpuledger.report.adaptive` builds the sections).

Reads (named queries): `report_sweep_search` (strategy and ASHA settings from the stored spec),
`report_sweep_trial_ends` (every run's end: offset, cumulative spend, final or last reported
objective value, the trial's status), `report_grid_twin_trials` (the grid sweeps of the same
experiment) and `report_sweep_est_basis` (where the plan's estimates come from).

Derived:
- `grid_twin`: the grid sweep of the same experiment (same model, method, objective and training
  settings, the same set of points), the newest among those with the most points run to their end;
- `full_grid(data)`: what every point of the grid would cost, estimated (Σ of this sweep's plan rows,
  one per candidate point) and measured (Σ of the twin grid's runs), beside what this sweep cost;
- `pruning_savings(data)`: per pruned trial, its full-run cost (the twin grid's measured cost of the
  same point when it ran to its end there, else this sweep's plan estimate) minus what it cost here;
- `asha_what_if(...)`: ASHA replayed over this sweep's measured learning curves (named query
  `learning_curves`, `gpuledger.search.asha_replay`) at the slot counts of `gpuledger.plan.WHAT_IF_KS`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from gpuledger.search.asha_replay import MAX_REPLAY_CURVES as SIMULATOR_MAX_CURVES
from gpuledger.search.suspension import suspends
from gpuledger.vocabulary import ADAPTIVE_STRATEGIES

#: the strategies whose sweeps get the adaptive sections
#: the most learning curves the report replays (at up to 7 slot counts): the simulator's bound
MAX_REPLAY_CURVES = SIMULATOR_MAX_CURVES


@dataclass
class GridTwin:
    """A grid sweep of the same experiment that tried the same points."""

    sweep_id: str
    sweep_name: str
    points: int  # planned points (= this sweep's)
    succeeded: int  # points run to their end there
    cost_usd: float  # Σ cost of every run of that grid (measured)
    trial_s: float  # Σ wall-clock of every run of that grid (measured)
    best_value: float | None  # its best objective value
    by_point: dict[str, dict[str, Any]] = field(default_factory=dict)  # canonical params → v_trial_results row


@dataclass
class AdaptiveData:
    """What the adaptive sections show, as read from the warehouse."""

    strategy: str  # tpe | asha
    metric: str
    goal: str
    min_steps: int | None  # ASHA's settings (None: no pruning, e.g. tpe without `pruning`)
    reduction_factor: int | None
    ends: pl.DataFrame  # report_sweep_trial_ends
    est_basis: list[tuple[str, int]]  # (basis, trials) of the plan's estimates
    twin: GridTwin | None = None
    twin_candidates: int = 0  # grid sweeps of the same experiment examined (any points)
    ranges: bool = False  # the space has a range: the candidates are drawn points, not a grid
    curves: Any = None  # the measured learning curves (gpuledger.search.asha_replay.Curve), asha only
    twin_curves: Any = None  # the twin grid's learning curves (they ran to their end), asha only
    twin_rates: dict[str, float] = field(default_factory=dict)  # the twin grid's measured USD per second per trial
    stopping: str = "rungs"  # search.stopping of the stored spec
    suspend: bool = True  # search.pruning.suspend of the stored spec (suspension at undecided rungs)
    max_parallel: int | None = None


def point_key(params: Any) -> str:
    """Returns a trial's params as canonical JSON (keys sorted): the same point in two sweeps has the same key."""
    if isinstance(params, str):
        try:
            params = json.loads(params)
        except ValueError:
            return params
    return json.dumps(params, sort_keys=True, separators=(",", ":"), default=str)


def load_adaptive(wh, sweep_id: str, trials: pl.DataFrame) -> AdaptiveData | None:
    """Returns the adaptive data of `sweep_id`, or None when its strategy is not tpe or asha
    (grid and random sweeps' reports have no adaptive sections). `trials`: its v_trial_results rows."""
    p = {"sweep_id": sweep_id}
    info = wh.query_named("report_sweep_search", p).to_dicts()
    if not info or info[0]["strategy"] not in ADAPTIVE_STRATEGIES:
        return None
    i = info[0]
    min_steps, factor = i["min_steps"], i["reduction_factor"]
    if i["strategy"] == "asha" and (min_steps is None or factor is None):
        from gpuledger.spec.models import Pruning  # asha without `pruning`: the defaults

        d = Pruning()
        min_steps, factor = min_steps or d.min_steps, factor or d.reduction_factor
    basis = [(r["est_basis"], int(r["trials"])) for r in wh.query_named("report_sweep_est_basis", p).to_dicts()]
    goal = i["objective_goal"] or "minimize"
    twin, candidates = _grid_twin(wh.query_named("report_grid_twin_trials", p), trials, goal)
    curves = None
    if i["strategy"] == "asha":
        from gpuledger.search.asha_replay import curves_from_points

        curves = curves_from_points(wh.query_named(
            "learning_curves", {"sweep_id": sweep_id, "model": None, "method": None, "metric": None}).to_dicts())
    twin_curves, twin_rates = None, {}
    if i["strategy"] == "asha" and twin is not None:
        from gpuledger.inputs.ledger import recorded_curves

        _sid, twin_curves, twin_rates, _meta = recorded_curves(wh, twin.sweep_id)
    return AdaptiveData(strategy=i["strategy"], metric=i["objective_metric"] or "metric",
                        goal=goal, min_steps=min_steps, reduction_factor=factor,
                        ends=wh.query_named("report_sweep_trial_ends", p), est_basis=basis, twin=twin,
                        twin_candidates=candidates, curves=curves, ranges=_has_range(i["params_json"]),
                        twin_curves=twin_curves, twin_rates=twin_rates,
                        stopping=i.get("stopping") or "rungs",  # a spec stored before search.stopping: rungs
                        # the runtime's rule (search/suspension.py); stored before search.pruning.suspend: its default
                        suspend=suspends(i["strategy"], {"suspend": i.get("suspend")}))


def _has_range(params_json: str | None) -> bool:
    try:
        space = json.loads(params_json) if params_json else {}
    except ValueError:
        return False
    return isinstance(space, dict) and any(isinstance(v, dict) for v in space.values())


def _grid_twin(rows: pl.DataFrame, trials: pl.DataFrame, goal: str) -> tuple[GridTwin | None, int]:
    """Returns (the grid sweep that tried the same set of points, or None; grid sweeps examined)."""
    mine = {point_key(p) for p in trials["params"].to_list()} if trials.height else set()
    if not mine or rows.height == 0:
        return None, 0
    if "train_json" in rows.columns:
        pairs = list(zip(rows["train_json"].to_list(), rows["my_train_json"].to_list(), strict=True))
        same = {p: _same_train(*p) for p in set(pairs)}
        rows = rows.filter(pl.Series([same[p] for p in pairs], dtype=pl.Boolean))
        if rows.height == 0:
            return None, 0
    order = list(dict.fromkeys(rows["sweep_id"].to_list()))  # newest first (the query's order)
    best: GridTwin | None = None
    for sid in order:
        part = rows.filter(pl.col("sweep_id") == sid).to_dicts()
        by_point = {point_key(r["params"]): r for r in part}
        if set(by_point) != mine:
            continue
        values = [r["metric_value"] for r in part if r["status"] == "succeeded" and r["metric_value"] is not None]
        twin = GridTwin(
            sweep_id=sid, sweep_name=part[0]["sweep_name"], points=len(by_point),
            succeeded=sum(1 for r in part if r["status"] == "succeeded"),
            cost_usd=float(sum(float(r["cost_usd"] or 0.0) for r in part)),
            trial_s=float(sum(float(r["wall_s"] or 0.0) for r in part)),
            best_value=best_of(values, goal), by_point=by_point)
        if best is None or twin.succeeded > best.succeeded:  # ties: the newer (seen first) stays
            best = twin
    return best, len(order)


def _same_train(a: str | None, b: str | None) -> bool:
    from gpuledger.spec.kinds import same_train_json

    return a == b or same_train_json(a, b)


def best_of(values: list[float], goal: str) -> float | None:
    """Returns the best of `values` for the objective's goal (None when there is none)."""
    if not values:
        return None
    return max(values) if goal == "maximize" else min(values)


# ------------------------------------------------------------------------------------------ derive


def _sum(values: list[Any]) -> float:
    return float(sum(float(v) for v in values if v is not None))


def est_basis_text(ad: AdaptiveData) -> str:
    """Returns where the plan's estimates come from, e.g. 'estimate for 10 trials, measured for 2'."""
    if not ad.est_basis:
        return "no plan estimate"
    return ", ".join(f"{basis} for {n} trial{'s' if n != 1 else ''}" for basis, n in ad.est_basis)


def full_grid(trials: pl.DataFrame, ad: AdaptiveData) -> dict[str, Any]:
    """Returns what the full grid would have cost beside what this sweep cost.

    Keys: points (candidates planned), est_points (with a plan estimate), est_cost_usd, est_trial_s
    (Σ of the plan rows), cost_usd, trial_s (Σ of this sweep's runs, pruned ones included), ran,
    pruned, best_value (this sweep's), saved_vs_est_usd / _pct; and from the twin grid (None without
    one): grid_sweep_id, grid_sweep_name, grid_succeeded, grid_cost_usd, grid_trial_s, grid_best_value,
    saved_vs_grid_usd / _pct, trial_s_vs_grid_pct (this sweep's trial-seconds as % of the grid's).
    """
    t = trials.to_dicts()
    est = [r for r in t if r["est_cost_usd"] is not None]
    out: dict[str, Any] = {
        "points": len(t),
        "est_points": len(est),
        "est_cost_usd": _sum([r["est_cost_usd"] for r in est]),
        "est_trial_s": _sum([r["est_wall_s"] for r in est]),
        "cost_usd": _sum([r["cost_usd"] for r in t]),
        "trial_s": _sum([r["wall_s"] for r in t]),
        "ran": sum(1 for r in t if (r["attempts"] or 0) > 0),
        "pruned": sum(1 for r in t if r["status"] == "pruned"),
        "best_value": best_of([r["metric_value"] for r in t if r["status"] == "succeeded"
                               and r["metric_value"] is not None], ad.goal),
    }
    out["saved_vs_est_usd"] = out["est_cost_usd"] - out["cost_usd"] if est else None
    out["saved_vs_est_pct"] = _pct(out["saved_vs_est_usd"], out["est_cost_usd"])
    tw = ad.twin
    out.update({
        "grid_sweep_id": tw.sweep_id if tw else None,
        "grid_sweep_name": tw.sweep_name if tw else None,
        "grid_succeeded": tw.succeeded if tw else None,
        "grid_cost_usd": tw.cost_usd if tw else None,
        "grid_trial_s": tw.trial_s if tw else None,
        "grid_best_value": tw.best_value if tw else None,
        "saved_vs_grid_usd": tw.cost_usd - out["cost_usd"] if tw else None,
    })
    out["saved_vs_grid_pct"] = _pct(out["saved_vs_grid_usd"], out["grid_cost_usd"])
    out["trial_s_vs_grid_pct"] = (100.0 * out["trial_s"] / tw.trial_s) if tw and tw.trial_s > 0 else None
    return out


def _pct(part: float | None, whole: float | None) -> float | None:
    return 100.0 * part / whole if part is not None and whole else None


def pruning_savings(trials: pl.DataFrame, ad: AdaptiveData) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Returns (rows, total): per pruned trial what running it to its end would have cost, and what it did.

    Row keys: trial_id, trial_index, params, values_reported (objective values it reported before it
    was stopped), wall_s, cost_usd (measured, all its attempts), full_wall_s, full_cost_usd, basis
    ('grid' = the twin grid's measured run of the same point, which ran to its end; 'plan' = this
    sweep's plan estimate; None = neither), saved_usd, saved_s. Total keys: pruned, saved_usd, saved_s,
    cost_usd (what the pruned trials cost), from_grid, from_plan, unknown (trials with neither).
    """
    reported: dict[str, int] = {}
    for r in ad.ends.to_dicts():
        reported[r["trial_id"]] = max(reported.get(r["trial_id"], 0), int(r["values_reported"] or 0))
    rows = []
    for t in trials.filter(pl.col("status") == "pruned").to_dicts():
        g = ad.twin.by_point.get(point_key(t["params"])) if ad.twin else None
        if g is not None and g["status"] == "succeeded" and g["cost_usd"] is not None:
            full_cost, full_s, basis = float(g["cost_usd"]), g["wall_s"], "grid"
        elif t["est_cost_usd"] is not None:
            full_cost, full_s, basis = float(t["est_cost_usd"]), t["est_wall_s"], "plan"
        else:
            full_cost, full_s, basis = None, None, None
        cost, wall = float(t["cost_usd"] or 0.0), t["wall_s"]
        rows.append({
            "trial_id": t["trial_id"], "trial_index": t["trial_index"], "params": t["params"],
            "values_reported": reported.get(t["trial_id"], 0), "wall_s": wall, "cost_usd": cost,
            "full_wall_s": float(full_s) if full_s is not None else None, "full_cost_usd": full_cost,
            "basis": basis,
            "saved_usd": full_cost - cost if full_cost is not None else None,
            "saved_s": float(full_s) - float(wall or 0.0) if full_s is not None else None,
        })
    total = {
        "pruned": len(rows),
        "saved_usd": _sum([r["saved_usd"] for r in rows]),
        "saved_s": _sum([r["saved_s"] for r in rows]),
        "cost_usd": _sum([r["cost_usd"] for r in rows]),
        "from_grid": sum(1 for r in rows if r["basis"] == "grid"),
        "from_plan": sum(1 for r in rows if r["basis"] == "plan"),
        "unknown": sum(1 for r in rows if r["basis"] is None),
    }
    return rows, total


def asha_what_if(trials: pl.DataFrame, ad: AdaptiveData, actual_slots: int | None
                 ) -> tuple[list[dict[str, Any]], dict[str, Any] | None, str | None]:
    """Returns (rows, basis, why_not): ASHA replayed over the sweep's measured learning curves at each
    slot count of `WHAT_IF_KS` (and the sweep's own), or [] and the reason.

    The replay is `gpuledger.search.asha_replay.simulate_asha` with the sweep's min_steps,
    reduction_factor and goal, the trials in the order this sweep launched them, suspending at undecided
    rungs as the runtime does (`gpuledger.search.suspension`, unless `search.pruning.suspend` is false; every attempt's seconds counted). Row keys: slots,
    trial_seconds, makespan_s, cost_usd (trial_seconds × the sweep's measured USD per trial-second),
    pruned, completed, extrapolated (trials promoted past where their measured curve was cut: the
    curve held at its last value), best_value, best_trial_id, time_to_best_s, actual (the sweep's
    slots). `basis`: usd_per_trial_s, measured_cost_usd, measured_trial_s, curves.
    """
    from gpuledger.plan import WHAT_IF_KS
    from gpuledger.search.asha_replay import simulate_asha

    if ad.strategy != "asha" or ad.min_steps is None or ad.reduction_factor is None:
        return [], None, "the replay is of ASHA's pruning; this sweep's strategy is " + ad.strategy
    t = trials.filter(pl.col("attempts") > 0)
    if trials.filter(pl.col("status") == "running").height:
        return [], None, "the sweep is still running; the replay needs every measured curve"
    curves = [c for c in (ad.curves or []) if c.values or c.complete]
    if not curves:
        return [], None, f"no run of this sweep logged {ad.metric} (the learning curves the replay needs)"
    if len(curves) > MAX_REPLAY_CURVES:
        return [], None, (f"the sweep has {len(curves):,} learning curves; the report replays at most "
                          f"{MAX_REPLAY_CURVES:,} (a replay's time grows with the square of the trials); "
                          f"gpuledger.search.asha_replay.simulate_asha replays it outside the report")
    measured_cost, measured_s = _sum(t["cost_usd"].to_list()), _sum(t["wall_s"].to_list())
    if measured_s <= 0:
        return [], None, "no measured trial-seconds to price the replay with"
    rate = measured_cost / measured_s
    have = {c.trial_id for c in curves}
    order = [r["trial_id"] for r in t.sort("started_at", nulls_last=True).to_dicts() if r["trial_id"] in have]
    order += [c.trial_id for c in curves if c.trial_id not in set(order)]
    # more slots than trials change nothing: the Ks up to the first that runs every trial at once
    enough = min([k for k in WHAT_IF_KS if k >= len(curves)], default=max(WHAT_IF_KS))
    ks = sorted({k for k in WHAT_IF_KS if k <= enough} | ({int(actual_slots)} if actual_slots else set()))
    rows = []
    for k in ks:
        sim = simulate_asha(curves, slots=k, min_steps=ad.min_steps, reduction_factor=ad.reduction_factor,
                            goal=ad.goal, order=order, suspend=ad.suspend)  # as the runtime did (search/suspension.py)
        rows.append({"slots": k, "trial_seconds": sim.trial_seconds, "makespan_s": sim.makespan_s,
                     "cost_usd": sim.trial_seconds * rate, "pruned": sim.pruned, "completed": sim.completed,
                     "extrapolated": sim.extrapolated, "best_value": sim.best_value,
                     "best_trial_id": sim.best_trial_id, "time_to_best_s": sim.time_to_best_s,
                     "actual": actual_slots is not None and k == int(actual_slots)})
    basis = {"usd_per_trial_s": rate, "measured_cost_usd": measured_cost, "measured_trial_s": measured_s,
             "curves": len(curves)}
    return rows, basis, None


#: the arrival orders the report replays the grid's curves over (benchmarks/search_replay.py's default)
REPORT_ORDERS = 40


def grid_replay(ad: AdaptiveData, slots: int | None) -> tuple[dict[str, Any] | None, str | None]:
    """Returns (this sweep's settings replayed over REPORT_ORDERS arrival orders of the twin grid's curves
    against that grid, `gpuledger.search.replay.replay_settings(...).to_json()` plus `orders` and `slots`;
    or None and why): the comparison with the grid stated over many orders, not the one this sweep had."""
    if ad.strategy != "asha" or ad.min_steps is None or ad.reduction_factor is None:
        return None, "the replay is of ASHA's pruning"
    if ad.twin is None or not ad.twin_curves:
        return None, "no measured grid of the same points to replay"
    from gpuledger.search.replay import replay_settings

    if len(ad.twin_curves) > MAX_REPLAY_CURVES:
        return None, (f"the grid has {len(ad.twin_curves):,} curves; a replay takes at most "
                      f"{MAX_REPLAY_CURVES:,}")
    k = max(1, int(slots or 1))
    one = replay_settings(ad.twin_curves, ad.twin_rates, slots=k, goal=ad.goal, min_steps=ad.min_steps,
                          reduction_factor=ad.reduction_factor, cost_stopping=ad.stopping == "cost", suspend=ad.suspend,
                          orders=REPORT_ORDERS)
    if one is None:
        return None, "the grid has fewer than 2 curves that ran to their end"
    return {**one.to_json(), "orders": REPORT_ORDERS, "slots": k}, None
