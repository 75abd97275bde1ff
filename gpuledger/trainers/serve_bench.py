"""The serving-benchmark trial program: start an inference server inside the job, load it, report.

    python -m gpuledger.trainers.serve_bench --engine tiny --concurrency 8 --max-num-seqs 16
    python -m gpuledger.trainers.serve_bench --engine vllm --model meta-llama/Llama-3.1-8B --tensor-parallel-size 1 \\
        --precision bf16 --kv-cache-dtype auto --max-num-seqs 256 --concurrency 64 --input-len 1024 --output-len 256

1. Starts the engine's OpenAI-compatible server on 127.0.0.1 in its own process group:
   `tiny` = `gpuledger/trainers/tiny_serve.py` (the numpy demo model on this CPU, continuous batching);
   `vllm` = `vllm serve MODEL ...` (`trainers/requirements-serve.txt`; a GPU), its flags built by
   `vllm_serve_cmd` (`--load-format dummy` with `--random-weights`: a random-initialised model).
2. Waits for `GET /health` to answer 200 (bounded by `--health-timeout`; a server that exits early
   fails the trial with the tail of its log).
3. Runs the benchmark client: `builtin` = `gpuledger/trainers/loadgen.py` (closed loop at `--concurrency`, or
   Poisson arrivals at `--request-rate`), or `vllm` = `vllm bench serve ... --save-result` (the
   engine's own client; the default with `--engine vllm`), whose result JSON both clients share.
4. Reports through `gpuledger.track` exactly: `output_tokens_per_s`, `requests_per_s`,
   `ttft_ms_p50`, `ttft_ms_p95`, `ttft_ms_p99`, `tpot_ms_p50`, `tpot_ms_p95`, `tpot_ms_p99` (and,
   for context, `completed_requests`, `bench_duration_s`, `output_tokens`). A run where any
   request failed, or a metric is missing or not a positive finite number, exits 1 and reports
   nothing: a benchmark never reports what did not happen.
5. Stops the server (SIGTERM to its process group, SIGKILL after 10 s) whatever happened.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: result-JSON key (vLLM `vllm bench serve --save-result`, also written by gpuledger/trainers/loadgen.py)
#: -> metric name reported through gpuledger.track.
METRIC_KEYS = {
    "output_throughput": "output_tokens_per_s",
    "request_throughput": "requests_per_s",
    "p50_ttft_ms": "ttft_ms_p50",
    "p95_ttft_ms": "ttft_ms_p95",
    "p99_ttft_ms": "ttft_ms_p99",
    "p50_tpot_ms": "tpot_ms_p50",
    "p95_tpot_ms": "tpot_ms_p95",
    "p99_tpot_ms": "tpot_ms_p99",
}
SERVING_METRICS = tuple(METRIC_KEYS.values())
#: spec precision -> vLLM flags (`--dtype` for the compute dtype, `--quantization` for weights).
PRECISION_FLAGS = {
    "bf16": ["--dtype", "bfloat16"],
    "fp16": ["--dtype", "float16"],
    "fp32": ["--dtype", "float32"],
    "fp8": ["--dtype", "bfloat16", "--quantization", "fp8"],
    "int8": ["--dtype", "bfloat16", "--quantization", "bitsandbytes"],
    "int4": ["--dtype", "bfloat16", "--quantization", "bitsandbytes"],
    "nf4": ["--dtype", "bfloat16", "--quantization", "bitsandbytes"],
}
KV_CACHE_DTYPES = ("auto", "fp8", "fp8_e4m3", "fp8_e5m2", "bfloat16", "float16")


class BenchError(Exception):
    """The benchmark could not produce a trustworthy measurement (the message says why)."""


def metrics_from_result(result: dict) -> dict[str, float]:
    """Returns the 8 serving metrics of a `vllm bench serve` / loadgen result dict.

    Raises BenchError when a request failed, nothing completed, or a value is missing, not a
    positive finite number, or its percentiles are out of order.
    """
    if not isinstance(result, dict):
        raise BenchError("the result is not a JSON object")
    completed, failed = result.get("completed"), result.get("failed", 0)
    if not isinstance(completed, int) or completed < 1:
        raise BenchError(f"no request completed (completed={completed!r}); errors: {result.get('errors')}")
    if failed:
        errors = [e for e in result.get("errors") or [] if e][:3]
        raise BenchError(f"{failed} of {completed + failed} requests failed: {errors}")
    out: dict[str, float] = {}
    missing = [key for key in METRIC_KEYS if key not in result]
    if missing:
        raise BenchError(f"the result lacks {', '.join(missing)} (run vllm bench serve with "
                         "--percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,95,99)")
    for key, name in METRIC_KEYS.items():
        value = result[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise BenchError(f"{key} is {value!r}, not a positive finite number (output length 1 has no TPOT)")
        out[name] = float(value)
    for metric in ("ttft", "tpot"):
        p50, p95, p99 = (out[f"{metric}_ms_p{p}"] for p in (50, 95, 99))
        if not p50 <= p95 <= p99:
            raise BenchError(f"{metric} percentiles out of order: p50 {p50}, p95 {p95}, p99 {p99}")
    return out


def tiny_serve_cmd(args) -> list[str]:
    """Returns the argv that starts gpuledger/trainers/tiny_serve.py for these settings."""
    return [sys.executable, "-m", "gpuledger.trainers.tiny_serve", "--port", "0", "--exit-on-stdin-eof",
            "--max-num-seqs", str(args.max_num_seqs),
            "--max-num-batched-tokens", str(args.max_num_batched_tokens or 256), "--seed", str(args.seed)]


def vllm_serve_cmd(args, port: int) -> list[str]:
    """Returns the `vllm serve` argv for these settings (vLLM's engine arguments, CLI spelling)."""
    cmd = ["vllm", "serve", args.model, "--host", "127.0.0.1", "--port", str(port),
           "--tensor-parallel-size", str(args.tensor_parallel_size),
           "--max-num-seqs", str(args.max_num_seqs),
           "--gpu-memory-utilization", f"{args.gpu_memory_utilization:g}",
           "--kv-cache-dtype", args.kv_cache_dtype,
           "--seed", str(args.seed)]
    cmd += PRECISION_FLAGS[args.precision]
    if args.max_num_batched_tokens:
        cmd += ["--max-num-batched-tokens", str(args.max_num_batched_tokens)]
    if args.max_model_len:
        cmd += ["--max-model-len", str(args.max_model_len)]
    if args.random_weights:
        cmd += ["--load-format", "dummy"]
    return cmd


def vllm_bench_cmd(args, base_url: str, result_dir: str, result_file: str) -> list[str]:
    """Returns the `vllm bench serve` argv: random prompts of --input-len tokens, exactly --output-len
    output tokens (--ignore-eos), the load, percentiles 50/95/99 of TTFT/TPOT/ITL/E2EL, saved as JSON."""
    cmd = ["vllm", "bench", "serve", "--backend", "vllm", "--base-url", base_url, "--endpoint", "/v1/completions",
           "--model", args.model, "--dataset-name", "random",
           "--random-input-len", str(args.input_len), "--random-output-len", str(args.output_len),
           "--num-prompts", str(args.num_prompts), "--ignore-eos", "--seed", str(args.seed),
           "--num-warmups", str(args.num_warmups),
           "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,95,99",
           "--save-result", "--result-dir", result_dir, "--result-filename", result_file, "--disable-tqdm"]
    if args.concurrency:
        cmd += ["--max-concurrency", str(args.concurrency)]
    cmd += ["--request-rate", "inf" if math.isinf(args.request_rate) else f"{args.request_rate:g}"]
    return cmd


def free_port() -> int:
    """Returns a TCP port on 127.0.0.1 that was free a moment ago (for servers that need one given)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(base_url: str, proc: subprocess.Popen, timeout_s: float, log_path: Path) -> float:
    """Returns seconds until GET /health answered 200; raises BenchError if the server exits or times out."""
    start = time.monotonic()
    while time.monotonic() - start < timeout_s:
        if proc.poll() is not None:
            raise BenchError(f"the server exited with code {proc.returncode} before it was healthy:\n{_tail(log_path)}")
        with contextlib.suppress(OSError, urllib.error.URLError), \
                urllib.request.urlopen(base_url + "/health", timeout=2) as resp:
            if resp.status == 200:
                return time.monotonic() - start
        time.sleep(0.2)
    raise BenchError(f"the server was not healthy within {timeout_s:g} s:\n{_tail(log_path)}")


def _tail(path: Path, lines: int = 15) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return ""


def stop(proc: subprocess.Popen, grace_s: float = 10.0) -> None:
    """Stops the server's whole process group: SIGTERM, then SIGKILL after `grace_s`."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(OSError):
        if proc.stdin:
            proc.stdin.close()
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)


def start_server(args, workdir: Path) -> tuple[subprocess.Popen, str, Path]:
    """Starts the engine's server; returns (process, base URL, server log path)."""
    log_path = workdir / "server.log"
    log = open(log_path, "w", encoding="utf-8")  # noqa: SIM115 (the child writes it until it stops)
    if args.engine == "tiny":
        proc = subprocess.Popen(tiny_serve_cmd(args), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                text=True, start_new_session=True)
        deadline = time.monotonic() + args.health_timeout
        line = ""
        while (left := deadline - time.monotonic()) > 0 and proc.poll() is None:
            if not select.select([proc.stdout], [], [], min(left, 0.5))[0]:
                continue
            line = proc.stdout.readline()
            if line.startswith("tiny_serve listening on "):
                return proc, f"http://127.0.0.1:{int(line.split()[-1])}", log_path
        stop(proc)
        raise BenchError(f"tiny_serve did not start (exit {proc.returncode}):\n{_tail(log_path)}")
    port = free_port()
    try:
        proc = subprocess.Popen(vllm_serve_cmd(args, port), stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
    except OSError as err:
        raise BenchError(f"cannot start vllm ({err.strerror}); install it: pip install -r trainers/requirements-serve.txt") from None
    return proc, f"http://127.0.0.1:{port}", log_path


def run_client(args, base_url: str, workdir: Path) -> dict:
    """Runs the benchmark client against `base_url`; returns its result dict."""
    if args.client == "vllm":
        result_file = "result.json"
        cmd = vllm_bench_cmd(args, base_url, str(workdir), result_file)
        timeout = args.max_duration + args.request_timeout + 120
        try:
            done = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise BenchError(f"vllm bench serve ran past {timeout:g} s") from None
        if done.returncode != 0:
            raise BenchError(f"vllm bench serve exited {done.returncode}:\n{done.stderr[-2000:]}")
        return read_result(workdir / result_file)
    from gpuledger.trainers import loadgen

    model = "" if args.engine == "tiny" else args.model
    if args.num_warmups:
        warm = loadgen.make_prompts(args.num_warmups, args.input_len, args.seed + 1)
        asyncio.run(loadgen.run_load(base_url, warm, args.output_len, model=model,
                                     concurrency=args.concurrency or args.num_warmups,
                                     max_duration_s=args.max_duration, request_timeout_s=args.request_timeout))
    prompts = loadgen.make_prompts(args.num_prompts, args.input_len, args.seed)
    results, duration = asyncio.run(loadgen.run_load(
        base_url, prompts, args.output_len, model=model, concurrency=args.concurrency,
        request_rate=args.request_rate, seed=args.seed, max_duration_s=args.max_duration,
        request_timeout_s=args.request_timeout))
    result = loadgen.summarize(results, duration)
    (workdir / "result.json").write_text(json.dumps(result, indent=1), encoding="utf-8")
    return result


def read_result(path: Path) -> dict:
    """Returns the result JSON at `path`; raises BenchError when it is missing or not JSON."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise BenchError(f"no result file {path}: {err.strerror}") from None
    except json.JSONDecodeError as err:
        raise BenchError(f"{path}: not JSON ({err.msg} at line {err.lineno})") from None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--engine", choices=("tiny", "vllm"), default="tiny")
    p.add_argument("--client", choices=("builtin", "vllm"), default=None,
                   help="benchmark client (default: vllm with --engine vllm, else builtin)")
    p.add_argument("--model", default="gpuledger/demo-char-gpt", help="model served (vllm: HF name or path)")
    # serving settings (vLLM engine arguments)
    p.add_argument("--max-num-seqs", type=int, default=16)
    p.add_argument("--max-num-batched-tokens", type=int, default=None)
    p.add_argument("--tensor-parallel-size", type=int, default=1)
    p.add_argument("--precision", choices=sorted(PRECISION_FLAGS), default="bf16", help="vllm: weights/compute")
    p.add_argument("--kv-cache-dtype", choices=KV_CACHE_DTYPES, default="auto")
    p.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    p.add_argument("--max-model-len", type=int, default=None)
    p.add_argument("--random-weights", action="store_true", help="vllm: --load-format dummy (no weight download)")
    # load
    p.add_argument("--concurrency", type=int, default=None, help="requests in flight at most (closed loop)")
    p.add_argument("--request-rate", type=float, default=math.inf, help="Poisson arrivals per second")
    p.add_argument("--num-prompts", type=int, default=200)
    p.add_argument("--num-warmups", type=int, default=4)
    p.add_argument("--input-len", type=int, default=16)
    p.add_argument("--output-len", type=int, default=32)
    p.add_argument("--max-duration", type=float, default=60.0, help="no new request after this many seconds")
    p.add_argument("--request-timeout", type=float, default=60.0)
    p.add_argument("--health-timeout", type=float, default=60.0, help="seconds to wait for the server")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--result-dir", default=None, help="keep the server log and result JSON here")
    return p


def check_args(args) -> None:
    """Raises BenchError naming the first setting out of range."""
    from gpuledger.trainers import loadgen

    try:
        loadgen.validate_load(args.num_prompts, args.input_len, args.output_len, args.concurrency, args.request_rate,
                              args.max_duration, args.request_timeout)
    except ValueError as err:
        raise BenchError(str(err)) from None
    if args.output_len < 2:
        raise BenchError("--output-len must be >= 2 (TPOT needs a second token)")
    if not 1 <= args.max_num_seqs <= 1024 or not 1 <= args.tensor_parallel_size <= 64:
        raise BenchError("--max-num-seqs must be in 1..1024 and --tensor-parallel-size in 1..64")
    if not 0 < args.gpu_memory_utilization <= 1:
        raise BenchError("--gpu-memory-utilization must be in (0, 1]")
    if not 0 < args.health_timeout <= 3600 or not 0 <= args.num_warmups <= 1000:
        raise BenchError("--health-timeout must be in (0, 3600] s and --num-warmups in 0..1000")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.client = args.client or ("vllm" if args.engine == "vllm" else "builtin")
    from gpuledger import track
    try:
        check_args(args)
    except BenchError as err:
        print(f"serve_bench: {err}", file=sys.stderr)
        return 2
    with contextlib.ExitStack() as stack:
        workdir = Path(args.result_dir) if args.result_dir else Path(stack.enter_context(tempfile.TemporaryDirectory()))
        workdir.mkdir(parents=True, exist_ok=True)
        proc = None
        try:
            proc, base_url, log_path = start_server(args, workdir)
            ready_s = wait_healthy(base_url, proc, args.health_timeout, log_path)
            print(f"serve_bench: {args.engine} server healthy at {base_url} after {ready_s:.1f} s", file=sys.stderr)
            result = run_client(args, base_url, workdir)
            metrics = metrics_from_result(result)
        except BenchError as err:
            print(f"serve_bench: {err}", file=sys.stderr)
            return 1
        finally:
            if proc is not None:
                stop(proc)
    track.log(**metrics, completed_requests=result["completed"], bench_duration_s=result["duration"],
              output_tokens=result["total_output_tokens"])
    print(json.dumps({"engine": args.engine, "client": args.client, "concurrency": args.concurrency,
                      "request_rate": args.request_rate if math.isfinite(args.request_rate) else None,
                      "metrics": metrics}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
