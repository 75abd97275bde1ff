"""A serving load generator for OpenAI-compatible completion servers on this machine (stdlib only).

    python -m gpuledger.trainers.loadgen --base-url http://127.0.0.1:PORT --num-prompts 64 --concurrency 8 \\
        --input-len 16 --output-len 32 --result result.json

Load is either a closed loop at a fixed concurrency (every request is ready at time 0 and at most
`--concurrency` are in flight, as `vllm bench serve --request-rate inf --max-concurrency C`) or
Poisson arrivals at `--request-rate` requests/s (exponential gaps from `--seed`, optionally also
capped by `--concurrency`). It is bounded: at most `--num-prompts` requests, no new request after
`--max-duration` seconds, and each request gives up after `--request-timeout` seconds. Only loopback
hosts are accepted.

Each request streams (`"stream": true`, one token per server-sent event); the client times the first
token (TTFT), the gaps between tokens (ITL) and the end (E2E latency). The result is written in the
shape of vLLM's `vllm bench serve --save-result` JSON (same key names, milliseconds, numpy's linear
percentiles), so `gpuledger/trainers/serve_bench.py` reads both the same way:
`duration` (s), `completed`, `failed`, `total_input_tokens`, `total_output_tokens`,
`request_throughput` (completed/duration), `output_throughput` (output tokens/duration),
`total_token_throughput`, and for ttft, tpot, itl, e2el: `mean_X_ms`, `median_X_ms`, `std_X_ms`,
`pP_X_ms` for each percentile P. TPOT of a request = (E2E latency - TTFT) / (output tokens - 1),
vLLM's definition; requests with one output token have none.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import statistics
import sys
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
DEFAULT_PERCENTILES = (50.0, 95.0, 99.0)
PROMPT_CHARS = "abcdefghijklmnopqrstuvwxyz"


@dataclass
class RequestResult:
    """What the client saw of one request (times in seconds, perf_counter clock)."""

    ok: bool = False
    prompt_len: int = 0
    output_tokens: int = 0
    start: float = 0.0
    ttft_s: float = 0.0
    latency_s: float = 0.0
    itl_s: list[float] = field(default_factory=list)
    error: str = ""


def percentile(values: list[float], p: float) -> float:
    """Returns the p-th percentile of `values` by linear interpolation (numpy's default method)."""
    if not values:
        return float("nan")
    xs = sorted(values)
    rank = (len(xs) - 1) * p / 100.0
    lo = math.floor(rank)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (rank - lo)


def make_prompts(n: int, input_len: int, seed: int) -> list[str]:
    """Returns `n` deterministic prompts of `input_len` characters (letters and spaces)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        chars = [rng.choice(PROMPT_CHARS) if (i + 1) % 6 else " " for i in range(input_len)]
        out.append("".join(chars))
    return out


def parse_base_url(base_url: str) -> tuple[str, int]:
    """Returns (host, port) of an http://HOST:PORT URL whose host is loopback; raises ValueError."""
    parts = urlsplit(base_url)
    if parts.scheme != "http" or not parts.hostname or parts.path not in ("", "/"):
        raise ValueError(f"--base-url must look like http://127.0.0.1:PORT (got {base_url!r})")
    if parts.hostname not in LOOPBACK_HOSTS:
        raise ValueError(f"--base-url host must be loopback ({', '.join(LOOPBACK_HOSTS)}), got {parts.hostname!r}")
    try:
        port = parts.port
    except ValueError:
        port = None
    if not port:
        raise ValueError(f"--base-url needs a port (got {base_url!r})")
    return parts.hostname, port


async def _read_body(reader: asyncio.StreamReader, chunked: bool):
    """Yields the response body in pieces, undoing HTTP/1.1 chunked transfer encoding if used."""
    if not chunked:
        while piece := await reader.read(65536):
            yield piece
        return
    while True:
        size_line = await reader.readline()
        if not size_line:
            return
        size = int(size_line.split(b";")[0].strip() or b"0", 16)
        if size == 0:
            return
        yield await reader.readexactly(size)
        await reader.readexactly(2)


async def one_request(host: str, port: int, model: str, prompt: str, output_len: int, timeout_s: float) -> RequestResult:
    """Sends one streaming completion and returns what the client measured (never raises)."""
    res = RequestResult(prompt_len=len(prompt))
    body = json.dumps({"model": model, "prompt": prompt, "max_tokens": output_len, "stream": True,
                       "ignore_eos": True, "temperature": 0.0,
                       "stream_options": {"include_usage": True}}).encode()
    head = (f"POST /v1/completions HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
            f"Accept: text/event-stream\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
    writer = None
    res.start = time.perf_counter()
    try:
        async with asyncio.timeout(timeout_s):
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(head + body)
            await writer.drain()
            status = await reader.readline()
            headers = {}
            while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
                name, _, value = line.decode("latin-1").partition(":")
                headers[name.strip().lower()] = value.strip().lower()
            if b" 200 " not in status + b" ":
                raise RuntimeError(f"HTTP {status.decode('latin-1').strip()}")
            buf, last, usage_tokens, chunks = b"", res.start, None, 0
            async for piece in _read_body(reader, headers.get("transfer-encoding") == "chunked"):
                buf += piece
                while b"\n\n" in buf:
                    event, buf = buf.split(b"\n\n", 1)
                    data = event.strip()
                    if not data.startswith(b"data:"):
                        continue
                    data = data[5:].strip()
                    if data == b"[DONE]":
                        continue
                    msg = json.loads(data)
                    if msg.get("usage"):
                        usage_tokens = msg["usage"].get("completion_tokens")
                        res.prompt_len = msg["usage"].get("prompt_tokens") or res.prompt_len
                    if any(c.get("text") for c in msg.get("choices") or []):
                        now = time.perf_counter()
                        if chunks == 0:
                            res.ttft_s = now - res.start
                        else:
                            res.itl_s.append(now - last)
                        last = now
                        chunks += 1
            res.latency_s = time.perf_counter() - res.start
            res.output_tokens = int(usage_tokens) if usage_tokens else chunks
            res.ok = chunks > 0
            if not res.ok:
                res.error = "no tokens received"
    except TimeoutError:
        res.error = f"timed out after {timeout_s:g} s"
    except (OSError, RuntimeError, ValueError, asyncio.IncompleteReadError) as err:
        res.error = f"{type(err).__name__}: {err}"
    finally:
        if writer is not None:
            writer.close()
    return res


async def run_load(base_url: str, prompts: list[str], output_len: int, *, model: str = "", concurrency: int | None = None,
                   request_rate: float = math.inf, seed: int = 0, max_duration_s: float = 120.0,
                   request_timeout_s: float = 60.0) -> tuple[list[RequestResult], float]:
    """Returns (one result per request sent, benchmark duration in s: first send to last finish)."""
    host, port = parse_base_url(base_url)
    rng = random.Random(seed)
    sem = asyncio.Semaphore(concurrency) if concurrency else None
    start = time.perf_counter()
    deadline = start + max_duration_s
    tasks = []

    async def limited(prompt: str) -> RequestResult | None:
        if sem is None:
            return await one_request(host, port, model, prompt, output_len, request_timeout_s)
        async with sem:
            if time.perf_counter() > deadline:
                return None  # never sent: the time bound was reached while it waited
            return await one_request(host, port, model, prompt, output_len, request_timeout_s)

    for prompt in prompts:
        if time.perf_counter() > deadline:
            break
        tasks.append(asyncio.create_task(limited(prompt)))
        if math.isfinite(request_rate):
            await asyncio.sleep(rng.expovariate(request_rate))
    results = [r for r in await asyncio.gather(*tasks) if r is not None]
    end = max((r.start + r.latency_s for r in results if r.ok), default=time.perf_counter())
    first = min((r.start for r in results), default=start)
    return results, max(end - first, 1e-9)


def summarize(results: list[RequestResult], duration_s: float, percentiles=DEFAULT_PERCENTILES) -> dict:
    """Returns the vLLM-shaped result dict of a run (see the module docstring)."""
    ok = [r for r in results if r.ok]
    out_tokens = sum(r.output_tokens for r in ok)
    in_tokens = sum(r.prompt_len for r in ok)
    result = {
        "duration": duration_s,
        "completed": len(ok),
        "failed": len(results) - len(ok),
        "total_input_tokens": in_tokens,
        "total_output_tokens": out_tokens,
        "request_throughput": len(ok) / duration_s,
        "output_throughput": out_tokens / duration_s,
        "total_token_throughput": (in_tokens + out_tokens) / duration_s,
        "errors": sorted({r.error for r in results if r.error})[:5],
    }
    series = {
        "ttft": [r.ttft_s * 1000 for r in ok],
        "tpot": [(r.latency_s - r.ttft_s) / (r.output_tokens - 1) * 1000 for r in ok if r.output_tokens > 1],
        "itl": [x * 1000 for r in ok for x in r.itl_s],
        "e2el": [r.latency_s * 1000 for r in ok],
    }
    for name, values in series.items():
        result[f"mean_{name}_ms"] = statistics.fmean(values) if values else float("nan")
        result[f"median_{name}_ms"] = percentile(values, 50)
        result[f"std_{name}_ms"] = statistics.pstdev(values) if values else float("nan")
        for p in percentiles:
            word = str(int(p)) if int(p) == p else str(p)
            result[f"p{word}_{name}_ms"] = percentile(values, p)
    return result


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--base-url", required=True, help="http://127.0.0.1:PORT (loopback only)")
    p.add_argument("--model", default="", help="model name sent with each request")
    p.add_argument("--num-prompts", type=int, default=64)
    p.add_argument("--input-len", type=int, default=16, help="prompt length in characters")
    p.add_argument("--output-len", type=int, default=32, help="tokens generated per request")
    p.add_argument("--concurrency", type=int, default=None, help="closed loop: requests in flight at most")
    p.add_argument("--request-rate", type=float, default=math.inf, help="Poisson arrivals per second (default inf)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-duration", type=float, default=120.0, help="no new request after this many seconds")
    p.add_argument("--request-timeout", type=float, default=60.0, help="seconds before one request gives up")
    p.add_argument("--result", default=None, help="write the result JSON here (else stdout)")
    return p


def validate_load(num_prompts: int, input_len: int, output_len: int, concurrency: int | None, request_rate: float,
                  max_duration_s: float, request_timeout_s: float) -> None:
    """Raises ValueError naming the first load setting out of range."""
    if not 1 <= num_prompts <= 100_000:
        raise ValueError(f"--num-prompts must be in 1..100000 (got {num_prompts})")
    if input_len < 1 or output_len < 1:
        raise ValueError("--input-len and --output-len must be >= 1")
    if concurrency is not None and not 1 <= concurrency <= 4096:
        raise ValueError(f"--concurrency must be in 1..4096 (got {concurrency})")
    if not request_rate > 0:
        raise ValueError(f"--request-rate must be > 0 (got {request_rate})")
    if concurrency is None and math.isinf(request_rate):
        raise ValueError("give --concurrency or a finite --request-rate (else every request is sent at once)")
    if not (0 < max_duration_s <= 86_400 and 0 < request_timeout_s <= 86_400):
        raise ValueError("--max-duration and --request-timeout must be in (0, 86400] seconds")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        parse_base_url(args.base_url)
        validate_load(args.num_prompts, args.input_len, args.output_len, args.concurrency, args.request_rate,
                      args.max_duration, args.request_timeout)
    except ValueError as err:
        print(f"loadgen: {err}", file=sys.stderr)
        return 2
    prompts = make_prompts(args.num_prompts, args.input_len, args.seed)
    results, duration = asyncio.run(run_load(args.base_url, prompts, args.output_len, model=args.model,
                                             concurrency=args.concurrency, request_rate=args.request_rate,
                                             seed=args.seed, max_duration_s=args.max_duration,
                                             request_timeout_s=args.request_timeout))
    text = json.dumps(summarize(results, duration), indent=1)
    if args.result:
        with open(args.result, "w", encoding="utf-8") as fh:
            fh.write(text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
