"""Inference throughput model (gpuledger.estimate.inference): hand arithmetic and known figures."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuledger.estimate import inference as inf

GIB = 2**30

# Llama-3.1-8B: 8,030,261,248 params (shared/reference/param_counts.csv); 32 layers, 32 heads,
# 8 KV heads, head_dim 128 (its config.json).
LLAMA31_8B = inf.ServingModel(
    name="meta-llama/Llama-3.1-8B",
    params_total=8_030_261_248,
    num_layers=32,
    attn_dim=32 * 128,
    kv_bytes_per_token=2 * 32 * 8 * 128 * 2,  # K and V × layers × kv heads × head_dim × 2 B = 131,072
)
# Llama-2-7B: 6,738,415,616 params, 32 layers, 32 heads (no GQA), head_dim 128.
LLAMA2_7B = inf.ServingModel(
    name="meta-llama/Llama-2-7b-hf",
    params_total=6_738_415_616,
    num_layers=32,
    attn_dim=4096,
    kv_bytes_per_token=2 * 32 * 32 * 128 * 2,
)


def test_kv_bytes_per_token_by_hand():
    assert LLAMA31_8B.kv_bytes_per_token == 131_072


def test_kv_limited_batch_llama31_8b_on_80gb_by_hand():
    hw = inf.hardware_for("A100-80GB", "bf16")
    assert hw.memory_gib == 80.0
    usable = 0.9 * 80 * GIB  # vLLM gpu_memory_utilization 0.9 of 80 GiB
    assert usable == 77_309_411_328
    weights = 8_030_261_248 * 2  # bf16
    assert weights == 16_060_522_496
    reserve = 1.5 * GIB  # activation / CUDA-graph reserve
    assert reserve == 1_610_612_736
    kv_budget = usable - weights - reserve
    assert kv_budget == 59_638_276_096
    tokens_per_request = math.ceil((1500 + 300) / 16) * 16  # 113 pages of 16 tokens = 1,808
    assert tokens_per_request == 1808
    per_request = tokens_per_request * 131_072
    assert per_request == 236_978_176
    by_hand = int(kv_budget // per_request)  # 251.66...
    assert by_hand == 251
    assert inf.max_batch_kv(LLAMA31_8B, hw, "bf16", 1500, 300) == by_hand
    assert inf.kv_budget_bytes(LLAMA31_8B, hw, "bf16") == kv_budget


def test_kv_limited_batch_grows_with_tensor_parallel_and_fp8():
    hw = inf.hardware_for("H100", "bf16")
    b1 = inf.max_batch_kv(LLAMA31_8B, hw, "bf16", 1500, 300, tp=1)
    b2 = inf.max_batch_kv(LLAMA31_8B, hw, "bf16", 1500, 300, tp=2)
    assert b2 > 2 * b1  # the second GPU holds no second copy of the weights
    fp8 = inf.ServingModel(**{**LLAMA31_8B.__dict__, "kv_bytes_per_token": 65_536})
    assert inf.max_batch_kv(fp8, inf.hardware_for("H100", "fp8"), "fp8", 1500, 300) > 2 * b1


def test_weights_do_not_fit_gives_zero_batch():
    seventy_b = inf.ServingModel("70b", 70_553_706_496, 80, 8192, 2 * 80 * 8 * 128 * 2)
    assert inf.max_batch_kv(seventy_b, inf.hardware_for("L4", "bf16"), "bf16", 1500, 300) == 0


def test_weight_bytes_scale_4_2_1_half():
    b = [inf.weight_bytes_per_param(p) for p in ("fp32", "bf16", "fp8", "int4")]
    assert b[:3] == [4.0, 2.0, 1.0]
    assert b[3] == 0.5 + 2.5 / 128  # 4 bits plus a group-128 fp16 scale and 4-bit zero point
    with pytest.raises(ValueError):
        inf.weight_bytes_per_param("int3")


def test_decode_batch1_llama2_7b_a100_matches_known_figures():
    """Llama-2-7B bf16 on one A100-80GB at batch 1: the bandwidth bound is 2039 GB/s / 13.48 GB =
    151.3 tokens/s (shared/reference/gpu_specs.csv, decode_tok_s_upper_bound_7B_bf16); vLLM-class
    servers measure about 70-100 tokens/s there."""
    hw = inf.hardware_for("A100-80GB", "bf16")
    step = inf.decode_step_s(LLAMA2_7B, hw, "bf16", batch=1, context_tokens=128)
    tok_s = 1 / step
    assert 70 <= tok_s <= 100, tok_s
    assert tok_s < 151.3
    # H100 (3,350 GB/s): bound 248.5 tokens/s per the same column
    h100 = 1 / inf.decode_step_s(LLAMA2_7B, inf.hardware_for("H100", "bf16"), "bf16", batch=1, context_tokens=128)
    assert tok_s < h100 < 248.5


def test_decode_turns_compute_bound_at_large_batch():
    hw = inf.hardware_for("A100-80GB", "bf16")
    b = 4096  # far past the ridge point: 2·P·b FLOPs dominate
    t = inf.decode_step_s(LLAMA31_8B, hw, "bf16", batch=b, context_tokens=1)
    flops = b * (2 * LLAMA31_8B.params_total + 4 * 32 * 4096 * 1)
    assert t == pytest.approx(flops / (312e12 * inf.DECODE_MFU) + inf.DECODE_STEP_OVERHEAD_S)


def test_prefill_by_hand():
    hw = inf.hardware_for("H100", "bf16")
    s = 1500
    flops = 2 * 8_030_261_248 * s + 2 * 32 * 4096 * s * s
    assert inf.prefill_flops(LLAMA31_8B, s) == flops
    assert inf.prefill_s(LLAMA31_8B, hw, "bf16", s) == pytest.approx(flops / (989e12 * 0.5))
    # ~50 ms for a 1,500-token prompt on H100 bf16
    assert 0.04 < inf.prefill_s(LLAMA31_8B, hw, "bf16", s) < 0.06
    # two NVLink GPUs: 2 × 0.9 as fast
    assert inf.prefill_s(LLAMA31_8B, hw, "bf16", s, tp=2) == pytest.approx(flops / (989e12 * 0.5 * 2 * 0.9))


def test_p95_wait():
    assert inf.p95_wait_s(0.01, 0.1) == 0.0
    assert inf.p95_wait_s(1.0, 0.1) == math.inf
    assert inf.p95_wait_s(0.5, 0.1) == pytest.approx(0.1 * math.log(10) / 0.5)


def test_tpot_includes_prefill_share():
    hw = inf.hardware_for("H100", "bf16")
    p = inf.serving_point(LLAMA31_8B, hw, "bf16", batch=60, prompt_tokens=1500, output_tokens=300)
    assert p.tpot_s == pytest.approx(p.decode_step_s + 60 / 300 * p.prefill_s)
    assert p.output_tokens_per_s_per_gpu == pytest.approx(60 / p.tpot_s)
    assert 0 < p.prefill_utilization < 1


@settings(max_examples=60, deadline=None)
@given(b=st.integers(1, 511), tp=st.sampled_from([1, 2, 4, 8]), accel=st.sampled_from(["L4", "A100-80GB", "H100"]))
def test_bigger_batch_is_slower_per_step_but_more_tokens_per_gpu(b, tp, accel):
    hw = inf.hardware_for(accel, "bf16")
    kw = dict(prompt_tokens=1000, output_tokens=200, tp=tp, headroom=0.2)
    p1 = inf.serving_point(LLAMA31_8B, hw, "bf16", batch=b, **kw)
    p2 = inf.serving_point(LLAMA31_8B, hw, "bf16", batch=b + 1, **kw)
    assert p2.tpot_s >= p1.tpot_s
    assert p2.ttft_p95_s >= p1.ttft_p95_s
    assert p2.output_tokens_per_s_per_gpu >= p1.output_tokens_per_s_per_gpu


def test_best_batch_is_the_largest_meeting_the_slo():
    hw = inf.hardware_for("H100", "bf16")
    kw = dict(prompt_tokens=1500, output_tokens=300, tp=1, headroom=0.3)
    p = inf.best_batch(LLAMA31_8B, hw, "bf16", p95_ttft_s=0.8, p95_tpot_s=0.05, batch_limit=250, **kw)
    assert p is not None and 1 <= p.batch < 250
    assert p.tpot_s <= 0.05 and p.ttft_p95_s <= 0.8
    nxt = inf.serving_point(LLAMA31_8B, hw, "bf16", batch=p.batch + 1, **kw)
    assert nxt.tpot_s > 0.05 or nxt.ttft_p95_s > 0.8
    assert inf.best_batch(LLAMA31_8B, hw, "bf16", p95_ttft_s=0.8, p95_tpot_s=0.001, batch_limit=250, **kw) is None


def test_serving_model_from_registry_config():
    from gpuledger.models import load_config

    m = inf.serving_model_from_config(load_config("meta-llama/Llama-3.1-8B"), "bf16")
    assert (m.params_total, m.num_layers, m.attn_dim, m.kv_bytes_per_token) == (8_030_261_248, 32, 4096, 131_072)
    assert inf.serving_model_from_config(load_config("meta-llama/Llama-3.1-8B"), "fp8").kv_bytes_per_token == 65_536


def test_fp8_prefill_uses_fp8_cores_only_where_they_exist():
    h100 = inf.hardware_for("H100", "fp8")
    a100 = inf.hardware_for("A100-80GB", "fp8")
    assert h100.native_fp8 and h100.peak_tflops == 1979
    assert not a100.native_fp8 and a100.peak_tflops == 312  # weight-only fp8: 16-bit matmuls
    assert inf.prefill_mfu("fp8", h100) == inf.PREFILL_MFU_FP8
    assert inf.prefill_mfu("fp8", a100) == inf.PREFILL_MFU
