"""Learn from use: the per-(method, framework, GPU family) correction (gpuledger/estimate/calibration.py)."""

from __future__ import annotations

import csv
import json
import statistics
from pathlib import Path

import pytest

from gpuledger.estimate import Workload, calibration, estimate

ROOT = Path(__file__).resolve().parents[2]
PUBLIC = ROOT / "tests" / "data" / "memory_public.csv"


def _records() -> list[dict]:
    from gpuledger.estimate.public import MEMORY_FAMILY_GPU, memory_workload

    out = []
    with open(PUBLIC, newline="") as fh:
        for row in csv.DictReader(fh):
            if row["kind"] != "peak":
                continue
            w = memory_workload(row)
            out.append(dict(method=w.method, framework=w.framework, accelerator=MEMORY_FAMILY_GPU[row["family"]],
                            est_memory_gib=estimate(w).memory_gib[row["level"]],
                            measured_memory_gib=float(row["measured_gib"])))
    return out


def test_fit_needs_enough_runs_and_takes_the_median():
    rec = [dict(method="lora", framework="hf", accelerator="A100", est_memory_gib=10.0, measured_memory_gib=m)
           for m in (9.0, 9.5, 9.3, 20.0)]
    assert calibration.fit(rec, "lora", "hf", "ampere") is None
    rec.append(dict(rec[0], measured_memory_gib=9.4))
    c = calibration.fit(rec, "lora", "hf", "ampere")
    assert c is not None and c.runs == 5 and abs(c.factor - 0.94) < 1e-9
    assert c.describe() == "calibrated on 5 of your runs: x0.94 (lora/hf/ampere)"
    assert calibration.fit(rec, "lora", "hf", "hopper") is None  # another GPU family learns nothing from these


def test_leave_one_out_on_public_measurements_does_not_hurt():
    pairs = calibration.leave_one_out(_records())
    assert len(pairs) >= 20
    raw = statistics.median(abs(r) for r, _ in pairs)
    corrected = statistics.median(abs(c) for _, c in pairs)
    assert corrected <= raw


def test_no_warehouse_no_runs(tmp_path):
    assert calibration.load_runs(tmp_path / "absent.duckdb") == []
    assert not (tmp_path / "absent.duckdb").exists()


def test_named_query_runs_on_a_real_warehouse(tmp_path):
    from gpuledger.warehouse import Warehouse

    path = tmp_path / "ledger.duckdb"
    with Warehouse.open(path) as wh:
        df = wh.query_named("estimate_runs")
    assert df.columns == ["run_id", "sweep_id", "model", "method", "accelerator", "gpus", "est_memory_gib",
                          "measured_memory_gib", "est_wall_s", "wall_s", "est_basis"]
    assert calibration.load_runs(path) == []


def test_cli_says_whether_it_calibrated(capsys, tmp_path):
    from gpuledger.cli import main

    assert main(["estimate", "gpt2", "--accelerator", "A100", "--warehouse", str(tmp_path / "w.duckdb")]) == 0
    assert "not calibrated: 0 of your measured runs match lora/hf/ampere (5 needed)" in capsys.readouterr().out
    assert main(["estimate", "gpt2", "--no-calibration"]) == 0
    assert "not calibrated (--no-calibration)" in capsys.readouterr().out


def _warehouse_with_runs(path, ratios, *, method="lora", accelerator="A100", time_ratios=None, basis="estimate"):
    """A real warehouse with one sweep of `method` and one succeeded GPU run per ratio
    (measured = 10 GiB x ratio against a 10 GiB estimate; wall-clock 1000 s x time ratio against a
    planned 1000 s, the plan's time of `basis`)."""
    from helpers.record_fixtures import example_record

    from gpuledger.warehouse import Warehouse

    time_ratios = time_ratios or [1.0] * len(ratios)
    with Warehouse.open(path) as wh:
        wh.register_sweep(sweep_id="cal-1", name="cal", method=method, started_at="2026-01-05T10:00:00")
        wh.upsert_trials("cal-1", [{"trial_id": f"t{i}", "est_memory_gib": 10.0, "est_wall_s": 1000.0, "est_basis": basis}
                                   for i in range(len(ratios))])
        wh.ingest_records([example_record(f"r{i}", f"t{i}", sweep_id="cal-1", accelerator=accelerator, gpus=1,
                                          peak_gpu_mem_gib=10.0 * q, wall_s=1000.0 * tq)
                           for i, (q, tq) in enumerate(zip(ratios, time_ratios, strict=True))])


@pytest.mark.slow  # over ~0.5 s alone (a report, warehouse, plan or subprocess): make test runs it, make test-fast does not
def test_learns_from_the_users_runs_and_says_so(capsys, tmp_path):
    from gpuledger.cli import main

    path = tmp_path / "w.duckdb"
    _warehouse_with_runs(path, [0.9, 0.92, 0.88, 0.9, 0.95])
    runs = calibration.load_runs(path)
    assert len(runs) == 5 and {r["method"] for r in runs} == {"lora"}
    base = estimate(Workload(model="gpt2"))
    assert main(["estimate", "gpt2", "--accelerator", "A100", "--warehouse", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["calibration"]["applied"] and out["calibration"]["runs"] == 5
    assert out["calibration"]["factor"] == 0.9
    assert out["calibration"]["device_gib"] == round(base.memory_gib["device"] * 0.9, 4)
    assert out["calibration"]["note"] == "calibrated on 5 of your runs: x0.90 (lora/hf/ampere)"
    # another GPU family or --no-calibration: the plain estimate, and the output says why
    assert main(["estimate", "gpt2", "--accelerator", "H100", "--warehouse", str(path)]) == 0
    assert "not calibrated: 0 of your measured runs match lora/hf/hopper (5 needed)" in capsys.readouterr().out
    assert main(["estimate", "gpt2", "--accelerator", "A100", "--warehouse", str(path), "--no-calibration"]) == 0
    assert "not calibrated (--no-calibration)" in capsys.readouterr().out


@pytest.mark.slow  # over ~1 s (a whole report, replay, plan or warehouse): make test runs it, make test-fast does not
def test_time_learnt_from_the_users_runs_in_the_gpu_table(capsys, tmp_path):
    from gpuledger.cli import main

    path = tmp_path / "w.duckdb"
    _warehouse_with_runs(path, [1.0] * 5, time_ratios=[1.3, 1.2, 1.25, 1.25, 1.4])
    runs = calibration.load_runs(path)
    c = calibration.fit(runs, "lora", "hf", "ampere", quantity="time")
    assert c is not None and c.factor == 1.25 and c.describe() == "time calibrated on 5 of your runs: x1.25 (lora/hf/ampere)"
    args = ["estimate", "gpt2", "--tokens", "1e6", "--accelerator", "A100-80GB", "--accelerator", "H100",
            "--warehouse", str(path), "--json"]
    assert main(args) == 0
    cal = {(o["accelerator"], o["gpus"]): o for o in json.loads(capsys.readouterr().out)["options"]}
    assert main([*args, "--no-calibration"]) == 0
    raw = {(o["accelerator"], o["gpus"]): o for o in json.loads(capsys.readouterr().out)["options"]}
    # calibrated: the model's time x 1.25 is the P50 (the public cell's spread around it); without: the
    # model's time moved by the public cell's measured error
    from gpuledger.estimate import bands

    model_s = raw[("A100-80GB", 1)]["time_s"]["p50"] / bands.band_for("time", "hf", "lora", "bf16", 1, "A100-80GB").p50
    assert cal[("A100-80GB", 1)]["time_s"]["p50"] == pytest.approx(model_s * 1.25, rel=1e-3)
    assert cal[("A100-80GB", 1)]["time_calibration"] == c.describe()
    assert cal[("A100-80GB", 1)]["time_band"]["basis"] == "calibrated"
    # H100: no correction, but the band rests on the public rows and the 5 runs (the 1-GPU level)
    assert cal[("H100", 1)]["time_calibration"] is None and raw[("H100", 1)]["time_band"]["runs"] == 0
    assert cal[("H100", 1)]["time_band"]["runs"] == 5 and "5 of your runs" in cal[("H100", 1)]["time_band"]["says"]
    assert main(args[:-1]) == 0
    assert "- A100-80GB: time calibrated on 5 of your runs: x1.25 (lora/hf/ampere)" in capsys.readouterr().out


@pytest.mark.slow  # over ~0.5 s alone (a report, warehouse, plan or subprocess): make test runs it, make test-fast does not
def test_time_of_a_measured_plan_teaches_nothing(tmp_path):
    path = tmp_path / "w.duckdb"
    _warehouse_with_runs(path, [1.0] * 5, time_ratios=[1.3] * 5, basis="measured")
    assert calibration.fit(calibration.load_runs(path), "lora", "hf", "ampere", quantity="time") is None
