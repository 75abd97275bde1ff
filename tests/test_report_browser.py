"""Every report opens in headless Chromium: a non-blank screenshot, no console error, no network request.

Skips (with how to enable it) when /usr/bin/chromium is absent; fails instead when CI=true.
"""

from __future__ import annotations

import pytest
from browser import browser
from report_fixtures import CAPACITY_RESULT, build_all_failed, build_running, build_weekly_fixture

from gpuledger.report import write_capacity_report, write_sweep_report, write_weekly_report
from gpuledger.warehouse import Warehouse

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """Writes every kind of report page (full, all-failed, running, weekly, empty week, capacity)."""
    root = tmp_path_factory.mktemp("pages")
    wh_path = root / "ledger.duckdb"
    build_weekly_fixture(wh_path)
    build_all_failed(wh_path)
    build_running(wh_path)
    out = root / "out"
    with Warehouse.open(wh_path, read_only=True) as wh:
        files = {
            "sweep": write_sweep_report(wh, "lora-grid", out_dir=out),
            "all-failed": write_sweep_report(wh, "broken", out_dir=out),
            "running": write_sweep_report(wh, "live", out_dir=out),
            "weekly": write_weekly_report(wh, "2026-W02", out_dir=out),
            "empty-week": write_weekly_report(wh, "2026-W20", out_dir=out),
        }
    files["capacity"] = write_capacity_report(CAPACITY_RESULT, out_dir=out)
    return {k: f.html for k, f in files.items()}


@pytest.fixture(scope="module")
def chromium():
    with browser() as b:
        yield b


@pytest.mark.parametrize("kind", ["sweep", "all-failed", "running", "weekly", "empty-week", "capacity"])
def test_report_renders_offline_without_errors(pages, chromium, kind, tmp_path):
    check = chromium.check(pages[kind], tmp_path / f"{kind}.png")
    assert check.console_errors == [] and check.page_errors == []
    assert check.foreign_requests == [], f"the page asked the network for {check.foreign_requests}"
    assert check.requests == [check.url]
    assert check.screenshot.stat().st_size > 10_000
    # not blank: a white page has grey-level deviation 0 and one colour; ours has text, charts, cards
    assert check.width >= 800 and check.height >= 800
    assert check.pixel_stddev > 10, f"screenshot looks blank (grey-level std {check.pixel_stddev:.1f})"
    assert check.distinct_colours > 50
