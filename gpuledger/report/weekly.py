"""The weekly cost report: where the money of one ISO week went, compared with the week before.

Spend by project, owner, accelerator and spot/on-demand (the rows of view `v_weekly_spend`),
week-over-week change, top sweeps, cost per succeeded trial and waste (as `v_runs` defines them),
and budget burn of the week's sweeps that have a budget (as `v_sweep_roi`). A run counts in the
week of its START (UTC), the ISO-week rule of `v_weekly_spend`. The named queries `report_week_*`
read the base tables for the week's half-open range [Monday 00:00, next Monday 00:00)
(`gpuledger.report.weeks.week_bounds`), which DuckDB prunes by zone maps, instead of filtering whole views
by `strftime(started_at, '%G-W%V')`, which computes every run's billing and metric joins first.

A week is the ISO week 'YYYY-Www' (Monday to Sunday, UTC; gpuledger.report.weeks). Without a week: the
last complete week that has data (saying so), else the current week so far; the page lists the
weeks that have data. A week has data when a run started in it or a billed line item's charge period
starts in it (`report_weeks_with_data`): a week the bill charges but no run started is listed, and
its page says what the bill shows rather than "no spend recorded".
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

from gpuledger.report import charts
from gpuledger.report.billed import WeekBilled, load_week_billed, week_billed_section, week_billed_tables
from gpuledger.report.common import (
    ReportFiles,
    default_root,
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
from gpuledger.report.weeks import (
    check_week,
    current_week,
    last_complete_week,
    previous_week,
    week_bounds,
    week_start,
)


def choose_week(weeks_with_data: list[str], now: datetime | date | None = None) -> tuple[str, bool, str]:
    """Returns (week, so_far, why) for a report asked for without a week.

    The last complete ISO week that has data; when no complete week has data, the current week so far
    (so_far=True). `weeks_with_data` are 'YYYY-Www' strings (any order); `why` says which was chosen
    and why, for the page and the terminal.
    """
    last, current = last_complete_week(now), current_week(now)
    complete = sorted((w for w in weeks_with_data if w <= last), reverse=True)
    if complete:
        week = complete[0]
        if week == last:
            return week, False, f"No week given: {week} is the last complete week, and it has data."
        return week, False, (f"No week given: {week} is the last complete week with data "
                             f"({last}, the week before this one, has none).")
    if current in weeks_with_data:
        return current, True, (f"No week given and no complete week has data: {current} so far "
                               f"(the current week, up to now).")
    return current, True, f"No week given and no week has data yet: {current} so far (the current week)."


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
    weeks_with_data: pl.DataFrame = None  # type: ignore[assignment]  # week, runs, cost_usd, billed_line_items,
    #   billed_usd; newest first
    chosen_because: str = ""  # when no week was asked for: which week was chosen and why
    so_far: bool = False  # the current week, not complete yet
    billed: WeekBilled | None = None  # the bill's line items charged in the week (FOCUS exports), if read


def load_week(wh, week: str | None = None, now: datetime | date | None = None) -> WeekData:
    """Returns the data of ISO week `week` and the week before; without `week`, the last complete week
    that has data, else the current week so far (`choose_week`; `now` defaults to now, UTC)."""
    weeks = wh.query_named("report_weeks_with_data")
    why, so_far = "", False
    if week is None:
        week, so_far, why = choose_week(weeks["week"].to_list() if weeks.height else [], now)
    else:
        check_week(week)
        so_far = week == current_week(now)
    start = week_start(week)
    prev = previous_week(week)
    bounds = week_bounds(week)
    spend = wh.query_named("report_week_spend", bounds)
    prev_spend = wh.query_named("report_week_spend", week_bounds(prev))
    sweeps = wh.query_named("report_week_sweeps", bounds)
    waste = wh.query_named("report_week_waste", bounds)
    budgets = wh.query_named("report_week_budgets", bounds)
    return WeekData(week, start, prev, spend, prev_spend, sweeps, waste, budgets, weeks, why, so_far,
                    load_week_billed(wh, week))


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
    bill = data.billed.by_currency if data.billed is not None else None
    usd_bill = bill.filter(pl.col("billing_currency") == "USD") if bill is not None else None
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
        # the bill's line items charged in the week (any currency) and their USD BilledCost (None: no USD line)
        "billed_line_items": int(bill["line_items"].sum()) if bill is not None and bill.height else 0,
        "billed_usd": float(usd_bill["billed_cost"].sum()) if usd_bill is not None and usd_bill.height else None,
    }


def _change(s: dict[str, Any]) -> str:
    if s["prev_cost_usd"] == 0 and s["total_cost_usd"] == 0:
        return "no run either week (the bill's line items: Billed vs estimated)" if s["billed_line_items"] \
            else "no spend either week"
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
             usd(r.get("accrued_usd", r["total_cost_usd"])), pct(r["budget_used_pct"])] for r in data.budgets.to_dicts()]


_BUDGET_HEADERS = ["sweep", "status", "budget", "spent (all weeks)", "so far, running trials included", "budget used"]

HOW_TO_READ = [
    ("Week", "ISO week (Monday–Sunday, UTC). A run counts in the week it STARTED, all of its cost with it."),
    ("Spend", "Σ billing lines of the runs (hours × $/h, price source recorded per line: local rate, "
              "catalog with date, or invoice)."),
    ("GPU-hours", "Σ measured wall-clock × GPUs per run (CPU-only local runs have 0 GPUs)."),
    ("Cost per succeeded trial", "The week's spend ÷ the trials that succeeded in it (failed attempts included "
                                 "in the spend)."),
    ("Waste", "Spend of runs that ended failed, OOM, preempted or cancelled."),
    ("Budget used", "A sweep's spend over all weeks ÷ its budget (budget.max_usd of its spec)."),
    ("Billed vs estimated", "From the cloud's FOCUS billing export ('gpuledger billing ingest'): the line items "
                            "whose charge period starts in the week (UTC). Billed = Σ BilledCost, effective = "
                            "Σ EffectiveCost (commitments amortised), USD only; other currencies are listed, never "
                            "added. Unattributed = charges matching no run by label, resource name or time; credits "
                            "(ChargeCategory Credit) matching no run are a line of their own, never netted into it."),
]


def weekly_document(data: WeekData) -> Document:
    """Returns the weekly cost report as a document (rendered by `weekly_html` and `weekly_markdown`)."""
    s = weekly_summary(data)
    blocks: list = []
    if data.chosen_because:
        blocks.append(Note(data.chosen_because, "info"))
    if data.so_far:
        blocks.append(Note(f"{data.week} is the current week: the numbers are the week so far and will change.",
                           "info"))
    if s["runs"] == 0 and s["billed_line_items"]:
        billed = (f"billed {usd(s['billed_usd'])}" if s["billed_usd"] is not None
                  else "none of them in USD")
        blocks.append(Note(f"No run started in {data.week} ({s['week_start']} – {s['week_end']}), so nothing is "
                           f"estimated for it, but the bill has {s['billed_line_items']} line items charged that week "
                           f"({billed}): see Billed vs estimated.", "warn"))
    elif s["runs"] == 0:
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
    no_runs = "No run either week (the bill's line items: Billed vs estimated)." if s["billed_line_items"] \
        else "No spend either week."
    for key, heading in DIMENSIONS:
        rows = _by(data.spend, data.prev_spend, key)
        blocks.append(Section(heading, [Table([key, *_DIM_HEADERS], _dim_rows(rows, key), numeric=[1, 2, 3, 4, 5],
                                              empty=no_runs)]))
    blocks.append(Section("Top sweeps", [Table(_SWEEP_HEADERS, _sweep_rows(data), numeric=[2, 3, 4, 5, 6],
                                               max_rows=20, empty="No sweep ran this week.")]))
    if data.billed is not None:
        blocks.append(week_billed_section(data.billed))
    blocks.append(Section("Waste", [Table(
        ["reason", "runs", "GPU-hours", "cost"],
        [[w["reason"], w["runs"], hours(w["gpu_hours"]), usd(w["cost_usd"])] for w in data.waste.to_dicts()],
        numeric=[1, 2, 3], empty="No waste this week.")]))
    blocks.append(Section("Budget burn", [Table(_BUDGET_HEADERS, _budget_rows(data), numeric=[2, 3, 4, 5],
                                                empty="No sweep with a budget ran this week.")]))
    blocks.append(Section("Weeks with data", [_weeks_table(data)]))
    blocks.append(Section("How to read this", [Definitions(HOW_TO_READ)]))
    return Document(f"Weekly GPU cost: {data.week}" + (" (so far)" if data.so_far else ""),
                    f"{s['week_start']} – {s['week_end']} (UTC), compared with {data.prev_week}", blocks,
                    "From the views v_weekly_spend, v_runs and v_sweep_roi"
                    + (", and v_billing_attribution and v_run_billed (FOCUS exports)."
                       if data.billed and data.billed.loaded.exports else "."),
                    generated_now())


#: weeks listed in "Weeks with data" (newest first; the CSV weeks.csv has all)
WEEKS_LISTED = 12


def weeks_with_data_text(data: WeekData) -> str:
    """Returns one line naming the weeks that have data (newest first), for the terminal."""
    weeks = data.weeks_with_data["week"].to_list() if data.weeks_with_data.height else []
    if not weeks:
        return "Weeks with data: none yet."
    more = f" and {len(weeks) - WEEKS_LISTED} earlier" if len(weeks) > WEEKS_LISTED else ""
    return f"Weeks with data: {', '.join(weeks[:WEEKS_LISTED])}{more}."


def _weeks_table(data: WeekData) -> Table:
    """The weeks with data: runs and their estimated spend, and (once a bill is ingested) the week's
    billed line items and their USD BilledCost."""
    weeks = data.weeks_with_data.to_dicts()
    billed = any(w.get("billed_line_items") for w in weeks)
    rows = [[w["week"] + (" (this report)" if w["week"] == data.week else ""), w["runs"], usd(w["cost_usd"])]
            + ([w["billed_line_items"], usd(w["billed_usd"])] if billed else [])
            for w in weeks]
    headers = ["week", "runs", "spend"] + (["billed line items", "billed (FOCUS, USD)"] if billed else [])
    return Table(headers, rows, numeric=[1, 2, 3, 4] if billed else [1, 2], max_rows=WEEKS_LISTED,
                 highlight=[i for i, w in enumerate(data.weeks_with_data["week"].to_list()) if w == data.week]
                 if rows else [], empty="No week has data yet: no run and no billed line item has been recorded.")


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
           "budgets": data.budgets, "weeks": data.weeks_with_data}
    if data.billed is not None:
        out.update(week_billed_tables(data.billed))
    for key, _ in DIMENSIONS:
        rows = _by(data.spend, data.prev_spend, key)
        out[f"by-{key}"] = pl.DataFrame(rows, schema={key: pl.String, "cost_usd": pl.Float64,
                                                      "gpu_hours": pl.Float64, "prev_cost_usd": pl.Float64,
                                                      "change_usd": pl.Float64, "change_pct": pl.Float64})
    return out


def write_weekly_report(wh, week: str | None = None, out_dir: str | Path | None = None,
                        now: datetime | date | None = None) -> ReportFiles:
    """Writes the weekly cost report of ISO week `week` (default: `choose_week`); returns its files,
    with `notes` saying which week was chosen and which weeks have data.

    Default place: `reports/weekly/<YYYY-Www>.html` (+ `.md`, + `<YYYY-Www>-csv/`); `out_dir` replaces the folder.
    """
    data = load_week(wh, week, now)
    folder = Path(out_dir) if out_dir is not None else default_root() / "weekly"
    files = write_report(folder, data.week, weekly_document(data), weekly_tables(data))
    files.notes = [n for n in (data.chosen_because, weeks_with_data_text(data)) if n]
    return files
