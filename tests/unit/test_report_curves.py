"""The sweep report's learning curves and hyper-parameter view (issue 38 item 7): one line per run from the
warehouse's metric points, the best trial emphasised, and each trial's final objective against each
searched parameter (log axis for a rate spanning > 10x, categories for strings)."""

from __future__ import annotations

import pytest
from helpers.report_fixtures import LOCAL_TRIALS, build_local_demo

from gpuledger.report import write_sweep_report
from gpuledger.report.curves import curve_series, param_panels
from gpuledger.warehouse import Warehouse


@pytest.mark.slow  # over ~1 s (a whole report, replay, plan or warehouse): make test runs it, make test-fast does not
def test_curves_and_params_from_the_warehouse(tmp_path):
    path = tmp_path / "ledger.duckdb"
    build_local_demo(path)
    with Warehouse.open(path, read_only=True) as wh:
        rows = wh.query_named("learning_curves", {"sweep_id": "demo-lora-00001111", "model": None, "method": None,
                                                  "metric": None}).to_dicts()
        trials = wh.query_named("report_sweep_trials", {"sweep_id": "demo-lora-00001111"}).to_dicts()
        files = write_sweep_report(wh, "demo-lora", out_dir=tmp_path / "out")
    curves = curve_series(rows, "d2d2d2d2d2d2")
    assert len(curves) == len(LOCAL_TRIALS) and all(len(c["points"]) == 9 for c in curves)
    assert [c["trial_id"] for c in curves if c["best"]] == ["d2d2d2d2d2d2"]
    by_trial = {c["trial_id"]: c for c in curves}
    for _i, tid, _lr, _wall, loss, _cw, _cu in LOCAL_TRIALS:
        assert by_trial[tid]["points"][0] == (0.0, 4.5) and by_trial[tid]["points"][-1] == (384.0, loss)
    [(name, scale, pts)] = param_panels(trials, "d2d2d2d2d2d2")
    assert name == "learning_rate" and scale == "log"  # 1e-3 .. 3e-2 spans 30x
    assert sorted((x, y) for x, y, _ in pts) == sorted((lr, loss) for _i, _t, lr, _w, loss, _c, _u in LOCAL_TRIALS)
    html = files.html.read_text()
    section = html[html.index("Learning curves and hyper-parameters"):]
    assert "eval_loss per trial over training steps" in section and "final eval_loss by hyper-parameter" in section
    assert section.count('<svg class="chart"') >= 2 and "#2 d2d2d2d2" in section


def test_params_kinds_and_what_is_left_out():
    trials = [{"trial_id": f"t{i}", "status": s, "metric_value": v, "params": p} for i, (s, v, p) in enumerate([
        ("succeeded", 1.0, '{"lr": 0.1, "opt": "adam", "r": 4, "fixed": 1}'),
        ("succeeded", 2.0, '{"lr": 0.2, "opt": "sgd", "r": 8, "fixed": 1}'),
        ("pruned", None, '{"lr": 0.3, "opt": "lion", "r": 16, "fixed": 1}'),
    ])]
    panels = {n: (sc, pts) for n, sc, pts in param_panels(trials, "t0")}
    assert set(panels) == {"lr", "opt", "r"}  # `fixed` takes one value; the pruned trial has no final value
    assert panels["lr"][0] == "linear" and panels["r"][0] == "linear" and panels["opt"][0] == "category"
    assert [x for x, _, _ in panels["opt"][1]] == ["adam", "sgd"]
    assert curve_series([{"run_id": "a", "trial_id": "t0", "status": "failed", "seq": None, "step": None,
                          "value": None}], None) == [{"run_id": "a", "trial_id": "t0", "status": "failed",
                                                      "points": [], "best": False}]


def test_a_pruned_trial_is_pruned_and_stands_at_its_last_value():
    trials = [{"trial_id": "a", "status": "succeeded", "metric_value": 1.0, "params": '{"lr": 0.1}'},
              {"trial_id": "b", "status": "pruned", "metric_value": None, "params": '{"lr": 0.3}'}]
    [(_name, _scale, pts)] = param_panels(trials, "a", {"b": 2.5})
    assert sorted((x, y) for x, y, _ in pts) == [(0.1, 1.0), (0.3, 2.5)]
    assert param_panels(trials, "a") == []  # without its last value only one trial is left: no panel
    from gpuledger.report.curves import curves_section

    rows = [{"run_id": "rb", "trial_id": "b", "status": "cancelled", "seq": 0, "step": 0, "value": 4.0},
            {"run_id": "rb", "trial_id": "b", "status": "cancelled", "seq": 1, "step": 24, "value": 2.5}]
    section = curves_section(rows, trials, {"metric_name": "eval_loss", "best_trial_id": "a"}, str)
    svg = section.blocks[0].svg
    assert "pruned" in svg and "cancelled" not in svg  # the legend names what the search did
