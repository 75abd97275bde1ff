"""benchmarks/gpu_truth.py, the parts that need no GPU: the matrix, a row from an agent record, the CSV
and the comparison with the estimator (the GPU run itself: docs/probes.md, not run here)."""

from __future__ import annotations

import csv
import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def gt():
    spec = importlib.util.spec_from_file_location("gpu_truth", REPO / "benchmarks" / "gpu_truth.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_truth"] = module
    spec.loader.exec_module(module)
    return module


def test_matrix_spans_sizes_methods_shapes(gt):
    cases = gt.build_matrix()
    params = {c.model: gt.estimate_for(c, None)["params_total"] for c in cases}
    assert min(params.values()) < 0.6e9 and 7e9 < max(params.values()) < 9e9 and len(params) == 4
    assert {c.method for c in cases} == {"lora", "full"}
    assert {c.seq_len for c in cases} >= {512, 4096} and {c.micro_batch for c in cases} >= {1, 8}
    assert {c.grad_ckpt for c in cases} == {True, False} and {c.precision for c in cases} == {"bf16"}
    # full fine-tuning of 8B does not fit an 80 GB GPU: not in the matrix
    assert all(params[c.model] < 4e9 for c in cases if c.method == "full")
    assert len(cases) == len(set(cases)) and all(gt.config_path(c.model).is_file() for c in cases)


def _record():
    points = [{"name": "tokens", "value": 4096.0 * s, "step": s, "t_s": 20.0 + 0.5 * s} for s in range(1, 9)]
    return {"run_id": "gpu-truth-1-2", "status": "succeeded", "reason": None, "peak_gpu_mem_gib": 21.5,
            "metrics": points, "final_metrics": {"step_s": 0.5, "tokens_per_s": 8192.0,
                                                 "torch_max_memory_allocated_gib": 18.25,
                                                 "torch_max_memory_reserved_gib": 20.0}}


def test_row_csv_and_comparison(gt, tmp_path):
    case = gt.Case("Qwen/Qwen2.5-0.5B", "lora", 4096, 1, False)
    versions = {"measured_at": "2026-11-26T15:00:00+00:00", "host": "gpu-1", "gpu": "NVIDIA H100 80GB HBM3",
                "driver": "580.1", "cuda": "13.0", "torch": "2.9.1", "transformers": "5.2", "peft": "0.18"}
    est = gt.estimate_for(case, "H100")
    assert est["est_allocated_gib"] < est["est_reserved_gib"] < est["est_device_gib"] and est["est_tokens_per_s"] > 0
    row = gt.row_from_record(case, _record(), versions, est)
    assert row["startup_s"] == 20.5 and row["steps"] == 8 and row["nvml_peak_gib"] == 21.5
    assert row["torch_max_allocated_gib"] == 18.25 and row["lora_r"] == 16 and row["gpu"].startswith("NVIDIA H100")
    out = tmp_path / "gpu_measured.csv"
    gt.append_rows(out, [row])
    gt.append_rows(out, [row])
    with open(out, newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 2 and list(rows[0]) == gt.COLUMNS and rows[1]["model"] == "Qwen/Qwen2.5-0.5B"
    lines = gt.comparison_lines([row])
    ratio = est["est_allocated_gib"] / 18.25
    assert "Qwen2.5-0.5B lora s4096 b1 ckpt off" in lines[2] and f"{ratio:.2f}x" in lines[2]
    other = tmp_path / "other.csv"
    other.write_text("a,b\n1,2\n")
    with pytest.raises(SystemExit, match="other columns"):
        gt.append_rows(other, [row])


def test_an_oom_case_is_a_row_without_numbers(gt):
    case = gt.Case("meta-llama/Llama-3.1-8B", "lora", 4096, 2, True)
    rec = {"run_id": "x", "status": "oom", "reason": "out of memory (exit code 1)", "peak_gpu_mem_gib": 79.1,
           "metrics": [], "final_metrics": {}}
    row = gt.row_from_record(case, rec, {}, gt.estimate_for(case, None))
    assert row["status"] == "oom" and row["steps"] == 0 and row["step_s"] is None
    assert "oom" in gt.comparison_lines([row])[2]


def test_committed_csv_has_the_header(gt):
    with open(REPO / "tests" / "data" / "gpu_measured.csv", newline="") as fh:
        assert next(csv.reader(fh)) == gt.COLUMNS
