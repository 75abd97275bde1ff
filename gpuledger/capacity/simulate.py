"""A discrete-event simulation of one serving replica under continuous batching.

Each event is one engine step (`gpuledger.estimate.inference.StepCost.step_s`). The scheduler is
vLLM V1's, with switches for the other engines:

1. every running sequence that has finished its prompt decodes one token;
2. prompts already started continue, in chunks when chunked prefill is on (`max_batched_tokens`
   per step in all, decode tokens first);
3. waiting requests are admitted in arrival order while there are fewer than `max_num_seqs`
   running, tokens left in the step's budget, and KV cache: on demand (vLLM, SGLang: a request
   holds the tokens it has; when the cache is full the most recently admitted request is preempted
   and later recomputed) or reserved in full at admission (TensorRT-LLM's GUARANTEED_NO_EVICT);
4. the step that completes a prompt emits the request's first token.

Arrivals are Poisson at a rate (open loop) or a closed loop of `concurrency` clients, each sending
its next request when the previous one finishes (what `vllm bench serve --max-concurrency` does).
Every request pays a fixed `request_overhead_s` (HTTP, tokenisation, scheduling) before the engine
sees it, counted in its TTFT. Requests have the same prompt length, or one drawn from a length mix
(`gpuledger.capacity.lengths`); output lengths are the same, spread uniformly, or drawn from a mix.

TTFT = first token − client send time; TPOT = (last token − first token) / (output tokens − 1), as
`vllm bench serve` reports them; throughput = output tokens / (last finish − first send).
Deterministic: the only randomness is the Poisson arrivals, drawn from `numpy.random.default_rng(seed)`.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from gpuledger.estimate.inference import StepCost

#: A simulation never runs more engine steps than this (bounded time: ~5 s of Python).
MAX_STEPS = 400_000


@dataclass(frozen=True)
class Scheduler:
    """The scheduling limits of one replica."""

    max_num_seqs: int
    max_batched_tokens: int
    chunked_prefill: bool
    kv_capacity_tokens: int
    reserve_full_request: bool
    request_overhead_s: float


@dataclass(frozen=True)
class SimResult:
    """What a benchmark client would report for one run (times in seconds)."""

    mode: str  # "closed" (fixed concurrency) or "poisson"
    concurrency: int | None
    offered_rate: float | None  # requests/s sent (Poisson)
    requests: int
    duration_s: float
    output_tokens_per_s: float
    requests_per_s: float
    ttft_p50_s: float
    ttft_p95_s: float
    ttft_p99_s: float
    tpot_p50_s: float
    tpot_p95_s: float
    tpot_p99_s: float
    mean_running: float  # time-averaged sequences in the running batch over the whole run
    max_running: int
    preemptions: int
    steps: int

    def as_dict(self) -> dict:
        return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in self.__dict__.items()}


class SimulationTooLong(RuntimeError):
    """The run needed more than `MAX_STEPS` steps."""


def _pct(values: np.ndarray, q: float) -> float:
    return float(np.percentile(values, q)) if values.size else 0.0


def simulate(cost: StepCost, sched: Scheduler, *, prompt_tokens: int, output_tokens: int,
             concurrency: int | None = None, rate: float | None = None, n_requests: int | None = None,
             output_spread: float = 0.0, warmup: int = 0, cooldown: int = 0, seed: int = 0,
             prompt_mix=None, output_mix=None) -> SimResult:
    """Runs `n_requests` requests through one replica; returns the client-side metrics.

    Exactly one of `concurrency` (closed loop) and `rate` (Poisson requests/s) is given.
    `n_requests` defaults to max(100, 10 × concurrency) closed, 400 Poisson. `output_spread` s
    draws each request's output length uniformly from [O·(1−s), O·(1+s)] (mean O; s = 0: all O).
    `warmup`: the first requests sent (e.g. the closed loop's opening burst of `concurrency`
    simultaneous prompts, which a running service never sees) and `cooldown`: the last ones sent
    (they run while the load drains) are left out of the latency statistics, and throughput is the
    output tokens emitted between the send times of the first and the last request kept (the steady
    state); with neither, throughput is the whole run's, as offline benchmarks report it.
    `prompt_mix` / `output_mix` (`gpuledger.capacity.lengths.LengthMix`): each request's prompt /
    output length drawn from the mix instead (seeded); `output_mix` replaces `output_spread`.
    """
    if (concurrency is None) == (rate is None):
        raise ValueError("give exactly one of concurrency and rate")
    if prompt_tokens < 1 or output_tokens < 1:
        raise ValueError("prompt_tokens and output_tokens must be >= 1")
    P, OUT = int(prompt_tokens), int(output_tokens)
    closed = concurrency is not None
    if closed and concurrency < 1:
        raise ValueError("concurrency must be >= 1")
    if not closed and not rate > 0:
        raise ValueError("rate must be > 0")
    n = int(n_requests or (max(100, 10 * concurrency) if closed else 400))
    cap = int(sched.kv_capacity_tokens)
    plen = prompt_mix.sample(n, [seed, 2]) if prompt_mix is not None else np.full(n, P, dtype=np.int64)
    if cap < int(plen.max()) + 1:
        raise ValueError(f"the KV cache holds {cap} tokens, less than one prompt + 1 ({int(plen.max()) + 1})")
    max_seqs = max(1, int(sched.max_num_seqs))
    budget_max = max(int(sched.max_batched_tokens), 1)
    overhead = float(sched.request_overhead_s)

    send = np.full(n, np.inf)  # client send time
    if closed:
        send[: min(concurrency, n)] = 0.0
    else:
        gaps = np.random.default_rng(seed).exponential(1.0 / rate, n)
        gaps[0] = 0.0
        send = np.cumsum(gaps)
    if not 0.0 <= output_spread < 1.0:
        raise ValueError("output_spread must be in [0, 1)")
    if output_mix is not None:
        out_len = output_mix.sample(n, [seed, 1])
    elif output_spread > 0 and OUT > 1:
        lo, hi = max(1, round(OUT * (1 - output_spread))), round(OUT * (1 + output_spread))
        out_len = np.random.default_rng([seed, 1]).integers(lo, hi + 1, n)
    else:
        out_len = np.full(n, OUT, dtype=np.int64)
    first = np.full(n, np.nan)
    finish = np.full(n, np.nan)
    target = plen.copy()  # tokens to prefill (prompt, or prompt + output when recomputed)
    prefilled = np.zeros(n, dtype=np.int64)
    gen_base = np.zeros(n, dtype=np.int64)  # tokens generated when the request entered decode
    ctx_base = np.zeros(n, dtype=np.int64)  # KV tokens it held then
    step_base = np.zeros(n, dtype=np.int64)  # step at which it entered decode
    epoch = np.zeros(n, dtype=np.int64)  # bumped on preemption: stale finish events are skipped

    arrivals: list[tuple[float, int]] = [(send[i] + overhead, i) for i in range(n) if np.isfinite(send[i])]
    heapq.heapify(arrivals)
    next_closed = min(concurrency, n) if closed else n
    waiting: deque[int] = deque()
    prefilling: list[int] = []
    decoding: dict[int, None] = {}  # insertion-ordered: the last one is the most recently admitted
    finish_at: dict[int, list[tuple[int, int]]] = {}  # step → [(request, epoch)]
    kv_used = 0  # tokens held (on demand) or reserved (full)
    ctx_sum = 0  # KV tokens of the decoding sequences
    t = 0.0
    step = 0
    done = 0
    preemptions = 0
    busy_seq_time = 0.0
    max_running = 0
    reserve = sched.reserve_full_request
    step_end: list[float] = [0.0]  # end time of each step
    emitted: list[int] = [0]  # output tokens emitted up to the end of each step
    tokens_out = 0

    def held(i: int) -> int:
        return int(ctx_base[i] + (step - step_base[i]) if i in decoding else prefilled[i])

    while done < n:
        while arrivals and arrivals[0][0] <= t + 1e-12:
            waiting.append(heapq.heappop(arrivals)[1])
        if not waiting and not prefilling and not decoding:
            if not arrivals:
                break
            t = arrivals[0][0]
            continue
        if step >= MAX_STEPS:
            raise SimulationTooLong(f"simulation stopped after {MAX_STEPS:,} engine steps ({done}/{n} requests done)")

        # 1. preempt (on-demand KV) until every decoding sequence can add its token
        while not reserve and decoding and kv_used + len(decoding) > cap:
            victim = prefilling.pop() if prefilling else next(reversed(decoding))
            h = held(victim)
            if victim in decoding:
                generated = int(gen_base[victim] + (step - step_base[victim]))
                del decoding[victim]
                ctx_sum -= h
                target[victim] = plen[victim] + generated
                gen_base[victim] = generated
            kv_used -= h
            prefilled[victim] = 0
            epoch[victim] += 1
            waiting.appendleft(victim)
            preemptions += 1
        budget = budget_max
        n_dec = len(decoding)
        budget -= n_dec
        dec_ctx = ctx_sum
        chunks: list[tuple[int, int]] = []
        pairs = 0.0
        pre_tokens = 0
        # 2. continue started prompts
        for i in prefilling:
            if budget <= 0:
                break
            c = min(int(target[i] - prefilled[i]), budget)
            if not reserve and kv_used + c > cap:
                c = max(0, cap - kv_used)
            if c <= 0:
                continue
            chunks.append((i, c))
            pairs += c * (prefilled[i] + c / 2.0)
            pre_tokens += c
            budget -= c
            if not reserve:
                kv_used += c
        # 3. admit waiting requests
        while waiting and budget > 0 and len(decoding) + len(prefilling) < max_seqs:
            i = waiting[0]
            need = int(target[i])
            if reserve:
                if kv_used + int(plen[i]) + int(out_len[i]) > cap and (decoding or prefilling):
                    break
            elif kv_used + min(need, budget) + n_dec > cap:
                break
            if sched.chunked_prefill:
                c = min(need, budget)
            elif need <= budget or (n_dec == 0 and not chunks):
                c = need
            elif need > budget_max:  # a prompt longer than the step budget is chunked anyway
                c = budget
            else:
                break
            waiting.popleft()
            prefilling.append(i)
            chunks.append((i, c))
            pairs += c * (c / 2.0)
            pre_tokens += c
            budget -= c
            kv_used += (int(plen[i]) + int(out_len[i])) if reserve else c
        if n_dec == 0 and not chunks:
            # nothing can run: partly prefilled prompts fill the cache between them, or one prompt
            # (with the tokens a preempted request must recompute) is larger than the cache
            if len(prefilling) > 1 and not reserve:
                victim = prefilling.pop()
                kv_used -= int(prefilled[victim])
                prefilled[victim] = 0
                epoch[victim] += 1
                waiting.appendleft(victim)
                preemptions += 1
                continue
            if prefilling or waiting:
                raise ValueError(f"a request needing {int(target[(prefilling or list(waiting))[0]])} tokens of KV "
                                 f"does not fit the cache of {cap} tokens")
            t = max(t, arrivals[0][0])
            continue

        running = n_dec + len(prefilling)
        max_running = max(max_running, running)
        dt = cost.step_s(n_dec, dec_ctx, pre_tokens, pairs)
        t += dt
        busy_seq_time += running * dt
        step += 1
        # decode tokens: every decoding sequence gained one
        tokens_out += n_dec
        if not reserve:
            kv_used += n_dec
        ctx_sum += n_dec
        finished_now = []
        for i, ep in finish_at.pop(step, ()):
            if ep == epoch[i] and i in decoding:
                finished_now.append(i)
        # prompts completed in this step emit their first token
        for i, c in chunks:
            prefilled[i] += c
            if prefilled[i] >= target[i]:
                prefilling.remove(i)
                if math.isnan(first[i]):
                    first[i] = t
                generated = int(gen_base[i]) + 1
                tokens_out += 1
                gen_base[i] = generated
                step_base[i] = step
                ctx_base[i] = int(prefilled[i]) + 1
                decoding[i] = None
                ctx_sum += int(ctx_base[i])
                if not reserve:
                    kv_used += 1
                if generated >= out_len[i]:
                    finished_now.append(i)
                    continue
                finish_at.setdefault(step + int(out_len[i] - generated), []).append((i, int(epoch[i])))
        for i in finished_now:
            h = held(i)
            del decoding[i]
            ctx_sum -= h
            kv_used -= (int(plen[i]) + int(out_len[i])) if reserve else h
            finish[i] = t
            done += 1
            if closed and next_closed < n:
                send[next_closed] = t
                heapq.heappush(arrivals, (t + overhead, next_closed))
                next_closed += 1
        kv_used = max(kv_used, 0)
        step_end.append(t)
        emitted.append(tokens_out)

    ok = np.isfinite(finish)
    order = np.argsort(send, kind="stable")
    window = None
    if (warmup or cooldown) and warmup + cooldown < n:
        kept = order[warmup:n - cooldown]
        keep = np.zeros(n, dtype=bool)
        keep[kept] = True
        ok &= keep
        t_a, t_b = float(send[kept[0]]), float(send[kept[-1]])
        if t_b > t_a:
            ends = np.asarray(step_end)
            cum = np.asarray(emitted, dtype=float)
            window = (t_b - t_a, float(np.interp(t_b, ends, cum) - np.interp(t_a, ends, cum)))
    ttft = (first - send)[ok]
    multi = ok & (out_len > 1)
    tpot = (finish - first)[multi] / (out_len[multi] - 1)
    start = float(np.min(send[ok])) if ok.any() else 0.0
    end = float(np.max(finish[ok])) if ok.any() else 0.0
    duration = max(end - start, 1e-12)
    if window is not None:
        out_rate, req_rate = window[1] / window[0], window[1] / window[0] / float(out_len.mean())
    else:
        out_rate, req_rate = float(out_len[ok].sum() / duration), float(ok.sum() / duration)
    return SimResult(
        mode="closed" if closed else "poisson",
        concurrency=concurrency,
        offered_rate=rate,
        requests=int(ok.sum()),
        duration_s=duration,
        output_tokens_per_s=out_rate,
        requests_per_s=req_rate,
        ttft_p50_s=_pct(ttft, 50), ttft_p95_s=_pct(ttft, 95), ttft_p99_s=_pct(ttft, 99),
        tpot_p50_s=_pct(tpot, 50), tpot_p95_s=_pct(tpot, 95), tpot_p99_s=_pct(tpot, 99),
        mean_running=busy_seq_time / max(t - float(np.min(send[np.isfinite(send)])), 1e-12),
        max_running=max_running,
        preemptions=preemptions,
        steps=step,
    )
