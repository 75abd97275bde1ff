"""The weekly cost report: where the money of one ISO week went, compared with the week before.

Spend by project, owner, accelerator and spot/on-demand (view `v_weekly_spend`), week-over-week
change, top sweeps, cost per succeeded trial and waste (named queries `report_week_*` over the
run-level view `v_runs`, filtered to the week with the same ISO-week rule as `v_weekly_spend`: the week of each
run's START, UTC), and budget burn of the week's sweeps that have a budget (`v_sweep_roi`).

A week is the ISO week 'YYYY-Www' (Monday to Sunday, UTC). Default: the last complete week (the
one before the current week), which is what the Monday-morning deployment reports.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

from gpuledger.errors import UserError
from gpuledger.report import charts
from gpuledger.report.common import (
    DEFAULT_ROOT,
    ReportFiles,
    check_week,
    generated_now,
    hours,
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


def iso_week(d: date) -> str:
    """Returns the ISO week of a date as 'YYYY-Www'."""
    y, w, _ = d.isocalendar()
    return f"{y}-W{w:02d}"


def week_start(week: str) -> date:
    """Returns the Monday of ISO week 'YYYY-Www'; UserError when the week does not exist (e.g. W53)."""
    check_week(week)
    y, w = int(week[:4]), int(week[6:])
    try:
        return date.fromisocalendar(y, w, 1)
    except ValueError:
        raise UserError(f"week {week} does not exist: {y} has fewer ISO weeks") from None


def default_week(today: date | None = None) -> str:
    """Returns the last complete ISO week before `today` (UTC today by default)."""
    today = today or datetime.now(UTC).date()
    return iso_week(today - timedelta(days=7))


@dataclass
class WeekData:
    """What the weekly report shows, as read from the warehouse."""

    week: str
    start: date
    prev_week: str
    spend: pl.DataFrame  # v_weekly_spend rows of the week
    prev_spend: pl.DataFrame  # ... of the week before
    sweeps: pl.DataFrame  # per sweep: runs, succeeded trials, cost, waste, GPU-hours (v_runs)
    waste: pl.DataFrame  # per reason (v_runs)
    budgets: pl.DataFrame  # v_sweep_roi of the week's sweeps with a budget


def load_week(wh, week: str | None = None) -> WeekData:
    """Returns the data of ISO week `week` (default: the last complete week) and the week before."""
    week = week or default_week()
    start = week_start(week)
    prev = iso_week(start - timedelta(days=7))
    spend = wh.query_named("report_week_spend", {"week": week})
    prev_spend = wh.query_named("report_week_spend", {"week": prev})
    sweeps = wh.query_named("report_week_sweeps", {"week": week})
    waste = wh.query_named("report_week_waste", {"week": week})
    budgets = wh.query_named("report_week_budgets", {"week": week})
    return WeekData(week, start, prev, spend, prev_spend, sweeps, waste, budgets)


def _by(spend: pl.DataFrame, prev: pl.DataFrame, key: str) -> list[dict[str, Any]]:
    """Returns rows {key, cost_usd, gpu_hours, prev_cost_usd, change_usd, change_pct} for one dimension."""
    def agg(df: pl.DataFrame) -> dict[Any, tuple[float, float]]:
        if df.height == 0:
            return {}
        g = df.group_by(key).agg(pl.col("cost_usd").sum(), pl.col("gpu_hours").sum())
        return {r[key]: (float(r["cost_usd"] or 0.0), float(r["gpu_hours"] or 0.0)) for r in g.to_dicts()}

    now, before = agg(spend), agg(prev)
    rows = []
    for k in set(now) | set(before):
        c, g = now.get(k, (0.0, 0.0))
        p = before.get(k, (0.0, 0.0))[0]
        label = ("spot" if k else "on-demand") if key == "spot" else str(k)
        rows.append({key: label, "cost_usd": c, "gpu_hours": g, "prev_cost_usd": p, "change_usd": c - p,
                     "change_pct": (100.0 * (c - p) / p) if p > 0 else None})
    rows.sort(key=lambda r: (-r["cost_usd"], -r["prev_cost_usd"], r[key]))
    return rows


def weekly_summary(data: WeekData) -> dict[str, Any]:
    """Returns the week's headline numbers (USD, hours) and its comparison with the week before."""
    total = float(data.spend["cost_usd"].sum()) if data.spend.height else 0.0
    prev = float(data.prev_spend["cost_usd"].sum()) if data.prev_spend.height else 0.0
    spot = float(data.spend.filter(pl.col("spot"))["cost_usd"].sum()) if data.spend.height else 0.0
    succeeded = int(data.sweeps["succeeded_trials"].sum()) if data.sweeps.height else 0
    waste = float(data.waste["cost_usd"].sum()) if data.waste.height else 0.0
    return {
        "week": data.week,
        "week_start": data.start.isoformat(),
        "week_end": (data.start + timedelta(days=6)).isoformat(),
        "total_cost_usd": total,
        "prev_week": data.prev_week,
        "prev_cost_usd": prev,
        "change_usd": total - prev,
        "change_pct": (100.0 * (total - prev) / prev) if prev > 0 else None,
        "gpu_hours": float(data.spend["gpu_hours"].sum()) if data.spend.height else 0.0,
        "runs": int(data.spend["runs"].sum()) if data.spend.height else 0,
        "spot_cost_usd": spot,
        "spot_share_pct": (100.0 * spot / total) if total > 0 else None,
        "succeeded_trials": succeeded,
        "cost_per_succeeded_trial_usd": (total / succeeded) if succeeded else None,
        "waste_usd": waste,
        "waste_pct": (100.0 * waste / total) if total > 0 else None,
    }


def _change(s: dict[str, Any]) -> str:
    if s["prev_cost_usd"] == 0 and s["total_cost_usd"] == 0:
        return "no spend either week"
    if s["prev_cost_usd"] == 0:
        return f"{s['prev_week']}: $0.00 (new spend)"
    return f"{s['prev_week']}: {usd(s['prev_cost_usd'])} → {'+' if s['change_usd'] >= 0 else ''}{usd(s['change_usd'])} " \
           f"({pct(s['change_pct'], True)})"


def _cards(s: dict[str, Any]) -> list[Card]:
    return [
        Card("spend this week", usd(s["total_cost_usd"]), _change(s)),
        Card("GPU-hours", hours(s["gpu_hours"]), f"{s['runs']} runs (measured wall-clock × GPUs)"),
        Card("spot share", pct(s["spot_share_pct"]), f"{usd(s['spot_cost_usd'])} on spot"),
        Card("cost per succeeded trial", usd(s["cost_per_succeeded_trial_usd"]),
             f"{s['succeeded_trials']} trials succeeded this week"),
        Card("waste", usd(s["waste_usd"]),
             "failed, OOM, preempted, cancelled runs" + (f" ({pct(s['waste_pct'])})" if s["waste_pct"] else "")),
    ]


def _dim_rows(rows: list[dict[str, Any]], key: str) -> list[list[Any]]:
    return [[r[key], usd(r["cost_usd"]), hours(r["gpu_hours"]), usd(r["prev_cost_usd"]),
             ("+" if r["change_usd"] >= 0 else "") + usd(r["change_usd"]), pct(r["change_pct"], True)]
            for r in rows]


_DIM_HEADERS = ["this week", "GPU-hours", "week before", "change", "change %"]
DIMENSIONS = (("project", "Spend by project"), ("owner", "Spend by owner"),
              ("accelerator", "Spend by accelerator"), ("spot", "Spot vs on-demand"))


def _sweep_rows(data: WeekData) -> list[list[Any]]:
    return [[r["sweep_name"] or r["sweep_id"] or "(no sweep)", r["project"] or "unattributed", r["runs"],
             r["succeeded_trials"], usd(r["cost_usd"]),
             usd(r["cost_usd"] / r["succeeded_trials"]) if r["succeeded_trials"] else "—", usd(r["waste_usd"])]
            for r in data.sweeps.to_dicts()]


_SWEEP_HEADERS = ["sweep", "project", "runs", "succeeded trials", "cost", "cost / succeeded trial", "waste"]


def _budget_rows(data: WeekData) -> list[list[Any]]:
    return [[r["sweep_name"] or r["sweep_id"], r["status"] or "—", usd(r["budget_usd"]), usd(r["total_cost_usd"]),
             pct(r["budget_used_pct"])] for r in data.budgets.to_dicts()]


_BUDGET_HEADERS = ["sweep", "status", "budget", "spent (all weeks)", "budget used"]

HOW_TO_READ = [
    ("Week", "ISO week (Monday–Sunday, UTC). A run counts in the week it STARTED, all of its cost with it."),
    ("Spend", "Σ billing lines of the runs (hours × $/h, price source recorded per line: local rate, "
              "catalog with date, or invoice)."),
    ("GPU-hours", "Σ measured wall-clock × GPUs per run (CPU-only local runs have 0 GPUs)."),
    ("Cost per succeeded trial", "The week's spend ÷ the trials that succeeded in it (failed attempts included "
                                 "in the spend)."),
    ("Waste", "Spend of runs that ended failed, OOM, preempted or cancelled."),
    ("Budget used", "A sweep's spend over all weeks ÷ its budget (budget.max_usd of its spec)."),
]


def weekly_document(data: WeekData) -> Document:
    """Returns the weekly cost report as a document (rendered by `weekly_html` and `weekly_markdown`)."""
    s = weekly_summary(data)
    blocks: list = []
    if s["runs"] == 0:
        blocks.append(Note(f"No spend recorded in {data.week} ({s['week_start']} – {s['week_end']}): no run "
                           f"started that week. {_change(s)}.", "info"))
    blocks.append(Cards(_cards(s)))
    if s["runs"]:
        by_project = _by(data.spend, data.prev_spend, "project")
        by_accel = _by(data.spend, data.prev_spend, "accelerator")
        blocks.append(Columns([
            Figure(charts.bar_chart([(r["project"], r["cost_usd"]) for r in by_project if r["cost_usd"] > 0],
                                    title="spend by project", value_label="USD this week", fmt=usd),
                   "Spend by project this week."),
            Figure(charts.bar_chart([(r["accelerator"], r["cost_usd"]) for r in by_accel if r["cost_usd"] > 0],
                                    title="spend by accelerator", value_label="USD this week", fmt=usd,
                                    colour=charts.ORANGE),
                   "Spend by accelerator this week ('cpu' = local CPU runs)."),
        ]))
    for key, heading in DIMENSIONS:
        rows = _by(data.spend, data.prev_spend, key)
        blocks.append(Section(heading, [Table([key, *_DIM_HEADERS], _dim_rows(rows, key), numeric=[1, 2, 3, 4, 5],
                                              empty="No spend either week.")]))
    blocks.append(Section("Top sweeps", [Table(_SWEEP_HEADERS, _sweep_rows(data), numeric=[2, 3, 4, 5, 6],
                                               max_rows=20, empty="No sweep ran this week.")]))
    blocks.append(Section("Waste", [Table(
        ["reason", "runs", "GPU-hours", "cost"],
        [[w["reason"], w["runs"], hours(w["gpu_hours"]), usd(w["cost_usd"])] for w in data.waste.to_dicts()],
        numeric=[1, 2, 3], empty="No waste this week.")]))
    blocks.append(Section("Budget burn", [Table(_BUDGET_HEADERS, _budget_rows(data), numeric=[2, 3, 4],
                                                empty="No sweep with a budget ran this week.")]))
    blocks.append(Section("How to read this", [Definitions(HOW_TO_READ)]))
    return Document(f"Weekly GPU cost: {data.week}",
                    f"{s['week_start']} – {s['week_end']} (UTC), compared with {data.prev_week}", blocks,
                    "From the views v_weekly_spend, v_runs and v_sweep_roi.",
                    generated_now())


def weekly_html(data: WeekData) -> str:
    """Returns the self-contained HTML page of the weekly cost report."""
    return render_html(weekly_document(data))


def weekly_markdown(data: WeekData) -> str:
    """Returns the markdown version (for a Prefect artifact), capped in size."""
    return render_markdown(weekly_document(data))


def weekly_tables(data: WeekData) -> dict[str, pl.DataFrame]:
    """Returns the report's tables for CSV export."""
    s = weekly_summary(data)
    out = {"headline": pl.DataFrame([s]), "spend": data.spend, "sweeps": data.sweeps, "waste": data.waste,
           "budgets": data.budgets}
    for key, _ in DIMENSIONS:
        rows = _by(data.spend, data.prev_spend, key)
        out[f"by-{key}"] = pl.DataFrame(rows, schema={key: pl.String, "cost_usd": pl.Float64,
                                                      "gpu_hours": pl.Float64, "prev_cost_usd": pl.Float64,
                                                      "change_usd": pl.Float64, "change_pct": pl.Float64})
    return out


def write_weekly_report(wh, week: str | None = None, out_dir: str | Path | None = None) -> ReportFiles:
    """Writes the weekly cost report of ISO week `week` (default: the last complete week); returns its files.

    Default place: `reports/weekly/<YYYY-Www>.html` (+ `.md`, + `<YYYY-Www>-csv/`); `out_dir` replaces the folder.
    """
    data = load_week(wh, week)
    folder = Path(out_dir) if out_dir is not None else DEFAULT_ROOT / "weekly"
    return write_report(folder, data.week, weekly_document(data), weekly_tables(data))
