"""The ROI report of an adaptive sweep (issue 18 item 5), on real sweeps: a small ASHA sweep and grids of
the same experiment (tests/helpers/adaptive_sweeps.py: the sweep engine, the fake launcher reporting each trial's
curve, a real DuckDB warehouse). Every number the adaptive sections show is checked against the warehouse by SQL written
here, independently of the report's named queries; the page opens in headless Chromium."""

from __future__ import annotations

import pytest
from helpers.adaptive_sweeps import XS, curve, run_sweep, write_spec
from helpers.adaptive_sweeps import loss as _loss

from gpuledger import vocabulary
from gpuledger.report import write_sweep_report
from gpuledger.report.common import usd
from gpuledger.report.sweep import load_sweep, sweep_markdown, sweep_tables
from gpuledger.warehouse import Warehouse

SECTIONS = ("What the full grid would have cost", "Money saved by pruning")


@pytest.fixture(scope="module")
def ledger(tmp_path_factory):
    """Runs the ASHA sweep alone (its report then has no measured grid), then the grid of the same 6
    points, a grid of 2 of them (same experiment, other points: never the twin) and a TPE sweep asking 3."""
    root = tmp_path_factory.mktemp("adaptive")
    wh_path = root / "wh" / "ledger.duckdb"
    out: dict = {"root": root, "wh": wh_path}
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        mp.setenv("GPULEDGER_WAREHOUSE", str(wh_path))
        asha = run_sweep(write_spec(root, "asha"), cap=1, curve=curve)
        with Warehouse.open(wh_path, read_only=True) as wh:
            out["before"] = load_sweep(wh, sweep_id=asha.sweep_id)
        grid = run_sweep(write_spec(root, "grid", max_parallel=2), cap=2, curve=curve)
        few = run_sweep(write_spec(root, "grid", xs=XS[:2], name="tiny-few"), cap=2, curve=curve)
        tpe = run_sweep(write_spec(root, "tpe"), cap=1, curve=curve)
        with Warehouse.open(wh_path, read_only=True) as wh:
            out["after"] = load_sweep(wh, sweep_id=asha.sweep_id)
            out["grid_data"] = load_sweep(wh, sweep_id=grid.sweep_id)
            out["files"] = write_sweep_report(wh, sweep_id=asha.sweep_id, out_dir=root / "out")
            out["grid_files"] = write_sweep_report(wh, sweep_id=grid.sweep_id, out_dir=root / "out")
            out["tpe_data"] = load_sweep(wh, sweep_id=tpe.sweep_id)
    out.update(asha=asha, grid=grid, few=few, tpe=tpe)
    return out


def _sql(ledger, sql: str, params: dict | None = None) -> list[dict]:
    with Warehouse.open(ledger["wh"], read_only=True) as wh:
        return wh.query(sql, params).to_dicts()


def test_the_sweeps_ran_and_asha_pruned(ledger):
    asha, grid = ledger["asha"], ledger["grid"]
    assert asha.pruned >= 1 and asha.failed == 0 and asha.succeeded + asha.pruned == len(XS)
    assert grid.succeeded == len(XS) and grid.pruned == 0
    rows = _sql(ledger, "select status, count(*) n from v_trial_results where sweep_id = $s group by all",
                {"s": asha.sweep_id})
    assert {r["status"]: r["n"] for r in rows}.get(vocabulary.PRUNED) == asha.pruned


def test_grid_reports_have_no_adaptive_sections(ledger):
    data = ledger["grid_data"]
    assert data.adaptive is None
    md = ledger["grid_files"].markdown_text
    assert not any(s in md for s in SECTIONS)
    assert not {"full-grid", "pruning-savings"} & set(sweep_tables(data))
    html = ledger["grid_files"].html.read_text(encoding="utf-8")
    assert not any(s in html for s in SECTIONS) and "best eval_loss so far vs wall-clock" in html


def test_full_grid_estimated_and_measured_match_the_warehouse(ledger):
    a, g = ledger["asha"].sweep_id, ledger["grid"].sweep_id
    est = _sql(ledger, "select count(*) n, sum(est_cost_usd) usd, sum(est_wall_s) s from trials where sweep_id = $s",
               {"s": a})[0]
    mine = _sql(ledger, "select sum(cost_usd) usd, sum(wall_s) s from runs where sweep_id = $s", {"s": a})[0]
    grid = _sql(ledger, "select sum(cost_usd) usd, sum(wall_s) s from runs where sweep_id = $s", {"s": g})[0]
    table = sweep_tables(ledger["after"])["full-grid"].to_dicts()[0]
    assert table["points"] == est["n"] == len(XS)
    assert table["est_cost_usd"] == pytest.approx(est["usd"]) and table["est_trial_s"] == pytest.approx(est["s"])
    assert table["cost_usd"] == pytest.approx(mine["usd"]) and table["trial_s"] == pytest.approx(mine["s"])
    assert table["grid_sweep_id"] == g  # the 2-point grid of the same experiment is not the twin
    assert table["grid_cost_usd"] == pytest.approx(grid["usd"]) and table["grid_trial_s"] == pytest.approx(grid["s"])
    assert table["saved_vs_grid_usd"] == pytest.approx(grid["usd"] - mine["usd"])
    best = _sql(ledger, """select sweep_id, min(metric_value) v from v_trial_results
                           where sweep_id in ($a, $g) and status = 'succeeded' group by all""", {"a": a, "g": g})
    best = {r["sweep_id"]: r["v"] for r in best}
    assert table["best_value"] == pytest.approx(best[a]) and table["grid_best_value"] == pytest.approx(best[g])
    assert best[g] == pytest.approx(_loss(0.3, 8))  # the grid ran x = 0.3 to its end
    md = ledger["files"].markdown_text
    section = md[md.index("## What the full grid would have cost"):md.index("## Money saved by pruning")]
    for value in (est["usd"], mine["usd"], grid["usd"], grid["usd"] - mine["usd"]):
        assert usd(value) in section
    assert f"measured: Σ of every run of grid sweep {g}" in section and "estimate: Σ of this sweep's plan rows" in section


def test_without_a_grid_the_report_says_so_and_prices_pruning_by_the_plan(ledger):
    data = ledger["before"]
    md = sweep_markdown(data)
    assert "No measured grid: this warehouse holds no grid sweep of the same model" in md
    rows = _sql(ledger, """
        select t.trial_id, t.est_cost_usd - sum(r.cost_usd) saved from trials t join runs r using (sweep_id, trial_id)
        where t.sweep_id = $s and t.status = 'pruned' group by t.trial_id, t.est_cost_usd""",
                {"s": ledger["asha"].sweep_id})
    table = {r["trial_id"]: r for r in sweep_tables(data)["pruning-savings"].to_dicts()}
    assert set(table) == {r["trial_id"] for r in rows}
    for r in rows:
        assert table[r["trial_id"]]["basis"] == "plan"
        assert table[r["trial_id"]]["saved_usd"] == pytest.approx(r["saved"])
    assert usd(sum(r["saved"] for r in rows)) in md


def test_pruning_savings_use_the_grid_run_of_the_same_point(ledger):
    rows = _sql(ledger, """
        with mine as (select t.trial_id, t.params::varchar p, sum(r.cost_usd) usd, sum(r.wall_s) s
                      from trials t join runs r using (sweep_id, trial_id)
                      where t.sweep_id = $a and t.status = 'pruned' group by all),
             grid as (select t.params::varchar p, sum(r.cost_usd) usd, sum(r.wall_s) s
                      from trials t join runs r using (sweep_id, trial_id)
                      where t.sweep_id = $g and r.status = 'succeeded' group by all)
        select mine.trial_id, grid.usd - mine.usd saved_usd, grid.s - mine.s saved_s
        from mine join grid using (p)""", {"a": ledger["asha"].sweep_id, "g": ledger["grid"].sweep_id})
    assert len(rows) == ledger["asha"].pruned
    table = {r["trial_id"]: r for r in sweep_tables(ledger["after"])["pruning-savings"].to_dicts()}
    for r in rows:
        assert table[r["trial_id"]]["basis"] == "grid"
        assert table[r["trial_id"]]["saved_usd"] == pytest.approx(r["saved_usd"]) and r["saved_usd"] > 0
        assert table[r["trial_id"]]["saved_s"] == pytest.approx(r["saved_s"])
    md = ledger["files"].markdown_text
    section = md[md.index("## Money saved by pruning"):]
    assert usd(sum(r["saved_usd"] for r in rows)) in section
    assert f"measured in grid sweep {ledger['grid'].sweep_id}" in section
    pruned_usd = _sql(ledger, """select sum(cost_usd) v from v_trial_results where sweep_id = $s and status = 'pruned'""",
                      {"s": ledger["asha"].sweep_id})[0]["v"]
    n = ledger["asha"].pruned
    assert f", {n} pruned |" in md  # the trials card counts them, apart from failures
    # the waste card leaves them out: stopping them early is the search's saving, not waste
    assert f"not the {n} pruned trials ({usd(pruned_usd)})" in md
    wasted = _sql(ledger, """select count(*) n from v_run_facts f join v_trial_results t using (sweep_id, trial_id)
                             where f.sweep_id = $s and t.status = 'pruned' and (f.wasted or not f.pruned)""",
                  {"s": ledger["asha"].sweep_id})[0]["n"]
    assert wasted == 0


def test_the_comparison_with_the_grid_is_stated_over_many_replayed_orders(ledger):
    from gpuledger.report.adaptive_data import REPORT_ORDERS, grid_replay

    ad = ledger["after"].adaptive
    rep, why = grid_replay(ad, ledger["after"].sweep.get("max_parallel"))
    assert why is None and rep["replays"] == REPORT_ORDERS and len(ad.twin_curves) == ledger["grid"].trials
    lo, hi = rep["cost_vs_grid_range"]
    assert 0 < lo <= rep["cost_vs_grid"] <= hi <= 1.0
    md = ledger["files"].markdown_text
    assert f"cost vs the grid, over {REPORT_ORDERS} orders" in md and f"recipe kept, over {REPORT_ORDERS} orders" in md
    assert f"{round(rep['recipe_kept'] * REPORT_ORDERS)} of {REPORT_ORDERS}" in md


def test_progress_points_are_every_run_end_with_pruned_at_their_last_value(ledger):
    ad = ledger["after"].adaptive
    runs = _sql(ledger, "select run_id from runs where sweep_id = $s", {"s": ledger["asha"].sweep_id})
    assert sorted(ad.ends["run_id"].to_list()) == sorted(r["run_id"] for r in runs)
    pruned = [r for r in ad.ends.to_dicts() if r["trial_status"] == vocabulary.PRUNED]
    # every attempt of a pruned trial ends at its last value: the one pruned, and any suspended at a rung before
    assert len({r["trial_id"] for r in pruned}) == ledger["asha"].pruned
    assert len(pruned) - ledger["asha"].pruned <= ledger["asha"].suspended
    for r in pruned:
        last = _sql(ledger, """select arg_max(value, seq) v, count(*) n from metrics
                               where run_id = $r and name = 'eval_loss'""", {"r": r["run_id"]})[0]
        x = _sql(ledger, "select params->>'x' x from trials where sweep_id = $s and trial_id = $t",
                 {"s": ledger["asha"].sweep_id, "t": r["trial_id"]})[0]["x"]
        assert r["last_value"] == pytest.approx(last["v"]) and r["values_reported"] == last["n"]
        assert r["last_value"] == pytest.approx(_loss(float(x), last["n"]))  # the trial's own formula
        assert 2 <= r["values_reported"] < 9  # stopped at a rung, before its end
    html = ledger["files"].html.read_text(encoding="utf-8")
    for title in ("best eval_loss so far vs elapsed time", "best eval_loss so far vs dollars spent"):
        assert title in html
    assert html.count(">pruned<") >= 2  # the legend of both progress charts


@pytest.mark.browser
def test_adaptive_report_renders_in_chromium(ledger, tmp_path):
    from helpers.browser import browser

    with browser() as b:
        check = b.check(ledger["files"].html, tmp_path / "adaptive.png")
    assert check.console_errors == [] and check.page_errors == []
    assert check.requests == [check.url], f"the page asked the network for {check.foreign_requests}"
    assert check.pixel_stddev > 10 and check.distinct_colours > 50  # not blank
    assert check.text_overlaps == []


def test_asha_what_if_replays_the_measured_curves_at_each_slot_count(ledger):
    from gpuledger.plan import WHAT_IF_KS

    a = ledger["asha"].sweep_id
    table = sweep_tables(ledger["after"])["asha-what-if"].to_dicts()
    assert [r["slots"] for r in table] == [k for k in WHAT_IF_KS if k <= 8]  # 6 trials: 8 slots run them all at once
    measured = _sql(ledger, """select sum(cost_usd) usd, sum(wall_s) s,
                                      count(distinct trial_id) filter (where t.status = 'pruned') pruned
                               from runs r join trials t using (sweep_id, trial_id) where sweep_id = $s""", {"s": a})[0]
    rate = measured["usd"] / measured["s"]
    for r in table:
        assert r["cost_usd"] == pytest.approx(r["trial_seconds"] * rate)
        assert r["pruned"] + r["completed"] == len(XS)
        assert r["time_to_best_s"] <= r["makespan_s"] <= r["trial_seconds"] + 1e-9
    one = table[0]  # the sweep's own K: the replay of its curves does what the sweep did (the runtime polls
    # values every 0.5 s and a loaded machine may hand the pruner two at once: one decision may differ)
    assert one["actual"] and abs(one["pruned"] - measured["pruned"]) <= 1 and measured["pruned"] == ledger["asha"].pruned
    assert one["trial_seconds"] == pytest.approx(measured["s"], rel=0.15)
    assert one["best_value"] == pytest.approx(ledger["after"].roi["best_metric"])
    assert table[-1]["makespan_s"] < one["makespan_s"]  # more slots finish sooner
    md = ledger["files"].markdown_text
    section = md[md.index("## Parallelism what-if under ASHA"):]
    assert "Simulated, not measured" in section and usd(one["cost_usd"]) in section
    assert "## Parallelism what-if (from measured durations)" not in md


def test_a_sweep_with_too_many_curves_says_why_there_is_no_replay(ledger, monkeypatch):
    from gpuledger.report import adaptive_data

    monkeypatch.setattr(adaptive_data, "MAX_REPLAY_CURVES", len(XS) - 1)
    md = sweep_markdown(ledger["after"])
    assert (f"No what-if: the sweep has {len(XS)} learning curves; the report replays at most {len(XS) - 1}"
            in md)
    assert "asha-what-if" not in sweep_tables(ledger["after"])


def test_tpe_report_compares_with_the_grid_and_keeps_the_duration_what_if(ledger):
    data, t, g = ledger["tpe_data"], ledger["tpe"].sweep_id, ledger["grid"].sweep_id
    assert data.adaptive is not None and data.adaptive.strategy == "tpe" and data.adaptive.curves is None
    md = sweep_markdown(data)
    statuses = {r["status"]: r["n"] for r in _sql(
        ledger, "select status, count(*) n from v_trial_results where sweep_id = $s group by all", {"s": t})}
    assert statuses == {vocabulary.SUCCEEDED: 3, vocabulary.NOT_ASKED: len(XS) - 3}
    assert f"{len(XS) - 3} not asked by the search" in md
    mine = _sql(ledger, "select sum(cost_usd) v from runs where sweep_id = $s", {"s": t})[0]["v"]
    grid = _sql(ledger, "select sum(cost_usd) v from runs where sweep_id = $s", {"s": g})[0]["v"]
    assert f"measured, this sweep's one arrival order: grid sweep {g} cost {usd(grid)}, this sweep {usd(mine)}" in md
    assert "over 40 orders" not in md  # the replay is of ASHA's pruning
    assert "3 of 6 (0 pruned)" in md
    assert "No trial was pruned: the search prunes nothing without" in md
    assert "## Parallelism what-if (from measured durations)" in md and "under ASHA" not in md
    assert "asha-what-if" not in sweep_tables(data)
