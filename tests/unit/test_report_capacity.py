"""Capacity report: options compared, cheapest feasible, why others fail; golden markdown."""

from __future__ import annotations

import copy

import pytest
from helpers.report_fixtures import CAPACITY_RESULT, assert_golden

from gpuledger.errors import UserError
from gpuledger.report import capacity_markdown, write_capacity_report


@pytest.mark.slow  # over ~0.5 s alone (a report, warehouse, plan or subprocess): make test runs it, make test-fast does not
def test_markdown_golden():
    md = capacity_markdown(CAPACITY_RESULT)
    assert "| cheapest feasible | 3 × H100 |" in md
    assert "- **T4**: weights need 15.0 GiB per GPU" in md
    assert_golden("report_capacity.md", md)


@pytest.mark.slow  # over ~0.5 s alone (a report, warehouse, plan or subprocess): make test runs it, make test-fast does not
def test_latency_throughput_chart_and_curve_tables(tmp_path):
    files = write_capacity_report(CAPACITY_RESULT, out_dir=tmp_path)
    html = files.html.read_text()
    assert "latency–throughput per accelerator" in html and "<svg" in html
    assert "SLO p95 TPOT 50 ms" in html  # the SLO line's legend entry
    assert "Operating points and why" in html and "Latency–throughput curves" in html
    names = {p.name for p in files.csv}
    assert names == {"options.csv", "curve.csv", "replicas-by-hour.csv"}
    assert "replicas of H100 over the day" in html and "$ per 1M output tokens at the planned load" in html
    assert "API (input included)" in html
    curve = (files.csv[0].parent / "curve.csv").read_text().splitlines()
    assert len(curve) == 1 + 8 and curve[0].startswith("accelerator,gpus_per_replica,concurrency")
    options = (files.csv[0].parent / "options.csv").read_text().splitlines()[0]
    assert "operating_point_concurrency" in options and "curve" not in options.split(",")


@pytest.mark.slow  # over ~0.5 s alone (a report, warehouse, plan or subprocess): make test runs it, make test-fast does not
def test_files_default_path(tmp_path, monkeypatch):
    """Without --out a report goes to reports/ of the project, from any of its subfolders."""
    monkeypatch.delenv("GPULEDGER_REPORTS_DIR")
    (tmp_path / "gpuledger.toml").write_text("[paths]\n")
    (tmp_path / "deep" / "er").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "deep" / "er")
    files = write_capacity_report(CAPACITY_RESULT)
    assert files.html == tmp_path / "reports" / "capacity" / "chat-serving.html"
    html = files.html.read_text()
    assert "Why the others fail" in html and "T4" in html
    assert files.csv[0].name == "options.csv"


def test_no_feasible_option():
    result = copy.deepcopy(CAPACITY_RESULT)
    for o in result["options"]:
        o["feasible"] = False
        o["reason"] = o["reason"] or "p95 TPOT 62 ms > 50 ms"
    result["best"] = None
    result["best_reason"] = "no accelerator meets the targets"
    md = capacity_markdown(result)
    assert "No option meets the targets" in md and "| cheapest feasible option | none |" in md


def test_bad_name_refused(tmp_path):
    result = copy.deepcopy(CAPACITY_RESULT)
    result["spec"]["name"] = "../x"
    with pytest.raises(UserError, match="not valid"):
        write_capacity_report(result, out_dir=tmp_path)


@pytest.mark.slow  # over ~1 s (a whole report, replay, plan or warehouse): make test runs it, make test-fast does not
def test_real_plan_renders(tmp_path, repo_root):
    from gpuledger.capacity import plan_capacity
    from gpuledger.spec import load_spec

    files = write_capacity_report(plan_capacity(load_spec(repo_root / "specs" / "chat-capacity.yaml")), out_dir=tmp_path)
    assert files.html.exists() and "Options compared" in files.markdown.read_text()
    html = files.html.read_text()
    assert html.count("<svg") >= 2 and "SLO p95 TPOT 50 ms" in html
