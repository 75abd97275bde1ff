"""The sweep ROI report's data: read from the warehouse (named queries `report_sweep_*`) and the
numbers derived from it (headline summary, the what-if on measured durations, the cloud equivalent
of a local sweep, estimate accuracy). No rendering here: `gpuledger.report.sweep` builds the
document from these.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from gpuledger.errors import UserError
from gpuledger.report.adaptive_data import load_adaptive
from gpuledger.report.billed import load_sweep_billed
from gpuledger.report.common import check_name, usd
from gpuledger.report.pools import load_pools
from gpuledger.report.rl_roles import plan_roles
from gpuledger.serving import sweep_points

#: |estimate − measured| / measured beyond which a trial is named on the accuracy charts
OUTLIER_PCT = 25.0
#: parallel slots of the what-if curve (the actual K is added when it is not among them)


@dataclass
class SweepData:
    """Everything the sweep report shows, as read from the warehouse (no derived numbers)."""

    roi: dict[str, Any]  # the v_sweep_roi row
    sweep: dict[str, Any]  # launcher, max_parallel, model, method (sweeps table)
    trials: pl.DataFrame  # v_trial_results, in launch order
    runs: pl.DataFrame  # v_trial_timeline + preemptions (v_runs), by start
    accuracy: pl.DataFrame  # v_estimate_accuracy
    savings: dict[str, Any]  # v_spot_savings row
    waste: pl.DataFrame  # v_waste rows
    billing_sources: pl.DataFrame  # source, description, usd_per_hour, spot, on_demand_usd_per_hour, lines
    price_dates: list[str]  # prices.as_of of the sweep's snapshot
    price_sources: list[str]  # prices.source: where each catalog price the plan used came from
    cloud_equiv: pl.DataFrame  # per trial of a local sweep: the plan's cloud-GPU equivalent (accelerator, gpus,
    #                            cloud, instance_type, spot, wall_s, cost_usd); empty for cloud sweeps
    serving: Any = None  # gpuledger.serving.SweepPoints of a method: inference sweep, else None
    billed: dict[str, Any] | None = None  # v_sweep_billed: estimated vs billed vs effective USD (FOCUS exports)
    adaptive: Any = None  # gpuledger.report.adaptive_data.AdaptiveData of a tpe/asha sweep, else None
    pools: list[dict[str, Any]] = field(default_factory=list)  # its SkyPilot pools (gpuledger/report/pools.py)
    probes: pl.DataFrame | None = None  # v_probes rows of the sweep (`gpuledger probe`), None/empty: no probe
    #: the stored plan's bands (`plan_bands`): {"trials": {trial_id: band fields}, totals, confidence}; {} before them
    plan_bands: dict[str, Any] = field(default_factory=dict)
    #: the objective's points of every run (named query `learning_curves`): the learning curves section
    curves: list[dict[str, Any]] = field(default_factory=list)
    #: an RL sweep's roles: the stored plan's by trial (gpuledger/plan/rl_roles.py) and the runs' measured ones
    #: (`report_sweep_rl_roles`); {} / None for other sweeps
    plan_roles: dict[str, Any] = field(default_factory=dict)
    rl_roles: pl.DataFrame | None = None
    #: an RL sweep's trial runs' cost by billing role (`report_sweep_rl_cost`, gpuledger/report/rl_cost.py); None
    #: for other sweeps
    rl_cost: pl.DataFrame | None = None


# ------------------------------------------------------------------------------------------ load


def known_sweep_names(wh) -> list[str]:
    """Returns the names of the sweeps in the warehouse, sorted."""
    df = wh.query_named("report_sweep_names")
    return df["sweep_name"].to_list() if df.height else []


def resolve_sweep_id(wh, name: str | None = None, sweep_id: str | None = None) -> str:
    """Returns the sweep id to report: `sweep_id` when given (checked), else the latest sweep called `name`.

    Raises UserError naming the known sweeps when there is no such sweep.
    """
    if sweep_id is not None:
        df = wh.query_named("report_sweep_by_id", {"sweep_id": sweep_id})
        if df.height == 0:
            ids = wh.query_named("report_recent_sweep_ids")
            known = ", ".join(ids["sweep_id"].to_list()) or "none yet"
            raise UserError(f"no sweep with id {sweep_id!r} in the warehouse; recent sweep ids: {known}")
        if name is not None and df["sweep_name"][0] not in (None, name):
            raise UserError(f"sweep {sweep_id!r} is called {df['sweep_name'][0]!r}, not {name!r}")
        return sweep_id
    if name is None:
        raise UserError("say which sweep: its name (its latest sweep) or a sweep id (`gpuledger report sweep "
                        "--sweep-id ID`, `Ledger.report_sweep(None, sweep_id=ID)`)")
    check_name(name, "sweep name")
    df = wh.query_named("report_latest_sweep_id", {"name": name})
    if df.height == 0:
        names = known_sweep_names(wh)
        known = ", ".join(names) if names else "none yet (run `gpuledger sweep SPEC` first)"
        raise UserError(f"no sweep called {name!r} in the warehouse; known sweeps: {known}")
    return df["sweep_id"][0]


def load_sweep(wh, name: str | None = None, sweep_id: str | None = None) -> SweepData:
    """Returns the report's data for one sweep (the latest called `name`, or `sweep_id`)."""
    sid = resolve_sweep_id(wh, name, sweep_id)
    p = {"sweep_id": sid}
    roi = wh.query_named("report_sweep_roi", p).to_dicts()[0]
    sweep_rows = wh.query_named("report_sweep_info", p).to_dicts()
    trials = wh.query_named("report_sweep_trials", p)
    runs = wh.query_named("report_sweep_runs", p)
    accuracy = wh.query_named("report_sweep_accuracy", p)
    savings = wh.query_named("report_sweep_spot_savings", p).to_dicts()
    waste = wh.query_named("report_sweep_waste", p)
    billing = wh.query_named("report_sweep_billing_sources", p)
    prices = wh.query_named("report_sweep_prices", p)
    cloud_equiv = wh.query_named("report_sweep_cloud_equiv", p)
    plan_rows = wh.query_named("report_sweep_plan", p).to_dicts()
    roles, rl_roles = plan_roles(plan_rows), wh.query_named("report_sweep_rl_roles", p)
    return SweepData(
        roi=roi,
        sweep=sweep_rows[0] if sweep_rows else {},
        trials=trials,
        runs=runs,
        accuracy=accuracy,
        savings=savings[0] if savings else {"paid_usd": 0.0, "on_demand_equiv_usd": 0.0, "saved_usd": 0.0,
                                            "spot_hours": 0.0, "saved_pct": None, "preempted_hours": 0.0,
                                            "preempted_paid_usd": 0.0},
        waste=waste,
        billing_sources=billing,
        price_dates=sorted({str(d) for d in prices["as_of"].to_list()}),
        price_sources=sorted(set(prices["source"].to_list())),
        serving=sweep_points(wh, sid),
        cloud_equiv=cloud_equiv,
        billed=load_sweep_billed(wh, sid),
        adaptive=load_adaptive(wh, sid, trials),
        pools=load_pools(wh, sid),
        probes=wh.query_named("report_sweep_probes", p),
        plan_bands=plan_bands(plan_rows),
        plan_roles=roles,
        rl_roles=rl_roles,
        rl_cost=wh.query_named("report_sweep_rl_cost", p) if roles or rl_roles.height else None,
        curves=wh.query_named("learning_curves", {"sweep_id": sid, "model": None, "method": None,
                                                  "metric": None}).to_dicts(),
    )


#: what the sweep report reads of the stored plan's bands (gpuledger/plan/bands.py)
BAND_TRIAL_KEYS = ("est_wall_s", "est_wall_s_p10", "est_wall_s_p90", "est_cost_usd", "est_cost_usd_p10",
                   "est_cost_usd_p90", "mem_gib_p90", "est_band")
BAND_PLAN_KEYS = ("total_est_cost_usd", "total_cost_usd_p10", "total_cost_usd_p90", "confidence", "decided_usd",
                  "decided_usd_p50", "decided_usd_p90")


def plan_bands(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Returns the bands of the stored plan (`report_sweep_plan`): {"trials": {trial_id: BAND_TRIAL_KEYS},
    BAND_PLAN_KEYS...}; {} when the plan has none (a plan stored before bands, or none stored)."""
    text = rows[0].get("plan_json") if rows else None
    try:
        plan = json.loads(text) if isinstance(text, str) else (text or {})
    except ValueError:
        return {}
    if not isinstance(plan, dict) or plan.get("total_cost_usd_p90") is None:
        return {}
    trials = {t["trial_id"]: {k: t.get(k) for k in BAND_TRIAL_KEYS} for t in plan.get("trials") or []
              if isinstance(t, dict) and t.get("trial_id") and t.get("est_wall_s_p90") is not None}
    return {"trials": trials, **{k: plan.get(k) for k in BAND_PLAN_KEYS}}


def band_hold(data: SweepData) -> dict[str, Any] | None:
    """Returns how the plan's bands held on this sweep: succeeded trials measured, within P10-P90 of
    their wall-clock, below, above; None without bands or measured trials."""
    bands = (data.plan_bands or {}).get("trials") or {}
    if not bands or data.trials.is_empty() or "wall_s" not in data.trials.columns:
        return None
    inside = below = above = 0
    for t in data.trials.to_dicts():
        b = bands.get(t["trial_id"])
        if b is None or t.get("status") != "succeeded" or not t.get("wall_s"):
            continue
        w = float(t["wall_s"])
        inside += b["est_wall_s_p10"] <= w <= b["est_wall_s_p90"]
        below += w < b["est_wall_s_p10"]
        above += w > b["est_wall_s_p90"]
    n = inside + below + above
    return {"trials": n, "inside": inside, "below": below, "above": above} if n else None


# ------------------------------------------------------------------------------------------ derive


def params_text(params: Any) -> str:
    """Returns a trial's params as 'k=v, k=v' (JSON text or dict in; keys sorted)."""
    if params is None:
        return ""
    if isinstance(params, str):
        try:
            params = json.loads(params)
        except ValueError:
            return params
    if isinstance(params, dict):
        return ", ".join(f"{k}={v}" for k, v in sorted(params.items()))
    return str(params)


def price_source(data: SweepData) -> str:
    """Returns where the sweep's dollar figures come from, e.g. 'catalog prices as of 2026-05-20
    (AWS list price from the SkyPilot catalog snapshot bundled with gpuledger)': the dates and, in
    words, the basis of each price the plan used (`gpuledger.catalog.pricing`)."""
    b = data.billing_sources
    if b.height == 0:
        return "no billing lines yet"
    parts = []
    sources = set(b["source"].to_list())
    if "local" in sources:
        from gpuledger.catalog.local import local_reference

        ref = local_reference()
        rates = sorted({float(r) for r in b.filter(pl.col("source") == "local")["usd_per_hour"].to_list()})
        if any(abs(r - ref.usd_per_hour) < 1e-9 for r in rates):
            what = ref.source.split(" (")[0].removeprefix("reference rate: ")
            parts.append(f"this machine at the reference rate {usd(ref.usd_per_hour)}/h ({what}, as of {ref.as_of}; "
                         f"a reference price, not a bill)")
        others = [r for r in rates if abs(r - ref.usd_per_hour) >= 1e-9]
        if others:
            rate_text = ", ".join(f"{usd(r)}/h" for r in others)
            parts.append(f"local rate {rate_text} (a configured rate, not a cloud price)")
    if "catalog" in sources:
        dates = ", ".join(data.price_dates)
        basis = f" ({'; '.join(data.price_sources)})" if data.price_sources else ""
        parts.append("catalog prices" + (f" as of {dates}" if dates else " (date in the plan's price snapshot)") + basis)
    if "invoice" in sources:
        parts.append("invoice lines")
    return "; ".join(parts)


def sweep_summary(data: SweepData) -> dict[str, Any]:
    """Returns the headline numbers (units in the keys) and where they come from.

    Definitions (as in the views): time_to_recipe_s = end of the best run − sweep start;
    cost_to_recipe_usd = Σ cost of the runs that ended by then; time/cost_to_target the same for the
    first run meeting `objective.target`; waste_usd = Σ cost of failed/oom/preempted/cancelled runs (not
    the cancelled runs of pruned trials: the search's savings);
    spot_saved_usd = Σ spot hours of runs not preempted × on-demand $/h − Σ paid for every spot line
    (v_spot_savings: a preempted run's lost work is paid, never counted as saved).
    """
    r = data.roi
    t = data.trials
    best_params = None
    best_index = None
    if r.get("best_trial_id") is not None and t.height:
        row = t.filter(pl.col("trial_id") == r["best_trial_id"])
        if row.height:
            best_params = params_text(row["params"][0])
            best_index = row["trial_index"][0]
    statuses = t["status"].to_list() if t.height else []
    running = sum(1 for s in statuses if s in ("running", "pending"))
    pruned = t.filter(pl.col("status") == "pruned") if t.height else t
    return {
        "sweep_id": r["sweep_id"],
        "sweep_name": r.get("sweep_name"),
        "project": r.get("project"),
        "owner": r.get("owner"),
        "status": r.get("status"),
        "started_at": r.get("started_at"),
        "ended_at": r.get("ended_at"),
        "metric_name": r.get("metric_name"),
        "goal": r.get("goal"),
        "target": r.get("target"),
        "best_trial_id": r.get("best_trial_id"),
        "best_trial_index": best_index,
        "best_params": best_params,
        "best_metric": r.get("best_metric"),
        "time_to_recipe_s": r.get("time_to_recipe_s"),
        "cost_to_recipe_usd": r.get("cost_to_recipe_usd"),
        "time_to_target_s": r.get("time_to_target_s"),
        "cost_to_target_usd": r.get("cost_to_target_usd"),
        "makespan_s": r.get("makespan_s"),
        "total_cost_usd": float(r.get("total_cost_usd") or 0.0),
        "gpu_hours": float(r.get("gpu_hours") or 0.0),
        "waste_usd": float(r.get("waste_usd") or 0.0),
        "spot_paid_usd": float(data.savings.get("paid_usd") or 0.0),
        "spot_on_demand_equiv_usd": float(data.savings.get("on_demand_equiv_usd") or 0.0),
        "spot_saved_usd": float(data.savings.get("saved_usd") or 0.0),
        "spot_hours": float(data.savings.get("spot_hours") or 0.0),
        "spot_preempted_hours": float(data.savings.get("preempted_hours") or 0.0),
        "spot_preempted_paid_usd": float(data.savings.get("preempted_paid_usd") or 0.0),
        "budget_usd": r.get("budget_usd"),
        "budget_used_pct": r.get("budget_used_pct"),
        "trials": int(r.get("trials") or 0),
        "succeeded": int(r.get("succeeded") or 0),
        "failed": int(r.get("failed") or 0),
        "skipped": int(r.get("skipped") or 0),
        "running": running,
        "pruned": pruned.height,  # stopped by the adaptive search (their cancelled runs are not waste: v_run_facts.pruned)
        "not_asked": sum(1 for s in statuses if s == "not-asked"),  # candidates the adaptive search never asked for
        "pruned_cost_usd": float(sum(float(c or 0.0) for c in pruned["cost_usd"].to_list())) if pruned.height else 0.0,
        "runs": int(r.get("runs") or 0),
        "cost_per_succeeded_trial_usd": r.get("cost_per_succeeded_trial_usd"),
        "max_parallel": data.sweep.get("max_parallel"),
        "launcher": data.sweep.get("launcher"),
        "price_source": price_source(data),
    }


def is_running(summary: dict[str, Any]) -> bool:
    """Returns True while the sweep has not finished (no end time, or trials still pending/running)."""
    return summary["ended_at"] is None or summary["running"] > 0 or summary["status"] == "running"


def peak_concurrency(runs: pl.DataFrame) -> int:
    """Returns the largest number of runs that overlapped in time (the K the sweep really had)."""
    if runs.height == 0:
        return 0
    events = sorted([(s, 1) for s in runs["start_offset_s"].to_list()] +
                    [(e, -1) for e in runs["end_offset_s"].to_list()], key=lambda ev: (ev[0], ev[1]))
    cur = best = 0
    for _, d in events:
        cur += d
        best = max(best, cur)
    return best


def what_if_inputs(data: SweepData) -> tuple[list[float], list[float], int | None, list[str]]:
    """Returns (durations_s, costs_usd, target_index, trial_ids) of the trials with a measured result, in launch order.

    Duration and cost of a trial are those of all its attempts (what it really took); the target is
    the best trial. Trials without a result yet (running, skipped) are left out.
    """
    t = data.trials.filter(pl.col("wall_s").is_not_null() & (pl.col("attempts") > 0))
    ids = t["trial_id"].to_list()
    durations = [float(w) for w in t["wall_s"].to_list()]
    costs = [float(c or 0.0) for c in t["cost_usd"].to_list()]
    best = data.roi.get("best_trial_id")
    target = ids.index(best) if best in ids else None
    return durations, costs, target, ids


def pareto_flags(points: list[tuple[float, float]]) -> list[bool]:
    """Returns, for each (time, cost) in order of increasing K, whether it is on the Pareto front.

    A point is off the front when another is at least as good in both and better in one, or is
    the same point reached with fewer slots (an earlier one in the list): more GPUs for nothing.
    """
    flags = []
    for i, (ti, ci) in enumerate(points):
        dominated = any((tj <= ti and cj <= ci) and (tj < ti or cj < ci or j < i)
                        for j, (tj, cj) in enumerate(points) if j != i)
        flags.append(not dominated)
    return flags


def what_if_rows(data: SweepData) -> tuple[list[dict[str, Any]], str | None]:
    """Returns (rows, why_not): the what-if curve from the measured durations, or [] and the reason.

    Each row: parallel (K), time_to_recipe_s, cost_usd, pareto (bool), actual (K = the sweep's
    max_parallel), and for a local sweep whose trials all have a cloud equivalent, the same replay
    on the plan's cloud-GPU estimates (cloud_time_to_recipe_s, cloud_cost_usd; else None). The
    simulation is the planner's (`gpuledger.plan.what_if_curve`); this report only feeds it
    measured durations and costs.
    """
    from gpuledger.plan import WHAT_IF_KS, what_if_curve

    durations, costs, target, ids = what_if_inputs(data)
    unfinished = data.trials.filter(pl.col("status").is_in(["running", "pending"])).height if data.trials.height else 0
    if unfinished:
        return [], (f"{unfinished} trials have no result yet; the what-if replays the measured durations of "
                    f"a sweep whose trials all ran")
    if not durations:
        return [], "no trial has a measured duration yet"
    if target is None:
        return [], "no succeeded trial with the objective metric, so there is no recipe to reach"
    actual = data.sweep.get("max_parallel") or peak_concurrency(data.runs) or None
    ks = sorted(set(WHAT_IF_KS) | ({int(actual)} if actual else set()))
    rows = [{"parallel": int(r["parallel"]), "time_to_recipe_s": float(r["time_to_recipe_s"]),
             "cost_usd": float(r["cost_usd"])} for r in what_if_curve(durations, costs, target_index=target, ks=ks)]
    flags = pareto_flags([(r["time_to_recipe_s"], r["cost_usd"]) for r in rows])
    cloud = _cloud_by_trial(data)
    cloud_rows = None
    if cloud and all(i in cloud for i in ids):
        cloud_rows = what_if_curve([cloud[i]["wall_s"] for i in ids], [cloud[i]["cost_usd"] for i in ids],
                                   target_index=target, ks=ks)
    for i, (r, f) in enumerate(zip(rows, flags, strict=True)):
        r["pareto"] = f
        r["actual"] = actual is not None and r["parallel"] == int(actual)
        r["cloud_time_to_recipe_s"] = float(cloud_rows[i]["time_to_recipe_s"]) if cloud_rows else None
        r["cloud_cost_usd"] = float(cloud_rows[i]["cost_usd"]) if cloud_rows else None
    return rows, None


def _cloud_by_trial(data: SweepData) -> dict[str, dict[str, Any]]:
    """Per trial, its cloud equivalent (the cloud plan's full-run time and cost). A trial the adaptive
    search pruned ran only part of its run: its cloud time and cost are the full run's × the share it ran
    here (its measured wall-clock, start-up included, over the full run's: the twin grid's measured run of
    the same point, else this sweep's plan estimate), so an ASHA sweep's cards are its own, not the grid's."""
    rows = {r["trial_id"]: r for r in data.cloud_equiv.to_dicts() if r["wall_s"] is not None}
    ad = data.adaptive
    if ad is None or not data.trials.height:
        return rows
    from gpuledger.report.adaptive_data import point_key

    for t in data.trials.filter(pl.col("status") == "pruned").to_dicts():
        r = rows.get(t["trial_id"])
        g = ad.twin.by_point.get(point_key(t["params"])) if ad.twin else None
        full = g["wall_s"] if g is not None and g["status"] == "succeeded" and g["wall_s"] else t["est_wall_s"]
        if r is None or not full or t["wall_s"] is None:
            continue
        share = min(1.0, float(t["wall_s"]) / float(full))
        wall, cost = float(r["wall_s"]), float(r["cost_usd"] or 0.0)
        rows[t["trial_id"]] = {**r, "wall_s": wall * share, "cost_usd": cost * share, "ran_share": share}
    return rows


def cloud_equivalent(data: SweepData) -> dict[str, Any] | None:
    """Returns what the trials that ran would cost on the cloud GPU the plan would pick (the plan's
    estimate stored with each trial of a local sweep), or None when the sweep has none.

    Keys: offer (e.g. '1 × A10G (aws g5.xlarge, on-demand)'), accelerator, trials (with an
    equivalent), of_trials (that ran), total_usd, total_wall_s (Σ of the estimated times there).
    """
    _d, _c, _t, ids = what_if_inputs(data)
    cloud = _cloud_by_trial(data)
    ran = [cloud[i] for i in ids if i in cloud]
    if not ran:
        return None
    partial = sum(1 for r in ran if r.get("ran_share") is not None)
    offers = sorted({f"{r['gpus'] or 1} × {r['accelerator']} ({r['cloud']} {r['instance_type']}, "
                     f"{'spot' if r['spot'] else 'on-demand'})" for r in ran})
    accels = sorted({str(r["accelerator"]) for r in ran})
    return {"offer": "; ".join(offers), "accelerator": ", ".join(accels), "trials": len(ran), "of_trials": len(ids),
            "total_usd": float(sum(float(r["cost_usd"] or 0.0) for r in ran)),
            "total_wall_s": float(sum(float(r["wall_s"] or 0.0) for r in ran)), "pruned": partial}


def accuracy_rows(data: SweepData) -> list[dict[str, Any]]:
    """Returns per run: trial label, est/measured memory and time with errors, and whether it is an outlier."""
    idx = dict(zip(data.trials["trial_id"].to_list(), data.trials["trial_index"].to_list(), strict=True)) \
        if data.trials.height else {}
    out = []
    for row in data.accuracy.to_dicts():
        mem_err, time_err = row.get("memory_err_pct"), row.get("time_err_pct")
        label = trial_label(row["trial_id"], idx.get(row["trial_id"]))
        out.append({
            "trial": label,
            "run_id": row["run_id"],
            "status": row["status"],
            "est_memory_gib": row.get("est_memory_gib"),
            "measured_memory_gib": row.get("measured_memory_gib"),
            "memory_err_pct": mem_err,
            "est_wall_s": row.get("est_wall_s"),
            "wall_s": row.get("wall_s"),
            "time_err_pct": time_err,
            "memory_outlier": mem_err is not None and abs(mem_err) > OUTLIER_PCT,
            "time_outlier": time_err is not None and abs(time_err) > OUTLIER_PCT,
        })
    return out


def trial_label(trial_id: str, index: Any) -> str:
    return f"#{index} {trial_id[:8]}" if index is not None else str(trial_id)[:8]
