"""The weekly report's week filter as a half-open timestamp range (gpuledger.report.weeks.week_bounds) gives the
same answers as the ISO-week rule it replaced (`strftime(ts, '%G-W%V') = week` over whole views, kept in
benchmarks/sql/weekly_strftime/), on a real warehouse whose runs and FOCUS line items sit on the edges:
Sunday 23:59:59(.999999) / Monday 00:00 UTC, ISO week 53 (2020, 2026) and years whose ISO week starts in
the calendar year before (2025-W01 on 2024-12-30) or ends in the one after (2026-W53 on 2027-01-03)."""

from __future__ import annotations

import csv
import math
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from helpers.billing_fixtures import DATA, ingest
from helpers.record_fixtures import example_record, ingest_known

from gpuledger.report import load_week
from gpuledger.report.weekly import weekly_summary
from gpuledger.report.weeks import iso_week, previous_week, week_bounds
from gpuledger.warehouse import Warehouse

OLD = Path(__file__).resolve().parents[2] / "benchmarks" / "sql" / "weekly_strftime"
WEEK_QUERIES = ["report_weeks_with_data", "report_week_spend", "report_week_sweeps", "report_week_waste",
                "report_week_budgets", "report_week_billed", "report_week_unattributed", "report_week_runs_billed"]
US = timedelta(microseconds=1)

# (start, sweep, accelerator, gpus, status, $/h, wall_s): the week of each start is the point
RUNS = [
    (datetime(2026, 1, 4, 23, 59, 59), "a", "A100", 1, "succeeded", 2.0, 3600),        # Sun: 2026-W01
    (datetime(2026, 1, 5) - US, "a", "A100", 2, "oom", 2.0, 60),                        # Sun: 2026-W01
    (datetime(2026, 1, 5), "a", "H100", 1, "succeeded", 4.0, 1800),                     # Mon: 2026-W02
    (datetime(2026, 1, 5, 0, 0, 1), "b", None, 0, "failed", 0.0, 10),                   # Mon: 2026-W02, cpu
    (datetime(2020, 12, 27, 23, 59, 59), "b", "L4", 1, "succeeded", 0.8, 600),          # 2020-W52
    (datetime(2020, 12, 28), "b", "L4", 1, "preempted", 0.8, 900),                      # 2020-W53 (Mon)
    (datetime(2020, 12, 31, 12), "a", "L4", 1, "succeeded", 0.8, 1200),                 # 2020-W53
    (datetime(2021, 1, 3, 23, 59, 59), "c", "A10G", 1, "cancelled", 1.0, 300),          # 2020-W53 (Sun)
    (datetime(2021, 1, 4), "c", "A10G", 1, "succeeded", 1.0, 300),                      # 2021-W01
    (datetime(2024, 12, 29, 23, 59, 59), "c", "A10G", 4, "succeeded", 1.0, 7200),       # 2024-W52
    (datetime(2024, 12, 30), "a", "A10G", 1, "succeeded", 1.0, 3600),                   # 2025-W01 in 2024
    (datetime(2026, 12, 31, 23, 59, 59), "b", "H100", 8, "succeeded", 32.0, 3600),      # 2026-W53
    (datetime(2027, 1, 3, 23, 59, 59), "c", "H100", 1, "failed", 4.0, 120),             # 2026-W53 (Sun)
    (datetime(2027, 1, 4), "c", "H100", 1, "succeeded", 4.0, 120),                      # 2027-W01
]
SWEEPS = {"a": ("alpha", "proj-a", "ann", 50.0), "b": ("beta", "proj-b", "bob", None), "c": ("gamma", None, None, 5.0)}
# FOCUS line items: (charge period start, hours, billed $, tagged run index or None)
LINE_ITEMS = [
    (datetime(2026, 1, 4, 23), 1, 2.10, 0), (datetime(2026, 1, 5), 1, 4.20, 2),
    (datetime(2026, 1, 4, 23, 59, 59), 1, 0.50, None), (datetime(2021, 1, 3, 23), 1, 1.00, 7),
    (datetime(2021, 1, 4), 24, 3.00, None), (datetime(2020, 12, 28), 1, 0.90, 5),
    (datetime(2024, 12, 30), 1, 1.10, 10), (datetime(2027, 1, 3, 23, 59, 59), 1, 0.40, None),
    (datetime(2023, 1, 1, 23, 59, 59), 1, 0.70, None),  # Sun of 2022-W52: a week the bill charges, no run started
]
WEEKS = sorted({iso_week(r[0]) for r in RUNS} | {iso_week(li[0]) for li in LINE_ITEMS})


def _focus_csv(path: Path) -> Path:
    """A FOCUS export with LINE_ITEMS, every other column as in the usage row of the test bill."""
    with (DATA / "gpu_cloud_2026-02.csv").open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    template = next(r for r in rows if r["ChargeCategory"] == "Usage" and r["Tags"])
    out = []
    for i, (start, hours, billed, run) in enumerate(LINE_ITEMS):
        month = start.replace(day=1, hour=0, minute=0, second=0)
        next_month = (month + timedelta(days=32)).replace(day=1)
        tags = (f'{{"gpuledger-sweep": "{RUNS[run][1]}-sweep", "gpuledger-trial": "t{run:02d}"}}'
                if run is not None else '{"team": "ml"}')
        out.append({**template, "BillingPeriodStart": f"{month:%Y-%m-%dT%H:%M:%SZ}",
                    "BillingPeriodEnd": f"{next_month:%Y-%m-%dT%H:%M:%SZ}",
                    "ChargePeriodStart": f"{start:%Y-%m-%dT%H:%M:%SZ}",
                    "ChargePeriodEnd": f"{start + timedelta(hours=hours):%Y-%m-%dT%H:%M:%SZ}",
                    "BilledCost": f"{billed:.2f}", "EffectiveCost": f"{billed:.2f}", "ListCost": f"{billed:.2f}",
                    "ResourceId": f"i-{i:04d}", "ResourceName": f"idle-{i}", "Tags": tags,
                    # untagged: another region, so no run matches it by time either (unattributed)
                    "RegionId": "us-east-1" if run is not None else "eu-west-3"})
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(out)
    return path


@pytest.fixture(scope="module")
def wh(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("weekly-bounds")
    with Warehouse.open(tmp / "ledger.duckdb") as w:
        for key, (name, project, owner, budget) in SWEEPS.items():
            w.register_sweep(sweep_id=f"{key}-sweep", name=name, project=project, owner=owner, budget_usd=budget,
                             objective_metric="eval_loss", started_at="2020-12-01T00:00:00", launcher="skypilot")
        ingest_known(w, [
            example_record(f"run-{i:02d}", f"t{i:02d}", sweep_id=f"{sweep}-sweep", started_at=start, wall_s=wall,
                           status=status, launcher="skypilot", cloud="aws", region="us-east-1", accelerator=accel,
                           gpus=gpus, usd_per_hour=rate, spot=i % 3 == 0, final_metrics={"eval_loss": 1.0 + i / 10})
            for i, (start, sweep, accel, gpus, status, rate, wall) in enumerate(RUNS)])
        ingest(w, _focus_csv(tmp / "edges.csv"))
        yield w


def _canonical(df: pl.DataFrame) -> list[tuple]:
    """Rows as tuples in a fixed order (ties of the queries' ORDER BY may come either way), numbers as floats."""
    def value(v):
        return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else v
    return sorted((tuple(value(v) for v in row) for row in df.iter_rows()), key=repr)


def _same(old: pl.DataFrame, new: pl.DataFrame) -> bool:
    if old.columns != new.columns or old.height != new.height:
        return False
    for a, b in zip(_canonical(old), _canonical(new), strict=True):
        for x, y in zip(a, b, strict=True):
            if isinstance(x, float) and isinstance(y, float):
                if not math.isclose(x, y, rel_tol=1e-12, abs_tol=1e-12):
                    return False
            elif x != y:
                return False
    return True


@pytest.mark.slow  # over ~1 s (a whole report, replay, plan or warehouse): make test runs it, make test-fast does not
@pytest.mark.parametrize("name", WEEK_QUERIES)
def test_range_filter_gives_what_the_iso_week_rule_gave(wh, name):
    weeks = WEEKS + [previous_week(w) for w in WEEKS]
    checked = 0
    for week in weeks:
        old = wh.query((OLD / f"{name}.sql").read_text(), {"week": week} if name != "report_weeks_with_data" else None)
        new = wh.query_named(name, week_bounds(week) if name != "report_weeks_with_data" else None)
        # the same columns too: a copy that fell behind its query (a column added, bill-only weeks) fails here,
        # as benchmarks/warehouse_scale.py stops on it
        assert old.columns == new.columns, f"{name}: {old.columns} vs {new.columns}"
        assert _same(old, new), f"{name} {week}:\nold\n{old}\nnew\n{new}"
        checked += new.height
    assert checked > 0  # the edges do land somewhere


@pytest.mark.slow  # over ~1 s (a whole report, replay, plan or warehouse): make test runs it, make test-fast does not
def test_each_edge_run_counts_in_its_iso_week(wh):
    runs = {w: weekly_summary(load_week(wh, w))["runs"] for w in WEEKS}
    assert runs["2026-W01"] == 2 and runs["2026-W02"] == 2  # Sunday 23:59:59.999999 vs Monday 00:00
    assert runs["2020-W52"] == 1 and runs["2020-W53"] == 3 and runs["2021-W01"] == 1
    assert runs["2024-W52"] == 1 and runs["2025-W01"] == 1  # 2024-12-30 is in ISO year 2025
    assert runs["2026-W53"] == 2 and runs["2027-W01"] == 1  # 2027-01-03 is in ISO year 2026
    assert sum(runs.values()) == len(RUNS)


def test_each_edge_line_item_counts_in_its_iso_week(wh):
    items = {w: int(wh.query_named("report_week_billed", week_bounds(w))["line_items"].sum() or 0) for w in WEEKS}
    assert items["2026-W01"] == 2 and items["2026-W02"] == 1 and items["2020-W53"] == 2
    assert items["2021-W01"] == 1 and items["2025-W01"] == 1 and items["2026-W53"] == 1 and items["2022-W52"] == 1
    assert sum(items.values()) == len(LINE_ITEMS)


def test_week_bounds_are_the_iso_week_half_open():
    assert week_bounds("2020-W53") == {"week_start": datetime(2020, 12, 28), "week_end": datetime(2021, 1, 4)}
    assert week_bounds("2025-W01")["week_start"] == datetime(2024, 12, 30)
    for week in ("1970-W01", "2020-W53", "2026-W53", "9998-W52"):
        b = week_bounds(week)
        assert iso_week(b["week_start"]) == week and iso_week(b["week_end"] - US) == week
        assert iso_week(b["week_start"] - US) != week and iso_week(b["week_end"]) != week
