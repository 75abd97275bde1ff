"""Sweep ROI report: headline numbers against hand arithmetic, partial data, paths, markdown limits, golden."""

from __future__ import annotations

import dataclasses
import os

import pytest
from helpers.report_fixtures import (
    LOCAL_TRIALS,
    SWEEP_ID,
    assert_golden,
    build_all_failed,
    build_empty_sweep,
    build_local_demo,
    build_roi_fixture,
    build_running,
)
from helpers.warehouse_template import fresh_warehouse

from gpuledger.errors import UserError
from gpuledger.report import MARKDOWN_MAX_CHARS, load_sweep, sweep_markdown, sweep_summary, write_sweep_report
from gpuledger.report.markdown import cap_markdown, md_table
from gpuledger.report.sweep import accuracy_rows, pareto_flags, peak_concurrency, what_if_inputs, what_if_rows
from gpuledger.warehouse import Warehouse


@pytest.fixture(scope="module")
def wh_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("roi") / "ledger.duckdb"
    build_roi_fixture(path)
    return path


@pytest.fixture
def wh(wh_path):
    with Warehouse.open(wh_path, read_only=True) as w:
        yield w


def test_headline_numbers_match_hand_arithmetic(wh):
    s = sweep_summary(load_sweep(wh, "lora-grid"))
    # Best: minimize eval_loss over succeeded runs: r0 1.30, r1 1.10, r3 1.05, r4 1.08 -> r3 (trial #3).
    assert s["best_trial_id"] == "dddd33333333" and s["best_metric"] == pytest.approx(1.05)
    assert s["best_params"] == "learning_rate=0.0001, lora_r=64"
    # Time to recipe: r3 ends 10:45 + 5400 s = 12:15; sweep start 10:00 -> 2 h 15 min = 8100 s.
    assert s["time_to_recipe_s"] == pytest.approx(8100.0)
    # Cost to recipe: runs ended by 12:15 = r0 (11:00) $1.00 + r1 (10:30) 0.5 h x $0.40 = $0.20
    #   + r2 (10:45) 0.25 h x $1.00 = $0.25 + r3 (12:15) 1.5 h x $1.00 = $1.50 -> $2.95 (r4 ends 12:30: not yet).
    assert s["cost_to_recipe_usd"] == pytest.approx(1.00 + 0.20 + 0.25 + 1.50)
    # Target 1.20: the first run at or below it is r1 (1.10), ended 10:30 -> 1800 s; cost by then r1 only = $0.20.
    assert s["time_to_target_s"] == pytest.approx(1800.0)
    assert s["cost_to_target_usd"] == pytest.approx(0.20)
    # Total: 1.00 + 0.20 + 0.25 + 1.50 + 1.50 = $4.45.
    assert s["total_cost_usd"] == pytest.approx(4.45)
    # Waste: the OOM run r2: 0.25 h x $1.00 = $0.25.
    assert s["waste_usd"] == pytest.approx(0.25)
    # Spot savings: r1 spot 0.5 h at $0.40 vs on-demand $1.00 -> paid $0.20, on-demand $0.50, saved $0.30.
    assert s["spot_paid_usd"] == pytest.approx(0.20)
    assert s["spot_on_demand_equiv_usd"] == pytest.approx(0.50)
    assert s["spot_saved_usd"] == pytest.approx(0.30)
    # 5 trials: 4 succeeded, 1 failed (oom); budget $10 -> 44.5 % used.
    assert (s["trials"], s["succeeded"], s["failed"], s["running"]) == (5, 4, 1, 0)
    assert s["budget_used_pct"] == pytest.approx(44.5)
    assert s["price_source"] == "catalog prices as of 2026-01-02 (skypilot-catalog)"  # the date and the basis


def test_headline_numbers_appear_in_markdown_with_units(wh):
    md = sweep_markdown(load_sweep(wh, "lora-grid"))
    for text in ("| time to recipe | 2 h 15 min |", "| cost to recipe | $2.95 |", "| total spend | $4.45 |",
                 "| waste | $0.25 |", "| realised spot savings | $0.30 |", "| time to target 1.2 | 30 min 00 s |",
                 "catalog prices as of 2026-01-02 (skypilot-catalog)"):
        assert text in md


def test_money_names_the_basis_of_each_price_the_plan_used(wh):
    basis = ["AWS list price from the SkyPilot catalog cache, less your 20% discount (gpuledger.toml discount_pct)",
             "your price for p5.48xlarge in gpuledger.toml"]
    data = dataclasses.replace(load_sweep(wh, "lora-grid"), price_sources=basis)
    md = sweep_markdown(data)
    assert f"Money: catalog prices as of 2026-01-02 ({'; '.join(basis)})." in md  # too long for a card: a note
    assert "prices: see Money under the cards" in md


def test_what_if_uses_measured_durations_and_marks_actual_k(wh):
    data = load_sweep(wh, "lora-grid")
    durations, costs, target, ids = what_if_inputs(data)
    assert ids == ["aaaa00000000", "bbbb11111111", "cccc22222222", "dddd33333333", "eeee44444444"]
    assert durations == pytest.approx([3600.0, 1800.0, 900.0, 5400.0, 5400.0])  # seconds
    assert costs == pytest.approx([1.00, 0.20, 0.25, 1.50, 1.50])
    assert target == 3
    rows, why = what_if_rows(data)
    assert why is None
    by_k = {r["parallel"]: r for r in rows}
    # K=1: all in order; trial 3 ends at 1 + 0.5 + 0.25 + 1.5 = 3.25 h; trials 0-3 started by then: $2.95.
    assert by_k[1]["time_to_recipe_s"] == pytest.approx(3.25 * 3600)
    assert by_k[1]["cost_usd"] == pytest.approx(2.95)
    # K=2 (the sweep's max_parallel): slot A runs t0 (0-1), slot B t1 (0-0.5), t2 (0.5-0.75), t3 (0.75-2.25):
    # the replay gives the measured 2 h 15 min; t4 starts at 1.0 < 2.25, so it is paid: $4.45.
    assert by_k[2]["time_to_recipe_s"] == pytest.approx(2.25 * 3600)
    assert by_k[2]["cost_usd"] == pytest.approx(4.45)
    assert by_k[2]["actual"] and sum(r["actual"] for r in rows) == 1
    # K=1 is cheapest, K=4 fastest: both on the front; K=2 is dominated by K=4; K=8.. repeat K=4 with more slots.
    assert [r["parallel"] for r in rows if r["pareto"]] == [1, 4]
    times = [r["time_to_recipe_s"] for r in rows]
    assert all(r["cloud_cost_usd"] is None for r in rows)  # a cloud sweep has no cloud equivalent
    assert times == sorted(times, reverse=True)
    assert peak_concurrency(data.runs) == 2


def test_pareto_flags():
    assert pareto_flags([(3, 1), (2, 2), (2, 3), (1, 3), (1, 3)]) == [True, True, False, True, False]


def test_estimate_outliers_named(wh):
    rows = {r["trial"]: r for r in accuracy_rows(load_sweep(wh, "lora-grid"))}
    # #2: est 14 GiB vs measured 20 GiB -> (14 - 20) / 20 = -30 %; #3: est 3000 s vs 5400 s -> -44.4 %.
    assert rows["#2 cccc2222"]["memory_err_pct"] == pytest.approx(-30.0)
    assert rows["#2 cccc2222"]["memory_outlier"]
    assert rows["#3 dddd3333"]["time_err_pct"] == pytest.approx(100 * (3000 - 5400) / 5400)
    assert rows["#3 dddd3333"]["time_outlier"] and not rows["#3 dddd3333"]["memory_outlier"]
    assert not any(r["memory_outlier"] or r["time_outlier"] for k, r in rows.items() if k.startswith(("#0", "#4")))


def test_markdown_golden(wh):
    assert_golden("report_sweep.md", sweep_markdown(load_sweep(wh, "lora-grid")))


@pytest.mark.slow  # over ~1 s (a whole report, replay, plan or warehouse): make test runs it, make test-fast does not
def test_default_paths_and_files(wh, tmp_path, monkeypatch):
    """Without --out: reports/sweeps/NAME/ of the project (here GPULEDGER_REPORTS_DIR, tests/conftest.py)."""
    from gpuledger import settings

    monkeypatch.chdir(tmp_path)
    files = write_sweep_report(wh, "lora-grid")
    assert files.html == settings.current().reports_dir / "sweeps" / "lora-grid" / f"{SWEEP_ID}.html"
    assert files.markdown.name == f"{SWEEP_ID}.md"
    assert {p.name for p in files.csv} == {"headline.csv", "trials.csv", "runs.csv", "what-if.csv",
                                           "estimate-accuracy.csv", "waste.csv", "cloud-equivalent.csv", "billed.csv"}
    html = files.html.read_text()
    assert "<script" not in html.lower() and "http://" not in html.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in html
    out = write_sweep_report(wh, sweep_id=SWEEP_ID, out_dir=tmp_path / "elsewhere")
    assert out.html == tmp_path / "elsewhere" / f"{SWEEP_ID}.html"
    assert "trial_id" in out.csv[1].read_text().splitlines()[0]


def test_unknown_sweep_lists_known_names(wh):
    with pytest.raises(UserError, match=r"no sweep called 'nope'.*known sweeps: lora-grid"):
        load_sweep(wh, "nope")
    with pytest.raises(UserError, match="recent sweep ids: lora-grid-0123abcd"):
        load_sweep(wh, sweep_id="nope-12345678")
    with pytest.raises(UserError, match=r"not valid.*\[a-z0-9-\]\+"):
        load_sweep(wh, "../../etc")


def test_empty_warehouse_says_none_yet(tmp_path):
    with Warehouse.open(fresh_warehouse(tmp_path / "w.duckdb")) as w, pytest.raises(UserError, match="none yet"):
        write_sweep_report(w, "lora-grid", out_dir=tmp_path)


@pytest.mark.slow  # over ~1 s (a whole report, replay, plan or warehouse): make test runs it, make test-fast does not
def test_all_failed_sweep_gives_a_clear_page(tmp_path):
    build_all_failed(tmp_path / "w.duckdb")
    with Warehouse.open(tmp_path / "w.duckdb", read_only=True) as w:
        data = load_sweep(w, "broken")
        s = sweep_summary(data)
        assert s["best_trial_id"] is None and s["waste_usd"] == pytest.approx(s["total_cost_usd"])
        # 120 s + 60 s at $1.00/h = $0.05, all of it waste
        assert s["total_cost_usd"] == pytest.approx(180 / 3600)
        rows, why = what_if_rows(data)
        assert rows == [] and "no succeeded trial" in why
        files = write_sweep_report(w, "broken", out_dir=tmp_path / "out")
    md = files.markdown.read_text()
    assert "No trial succeeded" in md and "| best eval_loss | none yet |" in md
    assert "No trial succeeded" in files.html.read_text()


@pytest.mark.slow  # over ~1 s (a whole report, replay, plan or warehouse): make test runs it, make test-fast does not
def test_running_sweep_gives_a_clear_page(tmp_path):
    build_running(tmp_path / "w.duckdb")
    with Warehouse.open(tmp_path / "w.duckdb", read_only=True) as w:
        data = load_sweep(w, "live")
        s = sweep_summary(data)
        assert s["running"] == 2 and s["ended_at"] is None
        rows, why = what_if_rows(data)
        assert rows == [] and "2 trials have no result yet" in why
        files = write_sweep_report(w, "live", out_dir=tmp_path / "out")
    md = files.markdown.read_text()
    assert "still running" in md and "1 of 3 trials have a result" in md
    assert "| time to target | no target |" in md
    # interrupted: the sweep ended (failed) with trials that never ran -> stopped, not "still running"
    with Warehouse.open(fresh_warehouse(tmp_path / "w.duckdb")) as w:
        w.finish_sweep("live-0000cafe", status="failed", ended_at="2026-01-05T10:20:00")
        md = write_sweep_report(w, "live", out_dir=tmp_path / "out").markdown.read_text()
    assert "> This sweep stopped (status failed) with 1 of 3 trials run" in md and "sweep is still running" not in md


@pytest.mark.slow  # over ~0.5 s alone (a report, warehouse, plan or subprocess): make test runs it, make test-fast does not
def test_sweep_without_trials(tmp_path):
    build_empty_sweep(tmp_path / "w.duckdb")
    with Warehouse.open(tmp_path / "w.duckdb", read_only=True) as w:
        files = write_sweep_report(w, "fresh", out_dir=tmp_path / "out")
    assert "no trials and no runs yet" in files.markdown.read_text()
    assert files.html.exists()


def test_markdown_stays_within_prefect_limit():
    rows = [[i, "x" * 200] for i in range(5000)]
    table = md_table(["i", "text"], rows)
    assert "4960 more rows" in table and len(table) < MARKDOWN_MAX_CHARS
    capped = cap_markdown("line\n" * 50_000)
    assert len(capped) <= MARKDOWN_MAX_CHARS and capped.rstrip().endswith("everything._")


@pytest.mark.slow  # over ~1 s (a whole report, replay, plan or warehouse): make test runs it, make test-fast does not
def test_large_sweep_markdown_within_limit(tmp_path):
    from helpers.record_fixtures import example_record, ingest_known

    with Warehouse.open(fresh_warehouse(tmp_path / "w.duckdb")) as w:
        w.register_sweep(sweep_id="big-00000000", name="big", objective_metric="loss", started_at="2026-01-05T10:00:00")
        w.upsert_trials("big-00000000", [{"trial_id": f"t{i:04d}", "index": i, "params": {"p": "v" * 50, "i": i}}
                                         for i in range(300)])
        ingest_known(w, [example_record(f"r{i}", f"t{i:04d}", sweep_id="big-00000000", wall_s=60 + i,
                                         final_metrics={"loss": 1 + i / 1000}) for i in range(300)])
        md = sweep_markdown(load_sweep(w, "big"))
    assert len(md) <= MARKDOWN_MAX_CHARS
    assert "260 more rows" in md


@pytest.mark.slow  # over ~1 s (a whole report, replay, plan or warehouse): make test runs it, make test-fast does not
@pytest.mark.skipif(os.name != "posix", reason="path check")
def test_odd_sweep_id_never_becomes_a_raw_path(tmp_path):
    from helpers.record_fixtures import example_record, ingest_known

    with Warehouse.open(fresh_warehouse(tmp_path / "w.duckdb")) as w:
        ingest_known(w, [example_record("x1", "t1", sweep_id="../../Evil Sweep")])
        files = write_sweep_report(w, sweep_id="../../Evil Sweep", out_dir=tmp_path / "out")
    assert files.html.parent == tmp_path / "out"
    assert files.html.name.startswith("evil-sweep-") and ".." not in files.html.name


@pytest.mark.slow  # over ~1 s (a whole report, replay, plan or warehouse): make test runs it, make test-fast does not
def test_cli_report_sweep(_isolated_warehouse, tmp_path, capsys):
    from gpuledger.cli import main

    build_roi_fixture(_isolated_warehouse)
    assert main(["report", "sweep", "lora-grid", "--out", str(tmp_path / "o")]) == 0
    assert f"o/{SWEEP_ID}.html" in capsys.readouterr().out
    assert main(["report", "sweep", "nope"]) == 1
    assert "known sweeps: lora-grid" in capsys.readouterr().err
    assert main(["report", "weekly", "--week", "2026-W02", "--out", str(tmp_path / "w")]) == 0
    assert (tmp_path / "w" / "2026-W02.html").exists()
    capsys.readouterr()
    # without --week: the last complete week with data (the fixture's runs are all in 2026-W02), said so
    assert main(["report", "weekly", "--out", str(tmp_path / "w2")]) == 0
    out = capsys.readouterr().out
    assert "No week given: 2026-W02 is the last complete week with data" in out
    assert "Weeks with data: 2026-W02." in out and (tmp_path / "w2" / "2026-W02.html").exists()


@pytest.mark.slow  # over ~0.5 s alone (a report, warehouse, plan or subprocess): make test runs it, make test-fast does not
def test_local_rate_is_labelled(tmp_path):
    from helpers.record_fixtures import example_record, ingest_known

    with Warehouse.open(fresh_warehouse(tmp_path / "w.duckdb")) as w:
        w.register_sweep(sweep_id="demo-00000001", name="demo", objective_metric="loss", launcher="local",
                         started_at="2026-01-05T10:00:00")
        ingest_known(w, [example_record("d1", "t1", sweep_id="demo-00000001", final_metrics={"loss": 2.0})])
        s = sweep_summary(load_sweep(w, "demo"))
    assert s["price_source"] == "local rate $0.00/h (a configured rate, not a cloud price)"
    assert s["total_cost_usd"] == 0.0


@pytest.mark.slow  # over ~1 s (a whole report, replay, plan or warehouse): make test runs it, make test-fast does not
def test_local_sweep_shows_money_and_its_cloud_equivalent(tmp_path):
    """A demo-like local sweep: billed at the bundled reference rate, with the plan's cloud equivalent."""
    import re

    from gpuledger.catalog.local import local_reference

    rate = local_reference().usd_per_hour
    build_local_demo(tmp_path / "w.duckdb")
    with Warehouse.open(tmp_path / "w.duckdb", read_only=True) as w:
        data = load_sweep(w, "demo-lora")
        files = write_sweep_report(w, "demo-lora", out_dir=tmp_path / "out")
    s = sweep_summary(data)
    walls = [t[3] for t in LOCAL_TRIALS]
    assert s["total_cost_usd"] == pytest.approx(sum(walls) / 3600 * rate)
    # best = trial 2 (0.77), ended 10:03: every run had ended by then -> cost to recipe = total
    assert s["cost_to_recipe_usd"] == pytest.approx(s["total_cost_usd"])
    assert s["price_source"].startswith(f"this machine at the reference rate ${rate:.4f}/h (gcp n2-standard-2")
    assert "not a bill" in s["price_source"]
    # the same 4 trials on 1 x A10G: sum of the plan's estimates; the what-if replays those at every K
    from gpuledger.report.sweep import cloud_equivalent

    cloud = cloud_equivalent(data)
    assert cloud["offer"] == "1 × A10G (aws g5.xlarge, on-demand)" and cloud["trials"] == 4
    assert cloud["total_usd"] == pytest.approx(sum(t[6] for t in LOCAL_TRIALS))
    rows, _ = what_if_rows(data)
    k1, k2 = rows[0], rows[1]
    # K=1 on A10G: one after another, the recipe (trial 2) ends at 6+9+12 s, paid trials 0..2
    assert k1["cloud_time_to_recipe_s"] == pytest.approx(27.0)
    assert k1["cloud_cost_usd"] == pytest.approx(0.0017 + 0.0025 + 0.0034)
    # K=2 (this sweep): 0 and 1 at 0 s, 2 at 6 s (ends 18 s), 3 at 9 s (ends 18 s): all four paid
    assert k2["actual"] and k2["cloud_time_to_recipe_s"] == pytest.approx(18.0)
    assert k2["cloud_cost_usd"] == pytest.approx(cloud["total_usd"])
    # the what-if shows different costs per K (locally too)
    assert len({round(r["cost_usd"], 9) for r in rows}) >= 2
    md = files.markdown.read_text()
    assert f"| same trials on A10G | ${cloud['total_usd']:.4f} | estimated, not billed" in md
    assert "| cost to recipe on A10G |" in md and "A10G time (est., min)" in md
    # at least 3 distinct non-zero dollar figures on the page (the hidden check on the demo's report)
    html = files.html.read_text()
    figures = {float(m.replace(",", "")) for m in re.findall(r"\$([\d,]+\.\d+)", html)}
    assert len({f for f in figures if f > 0}) >= 3
    assert (tmp_path / "out" / "demo-lora-00001111-csv" / "cloud-equivalent.csv").exists()
