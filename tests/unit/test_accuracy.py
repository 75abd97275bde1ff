"""`gpuledger accuracy`: the estimator's error per method, framework and GPU, from the public rows
shipped as package data and from the user's runs in a real warehouse; text, JSON and the HTML page."""

from __future__ import annotations

import csv
import json
import statistics
from pathlib import Path

import pytest
from helpers.record_fixtures import example_record

from gpuledger.cli import main
from gpuledger.estimate.public import MEMORY_CSV, THROUGHPUT_CSV, read_csv

#: (run, GPU, planned GiB, measured GiB, planned s, measured s, the plan's basis)
RUNS = [("r0", "A100", 10.0, 12.5, 1000.0, 800.0, "estimate"), ("r1", "A100", 10.0, 9.0, 1000.0, 1250.0, "estimate"),
        ("r2", "H100", 20.0, 20.0, 600.0, 600.0, "measured")]


def _warehouse(path: Path) -> None:
    from gpuledger.warehouse import Warehouse

    with Warehouse.open(path) as wh:
        wh.register_sweep(sweep_id="acc-1", name="acc", method="lora", started_at="2026-01-05T10:00:00")
        wh.upsert_trials("acc-1", [{"trial_id": f"t{i}", "est_memory_gib": r[2], "est_wall_s": r[4], "est_basis": r[6]}
                                   for i, r in enumerate(RUNS)])
        wh.ingest_records([example_record(r[0], f"t{i}", sweep_id="acc-1", accelerator=r[1], gpus=1,
                                          peak_gpu_mem_gib=r[3], wall_s=r[5]) for i, r in enumerate(RUNS)])


@pytest.mark.slow  # over ~1 s (a whole report, replay, plan or warehouse): make test runs it, make test-fast does not
def test_json_counts_public_rows_and_the_users_runs(tmp_path, capsys):
    path = tmp_path / "w.duckdb"
    _warehouse(path)
    assert main(["accuracy", "--json", "--warehouse", str(path)]) == 0
    acc = json.loads(capsys.readouterr().out)
    peaks = [r for r in read_csv(MEMORY_CSV) if r["kind"] == "peak"]
    scored = [r for r in read_csv(THROUGHPUT_CSV) if not (r.get("exclude_reason") or "").strip()]
    assert acc["summary"]["memory"]["public"]["overall"]["cases"] == len(peaks)
    assert acc["summary"]["time"]["public"]["overall"]["cases"] == len(scored)
    mine = acc["summary"]["memory"]["warehouse"]
    # errors (est - measured) / measured: -0.2, +0.111, 0
    assert mine["overall"] == {"cases": 3, "median_abs_error": 0.1111, "mean_error": round((-0.2 + 1 / 9 + 0) / 3, 4),
                               "within_band": 1.0}
    assert mine["by_gpu"]["A100"]["cases"] == 2 and mine["by_gpu"]["H100"]["median_abs_error"] == 0.0
    assert mine["by_framework"] == {"hf": mine["overall"]}
    time_mine = acc["summary"]["time"]["warehouse"]["by_gpu"]["A100"]
    assert time_mine["median_abs_error"] == round(statistics.median([0.25, 0.2]), 4) and time_mine["within_band"] == 1.0
    row = next(r for r in acc["rows"] if r["quantity"] == "time" and r["id"] == "acc-1/r2")
    assert row["detail"] == "plan basis: measured" and row["error"] == 0.0
    # the estimate bands per cell, the runs in theirs (GPU runs: memory 3, time 2 of the model's own plan)
    cells = acc["cells"]
    assert sum(c["runs"] for c in cells if c["quantity"] == "memory") == 3
    assert sum(c["runs"] for c in cells if c["quantity"] == "time") == 2
    assert all(c["band"]["p10"] <= c["band"]["p50"] <= c["band"]["p90"] for c in cells)


@pytest.mark.slow  # over ~0.5 s alone (a report, warehouse, plan or subprocess): make test runs it, make test-fast does not
def test_text_says_what_each_table_is(tmp_path, capsys):
    assert main(["accuracy", "--warehouse", str(tmp_path / "absent.duckdb")]) == 0
    out = capsys.readouterr().out
    assert "Memory — public measurements (shipped with gpuledger)" in out
    assert "Training time — your runs (warehouse)\n  no cases" in out
    assert "Per cell of the estimate bands" in out and "hf lora 16bit, 1 GPU, ampere" in out
    assert not (tmp_path / "absent.duckdb").exists()
    line = next(ln for ln in out.splitlines() if ln.strip().startswith("framework  megatron"))
    assert line.split()[2] == str(sum(1 for r in read_csv(THROUGHPUT_CSV)
                                      if r["framework"] == "megatron" and not (r.get("exclude_reason") or "").strip()))


@pytest.mark.slow  # over ~1 s (a whole report, replay, plan or warehouse): make test runs it, make test-fast does not
def test_html_page_in_the_reports_style(tmp_path, capsys):
    path = tmp_path / "w.duckdb"
    _warehouse(path)
    out_dir = tmp_path / "page"
    assert main(["accuracy", "--warehouse", str(path), "--html", str(out_dir)]) == 0
    assert f"wrote {out_dir / 'accuracy.html'}" in capsys.readouterr().out
    html = (out_dir / "accuracy.html").read_text(encoding="utf-8")
    assert "<h1>Estimator accuracy</h1>" in html and "Memory: your runs (warehouse)" in html
    assert "acc-1/r0" in html and "+25.0%" in html  # r0's memory: 12.5 GiB measured for 10 planned is -20%, its time +25%
    with open(out_dir / "accuracy-csv" / "rows.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert sum(1 for r in rows if r["origin"] == "warehouse") == 6  # memory and time of 3 runs
    assert (out_dir / "accuracy.md").read_text(encoding="utf-8").startswith("# Estimator accuracy")
