"""How a capacity option's fleet is sized and banded: GPUs for the demand at a per-GPU rate in whole
replicas (`gpus_needed`), the confidence the spec sizes at and the bands' factors for it
(`sizing_factors`, `gpuledger.capacity.bands`), the simulated maximum-throughput benchmark of one
replica (`bench_max`, as `vllm bench serve --request-rate inf` runs it) and the option's P10/P50/P90
bands of throughput, latency and replicas (`add_bands`)."""

from __future__ import annotations

import math
from typing import Any

from gpuledger.capacity import bands, lengths, operating
from gpuledger.capacity.simulate import SimulationTooLong
from gpuledger.estimate import inference


def gpus_needed(qps: float, output_tokens: int, headroom: float, tokens_per_s_per_gpu: float,
                gpus_per_replica: int = 1) -> tuple[int, int]:
    """Returns (GPUs, replicas): ceil(qps × output_tokens × (1 + headroom) / rate), in whole replicas."""
    demand = qps * output_tokens * (1.0 + headroom)
    gpus = math.ceil(demand / tokens_per_s_per_gpu - 1e-9)  # 1e-9: 150.0000000001 is 150
    replicas = max(1, math.ceil(gpus / gpus_per_replica))
    return replicas * gpus_per_replica, replicas


def confidence_of(spec) -> str:
    """Returns the spec's SLO confidence ("p90" default, "p50")."""
    return getattr(spec.slo, "confidence", "p90") or "p90"


def sizing_factors(spec, engine: inference.Engine, hw: inference.Hardware) -> dict[str, Any]:
    """Returns how the model's figures are taken at the spec's confidence (`gpuledger.capacity.bands`):
    `throughput` (× the simulated tokens/s: the band's P10 at p90, its P50 at p50), `tpot` (the
    simulated p95 TPOT × this must meet the SLO: the band's P90 at p90, P50 at p50), and the bands."""
    fam = bands.family(hw.name)
    b = {q: bands.band_for(engine.name, fam, q) for q in bands.QUANTITIES}
    p90 = confidence_of(spec) == "p90"
    return {"throughput": b["throughput"].p10 if p90 else b["throughput"].p50,
            "tpot": b["tpot"].p90 if p90 else b["tpot"].p50, "bands": b, "family": fam}


#: `vllm bench serve` / `sglang.bench_serving` default --num-prompts: the maximum-throughput run a
#: replica's `max_tokens_per_s_per_replica` reproduces (every request sent at once, request rate inf)
BENCH_NUM_PROMPTS = 1000
#: at most this many output tokens are simulated in that run (bounded time: long outputs get fewer prompts)
BENCH_MAX_OUTPUT_TOKENS = 400_000


def bench_prompts(output_tokens: int) -> int:
    """Returns the prompts of the maximum-throughput run: `BENCH_NUM_PROMPTS`, fewer when their outputs
    would exceed `BENCH_MAX_OUTPUT_TOKENS` (at least 64)."""
    return max(64, min(BENCH_NUM_PROMPTS, BENCH_MAX_OUTPUT_TOKENS // max(int(output_tokens), 1)))


def bench_max(model, hw, spec, engine: inference.Engine, tp: int) -> float | None:
    """Returns the output tokens/s of one replica in the benchmark of its maximum throughput
    (`BENCH_NUM_PROMPTS` requests of the spec's length mix all sent at once, ramp and drain included,
    as `vllm bench serve --request-rate inf` reports it), or None when the simulation cannot run it."""
    t = spec.traffic
    pm, om = lengths.mixes(spec)
    try:
        r = operating.max_throughput(model, hw, spec.precision, engine, prompt_tokens=t.prompt_tokens,
                                     output_tokens=t.output_tokens, num_requests=bench_prompts(t.output_tokens), tp=tp,
                                     prompt_mix=pm, output_mix=om or lengths.LengthMix(t.output_tokens, 0.0))
    except (ValueError, SimulationTooLong):
        return None
    return r.output_tokens_per_s


def add_bands(opt: dict[str, Any], model, hw, spec, engine: inference.Engine, choice) -> None:
    """Fills the option's bands ({p10, p50, p90}): `max_tokens_per_s_per_replica`, `ttft_ms_p95`,
    `tpot_ms_p95`, `replicas` (the fleet at the throughput band's P90, P50, P10), `replicas_sized`
    (the fleet sized at slo.confidence) and `bands` (what each rests on)."""
    opt["replicas_sized"] = opt.get("replicas")
    if not opt.get("feasible") or not opt.get("tokens_per_s_per_gpu"):
        opt["replicas"] = None
        return
    f = sizing_factors(spec, engine, hw)
    b = f["bands"]
    tp = int(opt["gpus_per_replica"] or 1)
    measured = opt.get("throughput_source") == "measured"
    spread = (opt.get("operating_point") or {}).get("spread") if measured else None
    if spread:  # a serving sweep's repeated runs of this point: their spread is the band, at least the noise
        noise = bands.Band(min(spread["low"], math.exp(-bands.MIN_HALF_WIDTH)), 1.0,
                           max(spread["high"], math.exp(bands.MIN_HALF_WIDTH)), spread["runs"], 1,
                           f"measured point: the spread of {spread['runs']} runs at this load")
    else:
        noise = bands.Band(math.exp(-bands.MIN_HALF_WIDTH), 1.0, math.exp(bands.MIN_HALF_WIDTH), 1, 1,
                           "measured point: ±8% run-to-run noise (one run)")
    tb = noise if measured else b["throughput"]
    mx = bench_max(model, hw, spec, engine, tp) if not measured else float(opt["tokens_per_s_per_gpu"]) * tp
    opt["max_tokens_per_s_per_replica"] = tb.apply(mx, 1) if mx else None
    opt["ttft_ms_p95"] = (noise if measured else b["ttft"]).apply(opt.get("ttft_ms"), 1)
    opt["tpot_ms_p95"] = (noise if measured else b["tpot"]).apply(opt.get("tpot_ms"), 2)
    t = spec.traffic
    rate = float(opt["tokens_per_s_per_gpu"])
    reps = {k: gpus_needed(t.qps, t.output_tokens, spec.headroom, rate * getattr(tb, q), tp)[1]
            for k, q in (("p10", "p90"), ("p50", "p50"), ("p90", "p10"))}
    if measured:  # the fleet is sized on the measured rate itself; its band only spans it
        reps["p50"] = opt["replicas_sized"]
        reps["p90"] = max(reps["p90"], reps["p50"])
        reps["p10"] = min(reps["p10"], reps["p50"])
    opt["replicas"] = reps
    opt["bands"] = {
        "confidence": confidence_of(spec),
        "throughput": bands.describe(tb, "throughput"),
        "ttft": bands.describe(noise if measured else b["ttft"], "ttft") + "; shown, not sized on",
        "tpot": bands.describe(noise if measured else b["tpot"], "tpot"),
        "max_tokens_per_s_per_replica": f"the simulated `vllm bench serve --request-rate inf --num-prompts "
                                        f"{bench_prompts(t.output_tokens)}` of the spec's lengths on one replica of "
                                        f"{tp} GPU(s)"
                                        if not measured else "the measured rate × GPUs per replica",
        "sizing_tokens_per_s_per_gpu": round(rate * (1.0 if measured else f["throughput"]), 1),
        "sizing_tpot_factor": 1.0 if measured else round(f["tpot"], 4),
        "sized_on": (f"throughput × {f['throughput']:.2f} and p95 TPOT × {f['tpot']:.2f} within the SLO "
                     f"(slo.confidence {confidence_of(spec)})") if not measured else "the measured point",
    }
