"""`gpuledger import`: a W&B export (the Public API's CSV with dict reprs, JSON lines with metadata, the
UI's runs table), an MLflow `search_runs` export (CSV and Parquet) and gpuledger's own table land in the
ledger idempotently, each unusable row named with what it lacks, and appear in the weekly report and
(model, method and tokens known) the calibration's runs."""

from __future__ import annotations

import json

import polars as pl
import pytest

from gpuledger.api import Ledger
from gpuledger.cli import main
from gpuledger.estimate.calibration import load_runs

# the shape of the W&B docs' export: pd.DataFrame({"summary": [...], "config": [...], "name": [...]}).to_csv()
WANDB_CSV = '''\
,summary,config,name
0,"{'_runtime': 3600.5, '_step': 900, '_timestamp': 1796112000.0, 'train/loss': 1.25, 'eval_loss': 1.4, 'train/num_input_tokens_seen': 36000000}","{'model_name_or_path': 'Qwen/Qwen2.5-0.5B', 'lora_r': 16, 'per_device_train_batch_size': 4, 'max_seq_length': 2048, 'gpu_type': 'NVIDIA A100-SXM4-80GB', 'gpu_count': 2}",lora-r16
1,"{'_runtime': 1800, '_timestamp': 1796115600.0, 'train/loss': 1.5}","{'model_name_or_path': 'Qwen/Qwen2.5-0.5B', 'lora_r': 8}",no-gpu-info
2,"{'_timestamp': 1796115600.0}","{'gpu_type': 'H100', 'gpu_count': 1}",no-runtime
'''


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.slow  # an import, the estimator, calibration and the weekly report: beyond the edit loop (make test runs it)
def test_a_wandb_export_imports_once_names_bad_rows_and_appears_in_the_weekly_report(tmp_path, capsys):
    export = _write(tmp_path, "team-wandb.csv", WANDB_CSV)
    code = main(["import", str(export), "--project", "team-llm", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1 and out["formats"] == ["wandb"] and out["rows"] == 3 and out["stored"] == 1 and out["new"] == 1
    assert any("row 2 (run no-gpu-info)" in s and "no GPU type or count" in s for s in out["skipped"])
    assert any("row 3 (run no-runtime)" in s and "no runtime" in s for s in out["skipped"])
    assert out["with_estimates"] == 1

    runs = Ledger().runs()
    row = runs.row(0, named=True)
    assert (row["launcher"], row["accelerator"], row["gpus"], row["status"]) == ("external", "A100-80GB", 2, "succeeded")
    assert row["wall_s"] == pytest.approx(3600.5) and row["project"] == "team-llm" and row["cost_usd"] > 0
    assert str(row["started_at"]).startswith("2026-12-01 06:59:59")  # _timestamp - _runtime
    finals = dict(Ledger().sql(f"select name, value from final_metrics where run_id = '{row['run_id']}'").rows())
    assert finals["train/loss"] == 1.25 and finals["eval_loss"] == 1.4

    again = Ledger().import_history([export], project="team-llm")
    assert again.stored == 1 and again.new == 0 and Ledger().runs().height == 1  # idempotent

    calibration = [r for r in load_runs() if r["run_id"] == row["run_id"]]
    assert calibration and calibration[0]["est_wall_s"] > 0 and calibration[0]["est_memory_gib"] > 0
    assert calibration[0]["model"] == "Qwen/Qwen2.5-0.5B" and calibration[0]["method"] == "lora"

    files = Ledger().report_weekly("2026-W49")
    text = files.markdown.read_text(encoding="utf-8")
    assert "team-llm" in text and "A100-80GB" in text


@pytest.mark.slow  # over ~0.5 s alone (a report, warehouse, plan or subprocess): make test runs it, make test-fast does not
def test_wandb_json_lines_with_metadata_and_the_ui_table(tmp_path):
    lines = [{"id": "abc123", "name": "sft-1", "state": "finished", "created_at": "2026-11-30T10:00:00Z",
              "config": {"lr": {"value": 0.0001, "desc": None}, "_wandb": {"value": {}}},
              "summary": {"_runtime": 120, "loss": 0.5},
              "metadata": {"gpu": "NVIDIA H100 80GB HBM3", "gpu_count": 8, "host": "node-1"}, "user": "ada"},
             {"id": "live1", "name": "still", "state": "running", "created_at": "2026-11-30T10:00:00Z",
              "summary": {"_runtime": 5}, "metadata": {"gpu": "H100", "gpu_count": 1}}]
    jsonl = _write(tmp_path, "runs.jsonl", "\n".join(json.dumps(r) for r in lines))
    ui = _write(tmp_path, "wandb_export.csv", 'Name,State,Created,Runtime,GPU Type,GPU Count,lr,eval/loss\n'
                'ui-run,finished,2026-11-29T08:00:00.000Z,600,NVIDIA L4,1,0.001,2.5\n')
    report = Ledger().import_history([jsonl, ui], project="sft")
    assert report.formats == ["wandb", "wandb"] and report.stored == 2
    assert any("run live1" in s and "still running" in s for s in report.skipped)
    runs = Ledger().runs().sort("started_at")
    assert runs["accelerator"].to_list() == ["L4", "H100"] and runs["gpus"].to_list() == [1, 8]
    assert runs["owner"].to_list()[1] == "ada"
    lr = Ledger().sql("select params->>'$.lr' as lr from runs where run_id like 'wandb-sft-abc123%'")["lr"].to_list()
    assert lr == ["0.0001"]


@pytest.mark.slow  # over ~1 s (a whole report, replay, plan or warehouse): make test runs it, make test-fast does not
def test_mlflow_search_runs_exports_csv_and_parquet(tmp_path):
    frame = pl.DataFrame({
        "run_id": ["r1", "r2"], "experiment_id": ["7", "7"], "status": ["FINISHED", "FAILED"],
        "artifact_uri": ["file:///a", "file:///b"],
        "start_time": ["2026-11-30 09:00:00+00:00", "2026-11-30 11:00:00+00:00"],
        "end_time": ["2026-11-30 10:30:00+00:00", "2026-11-30 11:05:00+00:00"],
        "metrics.loss": [0.9, None], "metrics.system/gpu_0_memory_usage_megabytes": [40960.0, 1000.0],
        "metrics.system/gpu_1_memory_usage_megabytes": [40000.0, None],
        "params.gpu_type": ["A100", "A100"], "params.learning_rate": ["1e-4", "1e-3"],
        "tags.mlflow.runName": ["big", "broken"], "tags.mlflow.user": ["bo", "bo"]})
    csv_path, pq_path = tmp_path / "mlflow.csv", tmp_path / "mlflow.parquet"
    frame.write_csv(csv_path)
    frame.write_parquet(pq_path)
    report = Ledger().import_history([csv_path], project="exp7")
    assert report.formats == ["mlflow"] and report.stored == 2 and not report.skipped
    again = Ledger().import_history([pq_path], project="exp7")
    assert again.stored == 2 and again.new == 0  # the same runs from the other file: nothing new
    runs = Ledger().runs().sort("started_at")
    assert runs["status"].to_list() == ["succeeded", "failed"] and runs["gpus"].to_list() == [2, 1]
    assert runs["wall_s"].to_list() == [5400.0, 300.0] and runs["peak_gpu_mem_gib"].to_list()[0] == 40.0


@pytest.mark.slow  # over ~0.5 s alone (a report, warehouse, plan or subprocess): make test runs it, make test-fast does not
def test_a_table_and_a_file_that_is_not_an_export(tmp_path, capsys):
    table = pl.DataFrame({"run_id": ["t1"], "started_at": ["2026-11-28T12:00:00"], "wall_s": [100.0],
                          "accelerator": ["H100"], "gpus": [4], "status": ["succeeded"], "cost_usd": [12.5],
                          "config": [json.dumps({"model": "meta-llama/Llama-3.1-8B"})], "metrics.loss": [1.0]})
    path = tmp_path / "history.parquet"
    table.write_parquet(path)
    report = Ledger().import_history([path], project="table")
    assert report.formats == ["table"] and report.stored == 1
    assert Ledger().runs()["cost_usd"].to_list() == [12.5]
    broken = _write(tmp_path, "broken.json", "{not json")
    assert main(["import", str(broken)]) == 1
    err = capsys.readouterr().err
    assert "broken.json:1:2: not JSON" in err and "Traceback" not in err
