"""Every report opens in headless Chromium: a non-blank screenshot, no console error, no network request.

Skips (with how to enable it) when /usr/bin/chromium is absent; fails instead when CI=true.
"""

from __future__ import annotations

import pytest
from helpers.billing_fixtures import DATA, billed_runs, ingest
from helpers.browser import browser
from helpers.report_fixtures import (
    CAPACITY_RESULT,
    build_all_failed,
    build_local_demo,
    build_running,
    build_weekly_fixture,
)

from gpuledger.report import write_capacity_report, write_sweep_report, write_weekly_report
from gpuledger.warehouse import Warehouse

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """Writes every kind of report page (full, all-failed, running, local with money, weekly, empty week, capacity)."""
    root = tmp_path_factory.mktemp("pages")
    wh_path = root / "ledger.duckdb"
    build_weekly_fixture(wh_path)
    build_all_failed(wh_path)
    build_running(wh_path)
    build_local_demo(wh_path)
    out = root / "out"
    with Warehouse.open(wh_path, read_only=True) as wh:
        files = {
            "sweep": write_sweep_report(wh, "lora-grid", out_dir=out),
            "all-failed": write_sweep_report(wh, "broken", out_dir=out),
            "running": write_sweep_report(wh, "live", out_dir=out),
            "local": write_sweep_report(wh, "demo-lora", out_dir=out),
            "weekly": write_weekly_report(wh, "2026-W02", out_dir=out),
            "empty-week": write_weekly_report(wh, "2026-W20", out_dir=out),
        }
    files["capacity"] = write_capacity_report(CAPACITY_RESULT, out_dir=out)
    with Warehouse.open(root / "billed.duckdb") as wh:  # a week and a sweep with a FOCUS bill ingested
        billed_runs(wh)
        ingest(wh, DATA / "gpu_cloud_2026-02.csv")
        ingest(wh, DATA / "gpu_cloud_eur_2026-02.csv")
        files["billed-week"] = write_weekly_report(wh, "2026-W06", out_dir=out / "billed")
        files["billed-sweep"] = write_sweep_report(wh, "lora-grid", out_dir=out / "billed")
    return {k: f.html for k, f in files.items()}


@pytest.fixture(scope="module")
def chromium():
    with browser() as b:
        yield b


@pytest.mark.parametrize("kind", ["sweep", "all-failed", "running", "local", "weekly", "empty-week", "capacity",
                                  "billed-week", "billed-sweep"])
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
    # no two texts of a chart overlap as the browser draws them (labels, ticks, legends, titles)
    assert check.text_overlaps == []


def test_overlap_check_sees_overlapping_text(chromium, tmp_path):
    """The overlap check itself: two texts drawn on top of each other are found."""
    page = tmp_path / "overlap.html"
    page.write_text('<!DOCTYPE html><html><body><svg class="chart" viewBox="0 0 200 100"><title>t</title>'
                    '<text x="10" y="50">K=16</text><text x="14" y="50">K=64</text>'
                    '<text x="10" y="90">apart</text></svg></body></html>')
    check = chromium.check(page, tmp_path / "overlap.png")
    assert check.text_overlaps == [("t", "K=16", "K=64")]


def test_crowded_what_if_labels_do_not_collide(chromium, tmp_path):
    """Seven Ks whose points nearly coincide (the old "K=16K=64" case): labels are placed apart or left out."""
    from gpuledger.report import charts
    from gpuledger.report.document import Document, Figure
    from gpuledger.report.html import render_html

    pts = [charts.Point(1.0 + 0.001 * i, 2.0 + 0.001 * i, f"K={k}", k == 4) for i, k in enumerate([1, 2, 4, 8, 16, 32, 64])]
    svg = charts.scatter_chart(pts, title="crowded", x_label="time (h)", y_label="cost (USD)", label_all=True,
                               connect=True)
    page = tmp_path / "crowded.html"
    page.write_text(render_html(Document("crowded", blocks=[Figure(svg, "seven close points")])))
    check = chromium.check(page, tmp_path / "crowded.png")
    assert check.text_overlaps == []
    assert "K=4" in svg  # the highlighted point's label is placed first
