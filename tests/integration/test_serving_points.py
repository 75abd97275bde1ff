"""Measured serving operating points: read from a real DuckDB warehouse (named query
serving_points), chosen per accelerator and tensor-parallel size against an SLO."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.record_fixtures import example_record, ingest_known
from helpers.warehouse_template import fresh_warehouse

from gpuledger.errors import UserError
from gpuledger.serving import best_by_placement, cheapest_meeting, load_points
from gpuledger.warehouse import Warehouse

SWEEP = "serve-h100-aaaa0000"


def _metrics(tok_s: float, ttft95: float, tpot95: float) -> dict[str, float]:
    return {"output_tokens_per_s": tok_s, "requests_per_s": tok_s / 128, "ttft_ms_p50": ttft95 * 0.6,
            "ttft_ms_p95": ttft95, "ttft_ms_p99": ttft95 * 1.2, "tpot_ms_p50": tpot95 * 0.8, "tpot_ms_p95": tpot95,
            "tpot_ms_p99": tpot95 * 1.1}


#: (run, accelerator, gpus, concurrency, $/h, tokens/s, p95 TTFT ms, p95 TPOT ms)
POINTS = [
    ("r1", "H100", 1, 8, 3.0, 1800.0, 90.0, 11.0),
    ("r2", "H100", 1, 32, 3.0, 5200.0, 180.0, 19.0),
    ("r3", "H100", 1, 128, 3.0, 9100.0, 900.0, 41.0),   # fastest, misses the SLO
    ("r4", "L4", 1, 8, 0.8, 420.0, 300.0, 35.0),       # misses: TTFT and TPOT
    ("r5", "L4", 1, 32, 0.8, 900.0, 1200.0, 70.0),
    ("r6", "H100", 2, 32, 6.0, 8000.0, 120.0, 14.0),
    ("r7", "H100", 1, 16, None, 3000.0, 100.0, 12.0),  # no billing: price unknown
]


@pytest.fixture
def wh(tmp_path):
    with Warehouse.open(fresh_warehouse(tmp_path / "w.duckdb")) as w:
        w.register_sweep(sweep_id=SWEEP, name="serve-h100", method="inference", objective_metric="output_tokens_per_s",
                         objective_goal="maximize", started_at="2026-11-20T09:00:00", status="succeeded",
                         spec_json={"kind": "sweep", "method": "inference",
                                    "serve": {"slo": {"p95_ttft_ms": 200, "p95_tpot_ms": 20}}})
        records = []
        for run, acc, gpus, conc, usd_h, tok, ttft, tpot in POINTS:
            rec = example_record(run, f"t-{run}", sweep_id=SWEEP, launcher="skypilot", accelerator=acc, gpus=gpus,
                                 cloud="aws", usd_per_hour=usd_h or 0.0, started_at="2026-11-20T10:00:00", wall_s=300,
                                 final_metrics=_metrics(tok, ttft, tpot),
                                 params={"concurrency": conc, "tensor_parallel": gpus})
            if usd_h is None:
                rec["billing"] = []
            records.append(rec)
        records.append(example_record("r8", "t-r8", sweep_id=SWEEP, status="failed", accelerator="H100", gpus=1,
                                      final_metrics=_metrics(99999, 1, 1)))
        result = ingest_known(w, records)
        assert not result.rejected, result.rejected
        yield w


def test_points_come_from_succeeded_runs_with_price_and_label(wh):
    sp = load_points(wh, "serve-h100")
    assert sp.sweep_id == SWEEP and sp.label == "measured in sweep serve-h100 on 2026-11-20"
    by_run = {p.run_id: p for p in sp.points}
    assert set(by_run) == {"r1", "r2", "r3", "r4", "r5", "r6", "r7"}  # the failed run is not a measurement
    r2 = by_run["r2"]
    assert (r2.accelerator, r2.gpus, r2.load) == ("H100", 1, "concurrency=32")
    assert r2.usd_per_hour == pytest.approx(3.0)
    assert r2.usd_per_million_output_tokens == pytest.approx(3.0 / (5200 * 3600) * 1e6)
    assert by_run["r7"].usd_per_hour is None and by_run["r7"].usd_per_million_output_tokens is None


def test_best_point_per_accelerator_and_tp_meets_the_slo_or_says_how_close(wh):
    points = load_points(wh, "serve-h100").points
    choices = {(c.accelerator, c.gpus): c for c in best_by_placement(points, p95_ttft_ms=200, p95_tpot_ms=20)}
    assert set(choices) == {("H100", 1), ("H100", 2), ("L4", 1)}
    assert choices["H100", 1].point.run_id == "r2" and choices["H100", 1].meets_slo  # not r3: it misses
    assert choices["H100", 2].point.run_id == "r6" and choices["H100", 2].meets_slo
    l4 = choices["L4", 1]
    assert not l4.meets_slo and l4.point.run_id == "r4" and "closest: concurrency=8" in l4.why


def test_cheapest_point_per_million_tokens_meeting_the_slo(wh):
    points = load_points(wh, "serve-h100").points
    best = cheapest_meeting(points, p95_ttft_ms=200, p95_tpot_ms=20)
    assert best.run_id == "r2"  # $0.160/M; r6 is $0.208/M, r1 $0.463/M; r7 has no price
    assert cheapest_meeting(points, p95_ttft_ms=10, p95_tpot_ms=1) is None


def test_unknown_or_non_serving_sweeps_are_one_clear_error(wh):
    with pytest.raises(UserError, match="no sweep named 'nope'"):
        load_points(wh, "nope")
    wh.register_sweep(sweep_id="lora-bbbb1111", name="lora", method="lora", objective_metric="eval_loss",
                      objective_goal="minimize", started_at="2026-11-20T09:00:00")
    ingest_known(wh, [example_record("l1", "t-l1", sweep_id="lora-bbbb1111", final_metrics={"eval_loss": 1.0})])
    with pytest.raises(UserError, match="no succeeded run reporting serving metrics"):
        load_points(wh, "lora")


def test_inference_sweep_report_shows_curves_slo_cost_per_million_and_cheapest(wh, tmp_path):
    from gpuledger.report import write_sweep_report

    files = write_sweep_report(wh, name="serve-h100", out_dir=tmp_path / "rep")
    md = files.markdown_text
    assert "## Serving: latency against throughput" in md
    assert "| cheapest configuration meeting the SLO | H100×1 tensor_parallel=1 at concurrency=32 | $0.16 per million" in md
    assert "L4×1: closest point concurrency=8" in md and "H100×2: best point concurrency=32" in md
    html = Path(files.html).read_text()
    assert html.count("SLO p95 TPOT 20 ms") >= 1 and html.count("SLO p95 TTFT 200 ms") >= 1
    csv = next(p for p in files.csv if p.name == "serving-points.csv").read_text().splitlines()
    assert csv[0].startswith("configuration,load,run_id") and len(csv) == 1 + 7


def test_a_lora_sweep_report_has_no_serving_section(wh, tmp_path):
    from gpuledger.report import write_sweep_report

    wh.register_sweep(sweep_id="lora-bbbb1111", name="lora", method="lora", objective_metric="eval_loss",
                      objective_goal="minimize", started_at="2026-11-20T09:00:00")
    ingest_known(wh, [example_record("l1", "t-l1", sweep_id="lora-bbbb1111", final_metrics={"eval_loss": 1.0})])
    assert "Serving:" not in write_sweep_report(wh, name="lora", out_dir=tmp_path / "rep").markdown_text


CAPACITY = """kind: capacity
name: chat
project: p
owner: o
model: meta-llama/Llama-3.1-8B
precision: bf16
traffic: {qps: 5, prompt_tokens: 1000, output_tokens: 200}
slo: {p95_ttft_ms: 200, p95_tpot_ms: 20}
resources: {accelerators: [L4, H100]}
measured: {from_sweep: serve-h100}
"""


def test_capacity_from_sweep_uses_the_best_measured_point_meeting_the_slo(wh):
    from gpuledger.serving.capacity_from_sweep import plan_capacity_measured
    from gpuledger.spec import parse_spec

    result = plan_capacity_measured(parse_spec(CAPACITY, "c.yaml"), wh=wh)
    assert result["measured_from"]["label"] == "measured in sweep serve-h100 on 2026-11-20"
    h100 = next(o for o in result["options"] if o["accelerator"] == "H100")
    assert h100["throughput_source"] == "measured" and h100["tokens_per_s_per_gpu"] == pytest.approx(5200.0)
    assert "measured in sweep serve-h100 on 2026-11-20, run r2" in h100["reason"]
    notes = [a for a in result["assumptions"] if a.startswith("measured in sweep serve-h100")]
    assert any("L4×1: none of 2 points meets" in n and "closest: concurrency=8" in n for n in notes)


def test_capacity_from_an_unknown_sweep_is_one_clear_error(wh):
    from gpuledger.serving.capacity_from_sweep import plan_capacity_measured
    from gpuledger.spec import parse_spec

    with pytest.raises(UserError, match="no sweep named 'nope'"):
        plan_capacity_measured(parse_spec(CAPACITY.replace("serve-h100", "nope"), "c.yaml"), wh=wh)


def test_capacity_command_reads_the_sweep_from_the_warehouse(wh, tmp_path):
    import os
    import subprocess
    import sys

    spec = tmp_path / "c.yaml"
    spec.write_text(CAPACITY)
    wh.close()  # the command opens the file itself (read-only)
    done = subprocess.run([sys.executable, "-m", "gpuledger.cli", "capacity", str(spec)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "GPULEDGER_WAREHOUSE": str(wh.path)})
    assert done.returncode == 0, done.stderr
    assert "measured in sweep serve-h100 on 2026-11-20: L4×1: none of 2 points meets" in done.stdout


def test_capacity_fine_tune_cost_comes_from_the_warehouse_and_pays_back(wh):
    from gpuledger.serving.capacity_from_sweep import plan_capacity_measured
    from gpuledger.spec import parse_spec

    text = CAPACITY.replace("measured: {from_sweep: serve-h100}\n", "") + (
        "fine_tune: {sweep: serve-h100}\n"
        "compare: {api: {usd_per_1m_input_tokens: 0.5, usd_per_1m_output_tokens: 1.5}}\n")
    result = plan_capacity_measured(parse_spec(text, "c.yaml"), wh=wh)
    roi = wh.query_named("report_sweep_roi", {"sweep_id": SWEEP}).to_dicts()[0]
    c = result["compare"]
    assert roi["total_cost_usd"] > 0 and c["fine_tune_usd"] == pytest.approx(roi["total_cost_usd"], abs=0.01)
    assert c["fine_tune_source"].startswith(f"sweep serve-h100 ({SWEEP}")
    assert c["api_usd_per_month"] > c["self_usd_per_month"] and c["payback_months"] > 0
    assert c["payback_months"] == pytest.approx(c["fine_tune_usd"] / (c["api_usd_per_month"] - c["self_usd_per_month"]),
                                                rel=0.01)
    with pytest.raises(UserError, match="fine_tune.sweep: no sweep called 'nope'"):
        plan_capacity_measured(parse_spec(text.replace("sweep: serve-h100", "sweep: nope"), "c.yaml"), wh=wh)
