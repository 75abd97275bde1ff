"""The sweep ROI report: what the best recipe cost, how long it took to find, what was wasted, what
spot saved, and what more or fewer parallel slots would have cost and saved.

Pipeline (each step a function of the one before): `load_sweep(wh, ...) -> SweepData` (warehouse
views) → `sweep_summary(data)` (headline numbers, plain dict) and `what_if_rows(data)` (the
planner's what-if on the MEASURED trial durations) → `sweep_html` / `sweep_markdown` / `sweep_tables`.
`write_sweep_report` does all of it and writes the files. Reading and deriving live in
`gpuledger.report.sweep_data`; this module turns them into the report's document.

Every read is a named query (`gpuledger/warehouse/sql/queries/report_sweep_*.sql`) over the views v_sweep_roi
(headline), v_spot_savings, v_waste, v_trial_results (trials table, what-if input), v_trial_timeline
+ v_runs (Gantt, best-so-far curves), v_estimate_accuracy (scatter). Two small facts have no view
and are read from tables: `sweeps` (launcher, max_parallel: the actual K) and the price sources
(`billing` source and rate per sweep, `prices.as_of`), which label where every dollar figure came
from. The report is a `Document` (gpuledger.report.document) rendered to HTML and to markdown.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl

from gpuledger.report import charts
from gpuledger.report.adaptive import (
    adaptive_sections,
    adaptive_tables,
    progress_section,
    what_if_section,
)
from gpuledger.report.adaptive import how_to_read as adaptive_how_to_read
from gpuledger.report.billed import sweep_billed_cards, sweep_billed_notes, sweep_billed_table
from gpuledger.report.common import (
    ReportFiles,
    default_root,
    duration,
    generated_now,
    gib,
    num,
    path_name,
    pct,
    usd,
    write_report,
)
from gpuledger.report.curves import curves_section
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
from gpuledger.report.pools import packing_section, pools_section
from gpuledger.report.probes import probes_section
from gpuledger.report.rl_roles import rl_roles_section
from gpuledger.report.serving import serving_section, serving_table
from gpuledger.report.sweep_data import (
    OUTLIER_PCT,
    SweepData,
    accuracy_rows,
    cloud_equivalent,
    is_running,
    known_sweep_names,
    load_sweep,
    params_text,
    pareto_flags,
    peak_concurrency,
    resolve_sweep_id,
    sweep_summary,
    trial_label,
    what_if_inputs,
    what_if_rows,
)


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


def _est_time(t: dict[str, Any], band: dict[str, Any] | None) -> str:
    """The planned wall-clock, with its P10-P90 band when the stored plan has one."""
    if band is None:
        return duration(t.get("est_wall_s"))
    return f"{duration(t.get('est_wall_s'))} ({duration(band['est_wall_s_p10'])}-{duration(band['est_wall_s_p90'])})"


def band_note(data: SweepData) -> Note | None:
    """Returns what the plan's bands said and how they held (None for a plan stored without bands)."""
    from gpuledger.report.sweep_data import band_hold

    b = data.plan_bands or {}
    if not b:
        return None
    conf = (b.get("confidence") or "p50").upper()
    other = "P50" if conf == "P90" else "P90"
    text = (f"The plan's estimate of the whole sweep: {usd(b['total_est_cost_usd'])} (P10 {usd(b['total_cost_usd_p10'])} - "
            f"P90 {usd(b['total_cost_usd_p90'])}); the budget was decided at {conf}: {usd(b['decided_usd'])} "
            f"({other} {usd(b['decided_usd_p50'] if other == 'P50' else b['decided_usd_p90'])} beside).")
    hold = band_hold(data)
    if hold is not None:
        text += (f" Its P10-P90 band of the wall-clock held {hold['inside']} of {hold['trials']} succeeded trials "
                 f"({hold['below']} faster, {hold['above']} slower; bands are built to hold 7-9 in 10, "
                 "docs/accuracy.md).")
    return Note(text, "small")


def trials_table_rows(data: SweepData) -> list[list[Any]]:
    """Returns the trials table (one row per trial, launch order) as display strings."""
    rows = []
    bands = (data.plan_bands or {}).get("trials") or {}
    for t in data.trials.to_dicts():
        rows.append([
            t.get("trial_index") if t.get("trial_index") is not None else "",
            t["trial_id"],
            params_text(t.get("params")),
            t.get("status") or "",
            num(t.get("metric_value"), 5),
            duration(t.get("wall_s")),
            usd(t.get("cost_usd")),
            gib(t.get("peak_gpu_mem_gib") if t.get("peak_gpu_mem_gib") is not None else t.get("peak_rss_gib")),
            gib(t.get("est_memory_gib")),
            _est_time(t, bands.get(t["trial_id"])),
            t.get("attempts") or 0,
            t.get("preemptions") or 0,
        ])
    return rows


TRIAL_HEADERS = ["#", "trial", "params", "status", "metric", "wall (measured)", "cost", "peak memory (measured)",
                 "memory (est.)", "time (est., P10-P90)", "attempts", "preemptions"]
TRIAL_NUMERIC = [0, 4, 5, 6, 7, 8, 9, 10, 11]


#: a failed run's last stderr lines the report shows (its whole output is at its log path)
STDERR_LINES = 3


def _why(r: dict[str, Any]) -> str:
    """Returns a failed run's last stderr lines (joined by ⏎) and its log path, or —."""
    tail = [ln.strip() for ln in str(r.get("stderr_tail") or "").splitlines() if ln.strip()][-STDERR_LINES:]
    text = " ⏎ ".join(ln if len(ln) <= 200 else ln[:200] + "…" for ln in tail)
    if r.get("log_path"):
        text = f"{text} (log {r['log_path']})" if text else f"log {r['log_path']}"
    return text or "—"


def _failure_rows(data: SweepData) -> list[list[Any]]:
    """Returns one row per run that did not succeed: trial, attempt, status, reason, its last stderr lines
    and log path, wall-clock, cost."""
    idx = dict(zip(data.trials["trial_id"].to_list(), data.trials["trial_index"].to_list(), strict=True)) \
        if data.trials.height else {}
    return [[trial_label(r["trial_id"], idx.get(r["trial_id"])), r["attempt"], r["status"], r["reason"] or "—",
             _why(r), duration(r["wall_s"]), usd(r["cost_usd"])]
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
        "billed": sweep_billed_table(data.billed),
    }
    if data.serving is not None and data.serving.points:
        tables["serving-points"] = serving_table(data.serving)
    if data.probes is not None and data.probes.height:
        tables["probes"] = data.probes
    if data.rl_roles is not None and data.rl_roles.height:
        tables["rl_roles"] = data.rl_roles
    if data.rl_cost is not None and data.rl_cost.height:
        tables["rl_cost"] = data.rl_cost
    tables.update(adaptive_tables(data))
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
                    f"measured: final {metric} of trial {trial_label(s['best_trial_id'], s['best_trial_index'])}")
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
                 "failed, OOM, preempted, cancelled runs" + (f" ({pct(waste_pct)} of spend)" if waste_pct else "")
                 + (f"; not the {s['pruned']} pruned trials ({usd(s['pruned_cost_usd'])}): stopping them early is "
                    "the search's saving (see 'Money saved by pruning')" if s["pruned"] else ""))
    if s["spot_hours"] > 0:
        lost = s["spot_preempted_hours"]
        spot = Card("realised spot savings", usd(s["spot_saved_usd"]),
                    f"paid {usd(s['spot_paid_usd'])} vs {usd(s['spot_on_demand_equiv_usd'])} on demand "
                    + (f"for the same {s['spot_hours']:.2f} h" if not lost else
                       f"for the {s['spot_hours'] - lost:.2f} h not lost to preemption (paid too: "
                       f"{usd(s['spot_preempted_paid_usd'])} for {lost:.2f} h of preempted runs)")
                    + " (billed on-demand price)")
    else:
        spot = Card("realised spot savings", usd(0.0), "no spot runs in this sweep")
    trials = Card("trials", f"{s['trials']}",
                  f"{s['succeeded']} succeeded, {s['failed']} failed, {s['running']} pending/running"
                  + (f", {s['pruned']} pruned" if s["pruned"] else "")
                  + (f", {s['not_asked']} not asked by the search" if s["not_asked"] else "")
                  + (f", {s['skipped']} skipped (budget)" if s["skipped"] else ""))
    return [best, ttr, ctr, ttt, total, waste, spot, trials]


def _cloud_cards(cloud: dict[str, Any] | None, wi: list[dict[str, Any]], s: dict[str, Any]) -> list[Card]:
    """Returns the cards of what the same trials would cost on the cloud GPU the plan would pick (local sweeps)."""
    if cloud is None:
        return []
    of = (f"the {cloud['trials']} trials that ran" if cloud["trials"] == cloud["of_trials"]
          else f"{cloud['trials']} of the {cloud['of_trials']} trials that ran (the others have no cloud plan)")
    part = (f"; the {cloud['pruned']} pruned trials for the share of their full run's wall-clock they ran here"
            if cloud.get("pruned") else "")
    cards = [Card(f"same trials on {cloud['accelerator']}", usd(cloud["total_usd"]),
                  f"estimated, not billed: {of} on {cloud['offer']}, the plan's time there "
                  f"({duration(cloud['total_wall_s'])} in all) × the catalog price{part}")]
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
        if s["status"] in (None, "running", "pending"):
            out.append(Note(
                f"This sweep is still running (status {s['status'] or 'unknown'}): {done} of {s['trials']} trials "
                f"have a result. Every number below is as of the last result and will change.", "info"))
        else:
            out.append(Note(
                f"This sweep stopped (status {s['status']}) with {done} of {s['trials']} trials run; the others "
                f"never got a result. Every number below covers the trials that ran; running the sweep again "
                f"continues it.", "warn"))
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


def _what_if_chart(wi: list[dict[str, Any]], div: float, unit: str) -> Figure:
    pts = []
    for group in _same_point_groups(wi):
        ks = [r["parallel"] for r in group]
        label = f"K={ks[0]}" if len(ks) == 1 else f"K={ks[0]}–{ks[-1]}"
        actual = any(r["actual"] for r in group)
        kind = "actual" if actual else ("pareto" if any(r["pareto"] for r in group) else "dominated")
        pts.append(charts.Point(group[0]["time_to_recipe_s"] / div, group[0]["cost_usd"], label,
                                highlight=actual, colour=WHAT_IF_COLOURS[kind]))

    def svg() -> str:  # drawn only for the HTML page (document.Figure)
        return charts.scatter_chart(
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
    # each chart is drawn only when the HTML page is (document.Figure: the markdown has no charts)
    out["best_time"] = Figure(lambda: charts.step_chart(
        [("best so far", charts.BLUE, pts_t)], title=f"best {metric} so far vs wall-clock",
        x_label=f"time since sweep start ({unit})", y_label=f"best {metric}", hline=hline),
        "Step = the best objective value among runs ended so far"
        + (f"; dashed {charts.colour_name(charts.RED)} = the target." if hline else "."))
    out["best_cost"] = Figure(lambda: charts.step_chart(
        [("best so far", charts.TEAL, pts_c)], title=f"best {metric} so far vs spend",
        x_label="cumulative spend (USD)", y_label=f"best {metric}", hline=hline),
        "The same curve against cumulative spend (runs in the order they ended).")
    if wi:  # without a what-if the section says why instead of a chart
        out["what_if"] = _what_if_chart(wi, div, unit)
    acc = accuracy_rows(data)
    ok, off = charts.BLUE, charts.RED
    legend = [(f"within ±{OUTLIER_PCT:g}%", ok), ("off by more", off)]
    mem_pts = [charts.Point(a["est_memory_gib"], a["measured_memory_gib"],
                            f"{a['trial']} ({pct(a['memory_err_pct'], True)})", a["memory_outlier"],
                            off if a["memory_outlier"] else ok)
               for a in acc if a["est_memory_gib"] is not None and a["measured_memory_gib"] is not None]
    out["memory"] = Figure(lambda: charts.scatter_chart(
        mem_pts, title="estimated vs measured peak memory", x_label="estimated memory (GiB)",
        y_label="measured peak (GiB)", diagonal=True, legend=legend),
        f"Points on the dashed line were estimated exactly; {charts.colour_name(off)} = off by more than "
        f"{OUTLIER_PCT:g}% (named when there is room; all are in the outliers table).")
    time_pts = [charts.Point(a["est_wall_s"] / div, a["wall_s"] / div, f"{a['trial']} ({pct(a['time_err_pct'], True)})",
                             a["time_outlier"], off if a["time_outlier"] else ok)
                for a in acc if a["est_wall_s"] is not None and a["wall_s"] is not None and a["time_err_pct"] is not None]
    out["time"] = Figure(lambda: charts.scatter_chart(
        time_pts, title="estimated vs measured wall-clock", x_label=f"estimated time ({unit})",
        y_label=f"measured time ({unit})", diagonal=True, legend=legend),
        f"Wall-clock of succeeded runs only (a failed run stops early); {charts.colour_name(off)} = off by more "
        f"than {OUTLIER_PCT:g}%.")
    idx = dict(zip(data.trials["trial_id"].to_list(), data.trials["trial_index"].to_list(), strict=True)) \
        if data.trials.height else {}
    bars = []
    for r in runs.to_dicts():
        label = trial_label(r["trial_id"], idx.get(r["trial_id"]))
        if r["attempt"] and r["attempt"] > 1:
            label += f" try {r['attempt']}"
        bars.append(charts.GanttBar(label, r["start_offset_s"] / div, r["end_offset_s"] / div, r["status"],
                                    bool(r["spot"]), int(r["preemptions"] or 0)))
    out["gantt"] = Figure(lambda: charts.gantt_chart(bars, title="trials over time", x_label=f"time since sweep start ({unit})"),
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
    ("Billed / effective (FOCUS export)", "From the cloud's FOCUS billing export ('gpuledger billing ingest'): "
                                          "Σ BilledCost and Σ EffectiveCost (commitments amortised) of the USD line "
                                          "items matched to the sweep's runs by label, resource name or time "
                                          "(v_sweep_billed); the card says how many runs the bill covers."),
    ("Waste", "Σ cost of runs that ended failed, OOM, preempted or cancelled: money that bought no result. The "
              "cancelled runs of trials the adaptive search pruned are not waste: they are counted with the "
              "search's savings."),
    ("Realised spot savings", "Σ over spot billing lines of hours × (on-demand $/h − paid $/h), with the "
                              "on-demand price recorded for that instance when it was billed; the lines of a "
                              "run that ended preempted count only as paid (that lost work would not have "
                              "happened on demand)."),
    ("Parallelism what-if", "The measured trial durations and costs, replayed in launch order on K parallel "
                            "slots by the planner's what-if (gpuledger.plan.what_if_curve): the time until the "
                            "best trial would have finished, and what would have been paid by then, including "
                            "trials started in parallel that turned out unnecessary. A K is on the Pareto front "
                            "when no other K is both faster and cheaper. The actual K is the sweep's max_parallel."),
    ("Estimate error", "(estimate − measured) / measured × 100%; positive = overestimate. Points beyond "
                       f"±{OUTLIER_PCT:g}% are named. Memory: peak GPU memory (NVML, device level) for GPU runs, "
                       "peak RSS of the process tree for CPU runs."),
]


def _trial_index(data: SweepData) -> dict[str, Any]:
    """trial_id -> the trial's index in the sweep (the report's trial numbers)."""
    if data.trials is None or not data.trials.height or "trial_index" not in data.trials.columns:
        return {}
    return dict(zip(data.trials["trial_id"].to_list(), data.trials["trial_index"].to_list(), strict=True))


def sweep_document(data: SweepData) -> Document:
    """Returns the sweep ROI report as a document (rendered by `sweep_html` and `sweep_markdown`)."""
    s = sweep_summary(data)
    wi, why = what_if_rows(data)
    div, unit = report_time_unit(data, wi)
    figs = _charts(data, s, wi, why, div, unit)
    acc = accuracy_rows(data)
    cloud = cloud_equivalent(data)
    blocks: list = [*_status_notes(s, data), Cards(_headline_cards(s) + sweep_billed_cards(data.billed)
                                                   + _cloud_cards(cloud, wi, s)), *sweep_billed_notes(data.billed)]
    if _short_source(s) != s["price_source"]:
        blocks.append(Note(f"Money: {s['price_source']}.", "small"))
    if s["best_params"] is not None:
        blocks.append(Note(f"Best recipe: {s['best_params']} (trial {s['best_trial_id']})."))
    if data.serving is not None:
        blocks.append(serving_section(data.serving))
    probes = probes_section(data.probes)
    if probes is not None:
        blocks.append(probes)
    roles = rl_roles_section(data.plan_roles, data.rl_roles, _trial_index(data), data.rl_cost, data.plan_bands)
    if roles is not None:
        blocks.append(roles)
    if data.adaptive is not None:  # tpe/asha: every trial's end on the curves, then the grid and pruning sections
        blocks.append(progress_section(data, data.adaptive, s, div, unit))
        blocks.extend(adaptive_sections(data, s))
    else:
        blocks.append(Section("Progress: best metric over time and money",
                              [Columns([figs["best_time"], figs["best_cost"]])]))
    idx = dict(zip(data.trials["trial_id"].to_list(), data.trials["trial_index"].to_list(), strict=True)) \
        if data.trials.height else {}
    blocks.append(curves_section(data.curves, data.trials.to_dicts() if data.trials.height else [], s,
                                 lambda tid: trial_label(tid, idx.get(tid))))
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
    wi_blocks: list = [Columns([figs["what_if"], wi_table])] if wi else [Note(f"No what-if: {why}.", "small")]
    if wi_cloud:
        wi_blocks.append(Note(f"The last two columns replay the plan's estimated time and cost of each trial on "
                              f"{cloud['offer']} the same way (estimates, not measurements; nothing was billed "
                              f"there).", "small"))
    for extra in (pools_section(data.pools), packing_section(data.runs)):
        if extra is not None:
            blocks.append(extra)
    if data.adaptive is not None and data.adaptive.strategy == "asha":  # pruning depends on K: replay the curves
        blocks.append(what_if_section(data, data.adaptive, s, div, unit))
    else:
        blocks.append(Section("Parallelism what-if (from measured durations)", wi_blocks))
    outliers = [a for a in acc if a["memory_outlier"] or a["time_outlier"]]
    out_table = Table(
        ["trial", "memory est.", "memory measured", "memory error", "time est.", "time measured", "time error"],
        [[a["trial"], gib(a["est_memory_gib"]), gib(a["measured_memory_gib"]), pct(a["memory_err_pct"], True),
          duration(a["est_wall_s"]), duration(a["wall_s"]), pct(a["time_err_pct"], True)] for a in outliers],
        numeric=[1, 2, 3, 4, 5, 6], empty=f"No estimate is off by more than {OUTLIER_PCT:g}%.")
    acc_blocks: list = [Columns([figs["memory"], figs["time"]]), out_table]
    held = band_note(data)
    if held is not None:
        acc_blocks.append(held)
    blocks.append(Section(f"Estimated vs measured (outliers: off by more than {OUTLIER_PCT:g}%)", acc_blocks))
    blocks.append(Section("Trials over time", [figs["gantt"]]))
    waste_rows = [[w["reason"], w["runs"], duration(w["wall_s"]), usd(w["cost_usd"])] for w in data.waste.to_dicts()]
    blocks.append(Section("Trials", [
        Table(TRIAL_HEADERS, trials_table_rows(data), numeric=TRIAL_NUMERIC, max_rows=200, markdown_columns=8,
              empty="No trials planned or run yet."),
        Section("Runs that did not succeed", [Table(["trial", "attempt", "status", "reason", "stderr (last lines), log",
                                                     "wall-clock", "cost"],
                                                    _failure_rows(data), numeric=[1, 5, 6], max_rows=100,
                                                    empty="Every run succeeded.")], level=3),
        Section("Waste by reason", [Table(["reason", "runs", "wall-clock", "cost"], waste_rows, numeric=[1, 2, 3],
                                          empty="No waste.")], level=3)]))
    blocks.append(Section("How to read this", [Definitions(adaptive_how_to_read(data, HOW_TO_READ))]))
    subtitle = (f"sweep {s['sweep_id']} · project {s['project'] or '—'} · owner {s['owner'] or '—'} · "
                f"launcher {s['launcher'] or '—'} · started {_ts(s['started_at'])} UTC · status {s['status'] or '—'}")
    footer = (f"From the warehouse views v_sweep_roi, v_trial_results, v_trial_timeline, v_estimate_accuracy, "
              f"v_spot_savings, v_waste, v_sweep_billed and the objective's points in metrics. Money: {s['price_source']}. Times: measured by the agent in each job.")
    if data.probes is not None and data.probes.height:
        footer += " Probes: v_probes."
    if data.adaptive is not None:
        footer += (" Adaptive sections: the trials' plan rows, the objective's points (metrics) and, where one ran, "
                   "a grid sweep of the same experiment; the ASHA what-if is a simulation over those points.")
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
    folder = Path(out_dir) if out_dir is not None else default_root() / "sweeps" / path_name(sname)
    return write_report(folder, path_name(data.roi["sweep_id"]), sweep_document(data), sweep_tables(data))


__all__ = [
    "SweepData",
    "accuracy_rows",
    "cloud_equivalent",
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
