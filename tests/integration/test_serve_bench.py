"""The serving benchmark trial program: the tiny CPU server, the load generator, vLLM command lines
and result parsing, and one real benchmark run end to end."""

from __future__ import annotations

import asyncio
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gpuledger.trainers import loadgen, serve_bench
from gpuledger.trainers.tiny_serve import CONFIG_PATH, KVEngine, Request, Scheduler

REPO = Path(__file__).resolve().parents[2]

VLLM_RESULT = REPO / "tests" / "data" / "bench_serve_result.json"  # vLLM --save-result format (see _provenance)


def _engine(slots: int = 4) -> KVEngine:
    return KVEngine(json.loads(CONFIG_PATH.read_text()), slots, seed=0)


def test_incremental_decode_equals_full_prefill():
    eng = _engine()
    tokens = [3, 14, 15, 9, 26, 5, 35, 8, 9, 7, 9, 3]
    full = eng.prefill(0, tokens)
    eng.prefill(1, tokens[:5])
    eng.prefill(2, [1, 2, 3])
    for pos in range(5, len(tokens)):  # one token at a time, batched with an unrelated sequence in slot 2
        logits = eng.decode([1, 2], [tokens[pos], 4], [pos, 3 + pos - 5])
    assert np.allclose(logits[0], full, atol=1e-5)


def test_scheduler_never_runs_more_than_max_num_seqs_and_finishes_every_request():
    eng = _engine(slots=3)
    sched = Scheduler(eng, max_num_seqs=3, max_num_batched_tokens=64)
    seen: dict[int, list[int]] = {}
    done: list[int] = []
    for i in range(7):
        seen[i] = []
        sched.waiting.append(Request([5] * (10 + i), 6, seen[i].append, lambda i=i: done.append(i)))
    widest = 0
    while sched.step():
        widest = max(widest, len(sched.running))
    assert widest == 3 and sorted(done) == list(range(7))
    assert all(len(toks) == 6 for toks in seen.values())
    assert sorted(sched.free) == [0, 1, 2]


def test_percentile_is_numpys_linear_and_monotone():
    xs = [5.0, 1.0, 9.5, 3.25, 7.0, 2.0, 8.0]
    for p in (0, 50, 95, 99, 100):
        assert loadgen.percentile(xs, p) == pytest.approx(float(np.percentile(xs, p)))
    assert math.isnan(loadgen.percentile([], 50))


@pytest.mark.parametrize("url", ["http://10.0.0.1:8000", "http://example.com:80", "https://127.0.0.1:1",
                                 "http://127.0.0.1", "http://127.0.0.1:8000/v1", "file:///etc/passwd"])
def test_loadgen_refuses_anything_but_a_loopback_http_url(url):
    with pytest.raises(ValueError, match="base-url"):
        loadgen.parse_base_url(url)


def _args(**over):
    ns = serve_bench.build_parser().parse_args([])
    for k, v in over.items():
        setattr(ns, k, v)
    return ns


def test_vllm_serve_command_line():
    args = _args(engine="vllm", model="meta-llama/Llama-3.1-8B", tensor_parallel_size=2, precision="fp8",
                 kv_cache_dtype="fp8", max_num_seqs=128, max_num_batched_tokens=8192, max_model_len=4096,
                 random_weights=True, gpu_memory_utilization=0.9)
    cmd = serve_bench.vllm_serve_cmd(args, 8123)
    assert cmd[:3] == ["vllm", "serve", "meta-llama/Llama-3.1-8B"]
    flags = dict(zip(cmd[3::2], cmd[4::2], strict=False))
    assert flags == {"--host": "127.0.0.1", "--port": "8123", "--tensor-parallel-size": "2", "--max-num-seqs": "128",
                     "--gpu-memory-utilization": "0.9", "--kv-cache-dtype": "fp8", "--seed": "0",
                     "--dtype": "bfloat16", "--quantization": "fp8", "--max-num-batched-tokens": "8192",
                     "--max-model-len": "4096", "--load-format": "dummy"}


def test_vllm_bench_command_line():
    args = _args(engine="vllm", model="m", concurrency=32, num_prompts=500, input_len=1024, output_len=128)
    cmd = serve_bench.vllm_bench_cmd(args, "http://127.0.0.1:8123", "/tmp/r", "result.json")
    assert cmd[:3] == ["vllm", "bench", "serve"]
    text = " ".join(cmd)
    for part in ("--backend vllm", "--base-url http://127.0.0.1:8123", "--dataset-name random",
                 "--random-input-len 1024", "--random-output-len 128", "--num-prompts 500", "--ignore-eos",
                 "--percentile-metrics ttft,tpot,itl,e2el", "--metric-percentiles 50,95,99", "--save-result",
                 "--result-dir /tmp/r", "--result-filename result.json", "--max-concurrency 32", "--request-rate inf"):
        assert part in text
    poisson = serve_bench.vllm_bench_cmd(_args(model="m", request_rate=2.5), "http://127.0.0.1:1", "d", "f")
    assert "--request-rate 2.5" in " ".join(poisson) and "--max-concurrency" not in poisson


def test_metrics_from_a_result_file_in_vllms_format():
    result = json.loads(VLLM_RESULT.read_text())
    metrics = serve_bench.metrics_from_result(result)
    assert set(metrics) == set(serve_bench.SERVING_METRICS)
    assert metrics["output_tokens_per_s"] == result["output_throughput"]
    assert metrics["ttft_ms_p95"] == result["p95_ttft_ms"] and metrics["tpot_ms_p99"] == result["p99_tpot_ms"]


@pytest.mark.parametrize(("change", "message"), [
    ({"failed": 2, "errors": ["boom"]}, "2 of"),
    ({"completed": 0}, "no request completed"),
    ({"p95_tpot_ms": float("nan")}, "p95_tpot_ms"),
    ({"p50_ttft_ms": 1e9}, "out of order"),
    ({"p95_ttft_ms": None}, "p95_ttft_ms"),
])
def test_metrics_refuse_a_run_that_did_not_fully_happen(change, message):
    result = {**json.loads(VLLM_RESULT.read_text()), **change}
    with pytest.raises(serve_bench.BenchError, match=message):
        serve_bench.metrics_from_result(result)


def test_metrics_name_missing_percentiles():
    result = json.loads(VLLM_RESULT.read_text())
    del result["p95_ttft_ms"]
    with pytest.raises(serve_bench.BenchError, match="--metric-percentiles 50,95,99"):
        serve_bench.metrics_from_result(result)


def test_loadgen_against_the_tiny_server_counts_every_token(tmp_path):
    proc, base_url, _log = serve_bench.start_server(_args(max_num_seqs=4), tmp_path)
    try:
        prompts = loadgen.make_prompts(12, 10, seed=3)
        results, duration = asyncio.run(loadgen.run_load(base_url, prompts, 8, concurrency=4, max_duration_s=30))
        summary = loadgen.summarize(results, duration)
        bad = asyncio.run(loadgen.run_load(base_url, ["x" * 60], 30, concurrency=1, max_duration_s=10))[0][0]
    finally:
        serve_bench.stop(proc)
    assert summary["completed"] == 12 and summary["failed"] == 0
    assert summary["total_output_tokens"] == 12 * 8 and summary["total_input_tokens"] == 12 * 10
    assert 0 < summary["p50_ttft_ms"] <= summary["p95_ttft_ms"] <= summary["p99_ttft_ms"]
    assert not bad.ok and "400" in bad.error  # 60 + 30 tokens exceed the model's 64 positions
    assert proc.poll() is not None


def test_serve_bench_runs_for_real_and_reports_the_eight_metrics(tmp_path):
    metrics_file = tmp_path / "metrics.jsonl"
    done = subprocess.run([sys.executable, "-m", "gpuledger.trainers.serve_bench", "--concurrency", "2", "--num-prompts", "16",
                           "--output-len", "8", "--max-duration", "20", "--result-dir", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=120,
                          env={"GPULEDGER_METRICS": str(metrics_file), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    points = {m["name"]: m["value"] for m in map(json.loads, metrics_file.read_text().splitlines())}
    for name in serve_bench.SERVING_METRICS:
        assert math.isfinite(points[name]) and points[name] > 0, name
    for metric in ("ttft", "tpot"):
        assert points[f"{metric}_ms_p50"] <= points[f"{metric}_ms_p95"] <= points[f"{metric}_ms_p99"]
    assert points["completed_requests"] == 16
    saved = json.loads((tmp_path / "out" / "result.json").read_text())
    assert serve_bench.metrics_from_result(saved) == {k: points[k] for k in serve_bench.SERVING_METRICS}


def test_serve_bench_refuses_bad_settings_in_one_line():
    done = subprocess.run([sys.executable, "-m", "gpuledger.trainers.serve_bench", "--concurrency", "0"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0 and "--concurrency" in done.stderr


def test_a_server_that_dies_fails_the_trial_with_its_log(tmp_path):
    args = _args(engine="vllm", model="m", health_timeout=5)
    args.client = "vllm"
    with pytest.raises(serve_bench.BenchError, match="cannot start vllm"):
        serve_bench.start_server(args, tmp_path)  # no `vllm` on this machine
    script = tmp_path / "dies.py"
    script.write_text("import sys; print('engine: out of memory', file=sys.stderr); sys.exit(3)\n")
    with open(tmp_path / "s.log", "w") as log:
        proc = subprocess.Popen([sys.executable, str(script)], stderr=log, start_new_session=True)
        with pytest.raises(serve_bench.BenchError, match="exited with code 3"):
            serve_bench.wait_healthy("http://127.0.0.1:9", proc, 20, tmp_path / "s.log")
    assert "out of memory" in (tmp_path / "s.log").read_text()



# ---------------------------------------------------------------------------------------------
# the spec of an inference sweep


def _inference_spec(extra: str = "", params: str = "concurrency: [1, 4]") -> str:
    return f"""kind: sweep
name: s
project: p
owner: o
model: gpuledger/demo-char-gpt
method: inference
serve: {{engine: tiny, prompt_tokens: 16, output_tokens: 32{extra}}}
search:
  params: {{{params}}}
  objective: {{metric: output_tokens_per_s, goal: maximize}}
budget: {{max_usd: 1}}
task:
  run: python -m gpuledger.trainers.serve_bench --engine {{engine}} --concurrency {{concurrency}} --max-num-seqs {{max_num_seqs}}
"""


def test_inference_spec_renders_serving_settings_quoted():
    from gpuledger.spec import expand_trials, parse_spec

    spec = parse_spec(_inference_spec(), "s.yaml")
    trials = expand_trials(spec)
    assert [t.params for t in trials] == [{"concurrency": 1}, {"concurrency": 4}]
    assert trials[1].run == "python -m gpuledger.trainers.serve_bench --engine tiny --concurrency 4 --max-num-seqs 256"


@pytest.mark.parametrize(("text", "message"), [
    (_inference_spec(params="max_num_seqs: [8, 16]"), "s.yaml:7:8: serve: method: inference needs a load"),
    (_inference_spec(extra=", output_tokens: 1"), "serve.output_tokens"),
    (_inference_spec(extra=", gpu_memory_utilization: 1.5"), "serve.gpu_memory_utilization"),
    (_inference_spec().replace("method: inference", "method: lora"), "serve: is for method: inference"),
])
def test_inference_spec_mistakes_are_located(text, message):
    from gpuledger.spec import SpecError, parse_spec

    with pytest.raises(SpecError) as info:
        parse_spec(text, "s.yaml")
    assert message in str(info.value)


def test_shipped_serve_bench_spec_is_valid_and_runs_one_benchmark_at_a_time():
    from gpuledger.spec import expand_trials, load_spec

    spec = load_spec(REPO / "specs" / "serve-bench.yaml")
    assert spec.method == "inference" and spec.resources.max_parallel == 1 and spec.serve.slo is not None
    assert [t.params["concurrency"] for t in expand_trials(spec)] == [1, 4, 16, 64]


def test_planner_sizes_a_serving_trial_as_weights_kv_and_one_step_at_the_engine_memory_fraction():
    from gpuledger.estimate import Workload, estimate
    from gpuledger.plan import trial_estimates
    from gpuledger.spec import expand_trials, parse_spec

    text = _inference_spec(params="concurrency: [8], tensor_parallel: [1, 2]")
    text = text.replace("engine: tiny, prompt_tokens: 16, output_tokens: 32",
                        "engine: vllm, prompt_tokens: 1024, output_tokens: 128, max_num_seqs: 64")
    text = text.replace("gpuledger/demo-char-gpt", "meta-llama/Llama-3.1-8B").replace("method: inference",
                                                                                   "method: inference\nprecision: bf16")
    spec = parse_spec(text, "s.yaml")
    est = trial_estimates(spec, expand_trials(spec)).to_dicts()
    assert [r["gpus"] for r in est] == [1, 2]
    for row in est:
        direct = estimate(Workload(model="meta-llama/Llama-3.1-8B", method="inference", precision="bf16", micro_batch=64,
                                   seq_len=1152, prompt_len=1024, completion_len=128, gpus=row["gpus"]))
        m = direct.memory_gib  # one engine step prefills 8192 tokens (vLLM's default), not all 64 x 1024 at once
        assert row["est_memory_gib"] == pytest.approx((m["device"] - m["activations"] * (1 - 8192 / 65536)) / 0.9)
        assert row["flops_total"] == pytest.approx(direct.flops_per_token * 200 * 1152)  # num_prompts x tokens


def test_batched_prefill_equals_one_prompt_at_a_time():
    eng = _engine(slots=3)
    prompts = [[3, 1, 4, 1, 5], [9, 2, 6, 5, 3], [5, 8, 9, 7, 9]]
    batched = eng.prefill_batch([0, 1, 2], prompts)
    for slot, prompt in enumerate(prompts):
        assert np.allclose(batched[slot], _engine(slots=3).prefill(slot, prompt), atol=1e-5)
    nxt = eng.decode([0, 1, 2], [2, 2, 2], [5, 5, 5])  # the batched caches serve decoding like single ones
    single = _engine(slots=1)
    single.prefill(0, prompts[1])
    assert np.allclose(nxt[1], single.decode([0], [2], [5])[0], atol=1e-5)
