"""Weekly cost report: spend by dimension, week over week, top sweeps, waste, budget burn, empty weeks."""

from __future__ import annotations

from datetime import date

import pytest
from helpers.report_fixtures import assert_golden, build_weekly_fixture
from helpers.warehouse_template import fresh_warehouse

from gpuledger.errors import UserError
from gpuledger.report import MARKDOWN_MAX_CHARS, load_week, weekly_markdown, write_weekly_report
from gpuledger.report.weekly import choose_week, weekly_summary
from gpuledger.report.weeks import check_week, last_complete_week, previous_week, week_end
from gpuledger.warehouse import Warehouse


@pytest.fixture(scope="module")
def wh_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("weekly") / "ledger.duckdb"
    build_weekly_fixture(path)
    return path


@pytest.fixture
def wh(wh_path):
    with Warehouse.open(wh_path, read_only=True) as w:
        yield w


def test_week_numbers_match_hand_arithmetic(wh):
    s = weekly_summary(load_week(wh, "2026-W02"))
    # W02: lora-grid $4.45 + eval-sweep 1 h x $4.00 = $8.45; W01: eval-sweep 2 h x $4.00 = $8.00.
    assert s["total_cost_usd"] == pytest.approx(8.45)
    assert s["prev_cost_usd"] == pytest.approx(8.00)
    assert s["change_usd"] == pytest.approx(0.45)
    assert s["change_pct"] == pytest.approx(100 * 0.45 / 8.00)
    # GPU-hours: 1 + 0.5 + 0.25 + 1.5 + 1.5 + 1 = 5.75; spot: r1 $0.20.
    assert s["gpu_hours"] == pytest.approx(5.75)
    assert s["spot_cost_usd"] == pytest.approx(0.20)
    # succeeded trials: 4 (lora-grid) + 1 (eval-sweep) -> $8.45 / 5 = $1.69; waste: the OOM run, $0.25.
    assert s["succeeded_trials"] == 5
    assert s["cost_per_succeeded_trial_usd"] == pytest.approx(8.45 / 5)
    assert s["waste_usd"] == pytest.approx(0.25)


def test_markdown_golden_and_sections(wh):
    md = weekly_markdown(load_week(wh, "2026-W02"))
    assert "| search | $4.00 | 1.00 h | $8.00 | -$4.00 | -50.0% |" in md
    assert "| eval-sweep | succeeded | $20.00 | $12.00 | $12.00 | 60.0% |" in md  # budget burn over all weeks (none running)
    assert len(md) <= MARKDOWN_MAX_CHARS
    assert_golden("report_weekly.md", md)


def test_empty_week_is_a_clear_page(wh, tmp_path):
    files = write_weekly_report(wh, "2026-W10", out_dir=tmp_path)
    md = files.markdown.read_text()
    assert "No spend recorded in 2026-W10" in md and "| spend this week | $0.00 |" in md
    assert "No spend recorded" in files.html.read_text()


def test_empty_warehouse_week(tmp_path):
    with Warehouse.open(fresh_warehouse(tmp_path / "w.duckdb")) as w:
        files = write_weekly_report(w, "2026-W01", out_dir=tmp_path / "out")
    assert files.html.name == "2026-W01.html"
    assert "no spend either week" in files.markdown.read_text()


def test_default_path_and_week(wh, tmp_path, monkeypatch):
    """Without --out: reports/ of the project (the project file's paths.reports_dir), from a subfolder."""
    monkeypatch.delenv("GPULEDGER_REPORTS_DIR")
    (tmp_path / "gpuledger.toml").write_text('[paths]\nreports_dir = "out/reports"\n')
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    files = write_weekly_report(wh, "2026-W02")
    assert files.html == tmp_path / "out" / "reports" / "weekly" / "2026-W02.html"
    assert {p.name for p in files.csv} >= {"by-project.csv", "sweeps.csv", "budgets.csv"}
    assert last_complete_week(date(2026, 1, 12)) == "2026-W02"  # Monday of W03 -> the week before


@pytest.mark.slow  # over ~0.5 s alone (a report, warehouse, plan or subprocess): make test runs it, make test-fast does not
def test_without_week_the_last_complete_week_with_data(wh, tmp_path):
    # The fixture has runs in 2026-W01 and 2026-W02. On Tuesday of W04, W03 (the last complete week) is
    # empty, so the report takes W02 and says so; the weeks with data are named.
    files = write_weekly_report(wh, out_dir=tmp_path, now=date(2026, 1, 20))
    assert files.html.name == "2026-W02.html"
    assert files.notes == ["No week given: 2026-W02 is the last complete week with data (2026-W03, the week "
                           "before this one, has none).", "Weeks with data: 2026-W02, 2026-W01."]
    md = files.markdown.read_text()
    assert "> No week given: 2026-W02 is the last complete week with data" in md
    assert "| 2026-W02 (this report) | 6 | $8.45 |" in md and "| 2026-W01 | 1 | $8.00 |" in md
    assert "(so far)" not in md
    # On Monday of W03, W02 is the last complete week itself.
    files = write_weekly_report(wh, out_dir=tmp_path, now=date(2026, 1, 12))
    assert files.html.name == "2026-W02.html" and "is the last complete week, and it has data" in files.notes[0]


def test_without_week_and_no_complete_week_the_current_week_so_far(wh, tmp_path):
    # On Wednesday 2025-12-31 (in 2026-W01) no complete week has data: the current week so far.
    files = write_weekly_report(wh, out_dir=tmp_path, now=date(2025, 12, 31))
    assert files.html.name == "2026-W01.html"
    md = files.markdown.read_text()
    assert md.startswith("# Weekly GPU cost: 2026-W01 (so far)")
    assert "no complete week has data: 2026-W01 so far" in files.notes[0]
    assert "the numbers are the week so far" in md


def test_choose_week_rules():
    assert choose_week([], date(2026, 3, 4)) == ("2026-W10", True, "No week given and no week has data yet: "
                                                                   "2026-W10 so far (the current week).")
    # data only in the future (clock skew) is not a complete week: the current week so far
    assert choose_week(["2026-W12"], date(2026, 3, 4))[:2] == ("2026-W10", True)
    # across a year boundary: 2025-W52 is before 2026-W01 as text and as weeks
    assert choose_week(["2025-W52", "2025-W40"], date(2026, 1, 14))[:2] == ("2025-W52", False)


def test_empty_warehouse_without_week(tmp_path):
    with Warehouse.open(fresh_warehouse(tmp_path / "w.duckdb")) as w:
        files = write_weekly_report(w, out_dir=tmp_path / "out", now=date(2026, 3, 4))
    assert files.html.name == "2026-W10.html"
    assert files.notes[-1] == "Weeks with data: none yet."
    assert "No week has data yet" in files.markdown.read_text()


def test_week_arithmetic():
    assert previous_week("2026-W01") == "2025-W52" and week_end("2026-W01") == date(2026, 1, 5)
    assert check_week("2026-W53") == "2026-W53"  # 2026 has 53 ISO weeks, 2025 does not


@pytest.mark.parametrize("week", ["2026-W54", "2026-w02", "26-W02", "2026-W00", "2026-W02/../x", "2025-W53"])
def test_bad_week_is_a_user_error(wh, week):
    with pytest.raises(UserError, match="week"):
        load_week(wh, week)
