"""The sweep ROI report: what the best recipe cost, how long it took to find, what was wasted, what
spot saved, and what more or fewer parallel slots would have cost and saved.

Pipeline (each step a function of the one before): `load_sweep(wh, ...) -> SweepData` (warehouse
views) → `sweep_summary(data)` (headline numbers, plain dict) and `what_if_rows(data)` (the
planner's what-if on the MEASURED trial durations) → `sweep_html` / `sweep_markdown` / `sweep_tables`.
`write_sweep_report` does all of it and writes the files.

Every read is a named query (`warehouse/queries/report_sweep_*.sql`) over the views v_sweep_roi
(headline), v_spot_savings, v_waste, v_trial_results (trials table, what-if input), v_trial_timeline
+ v_runs (Gantt, best-so-far curves), v_estimate_accuracy (scatter). Two small facts have no view
and are read from tables: `sweeps` (launcher, max_parallel: the actual K) and the price sources
(`billing` source and rate per sweep, `prices.as_of`), which label where every dollar figure came
from. The report is a `Document` (gpuledger.report.document) rendered to HTML and to markdown.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl

from gpuledger.errors import UserError
from gpuledger.report import charts
from gpuledger.report.common import (
    DEFAULT_ROOT,
    ReportFiles,
    check_name,
    duration,
    generated_now,
    gib,
    num,
    path_name,
    pct,
    usd,
    write_report,
)
from gpuledger.report.document import (
    Card,
    Cards,
    Columns,
    Definitions,
    Document,
    Figure,
    Note,
    Section,
    Table,
)
from gpuledger.report.html import render_html
from gpuledger.report.markdown import render_markdown
from gpuledger.report.serving import serving_section, serving_table
from gpuledger.serving import sweep_points

#: |estimate − measured| / measured beyond which a trial is named on the accuracy charts
OUTLIER_PCT = 25.0
#: parallel slots of the what-if curve (the actual K is added when it is not among them)
_FAILED = ("failed", "oom", "preempted", "cancelled")


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
    serving: Any = None  # gpuledger.serving.SweepPoints of a method: inference sweep, else None
    cloud_equiv: pl.DataFrame  # per trial of a local sweep: the plan's cloud-GPU equivalent (accelerator, gpus,
    #                            cloud, instance_type, spot, wall_s, cost_usd); empty for cloud sweeps


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
        raise UserError("say which sweep: a NAME (its latest sweep) or --sweep-id ID")
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
    dates = wh.query_named("report_sweep_price_dates", p)
    cloud_equiv = wh.query_named("report_sweep_cloud_equiv", p)
    return SweepData(
        roi=roi,
        sweep=sweep_rows[0] if sweep_rows else {},
        trials=trials,
        runs=runs,
        accuracy=accuracy,
        savings=savings[0] if savings else {"paid_usd": 0.0, "on_demand_equiv_usd": 0.0, "saved_usd": 0.0,
                                            "spot_hours": 0.0, "saved_pct": None},
        waste=waste,
        billing_sources=billing,
        price_dates=[str(d) for d in dates["as_of"].to_list()] if dates.height else [],
        serving=sweep_points(wh, sid),
        cloud_equiv=cloud_equiv,
    )


# ------------------------------------------------------------------------------------------ derive


def _params_text(params: Any) -> str:
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
    """Returns where the sweep's dollar figures come from, e.g. 'catalog prices as of 2026-05-20'."""
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
        parts.append("catalog prices" + (f" as of {dates}" if dates else " (date in the plan's price snapshot)"))
    if "invoice" in sources:
        parts.append("invoice lines")
    return "; ".join(parts)


def sweep_summary(data: SweepData) -> dict[str, Any]:
    """Returns the headline numbers (units in the keys) and where they come from.

    Definitions (as in the views): time_to_recipe_s = end of the best run − sweep start;
    cost_to_recipe_usd = Σ cost of the runs that ended by then; time/cost_to_target the same for the
    first run meeting `objective.target`; waste_usd = Σ cost of failed/oom/preempted/cancelled runs;
    spot_saved_usd = Σ spot hours × on-demand $/h − Σ paid for them.
    """
    r = data.roi
    t = data.trials
    best_params = None
    best_index = None
    if r.get("best_trial_id") is not None and t.height:
        row = t.filter(pl.col("trial_id") == r["best_trial_id"])
        if row.height:
            best_params = _params_text(row["params"][0])
            best_index = row["trial_index"][0]
    statuses = t["status"].to_list() if t.height else []
    running = sum(1 for s in statuses if s in ("running", "pending"))
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
        "budget_usd": r.get("budget_usd"),
        "budget_used_pct": r.get("budget_used_pct"),
        "trials": int(r.get("trials") or 0),
        "succeeded": int(r.get("succeeded") or 0),
        "failed": int(r.get("failed") or 0),
        "skipped": int(r.get("skipped") or 0),
        "running": running,
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
        return [], (f"the sweep is still running ({unfinished} trials have no result yet); the what-if replays "
                    f"the measured durations of a finished sweep")
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
    return {r["trial_id"]: r for r in data.cloud_equiv.to_dicts() if r["wall_s"] is not None}


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
    offers = sorted({f"{r['gpus'] or 1} × {r['accelerator']} ({r['cloud']} {r['instance_type']}, "
                     f"{'spot' if r['spot'] else 'on-demand'})" for r in ran})
    accels = sorted({str(r["accelerator"]) for r in ran})
    return {"offer": "; ".join(offers), "accelerator": ", ".join(accels), "trials": len(ran), "of_trials": len(ids),
            "total_usd": float(sum(float(r["cost_usd"] or 0.0) for r in ran)),
            "total_wall_s": float(sum(float(r["wall_s"] or 0.0) for r in ran))}


def accuracy_rows(data: SweepData) -> list[dict[str, Any]]:
    """Returns per run: trial label, est/measured memory and time with errors, and whether it is an outlier."""
    idx = dict(zip(data.trials["trial_id"].to_list(), data.trials["trial_index"].to_list(), strict=True)) \
        if data.trials.height else {}
    out = []
    for row in data.accuracy.to_dicts():
        mem_err, time_err = row.get("memory_err_pct"), row.get("time_err_pct")
        label = _trial_label(row["trial_id"], idx.get(row["trial_id"]))
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


def _trial_label(trial_id: str, index: Any) -> str:
    return f"#{index} {trial_id[:8]}" if index is not None else str(trial_id)[:8]


def _in_unit(seconds: float, div: float) -> str:
    """Returns a time in the report's unit with the digits that unit needs (h: 2, min: 1, s: 0; two
    more below 1 unit, so a short time never reads as 0)."""
    v = seconds / div
    digits = 2 if div >= 3600 else 1 if div >= 60 else 0
    return f"{v:,.{digits + 2 if 0 < abs(v) < 1 else digits}f}"


def _time_axis(max_s: float) -> tuple[float, str]:
    """Returns (divisor, unit) so offsets read naturally: seconds, minutes or hours."""
    if max_s < 180:
        return 1.0, "s"
    if max_s < 3 * 3600:
        return 60.0, "min"
    return 3600.0, "h"


# ------------------------------------------------------------------------------------------ tables


def trials_table_rows(data: SweepData) -> list[list[Any]]:
    """Returns the trials table (one row per trial, launch order) as display strings."""
    rows = []
    for t in data.trials.to_dicts():
        rows.append([
            t.get("trial_index") if t.get("trial_index") is not None else "",
            t["trial_id"],
            _params_text(t.get("params")),
            t.get("status") or "",
            num(t.get("metric_value"), 5),
            duration(t.get("wall_s")),
            usd(t.get("cost_usd")),
            gib(t.get("peak_gpu_mem_gib") if t.get("peak_gpu_mem_gib") is not None else t.get("peak_rss_gib")),
            gib(t.get("est_memory_gib")),
            duration(t.get("est_wall_s")),
            t.get("attempts") or 0,
            t.get("preemptions") or 0,
        ])
    return rows


TRIAL_HEADERS = ["#", "trial", "params", "status", "metric", "wall (measured)", "cost", "peak memory (measured)",
                 "memory (est.)", "time (est.)", "attempts", "preemptions"]
TRIAL_NUMERIC = [0, 4, 5, 6, 7, 8, 9, 10, 11]


def _failure_rows(data: SweepData) -> list[list[Any]]:
    """Returns one row per run that did not succeed: trial, attempt, status, reason, wall-clock, cost."""
    idx = dict(zip(data.trials["trial_id"].to_list(), data.trials["trial_index"].to_list(), strict=True)) \
        if data.trials.height else {}
    return [[_trial_label(r["trial_id"], idx.get(r["trial_id"])), r["attempt"], r["status"], r["reason"] or "—",
             duration(r["wall_s"]), usd(r["cost_usd"])]
            for r in data.runs.to_dicts() if r["status"] != "succeeded"]


def sweep_tables(data: SweepData) -> dict[str, pl.DataFrame]:
    """Returns the report's tables for CSV export (raw values with units in the column names)."""
    s = sweep_summary(data)
    headline = pl.DataFrame([{k: (str(v) if isinstance(v, datetime) else v) for k, v in s.items()}])
    wi, _ = what_if_rows(data)
    wi_df = pl.DataFrame(wi, schema={"parallel": pl.Int64, "time_to_recipe_s": pl.Float64,
                                     "cost_usd": pl.Float64, "pareto": pl.Boolean, "actual": pl.Boolean,
                                     "cloud_time_to_recipe_s": pl.Float64, "cloud_cost_usd": pl.Float64})
    acc = accuracy_rows(data)
    acc_df = pl.DataFrame(acc) if acc else pl.DataFrame(schema={"trial": pl.String})
    tables = {
        "headline": headline,
        "trials": data.trials,
        "runs": data.runs,
        "what-if": wi_df,
        "estimate-accuracy": acc_df,
        "waste": data.waste,
        "cloud-equivalent": data.cloud_equiv,
    }
    if data.serving is not None and data.serving.points:
        tables["serving-points"] = serving_table(data.serving)
    return tables


# ------------------------------------------------------------------------------------------ render


def _short_source(s: dict[str, Any]) -> str:
    """Returns the money source for a card: the whole statement when short, else a pointer to it."""
    src = s["price_source"]
    return src if len(src) <= 60 else "prices: see Money under the cards"


def _headline_cards(s: dict[str, Any]) -> list[Card]:
    src = _short_source(s)
    metric = s["metric_name"] or "metric"
    if s["best_trial_id"] is not None:
        best = Card(f"best {metric} ({s['goal'] or 'minimize'})", num(s["best_metric"], 5),
                    f"measured: final {metric} of trial {_trial_label(s['best_trial_id'], s['best_trial_index'])}")
        ttr = Card("time to recipe", duration(s["time_to_recipe_s"]), "measured: sweep start → best run ended")
        ctr = Card("cost to recipe", usd(s["cost_to_recipe_usd"]), f"runs ended by then; {src}")
    else:
        best = Card(f"best {metric}", "none yet", "no succeeded trial reported the objective metric")
        ttr = Card("time to recipe", "—", "no recipe yet")
        ctr = Card("cost to recipe", "—", "no recipe yet")
    if s["target"] is None:
        ttt = Card("time to target", "no target", "the spec sets no objective.target")
    elif s["time_to_target_s"] is None:
        ttt = Card(f"time to target {num(s['target'], 5)}", "not reached",
                   f"no run met {metric} {'≥' if s['goal'] == 'maximize' else '≤'} {num(s['target'], 5)}")
    else:
        ttt = Card(f"time to target {num(s['target'], 5)}", duration(s["time_to_target_s"]),
                   f"measured; cost by then {usd(s['cost_to_target_usd'])}")
    total = Card("total spend", usd(s["total_cost_usd"]), f"{s['runs']} runs, {s['gpu_hours']:.2f} GPU-h; {src}")
    if s["budget_usd"]:
        total.source += f"; {pct(s['budget_used_pct'])} of the {usd(s['budget_usd'])} budget"
    waste_pct = 100.0 * s["waste_usd"] / s["total_cost_usd"] if s["total_cost_usd"] > 0 else None
    waste = Card("waste", usd(s["waste_usd"]),
                 "failed, OOM, preempted, cancelled runs" + (f" ({pct(waste_pct)} of spend)" if waste_pct else ""))
    if s["spot_hours"] > 0:
        spot = Card("realised spot savings", usd(s["spot_saved_usd"]),
                    f"paid {usd(s['spot_paid_usd'])} vs {usd(s['spot_on_demand_equiv_usd'])} on demand "
                    f"for the same {s['spot_hours']:.2f} h (billed on-demand price)")
    else:
        spot = Card("realised spot savings", usd(0.0), "no spot runs in this sweep")
    trials = Card("trials", f"{s['trials']}",
                  f"{s['succeeded']} succeeded, {s['failed']} failed, {s['running']} pending/running"
                  + (f", {s['skipped']} skipped (budget)" if s["skipped"] else ""))
    return [best, ttr, ctr, ttt, total, waste, spot, trials]


def _cloud_cards(cloud: dict[str, Any] | None, wi: list[dict[str, Any]], s: dict[str, Any]) -> list[Card]:
    """Returns the cards of what the same trials would cost on the cloud GPU the plan would pick (local sweeps)."""
    if cloud is None:
        return []
    of = (f"the {cloud['trials']} trials that ran" if cloud["trials"] == cloud["of_trials"]
          else f"{cloud['trials']} of the {cloud['of_trials']} trials that ran (the others have no cloud plan)")
    cards = [Card(f"same trials on {cloud['accelerator']}", usd(cloud["total_usd"]),
                  f"estimated, not billed: {of} on {cloud['offer']}, the plan's time there "
                  f"({duration(cloud['total_wall_s'])} in all) × the catalog price")]
    actual = next((r for r in wi if r["actual"] and r["cloud_cost_usd"] is not None), None)
    if actual is not None:
        cards.append(Card(f"cost to recipe on {cloud['accelerator']}", usd(actual["cloud_cost_usd"]),
                          f"estimated: the what-if at K={actual['parallel']} on those times; recipe after "
                          f"{duration(actual['cloud_time_to_recipe_s'])} (here: {duration(s['time_to_recipe_s'])})"))
    return cards


def _status_notes(s: dict[str, Any], data: SweepData) -> list[Note]:
    out = []
    if s["trials"] == 0 and s["runs"] == 0:
        out.append(Note("This sweep has no trials and no runs yet: nothing was planned or launched.", "info"))
    elif is_running(s):
        done = data.trials.filter(pl.col("attempts") > 0).height if data.trials.height else 0
        out.append(Note(
            f"This sweep is still running (status {s['status'] or 'unknown'}): {done} of {s['trials']} trials "
            f"have a result. Every number below is as of the last result and will change.", "info"))
    if s["trials"] > 0 and s["succeeded"] == 0 and s["runs"] > 0 and not is_running(s):
        out.append(Note(
            f"No trial succeeded: all {s['runs']} runs ended failed, OOM, preempted or cancelled, so there is "
            f"no recipe. The whole spend ({usd(s['total_cost_usd'])}) is waste; see the trials table for reasons.",
            "bad"))
    return out


def _same_point_groups(rows: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Returns the what-if rows grouped where consecutive Ks give the same (time, cost)."""
    groups: list[list[dict[str, Any]]] = []
    for r in rows:
        key = (r["time_to_recipe_s"], r["cost_usd"])
        if groups and (groups[-1][0]["time_to_recipe_s"], groups[-1][0]["cost_usd"]) == key:
            groups[-1].append(r)
        else:
            groups.append([r])
    return groups


def report_time_unit(data: SweepData, what_if: list[dict[str, Any]]) -> tuple[float, str]:
    """Returns (seconds per unit, unit) of every time axis and time column of one report: chosen from
    the longest time it shows (the sweep's last run end, or the what-if at K=1)."""
    longest = max([0.0, *(float(e) for e in data.runs["end_offset_s"].to_list() if e is not None)]) \
        if data.runs.height else 0.0
    longest = max([longest, *(r["time_to_recipe_s"] for r in what_if)])
    return _time_axis(longest)


WHAT_IF_COLOURS = {"actual": charts.RED, "pareto": charts.BLUE, "dominated": charts.GREY}


def _what_if_chart(wi: list[dict[str, Any]], why: str | None, div: float, unit: str) -> Figure:
    if not wi:
        return Figure(charts.empty_chart("parallelism what-if", "no what-if (see the table)"),
                      f"No what-if: {why}.")
    pts = []
    for group in _same_point_groups(wi):
        ks = [r["parallel"] for r in group]
        label = f"K={ks[0]}" if len(ks) == 1 else f"K={ks[0]}–{ks[-1]}"
        actual = any(r["actual"] for r in group)
        kind = "actual" if actual else ("pareto" if any(r["pareto"] for r in group) else "dominated")
        pts.append(charts.Point(group[0]["time_to_recipe_s"] / div, group[0]["cost_usd"], label,
                                highlight=actual, colour=WHAT_IF_COLOURS[kind]))
    svg = charts.scatter_chart(
        pts, title="parallelism what-if: time vs cost to recipe", x_label=f"time to recipe ({unit})",
        y_label="cost to recipe (USD)", connect=True, label_all=True, x_zero=True, y_zero=True,
        legend=[("this sweep's K", WHAT_IF_COLOURS["actual"]), ("Pareto front", WHAT_IF_COLOURS["pareto"]),
                ("dominated", WHAT_IF_COLOURS["dominated"])])
    c = charts.colour_name
    return Figure(svg, f"Each point is K parallel slots (Ks that give the same point share one label); "
                       f"{c(WHAT_IF_COLOURS['pareto'])} = Pareto front (no other K both faster and cheaper), "
                       f"{c(WHAT_IF_COLOURS['actual'])} = the K this sweep used, {c(WHAT_IF_COLOURS['dominated'])} "
                       f"= dominated. Labels that would overlap are left to the table.")


def _charts(data: SweepData, s: dict[str, Any], wi: list[dict[str, Any]], why: str | None,
            div: float, unit: str) -> dict[str, Figure]:
    runs = data.runs
    out: dict[str, Figure] = {}
    metric = s["metric_name"] or "metric"
    hline = (float(s["target"]), f"target {num(s['target'], 5)}") if s["target"] is not None else None
    pts_t, pts_c = [], []
    for r in runs.to_dicts():
        if r["best_so_far"] is not None:
            pts_t.append((r["end_offset_s"] / div, float(r["best_so_far"])))
            pts_c.append((float(r["cumulative_cost_usd"]), float(r["best_so_far"])))
    out["best_time"] = Figure(charts.step_chart(
        [("best so far", charts.BLUE, pts_t)], title=f"best {metric} so far vs wall-clock",
        x_label=f"time since sweep start ({unit})", y_label=f"best {metric}", hline=hline),
        "Step = the best objective value among runs ended so far"
        + (f"; dashed {charts.colour_name(charts.RED)} = the target." if hline else "."))
    out["best_cost"] = Figure(charts.step_chart(
        [("best so far", charts.TEAL, pts_c)], title=f"best {metric} so far vs spend",
        x_label="cumulative spend (USD)", y_label=f"best {metric}", hline=hline),
        "The same curve against cumulative spend (runs in the order they ended).")
    out["what_if"] = _what_if_chart(wi, why, div, unit)
    acc = accuracy_rows(data)
    ok, off = charts.BLUE, charts.RED
    legend = [(f"within ±{OUTLIER_PCT:g}%", ok), ("off by more", off)]
    mem_pts = [charts.Point(a["est_memory_gib"], a["measured_memory_gib"],
                            f"{a['trial']} ({pct(a['memory_err_pct'], True)})", a["memory_outlier"],
                            off if a["memory_outlier"] else ok)
               for a in acc if a["est_memory_gib"] is not None and a["measured_memory_gib"] is not None]
    out["memory"] = Figure(charts.scatter_chart(
        mem_pts, title="estimated vs measured peak memory", x_label="estimated memory (GiB)",
        y_label="measured peak (GiB)", diagonal=True, legend=legend),
        f"Points on the dashed line were estimated exactly; {charts.colour_name(off)} = off by more than "
        f"{OUTLIER_PCT:g}% (named when there is room; all are in the outliers table).")
    time_pts = [charts.Point(a["est_wall_s"] / div, a["wall_s"] / div, f"{a['trial']} ({pct(a['time_err_pct'], True)})",
                             a["time_outlier"], off if a["time_outlier"] else ok)
                for a in acc if a["est_wall_s"] is not None and a["wall_s"] is not None and a["time_err_pct"] is not None]
    out["time"] = Figure(charts.scatter_chart(
        time_pts, title="estimated vs measured wall-clock", x_label=f"estimated time ({unit})",
        y_label=f"measured time ({unit})", diagonal=True, legend=legend),
        f"Wall-clock of succeeded runs only (a failed run stops early); {charts.colour_name(off)} = off by more "
        f"than {OUTLIER_PCT:g}%.")
    idx = dict(zip(data.trials["trial_id"].to_list(), data.trials["trial_index"].to_list(), strict=True)) \
        if data.trials.height else {}
    bars = []
    for r in runs.to_dicts():
        label = _trial_label(r["trial_id"], idx.get(r["trial_id"]))
        if r["attempt"] and r["attempt"] > 1:
            label += f" try {r['attempt']}"
        bars.append(charts.GanttBar(label, r["start_offset_s"] / div, r["end_offset_s"] / div, r["status"],
                                    bool(r["spot"]), int(r["preemptions"] or 0)))
    out["gantt"] = Figure(charts.gantt_chart(bars, title="trials over time", x_label=f"time since sweep start ({unit})"),
                          "One bar per run (attempt); colour = how it ended (legend above the chart); "
                          "hatched = spot; ✕ = preempted.")
    return out


HOW_TO_READ = [
    ("Sweep start", "The earlier of the sweep's registration and its first run's start (UTC)."),
    ("Time to recipe", "End of the run that produced the best objective metric − sweep start (measured)."),
    ("Cost to recipe", "Σ cost of every run that had ended by that moment (runs still running then are not "
                       "counted here, although they were paid for later)."),
    ("Time / cost to target", "The same, for the first run whose metric met objective.target."),
    ("Total spend", "Σ billing lines of every run: hours × $/h. The source of the price (local rate, "
                    "catalog with its date, invoice) is named on each card."),
    ("Waste", "Σ cost of runs that ended failed, OOM, preempted or cancelled: money that bought no result."),
    ("Realised spot savings", "Σ over spot billing lines of hours × (on-demand $/h − paid $/h), with the "
                              "on-demand price recorded for that instance when it was billed."),
    ("Parallelism what-if", "The measured trial durations and costs, replayed in launch order on K parallel "
                            "slots by the planner's what-if (gpuledger.plan.what_if_curve): the time until the "
                            "best trial would have finished, and what would have been paid by then, including "
                            "trials started in parallel that turned out unnecessary. A K is on the Pareto front "
                            "when no other K is both faster and cheaper. The actual K is the sweep's max_parallel."),
    ("Estimate error", "(estimate − measured) / measured × 100%; positive = overestimate. Points beyond "
                       f"±{OUTLIER_PCT:g}% are named. Memory: peak GPU memory (NVML, device level) for GPU runs, "
                       "peak RSS of the process tree for CPU runs."),
]


def sweep_document(data: SweepData) -> Document:
    """Returns the sweep ROI report as a document (rendered by `sweep_html` and `sweep_markdown`)."""
    s = sweep_summary(data)
    wi, why = what_if_rows(data)
    div, unit = report_time_unit(data, wi)
    figs = _charts(data, s, wi, why, div, unit)
    acc = accuracy_rows(data)
    cloud = cloud_equivalent(data)
    blocks: list = [*_status_notes(s, data), Cards(_headline_cards(s) + _cloud_cards(cloud, wi, s))]
    if _short_source(s) != s["price_source"]:
        blocks.append(Note(f"Money: {s['price_source']}.", "small"))
    if s["best_params"] is not None:
        blocks.append(Note(f"Best recipe: {s['best_params']} (trial {s['best_trial_id']})."))
    if data.serving is not None:
        blocks.append(serving_section(data.serving))
    blocks.append(Section("Progress: best metric over time and money", [Columns([figs["best_time"], figs["best_cost"]])]))
    wi_headers = ["K (parallel slots)", f"time to recipe ({unit})", "cost to recipe", "Pareto", "actual"]
    wi_cloud = bool(wi) and wi[0]["cloud_cost_usd"] is not None
    if wi_cloud:
        wi_headers += [f"{cloud['accelerator']} time (est., {unit})", f"{cloud['accelerator']} cost (est.)"]
    wi_table = Table(
        wi_headers,
        [[r["parallel"], _in_unit(r["time_to_recipe_s"], div), usd(r["cost_usd"]),
          "yes" if r["pareto"] else "", "← this sweep" if r["actual"] else ""]
         + ([_in_unit(r["cloud_time_to_recipe_s"], div), usd(r["cloud_cost_usd"])] if wi_cloud else []) for r in wi],
        numeric=[0, 1, 2, 5, 6], highlight=[i for i, r in enumerate(wi) if r["actual"]], empty=f"No what-if: {why}.")
    wi_blocks: list = [Columns([figs["what_if"], wi_table])]
    if wi_cloud:
        wi_blocks.append(Note(f"The last two columns replay the plan's estimated time and cost of each trial on "
                              f"{cloud['offer']} the same way (estimates, not measurements; nothing was billed "
                              f"there).", "small"))
    blocks.append(Section("Parallelism what-if (from measured durations)", wi_blocks))
    outliers = [a for a in acc if a["memory_outlier"] or a["time_outlier"]]
    out_table = Table(
        ["trial", "memory est.", "memory measured", "memory error", "time est.", "time measured", "time error"],
        [[a["trial"], gib(a["est_memory_gib"]), gib(a["measured_memory_gib"]), pct(a["memory_err_pct"], True),
          duration(a["est_wall_s"]), duration(a["wall_s"]), pct(a["time_err_pct"], True)] for a in outliers],
        numeric=[1, 2, 3, 4, 5, 6], empty=f"No estimate is off by more than {OUTLIER_PCT:g}%.")
    blocks.append(Section(f"Estimated vs measured (outliers: off by more than {OUTLIER_PCT:g}%)",
                          [Columns([figs["memory"], figs["time"]]), out_table]))
    blocks.append(Section("Trials over time", [figs["gantt"]]))
    waste_rows = [[w["reason"], w["runs"], duration(w["wall_s"]), usd(w["cost_usd"])] for w in data.waste.to_dicts()]
    blocks.append(Section("Trials", [
        Table(TRIAL_HEADERS, trials_table_rows(data), numeric=TRIAL_NUMERIC, max_rows=200, markdown_columns=8,
              empty="No trials planned or run yet."),
        Section("Runs that did not succeed", [Table(["trial", "attempt", "status", "reason", "wall-clock", "cost"],
                                                    _failure_rows(data), numeric=[1, 4, 5], max_rows=100,
                                                    empty="Every run succeeded.")], level=3),
        Section("Waste by reason", [Table(["reason", "runs", "wall-clock", "cost"], waste_rows, numeric=[1, 2, 3],
                                          empty="No waste.")], level=3)]))
    blocks.append(Section("How to read this", [Definitions(HOW_TO_READ)]))
    subtitle = (f"sweep {s['sweep_id']} · project {s['project'] or '—'} · owner {s['owner'] or '—'} · "
                f"launcher {s['launcher'] or '—'} · started {_ts(s['started_at'])} UTC · status {s['status'] or '—'}")
    footer = (f"From the warehouse views v_sweep_roi, v_trial_results, v_trial_timeline, v_estimate_accuracy, "
              f"v_spot_savings, v_waste. Money: {s['price_source']}. Times: measured by the agent in each job.")
    return Document(f"Sweep ROI: {s['sweep_name'] or s['sweep_id']}", subtitle, blocks, footer, generated_now())


def _ts(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    return str(value)


def sweep_html(data: SweepData) -> str:
    """Returns the self-contained HTML page of the sweep report."""
    return render_html(sweep_document(data))


def sweep_markdown(data: SweepData) -> str:
    """Returns the markdown version (for a Prefect artifact), capped in size."""
    return render_markdown(sweep_document(data))


def write_sweep_report(wh, name: str | None = None, sweep_id: str | None = None,
                       out_dir: str | Path | None = None) -> ReportFiles:
    """Writes the sweep ROI report; returns its files.

    Default place: `reports/sweeps/<name>/<sweep-id>.html` (+ `.md`, + `<sweep-id>-csv/`); `out_dir`
    replaces the folder. Raises UserError when there is no such sweep (naming the known ones).
    """
    data = load_sweep(wh, name=name, sweep_id=sweep_id)
    sname = data.roi.get("sweep_name") or name or "unnamed"
    folder = Path(out_dir) if out_dir is not None else DEFAULT_ROOT / "sweeps" / path_name(sname)
    return write_report(folder, path_name(data.roi["sweep_id"]), sweep_document(data), sweep_tables(data))


__all__ = [
    "SweepData",
    "accuracy_rows",
    "known_sweep_names",
    "load_sweep",
    "pareto_flags",
    "peak_concurrency",
    "resolve_sweep_id",
    "sweep_document",
    "sweep_html",
    "sweep_markdown",
    "sweep_summary",
    "sweep_tables",
    "what_if_inputs",
    "what_if_rows",
    "write_sweep_report",
]
