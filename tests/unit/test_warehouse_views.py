"""Each view on a small literal fixture, against values computed by hand; views.yml vs the database."""

from __future__ import annotations

import pytest
import yaml
from helpers.record_fixtures import example_record, ingest_known
from helpers.warehouse_template import fresh_warehouse

from gpuledger.warehouse import VIEWS_DOC, Warehouse

S = "lora-grid-1a2b3c4d"


def _run(run_id, trial, start, wall_s, status="succeeded", loss=None, **kw):
    fm = {"eval_loss": loss} if loss is not None else {}
    return example_record(run_id, trial, sweep_id=S, started_at=start, wall_s=wall_s, status=status,
                          final_metrics=fm, **kw)


H100_SPOT = {"launcher": "skypilot", "cloud": "aws", "accelerator": "H100", "gpus": 1, "spot": True,
             "usd_per_hour": 2.0, "on_demand_usd_per_hour": 5.0}


@pytest.fixture(scope="module")
def wh(tmp_path_factory):
    path = tmp_path_factory.mktemp("views") / "ledger.duckdb"
    w = Warehouse.open(path)
    w.register_sweep(sweep_id=S, name="lora-grid", project="support-bot", owner="ml-platform",
                     objective_metric="eval_loss", objective_goal="minimize", objective_target=1.0,
                     budget_usd=30.0, started_at="2026-01-04T21:50:00Z")
    w.upsert_trials(S, [
        {"trial_id": "t1", "index": 0, "params": {"lr": 1}},
        {"trial_id": "t2", "index": 1, "params": {"lr": 2}},
        {"trial_id": "t3", "index": 2, "params": {"lr": 3}, "est_memory_gib": 20.0, "est_wall_s": 1500.0},
        {"trial_id": "t4", "index": 3, "params": {"lr": 4}},
        {"trial_id": "t5", "index": 4, "params": {"lr": 5}, "est_memory_gib": 2.0, "est_wall_s": 500.0},
        {"trial_id": "t6", "index": 5, "params": {"lr": 6}, "status": "skipped-budget"},
    ])
    ingest_known(w, [
        # Sunday 2026-01-04 (ISO 2026-W01)
        _run("r1", "t1", "2026-01-04T22:00:00Z", 3600, loss=1.3, **H100_SPOT),
        _run("r2", "t2", "2026-01-04T22:00:00Z", 7200, status="oom", launcher="skypilot", cloud="aws",
             accelerator="A100-80GB", gpus=2, usd_per_hour=4.0),
        # Monday 2026-01-05 (ISO 2026-W02)
        _run("r3", "t3", "2026-01-05T00:30:00Z", 1800, loss=0.9, peak_gpu_mem_gib=16.0, **H100_SPOT),
        _run("r4", "t4", "2026-01-05T00:00:00Z", 3600, status="preempted", preemptions=1, **H100_SPOT),
        _run("r5", "t4", "2026-01-05T01:00:00Z", 3600, loss=0.85, attempt=2, **H100_SPOT),
        _run("r6", "t5", "2026-01-05T01:30:00Z", 600, status="cancelled", usd_per_hour=0.6,
             peak_rss_gib=2.5),
    ])
    yield w
    w.close()


def one(wh, sql):
    rows = wh.query(sql).to_dicts()
    assert len(rows) == 1, rows
    return rows[0]


def test_sweep_roi(wh):
    r = one(wh, f"select * from v_sweep_roi where sweep_id = '{S}'")
    # start 21:50 Sun; best = r5 (0.85) ended 02:00 Mon -> 4 h 10 min
    assert r["best_trial_id"] == "t4" and r["best_run_id"] == "r5" and r["best_metric"] == 0.85
    assert r["time_to_recipe_s"] == 15000.0
    # every run ended by 02:00: 2 + 8 + 1 + 2 + 2 + 0.1
    assert r["cost_to_recipe_usd"] == pytest.approx(15.1)
    # target 1.0 first met by r3 (0.9) ended 01:00 -> 3 h 10 min; runs ended by then r1 r2 r3 r4
    assert r["time_to_target_s"] == 11400.0
    assert r["cost_to_target_usd"] == pytest.approx(13.0)
    assert r["total_cost_usd"] == pytest.approx(15.1)
    assert r["waste_usd"] == pytest.approx(10.1)  # oom 8 + preempted 2 + cancelled 0.1
    assert (r["trials"], r["succeeded"], r["failed"], r["skipped"], r["runs"]) == (6, 3, 2, 1, 6)
    assert r["budget_used_pct"] == pytest.approx(100 * 15.1 / 30)
    assert r["makespan_s"] == 15000.0


def test_sweep_roi_maximize_and_no_target(tmp_path):
    with Warehouse.open(fresh_warehouse(tmp_path / "w.duckdb")) as w:
        w.register_sweep(sweep_id="m-1", name="m", objective_metric="acc", objective_goal="maximize",
                         started_at="2026-01-05T00:00:00")
        ingest_known(w, [
            example_record("a", "x", sweep_id="m-1", started_at="2026-01-05T00:00:00", wall_s=100,
                           final_metrics={"acc": 0.7}, usd_per_hour=36.0),
            example_record("b", "y", sweep_id="m-1", started_at="2026-01-05T00:00:00", wall_s=300,
                           final_metrics={"acc": 0.9}, usd_per_hour=36.0),
            example_record("c", "z", sweep_id="m-1", started_at="2026-01-05T00:00:00", wall_s=200,
                           final_metrics={"acc": 0.8}, usd_per_hour=36.0),
        ])
        r = one(w, "select * from v_sweep_roi")
        assert (r["best_trial_id"], r["best_metric"], r["time_to_recipe_s"]) == ("y", 0.9, 300.0)
        assert r["cost_to_recipe_usd"] == pytest.approx(6.0)  # 1 + 3 + 2 dollars, all ended by 300 s
        assert r["time_to_target_s"] is None and r["cost_to_target_usd"] is None


def test_trial_results(wh):
    rows = {r["trial_id"]: r for r in wh.query("select * from v_trial_results").to_dicts()}
    assert set(rows) == {"t1", "t2", "t3", "t4", "t5", "t6"}
    assert rows["t4"]["status"] == "succeeded" and rows["t4"]["attempts"] == 2
    assert rows["t4"]["metric_value"] == 0.85 and rows["t4"]["cost_usd"] == pytest.approx(4.0)
    assert rows["t4"]["wall_s"] == 7200.0 and rows["t4"]["preemptions"] == 1
    assert rows["t2"]["status"] == "oom" and rows["t2"]["metric_value"] is None
    assert rows["t6"]["status"] == "skipped-budget" and rows["t6"]["cost_usd"] == 0.0
    assert rows["t3"]["peak_gpu_mem_gib"] == 16.0 and rows["t3"]["est_memory_gib"] == 20.0
    assert rows["t1"]["metric_name"] == "eval_loss" and rows["t1"]["sweep_name"] == "lora-grid"


def test_spot_savings(wh):
    r = one(wh, f"select * from v_spot_savings where sweep_id = '{S}'")
    # spot lines: r1 1 h, r3 0.5 h, r4 1 h, r5 1 h at 2 $/h paid vs 5 $/h on demand; r4 was preempted and
    # r5 is its retry: on demand t4 would have taken r5's hour alone, so r4's hour is paid, never "saved"
    # (it was claimed as $3 saved: 10.5 of 17.5, where spot saved 5.5 of 12.5)
    assert r["spot_hours"] == pytest.approx(3.5)
    assert r["paid_usd"] == pytest.approx(7.0)
    assert r["on_demand_equiv_usd"] == pytest.approx(12.5)
    assert r["saved_usd"] == pytest.approx(5.5)
    assert r["saved_pct"] == pytest.approx(44.0)
    assert (r["preempted_hours"], r["preempted_paid_usd"]) == (pytest.approx(1.0), pytest.approx(2.0))


def test_the_sweep_report_says_the_preempted_hours_were_paid_not_saved(wh):
    from gpuledger.report.sweep import sweep_markdown
    from gpuledger.report.sweep_data import load_sweep

    text = sweep_markdown(load_sweep(wh, "lora-grid"))
    assert ("| realised spot savings | $5.50 | paid $7.00 vs $12.50 on demand for the 2.50 h not lost to "
            "preemption (paid too: $2.00 for 1.00 h of preempted runs)") in text


def test_waste(wh):
    got = {r["reason"]: r["cost_usd"] for r in wh.query("select * from v_waste").to_dicts()}
    assert got == pytest.approx({"oom": 8.0, "preempted": 2.0, "cancelled": 0.1})


def test_weekly_spend_across_iso_week_boundary(wh):
    df = wh.query("select week, accelerator, spot, runs, gpu_hours, cost_usd from v_weekly_spend "
                  "order by week, accelerator")
    rows = [(r["week"], r["accelerator"], r["spot"], r["runs"], round(r["gpu_hours"], 6), round(r["cost_usd"], 6))
            for r in df.to_dicts()]
    assert rows == [
        ("2026-W01", "A100-80GB", False, 1, 4.0, 8.0),  # Sunday: r2 (2 GPUs x 2 h), counted at its start
        ("2026-W01", "H100", True, 1, 1.0, 2.0),  # Sunday: r1
        ("2026-W02", "H100", True, 3, 2.5, 5.0),  # Monday: r3 r4 r5
        ("2026-W02", "cpu", False, 1, 0.0, 0.1),  # Monday: r6, CPU-only: no GPU-hours, cost still counted
    ]
    assert set(wh.query("select project || '/' || owner as p from v_weekly_spend")["p"]) == {"support-bot/ml-platform"}


def test_estimate_accuracy(wh):
    rows = {r["run_id"]: r for r in wh.query("select * from v_estimate_accuracy").to_dicts()}
    assert rows["r3"]["measured_memory_gib"] == 16.0
    assert rows["r3"]["memory_err_pct"] == pytest.approx(25.0)
    assert rows["r3"]["time_err_pct"] == pytest.approx(100 * (1500 - 1800) / 1800)
    assert rows["r6"]["measured_memory_gib"] == 2.5  # CPU run: RSS
    assert rows["r6"]["memory_err_pct"] == pytest.approx(-20.0)
    assert rows["r6"]["time_err_pct"] is None  # cancelled: its time says nothing


def test_trial_timeline(wh):
    rows = {r["run_id"]: r for r in wh.query("select * from v_trial_timeline").to_dicts()}
    assert rows["r1"]["start_offset_s"] == 600.0 and rows["r1"]["end_offset_s"] == 4200.0
    assert rows["r1"]["cumulative_cost_usd"] == pytest.approx(2.0) and rows["r1"]["best_so_far"] == 1.3
    assert rows["r3"]["cumulative_cost_usd"] == pytest.approx(13.0) and rows["r3"]["best_so_far"] == 0.9
    assert rows["r5"]["cumulative_cost_usd"] == pytest.approx(15.1) and rows["r5"]["best_so_far"] == 0.85


def test_runs_and_preemption_stats(wh):
    r = one(wh, "select * from v_runs where run_id = 'r6'")
    assert r["accelerator"] == "cpu" and r["gpu_hours"] == 0.0 and r["cost_usd"] == pytest.approx(0.1)
    assert wh.spot_preemption_stats() == (pytest.approx(3.5), 1)
    assert wh.spot_preemption_stats(cloud="gcp") == (0.0, 0)
    p = one(wh, "select * from v_spot_preemptions")
    assert (p["cloud"], p["accelerator"], p["preemptions"]) == ("aws", "H100", 1)
    assert p["preemptions_per_hour"] == pytest.approx(1 / 3.5)


def test_views_yml_matches_database(wh):
    doc = yaml.safe_load(VIEWS_DOC.read_text())
    documented = {name: [c["name"] for c in v["columns"]] for name, v in doc["views"].items()}
    assert documented == wh.views()
    for name, v in doc["views"].items():
        assert v.get("description"), name
        for c in v["columns"]:
            assert c.get("description"), f"{name}.{c['name']} has no description"
    required = {
        "v_trial_results": ["sweep_id", "sweep_name", "trial_id", "params", "status", "metric_name",
                            "metric_value", "peak_gpu_mem_gib", "peak_rss_gib", "wall_s", "cost_usd",
                            "est_memory_gib", "est_wall_s", "est_cost_usd"],
        "v_sweep_roi": ["sweep_id", "sweep_name", "started_at", "best_trial_id", "best_metric",
                        "time_to_recipe_s", "cost_to_recipe_usd", "time_to_target_s", "total_cost_usd",
                        "trials", "failed", "waste_usd"],
        "v_weekly_spend": ["week", "project", "owner", "accelerator", "spot", "gpu_hours", "cost_usd"],
        "v_estimate_accuracy": ["run_id", "est_memory_gib", "measured_memory_gib", "memory_err_pct",
                                "est_wall_s", "wall_s", "time_err_pct"],
        "v_spot_savings": ["sweep_id", "paid_usd", "on_demand_equiv_usd", "saved_usd"],
        "v_waste": ["sweep_id", "reason", "cost_usd"],
    }
    for view, cols in required.items():
        assert set(cols) <= set(documented[view]), view
