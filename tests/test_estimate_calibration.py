"""Learn from use: the per-(method, framework, GPU family) correction (gpuledger/estimate/calibration.py)."""

from __future__ import annotations

import csv
import statistics
from pathlib import Path

from gpuledger.estimate import calibration as cal
from gpuledger.estimate import estimate

ROOT = Path(__file__).resolve().parents[1]
PUBLIC = ROOT / "tests" / "data" / "memory_public.csv"
#: the GPU each public family measured on (tests/data/memory_public.csv `version`/`url` columns)
FAMILY_GPU = {"litgpt_hub": "A10G", "litgpt_tables": "A100", "fsdp_qlora": "RTX3090", "qwen_speed": "A100",
              "peft_metamathqa": "H100", "torchtune_flags": "A100", "trl_grpo": "A100", "torchtune_readme": "RTX4090"}


def _records() -> list[dict]:
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("estimator_accuracy", ROOT / "benchmarks" / "estimator_accuracy.py")
    bench = importlib.util.module_from_spec(spec)
    sys.modules["estimator_accuracy"] = bench
    spec.loader.exec_module(bench)
    out = []
    with open(PUBLIC, newline="") as fh:
        for row in csv.DictReader(fh):
            if row["kind"] != "peak":
                continue
            w = bench.public_workload(row)
            out.append(dict(method=w.method, framework=w.framework, accelerator=FAMILY_GPU[row["family"]],
                            est_memory_gib=estimate(w).memory_gib[row["level"]],
                            measured_memory_gib=float(row["measured_gib"])))
    return out


def test_fit_needs_enough_runs_and_takes_the_median():
    rec = [dict(method="lora", framework="hf", accelerator="A100", est_memory_gib=10.0, measured_memory_gib=m)
           for m in (9.0, 9.5, 9.3, 20.0)]
    assert cal.fit(rec, "lora", "hf", "ampere") is None
    rec.append(dict(rec[0], measured_memory_gib=9.4))
    c = cal.fit(rec, "lora", "hf", "ampere")
    assert c is not None and c.runs == 5 and abs(c.factor - 0.94) < 1e-9
    assert c.describe() == "calibrated on 5 of your runs: x0.94 (lora/hf/ampere)"
    assert cal.fit(rec, "lora", "hf", "hopper") is None  # another GPU family learns nothing from these


def test_leave_one_out_on_public_measurements_does_not_hurt():
    pairs = cal.leave_one_out(_records())
    assert len(pairs) >= 20
    raw = statistics.median(abs(r) for r, _ in pairs)
    corrected = statistics.median(abs(c) for _, c in pairs)
    assert corrected <= raw


def test_no_warehouse_no_runs(tmp_path):
    assert cal.load_runs(tmp_path / "absent.duckdb") == []
    assert not (tmp_path / "absent.duckdb").exists()


def test_named_query_runs_on_a_real_warehouse(tmp_path):
    from gpuledger.warehouse import Warehouse

    path = tmp_path / "ledger.duckdb"
    with Warehouse.open(path) as wh:
        df = wh.query_named("estimate_calibration")
    assert df.columns == ["run_id", "method", "accelerator", "est_memory_gib", "measured_memory_gib"]
    assert cal.load_runs(path) == []


def test_cli_says_whether_it_calibrated(capsys, tmp_path):
    from gpuledger.cli import main

    assert main(["estimate", "gpt2", "--accelerator", "A100", "--warehouse", str(tmp_path / "w.duckdb")]) == 0
    assert "not calibrated: 0 of your measured runs match lora/hf/ampere (5 needed)" in capsys.readouterr().out
    assert main(["estimate", "gpt2", "--no-calibration"]) == 0
    assert "not calibrated (--no-calibration)" in capsys.readouterr().out
