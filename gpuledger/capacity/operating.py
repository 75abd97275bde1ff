"""The latency–throughput curve of one replica and the operating point a plan runs it at.

`replica_setup` builds the step-cost model and scheduler of one replica (engine × accelerator ×
model × precision × tensor-parallel GPUs); `curve` simulates it in a closed loop at concurrency
1, 2, 4, … up to what the scheduler and the KV cache allow; `choose` picks the highest-throughput
concurrency whose p95 TTFT and p95 TPOT both meet the SLO (refined to the exact concurrency between
two curve points), which is how a serving benchmark sweep is read; `load_check` simulates the
fleet's real traffic (Poisson arrivals at the per-replica request rate) at the chosen shape.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from gpuledger.capacity.simulate import Scheduler, SimResult, simulate
from gpuledger.estimate import inference

#: Real traffic varies in length: output lengths are drawn uniformly within ±50% of the mean. With
#: every request the same length, a closed loop synchronises (all clients prefill at once), which
#: no production service sees.
OUTPUT_SPREAD = 0.5
#: The curve stops doubling the concurrency once a doubling adds less than 3% of tokens/s: past that
#: the replica is saturated and only latency grows.
SATURATION = 1.03
#: Seed of every simulation of a plan (Poisson arrivals and output lengths): plans are reproducible.
SEED = 20_260_101
#: Requests per closed-loop point: 10 per client, at least 24, at most what keeps a point near 6,000
#: engine steps (the plan of one accelerator stays under 2 s); the opening burst and the drain (one
#: client's worth each) are left out, and at least max(clients, 8) requests are measured between them.
MIN_REQUESTS, MIN_KEPT, REQUESTS_PER_CLIENT, STEP_BUDGET = 24, 8, 10, 6_000


def longest_output(output_tokens: int) -> int:
    """Returns the longest output length the simulated mix draws (mean × (1 + `OUTPUT_SPREAD`))."""
    return round(output_tokens * (1 + OUTPUT_SPREAD)) if output_tokens > 1 else output_tokens


@dataclass(frozen=True)
class Replica:
    """Everything the simulation needs about one replica."""

    tp: int
    cost: inference.StepCost
    scheduler: Scheduler
    max_concurrency: int  # the curve's last point: scheduler cap or KV cache, whichever is smaller

    @property
    def kv_tokens(self) -> int:
        return self.scheduler.kv_capacity_tokens


def longest_request(prompt_tokens: int, output_tokens: int, prompt_mix=None, output_mix=None) -> int:
    """Returns the most tokens one request of the simulated mix can hold (prompt + output)."""
    p = prompt_mix.longest if prompt_mix is not None else prompt_tokens
    o = output_mix.longest if output_mix is not None else longest_output(output_tokens)
    return p + o


def replica_setup(model: inference.ServingModel, hw: inference.Hardware, precision: str, engine: inference.Engine, tp: int,
                  prompt_tokens: int, output_tokens: int, prompt_mix=None, output_mix=None) -> Replica | None:
    """Returns the `Replica` of this shape, or None when one request does not fit its KV cache
    (the longest of the length mixes, when given)."""
    kv = inference.kv_capacity_tokens(model, hw, precision, tp, engine)
    if kv < longest_request(prompt_tokens, output_tokens, prompt_mix, output_mix) + 1:
        return None
    seqs, tokens = inference.engine_limits(engine, hw)
    sched = Scheduler(max_num_seqs=seqs, max_batched_tokens=max(tokens, seqs), chunked_prefill=engine.chunked_prefill,
                      kv_capacity_tokens=kv, reserve_full_request=engine.reserve_full_request,
                      request_overhead_s=inference.request_overhead_for(engine))
    per_request = prompt_tokens + output_tokens if engine.reserve_full_request else prompt_tokens + output_tokens / 2
    max_c = max(1, min(seqs, int(kv // per_request)))
    return Replica(tp=tp, cost=inference.step_cost(model, hw, precision, engine, tp), scheduler=sched, max_concurrency=max_c)


def _requests_for(c: int, output_tokens: int) -> int:
    n = max(MIN_REQUESTS, REQUESTS_PER_CLIENT * c)
    by_steps = STEP_BUDGET * c // max(output_tokens, 1)
    kept = max(c, min(MIN_REQUESTS, max(MIN_KEPT, by_steps)))  # requests measured between burst and drain
    return max(2 * c + kept, min(n, by_steps))


def run_closed(rep: Replica, c: int, prompt_tokens: int, output_tokens: int, prompt_mix=None,
               output_mix=None) -> SimResult:
    """Simulates a closed loop of `c` clients in steady state: the opening burst (the first `c`
    requests) and the drain (the last `c`) are left out of the statistics. Lengths from the mixes
    when given (`gpuledger.capacity.lengths.LengthMix`), else fixed prompts and outputs ±`OUTPUT_SPREAD`."""
    return simulate(rep.cost, rep.scheduler, prompt_tokens=prompt_tokens, output_tokens=output_tokens, concurrency=c,
                    n_requests=_requests_for(c, output_tokens), output_spread=OUTPUT_SPREAD, warmup=c, cooldown=c,
                    seed=SEED, prompt_mix=prompt_mix, output_mix=output_mix)


def concurrency_levels(max_c: int) -> list[int]:
    """Returns 1, 2, 4, … below `max_c`, and `max_c` itself."""
    levels, c = [], 1
    while c < max_c:
        levels.append(c)
        c *= 2
    levels.append(max_c)
    return levels


def meets(r: SimResult, p95_ttft_s: float, p95_tpot_s: float) -> bool:
    return r.ttft_p95_s <= p95_ttft_s and r.tpot_p95_s <= p95_tpot_s


@dataclass
class Choice:
    """The operating point chosen on one replica shape (None when even concurrency 1 misses)."""

    replica: Replica
    curve: list[SimResult]
    point: SimResult | None
    limit: str  # what stops the concurrency from growing


@functools.lru_cache(maxsize=256)
def choose(rep: Replica, prompt_tokens: int, output_tokens: int, p95_ttft_s: float, p95_tpot_s: float,
           prompt_mix=None, output_mix=None) -> Choice:
    """Returns the highest-throughput concurrency meeting both p95 targets, with the curve
    (deterministic, so cached per replica shape, lengths and SLO; treat the result as read-only)."""
    curve: list[SimResult] = []
    best: SimResult | None = None
    first_miss: int | None = None
    misses = 0
    saturated: str | None = None
    for c in concurrency_levels(rep.max_concurrency):
        r = run_closed(rep, c, prompt_tokens, output_tokens, prompt_mix, output_mix)
        curve.append(r)
        if meets(r, p95_ttft_s, p95_tpot_s):
            if best is not None and r.output_tokens_per_s < SATURATION * best.output_tokens_per_s:
                saturated = (f"saturated throughput: concurrency {c} gives {r.output_tokens_per_s / best.output_tokens_per_s - 1:+.1%} "
                             f"tokens/s over {best.concurrency}")
                if r.output_tokens_per_s > best.output_tokens_per_s:
                    best = r
                break
            if best is None or r.output_tokens_per_s > best.output_tokens_per_s:
                best = r
            continue
        misses += 1
        first_miss = c if first_miss is None else first_miss
        if best is None or misses >= 2:  # concurrency 1 misses, or one point past the knee for the chart
            break
    if best is None:
        return Choice(rep, curve, None, _why_missed(curve[0], p95_ttft_s, p95_tpot_s))
    lo = best.concurrency or 1
    hi = first_miss if first_miss is not None and first_miss > lo else None
    while hi is not None and hi - lo > 1:  # largest c in (lo, hi) that still meets the SLO
        mid = (lo + hi) // 2
        r = run_closed(rep, mid, prompt_tokens, output_tokens, prompt_mix, output_mix)
        curve.append(r)
        if meets(r, p95_ttft_s, p95_tpot_s) and r.output_tokens_per_s >= best.output_tokens_per_s:
            best, lo = r, mid
        else:
            hi = mid
    curve.sort(key=lambda r: r.concurrency or 0)
    if saturated:
        limit = saturated
    elif (best.concurrency or 0) >= rep.max_concurrency:
        kv_bound = rep.max_concurrency < rep.scheduler.max_num_seqs
        limit = (f"the KV cache ({rep.kv_tokens:,} tokens)" if kv_bound
                 else f"the engine's max sequences ({rep.scheduler.max_num_seqs})")
    else:
        nxt = next((r for r in curve if (r.concurrency or 0) > (best.concurrency or 0)), None)
        limit = _why_missed(nxt, p95_ttft_s, p95_tpot_s) if nxt else "the curve's end"
    return Choice(rep, curve, best, limit)


def _why_missed(r: SimResult, p95_ttft_s: float, p95_tpot_s: float) -> str:
    parts = []
    if r.ttft_p95_s > p95_ttft_s:
        parts.append(f"p95 TTFT {r.ttft_p95_s * 1e3:,.1f} ms > {p95_ttft_s * 1e3:.4g} ms at concurrency {r.concurrency}")
    if r.tpot_p95_s > p95_tpot_s:
        parts.append(f"p95 TPOT {r.tpot_p95_s * 1e3:,.2f} ms > {p95_tpot_s * 1e3:.4g} ms at concurrency {r.concurrency}")
    return " and ".join(parts) or "the SLO"


def load_check(rep: Replica, rate_per_replica: float, prompt_tokens: int, output_tokens: int, prompt_mix=None,
               output_mix=None) -> SimResult:
    """Simulates Poisson arrivals at `rate_per_replica` requests/s on one replica (400 requests)."""
    return simulate(rep.cost, rep.scheduler, prompt_tokens=prompt_tokens, output_tokens=output_tokens,
                    rate=rate_per_replica, n_requests=400, output_spread=OUTPUT_SPREAD, warmup=40, seed=SEED,
                    prompt_mix=prompt_mix, output_mix=output_mix)


def point_dict(r: SimResult, tp: int, p95_ttft_s: float | None = None, p95_tpot_s: float | None = None) -> dict:
    """Returns one curve point as JSON-ready numbers (ms, tokens/s per GPU)."""
    d = {
        "concurrency": r.concurrency,
        "request_rate": None if r.offered_rate is None else round(r.offered_rate, 4),
        "requests_per_s": round(r.requests_per_s, 4),
        "tokens_per_s_per_gpu": round(r.output_tokens_per_s / tp, 1),
        "ttft_ms_p50": round(r.ttft_p50_s * 1e3, 1),
        "ttft_ms_p95": round(r.ttft_p95_s * 1e3, 1),
        "ttft_ms_p99": round(r.ttft_p99_s * 1e3, 1),
        "tpot_ms_p50": round(r.tpot_p50_s * 1e3, 2),
        "tpot_ms_p95": round(r.tpot_p95_s * 1e3, 2),
        "tpot_ms_p99": round(r.tpot_p99_s * 1e3, 2),
        "mean_running": round(r.mean_running, 1),
        "preemptions": r.preemptions,
    }
    if p95_ttft_s is not None and p95_tpot_s is not None:
        d["meets_slo"] = meets(r, p95_ttft_s, p95_tpot_s)
    return d


def max_throughput(model: inference.ServingModel, hw: inference.Hardware, precision: str, engine: inference.Engine, *,
                   prompt_tokens: int, output_tokens: int, num_requests: int, tp: int = 1, prompt_mix=None,
                   output_mix=None) -> SimResult:
    """Reproduces an offline maximum-throughput benchmark (`trtllm-bench throughput`,
    `vllm bench throughput`): `num_requests` requests of fixed lengths all queued at once (a closed
    loop as wide as the scheduler allows), opening burst and drain included."""
    rep = replica_setup(model, hw, precision, engine, tp, prompt_tokens, output_tokens, prompt_mix, output_mix)
    if rep is None:
        raise ValueError(f"one request of {prompt_tokens + output_tokens} tokens does not fit {tp} × {hw.name}")
    return simulate(rep.cost, rep.scheduler, prompt_tokens=prompt_tokens, output_tokens=output_tokens,
                    concurrency=min(num_requests, rep.scheduler.max_num_seqs), n_requests=num_requests, seed=SEED,
                    prompt_mix=prompt_mix, output_mix=output_mix)
