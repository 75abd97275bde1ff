"""Capacity planning (gpuledger.capacity) and `gpuledger capacity`."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from gpuledger.capacity import OPTION_KEYS, cheapest_offer, fleet_cost, gpus_needed, plan_capacity
from gpuledger.capacity.operating import max_throughput, replica_setup, run_closed
from gpuledger.capacity.simulate import Scheduler, SimulationTooLong, simulate
from gpuledger.errors import UserError
from gpuledger.estimate import inference
from gpuledger.spec import CapacitySpec, load_spec

LLAMA31_8B = inference.ServingModel("meta-llama/Llama-3.1-8B", 8_030_261_248, 32, 4096, 131_072, 1_050_673_152)

EXPECTED_OPTION_KEYS = {
    "accelerator", "precision", "engine", "gpus", "gpus_per_replica", "replicas", "max_batch",
    "tokens_per_s_per_gpu", "throughput_source", "operating_point", "ttft_ms", "tpot_ms", "ttft_ms_p50",
    "ttft_ms_p99", "tpot_ms_p50", "tpot_ms_p99", "floor_ttft_ms", "floor_tpot_ms", "load_check", "curve",
    "price_per_gpu_hour_on_demand", "usd_per_hour_on_demand", "usd_per_day_on_demand", "usd_per_month_on_demand",
    "usd_per_hour_spot", "usd_per_month_spot", "cloud", "instance_type", "price_source", "feasible", "reason",
    # issue 28: the elastic fleet and the return on serving
    "usd_per_month_autoscaled", "replicas_by_hour", "usd_per_1m_output_tokens", "usd_per_request", "autoscale",
    "spot", "environments", "committed",
    # issue 37: bands {p10, p50, p90} and the fleet sized at slo.confidence
    "max_tokens_per_s_per_replica", "ttft_ms_p95", "tpot_ms_p95", "replicas_sized", "bands",
}


def _offers(rows):
    cols = ["cloud", "region", "instance_type", "accelerator", "accelerator_count", "usd_per_hour_on_demand",
            "usd_per_hour_spot", "spot_suspicious", "source", "as_of"]
    return pl.DataFrame([dict(zip(cols, r, strict=True)) for r in rows], orient="row")


OFFERS = _offers([
    ("aws", "us-east-1", "h100.1x", "H100", 1, 5.00, 1.50, False, "test", "2026-01-01"),
    ("aws", "us-east-1", "h100.8x", "H100", 8, 36.00, 3.60, True, "test", "2026-01-01"),  # 10%: suspicious
    ("aws", "us-east-1", "a100.1x", "A100-80GB", 1, 3.00, None, False, "test", "2026-01-01"),
    ("aws", "us-east-1", "l4.8x", "L4", 8, 8.00, 2.40, False, "test", "2026-01-01"),
    ("gcp", "us-central1", "h100.cheap", "H100", 1, 1.00, 0.50, False, "test", "2026-01-01"),  # other cloud
])


def _spec(**over) -> CapacitySpec:
    data = {
        "kind": "capacity", "name": "t", "project": "p", "owner": "o", "model": "meta-llama/Llama-3.1-8B",
        "precision": "bf16",
        "traffic": {"qps": 20, "prompt_tokens": 1500, "output_tokens": 300},
        "slo": {"p95_ttft_ms": 800, "p95_tpot_ms": 50},
        "headroom": 0.3,
        "resources": {"accelerators": ["H100", "A100-80GB"], "clouds": ["aws"]},
    }
    for k, v in over.items():
        data[k] = {**data[k], **v} if isinstance(v, dict) and isinstance(data.get(k), dict) else v
    return CapacitySpec.model_validate(data)


def _opt(result, accel):
    return next(o for o in result["options"] if o["accelerator"] == accel)


# -------------------------------------------------------------------------------- money


def test_seed_cost_arithmetic():
    """Seed 000: 10 GPUs at $1.99/h → $19.90/h, $477.60/day, $14,527/month at 730 h."""
    assert fleet_cost(10, 1.99) == {"usd_per_hour": 19.90, "usd_per_day": 477.60, "usd_per_month": 14527.00}


def test_seed_sizing_does_not_add_up():
    """Seed 000 sizes 30 QPS × 300 output tokens at 60 tokens/s per GPU with 30% headroom as 10 GPUs;
    its own inputs need 30 × 300 × 1.3 / 60 = 195."""
    assert gpus_needed(30, 300, 0.3, 60) == (195, 195)
    assert gpus_needed(30, 300, 0.3, 60, gpus_per_replica=4) == (196, 49)


def test_gpus_needed_exact_multiple_is_not_rounded_up():
    assert gpus_needed(10, 100, 0.5, 150) == (10, 10)  # 1,500 / 150 = 10 exactly


# -------------------------------------------------------------------------------- offers


def test_cheapest_offer_picks_lowest_per_gpu_price():
    rows = OFFERS.filter(pl.col("cloud") == "aws").to_dicts()
    p = cheapest_offer(rows, "H100")
    assert p["on_demand"]["instance_type"] == "h100.8x"
    assert p["price_per_gpu_hour_on_demand"] == pytest.approx(36.00 / 8)
    # the 8x's spot ($3.60 = 10% of $36) is flagged suspicious: spot falls back to the 1x's
    assert p["spot"]["instance_type"] == "h100.1x"
    assert p["price_per_gpu_hour_spot"] == 1.50
    assert p["spot_skipped"] == 1
    # a replica of 2 GPUs needs an instance with at least 2
    assert cheapest_offer(rows, "A100-80GB", min_count=2) is None
    assert cheapest_offer(rows, "A100-80GB")["spot"] is None


# -------------------------------------------------------------------------------- simulation


def _replica(accel="H100", precision="bf16", engine="vllm", prompt=512, output=128, tp=1):
    hw = inference.hardware_for(accel, precision)
    return replica_setup(LLAMA31_8B, hw, precision, inference.engine_for(engine), tp, prompt, output)


def test_one_client_decodes_at_the_step_time():
    rep = _replica()
    r = simulate(rep.cost, rep.scheduler, prompt_tokens=512, output_tokens=128, concurrency=1, n_requests=5)
    # TPOT of a lone request = its decode steps (KV grows from 513 to 640 tokens)
    steps = [rep.cost.step_s(1, 513 + k, 0, 0.0) for k in range(127)]
    assert r.tpot_p50_s == pytest.approx(sum(steps) / 127, rel=1e-9)
    # TTFT = request overhead + one prefill step of the whole prompt
    prefill = rep.cost.step_s(0, 0, 512, 512 * 256.0)
    # (the chat endpoint's, a capacity plan's default: 45 ms for vLLM)
    assert r.ttft_p50_s == pytest.approx(prefill + inference.request_overhead_for(inference.engine_for("vllm")), rel=1e-9)
    assert r.ttft_p99_s == pytest.approx(r.ttft_p50_s, rel=1e-9)  # no queueing with one client
    assert r.max_running == 1 and r.preemptions == 0


def test_closed_loop_obeys_littles_law_and_batching_raises_throughput():
    rep = _replica()
    rs = [run_closed(rep, c, 512, 128) for c in (1, 8, 64)]
    for r in rs:
        latency = r.ttft_p50_s + r.tpot_p50_s * 127
        # throughput ≈ concurrency / per-request latency (Little), within the spread of lengths
        assert r.requests_per_s == pytest.approx(r.concurrency / latency, rel=0.25)
    assert rs[0].output_tokens_per_s < rs[1].output_tokens_per_s < rs[2].output_tokens_per_s
    assert rs[0].tpot_p95_s < rs[1].tpot_p95_s < rs[2].tpot_p95_s


def test_poisson_is_deterministic_by_seed_and_percentiles_are_ordered():
    rep = _replica()
    kw = dict(prompt_tokens=512, output_tokens=128, rate=20.0, n_requests=300, output_spread=0.5)
    a = simulate(rep.cost, rep.scheduler, seed=1, **kw)
    b = simulate(rep.cost, rep.scheduler, seed=1, **kw)
    c = simulate(rep.cost, rep.scheduler, seed=2, **kw)
    assert a == b and a != c
    assert a.ttft_p50_s <= a.ttft_p95_s <= a.ttft_p99_s and a.tpot_p50_s <= a.tpot_p95_s <= a.tpot_p99_s
    assert a.requests_per_s == pytest.approx(20.0, rel=0.2)  # an unsaturated server keeps up with the offer


def test_a_full_kv_cache_preempts_on_demand_and_never_with_full_reservation():
    rep = _replica()
    small = Scheduler(max_num_seqs=256, max_batched_tokens=2048, chunked_prefill=True, kv_capacity_tokens=6000,
                      reserve_full_request=False, request_overhead_s=0.0)
    r = simulate(rep.cost, small, prompt_tokens=512, output_tokens=512, concurrency=16, n_requests=48)
    assert r.preemptions > 0 and r.requests == 48
    reserved = Scheduler(max_num_seqs=256, max_batched_tokens=2048, chunked_prefill=False, kv_capacity_tokens=6000,
                         reserve_full_request=True, request_overhead_s=0.0)
    r2 = simulate(rep.cost, reserved, prompt_tokens=512, output_tokens=512, concurrency=16, n_requests=48)
    assert r2.preemptions == 0 and r2.max_running == 6000 // 1024 and r2.requests == 48


def test_simulation_inputs_are_checked():
    rep = _replica()
    with pytest.raises(ValueError, match="exactly one"):
        simulate(rep.cost, rep.scheduler, prompt_tokens=10, output_tokens=10)
    with pytest.raises(ValueError, match="KV cache holds"):
        tiny = Scheduler(8, 64, True, 5, False, 0.0)
        simulate(rep.cost, tiny, prompt_tokens=10, output_tokens=10, concurrency=1)
    assert issubclass(SimulationTooLong, RuntimeError)
    # two half-prefilled prompts that fill a small cache between them: one is preempted, both finish
    small = Scheduler(8, 300, True, 700, False, 0.0)
    r = simulate(rep.cost, small, prompt_tokens=500, output_tokens=50, concurrency=2, n_requests=6)
    assert r.requests == 6 and r.preemptions > 0
    # a request that can never fit (prompt + output > cache) is one clear error, not a hang
    with pytest.raises(ValueError, match="does not fit the cache of 520 tokens"):
        simulate(rep.cost, Scheduler(8, 300, True, 520, False, 0.0), prompt_tokens=500, output_tokens=50,
                 concurrency=1, n_requests=3)


def test_max_throughput_reproduces_a_published_row():
    """TensorRT-LLM perf overview, Llama-3.1-8B fp8 on H100, 1000/1000, 3,000 requests: 15,270 tokens/s."""
    hw = inference.hardware_for("H100", "fp8")
    m = inference.ServingModel("llama", 8_030_261_248, 32, 4096, 65_536, 1_050_673_152)
    r = max_throughput(m, hw, "fp8", inference.engine_for("trtllm"), prompt_tokens=1000, output_tokens=1000,
                       num_requests=3000)
    assert r.output_tokens_per_s == pytest.approx(15_270, rel=0.10)


# -------------------------------------------------------------------------------- planning


def test_plan_shape_and_best():
    r = plan_capacity(_spec(), offers=OFFERS, model=LLAMA31_8B)
    assert set(r) == {"spec", "options", "best", "best_reason", "assumptions", "compare", "mixed_fleet", "ownership"}
    for o in r["options"]:
        assert set(o) == EXPECTED_OPTION_KEYS == set(OPTION_KEYS)
    h = _opt(r, "H100")
    assert h["feasible"] and h["throughput_source"] == "estimated" and h["engine"] == "vllm"
    assert h["cloud"] == "aws"  # the cheaper gcp offer is outside the spec's clouds
    # sized at slo.confidence p90: the throughput band's P10 × the simulated rate
    sized = h["bands"]["sizing_tokens_per_s_per_gpu"]
    assert sized < h["tokens_per_s_per_gpu"] and h["gpus"] == math.ceil(20 * 300 * 1.3 / sized - 1e-3)
    assert h["usd_per_month_on_demand"] == pytest.approx(h["gpus"] * 4.5 * 730, abs=0.01)
    assert h["usd_per_day_on_demand"] == pytest.approx(h["gpus"] * 4.5 * 24, abs=0.01)
    assert h["usd_per_month_spot"] == pytest.approx(h["gpus"] * 1.5 * 730, abs=0.01)
    a = _opt(r, "A100-80GB")
    assert a["usd_per_hour_spot"] is None and a["usd_per_month_spot"] is None
    feasible = [o for o in r["options"] if o["feasible"]]
    assert r["best"] == min(feasible, key=lambda o: o["usd_per_month_on_demand"])
    assert r["best_reason"] is None
    assert all(isinstance(a, str) and a for a in r["assumptions"])
    assert r["spec"]["engine_version"].startswith("vLLM")
    json.dumps(r)


def test_each_option_says_which_operating_point_and_why():
    h = _opt(plan_capacity(_spec(), offers=OFFERS, model=LLAMA31_8B), "H100")
    opp = h["operating_point"]
    assert opp["concurrency"] == h["max_batch"] >= 1
    assert "most tokens/s per GPU" in opp["why"] and "going higher is stopped by" in opp["why"]
    assert h["ttft_ms"] <= 800 and h["tpot_ms"] <= 50
    assert h["ttft_ms_p50"] <= h["ttft_ms"] <= h["ttft_ms_p99"] and h["tpot_ms_p50"] <= h["tpot_ms"] <= h["tpot_ms_p99"]
    curve = h["curve"]
    assert [p["concurrency"] for p in curve] == sorted(p["concurrency"] for p in curve)
    chosen = next(p for p in curve if p["concurrency"] == opp["concurrency"])
    assert chosen["meets_slo"] and chosen["tokens_per_s_per_gpu"] == h["tokens_per_s_per_gpu"]
    # the TPOT target is met at slo.confidence: the simulated p95 × the TPOT band's P90
    f = h["bands"]["sizing_tpot_factor"]
    within = [p for p in curve if p["ttft_ms_p95"] <= 800 and p["tpot_ms_p95"] * f <= 50]
    assert max(p["tokens_per_s_per_gpu"] for p in within) == h["tokens_per_s_per_gpu"]
    assert any(not p["meets_slo"] for p in curve)  # the curve goes past the knee
    lc = h["load_check"]
    assert lc["mode"] == "poisson" and lc["replicas"] == h["replicas_sized"]
    assert lc["request_rate"] == pytest.approx(20 / h["replicas_sized"], rel=1e-3)


def test_plans_are_deterministic():
    a = plan_capacity(_spec(), offers=OFFERS, model=LLAMA31_8B)
    b = plan_capacity(_spec(), offers=OFFERS, model=LLAMA31_8B)
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


@settings(max_examples=8, deadline=None)
@given(q1=st.floats(0.01, 200), q2=st.floats(0.01, 200))
def test_more_qps_never_needs_fewer_gpus(q1, q2):
    lo, hi = sorted([q1, q2])
    r_lo = plan_capacity(_spec(traffic={"qps": lo}), offers=OFFERS, model=LLAMA31_8B)
    r_hi = plan_capacity(_spec(traffic={"qps": hi}), offers=OFFERS, model=LLAMA31_8B)
    for a, b in zip(r_lo["options"], r_hi["options"], strict=True):
        assert a["feasible"] == b["feasible"]
        if a["feasible"]:
            assert a["gpus"] <= b["gpus"]
            assert a["usd_per_month_on_demand"] <= b["usd_per_month_on_demand"]


def test_physically_impossible_tpot_is_infeasible_even_with_a_measured_point():
    spec = _spec(slo={"p95_tpot_ms": 0.5}, measured={"H100": {"tokens_per_s_per_gpu": 5000, "concurrency": 8,
                                                                "ttft_ms": 50, "tpot_ms": 0.4}},
                 resources={"accelerators": ["H100"], "clouds": ["aws"]})
    r = plan_capacity(spec, offers=OFFERS, model=LLAMA31_8B)
    h = _opt(r, "H100")
    assert not h["feasible"] and h["gpus"] is None and h["usd_per_month_on_demand"] is None
    # 16.06 GB of weights over 8 × 3,350 GB/s = 0.60 ms per token at best, + 2 × 32 all-reduces ≥ 2 µs
    assert "physically impossible: p95 TPOT 0.5 ms is below the floor 0.73 ms" in h["reason"]
    assert "floors at TP 8" in h["reason"] and "all-reduces" in h["reason"]
    assert "measured point(s) for H100 cannot change physics" in h["reason"]
    assert r["best"] is None and "physically impossible" in r["best_reason"]


def test_physically_impossible_ttft_is_infeasible_with_numbers():
    h = _opt(plan_capacity(_spec(slo={"p95_ttft_ms": 1}), offers=OFFERS, model=LLAMA31_8B), "H100")
    assert not h["feasible"]
    assert "physically impossible: p95 TTFT 1 ms is below the floor" in h["reason"]
    assert "TFLOP of prefill" in h["reason"]


def test_possible_in_principle_but_unreachable_is_explained():
    h = _opt(plan_capacity(_spec(slo={"p95_tpot_ms": 1}), offers=OFFERS, model=LLAMA31_8B), "H100")
    assert not h["feasible"] and h["floor_tpot_ms"] < 1
    assert "even one request at a time misses the SLO" in h["reason"] and "p95 TPOT" in h["reason"]


def test_weights_that_do_not_fit_are_explained():
    seventy_b = inference.ServingModel("70b", 70_553_706_496, 80, 8192, 2 * 80 * 8 * 128 * 2)
    spec = _spec(resources={"accelerators": ["L4"], "clouds": ["aws"], "max_gpus_per_replica": 4},
                 slo={"p95_tpot_ms": 500})
    o = _opt(plan_capacity(spec, offers=OFFERS, model=seventy_b), "L4")
    assert not o["feasible"]
    assert "weights need 131.4 GiB at bf16" in o["reason"]
    assert "more than 4 × L4 usable" in o["reason"]


def test_a_measured_point_that_meets_the_slo_sizes_the_fleet():
    point = {"tokens_per_s_per_gpu": 1200, "concurrency": 32, "ttft_ms": 300, "tpot_ms": 30, "engine": "sglang"}
    r = plan_capacity(_spec(measured={"H100": point}), offers=OFFERS, model=LLAMA31_8B)
    h = _opt(r, "H100")
    assert h["throughput_source"] == "measured" and h["tokens_per_s_per_gpu"] == 1200
    # 20 req/s × 300 tokens × 1.3 = 7,800 tokens/s; / 1,200 = 6.5 → 7 GPUs
    assert h["gpus"] == 7 and h["usd_per_hour_on_demand"] == pytest.approx(7 * 4.5)
    assert (h["ttft_ms"], h["tpot_ms"]) == (300, 30) and h["max_batch"] == 32
    assert h["operating_point"]["mode"] == "measured" and h["operating_point"]["engine"] == "sglang"
    assert "measured on sglang, planned for vllm" in h["reason"]
    assert _opt(r, "A100-80GB")["throughput_source"] == "estimated"
    # a caller's points (e.g. a serving sweep's) replace the spec's: 7,800 / 600 = 13
    r2 = plan_capacity(_spec(measured={"H100": point}), offers=OFFERS, model=LLAMA31_8B,
                       measured={"h100": [{**point, "tokens_per_s_per_gpu": 600}, {**point, "tpot_ms": 80}]})
    assert _opt(r2, "H100")["gpus"] == 13
    with pytest.raises(UserError, match="must be positive"):
        plan_capacity(_spec(), offers=OFFERS, model=LLAMA31_8B, measured={"H100": -1})
    with pytest.raises(UserError, match="unknown field"):
        plan_capacity(_spec(), offers=OFFERS, model=LLAMA31_8B, measured={"H100": {"tokens_per_s_per_gpu": 1, "x": 2}})


def test_a_measured_point_cannot_make_weights_fit_or_beat_the_floors():
    seventy_b = inference.ServingModel("70b", 70_553_706_496, 80, 8192, 2 * 80 * 8 * 128 * 2)
    spec = _spec(resources={"accelerators": ["L4"], "clouds": ["aws"], "max_gpus_per_replica": 8},
                 slo={"p95_tpot_ms": 500, "p95_ttft_ms": 60_000},
                 measured={"L4": {"tokens_per_s_per_gpu": 50, "concurrency": 4, "ttft_ms": 900, "tpot_ms": 200}})
    o = _opt(plan_capacity(spec, offers=OFFERS, model=seventy_b), "L4")
    # the simulation finds 8 × L4 replicas; the 1-GPU measured point is not believed
    assert o["throughput_source"] == "estimated" and o["gpus_per_replica"] == 8
    assert "exceed 1 × 22.49 GiB of device memory: ignored as physically impossible" in o["reason"]
    fast = _spec(measured={"H100": {"tokens_per_s_per_gpu": 5000, "concurrency": 8, "ttft_ms": 0.5, "tpot_ms": 20}})
    h = _opt(plan_capacity(fast, offers=OFFERS, model=LLAMA31_8B), "H100")
    assert h["throughput_source"] == "estimated" and "measured TTFT 0.5 ms" in h["reason"]


def test_a_measured_point_that_misses_the_slo_is_not_used():
    point = {"tokens_per_s_per_gpu": 9000, "concurrency": 512, "ttft_ms": 3000, "tpot_ms": 90}
    h = _opt(plan_capacity(_spec(measured={"H100": point}), offers=OFFERS, model=LLAMA31_8B), "H100")
    assert h["throughput_source"] == "estimated" and h["feasible"]
    assert "misses the SLO: not used" in h["reason"]


def test_a_rate_without_latencies_needs_the_simulation_to_meet_the_slo():
    ok = _opt(plan_capacity(_spec(measured={"H100": {"tokens_per_s_per_gpu": 780}}), offers=OFFERS,
                            model=LLAMA31_8B), "H100")
    assert ok["feasible"] and ok["throughput_source"] == "measured" and ok["gpus"] == 10  # 7,800 / 780
    bad = _opt(plan_capacity(_spec(slo={"p95_tpot_ms": 1}, measured={"H100": {"tokens_per_s_per_gpu": 780}}),
                             offers=OFFERS, model=LLAMA31_8B), "H100")
    assert not bad["feasible"] and "has no TTFT/TPOT to show it meets the SLO" in bad["reason"]


def test_no_offer_keeps_the_verdict_but_no_price():
    spec = _spec(resources={"accelerators": ["L40S"], "clouds": ["aws"]})
    r = plan_capacity(spec, offers=OFFERS, model=LLAMA31_8B)
    o = _opt(r, "L40S")
    assert o["feasible"] and o["gpus"] >= 1 and o["usd_per_month_on_demand"] is None
    assert "no offer of L40S" in o["price_source"] and "unpriced" in o["reason"]
    assert r["best"] is None and "no feasible accelerator has a price" in r["best_reason"]


def test_unknown_engine_is_one_clear_error():
    spec = _spec()
    object.__setattr__(spec, "engine", "lmdeploy")
    with pytest.raises(UserError, match="unknown serving engine"):
        plan_capacity(spec, offers=OFFERS, model=LLAMA31_8B)


def test_engines_differ_where_their_schedulers_differ():
    plans = {e: _opt(plan_capacity(_spec(engine=e, slo={"p95_ttft_ms": 60_000, "p95_tpot_ms": 1000}), offers=OFFERS,
                                   model=LLAMA31_8B), "H100") for e in ("vllm", "trtllm")}
    # the curve ends at the widest batch the KV cache admits: TensorRT-LLM reserves prompt + output
    # per request (in 0.95 of the memory), vLLM allocates on demand (in 0.9)
    widest = {e: p["curve"][-1]["concurrency"] for e, p in plans.items()}
    assert widest["vllm"] != widest["trtllm"]
    assert all(p["feasible"] and p["operating_point"]["engine"] == e for e, p in plans.items())


def test_engine_args_replace_the_engine_defaults():
    spec = _spec(engine_args={"max_num_seqs": 16, "gpu_memory_utilization": 0.5},
                 resources={"accelerators": ["H100"], "clouds": ["aws"]}, slo={"p95_ttft_ms": 60_000, "p95_tpot_ms": 1000})
    r = plan_capacity(spec, offers=OFFERS, model=LLAMA31_8B)
    h = _opt(r, "H100")
    assert max(p["concurrency"] for p in h["curve"]) == 16 == h["max_batch"]
    assert "the engine's max sequences (16)" in h["operating_point"]["why"]
    assert r["spec"]["engine_args"] == {"max_num_seqs": 16, "gpu_memory_utilization": 0.5}
    assert "max_num_seqs 16, gpu_memory_utilization 0.5" in r["assumptions"][1]
    with pytest.raises(ValidationError):
        _spec(engine_args={"max_num_seqs": 0})


def test_shipped_chat_capacity_spec_has_a_feasible_best(repo_root):
    r = plan_capacity(load_spec(repo_root / "specs" / "chat-capacity.yaml"))
    best = r["best"]
    assert best is not None and best["feasible"]
    assert best["gpus"] >= 1 and best["usd_per_month_on_demand"] > 0
    assert best["ttft_ms"] <= 800 and best["tpot_ms"] <= 50
    assert r["spec"]["params_total"] == 8_030_261_248
    assert r["spec"]["kv_bytes_per_token"] == 131_072


def test_one_accelerator_plans_within_two_seconds_of_cpu(repo_root):
    import time

    spec = _spec(resources={"accelerators": ["H100"], "clouds": ["aws"]}, slo={"p95_ttft_ms": 2000, "p95_tpot_ms": 80})
    t0 = time.process_time()
    plan_capacity(spec, offers=OFFERS, model=LLAMA31_8B)
    assert time.process_time() - t0 < 2.0


# -------------------------------------------------------------------------------- CLI


def test_cli_json_has_exactly_the_keys(repo_root):
    out = subprocess.run([sys.executable, "-m", "gpuledger.cli", "capacity", "specs/chat-capacity.yaml", "--json"],
                         cwd=repo_root, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    assert set(r) == {"spec", "options", "best", "best_reason", "assumptions", "compare", "mixed_fleet", "ownership"}
    assert r["options"] and all(set(o) == EXPECTED_OPTION_KEYS for o in r["options"])
    assert set(r["best"]) == EXPECTED_OPTION_KEYS
    assert {o["throughput_source"] for o in r["options"]} <= {"estimated", "measured"}


def test_cli_human_form_and_errors(repo_root, capsys):
    from gpuledger.cli import main

    assert main(["capacity", str(repo_root / "specs" / "chat-capacity.yaml")]) == 0
    text = capsys.readouterr().out
    assert "best:" in text and "H100" in text and "$/month" in text and "physical floors" in text
    assert main(["capacity", str(repo_root / "specs" / "lora-grid.yaml")]) == 1
    err = capsys.readouterr().err
    assert "needs `kind: capacity`" in err and "Traceback" not in err
    assert main(["capacity", "no/such/spec.yaml"]) == 1
