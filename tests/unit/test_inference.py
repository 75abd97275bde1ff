"""Inference speed model (gpuledger.estimate.inference): hand arithmetic, engines, physical floors."""

from __future__ import annotations

import pytest

from gpuledger.estimate import inference

GIB = 2**30

# Llama-3.1-8B: 8,030,261,248 params of which 2 × 128,256 × 4,096 = 1,050,673,152 embedding + lm_head
# (shared/reference/param_counts.csv; its config.json); 32 layers, 32 heads, 8 KV heads, head_dim 128.
LLAMA31_8B = inference.ServingModel(
    name="meta-llama/Llama-3.1-8B",
    params_total=8_030_261_248,
    num_layers=32,
    attn_dim=32 * 128,
    kv_bytes_per_token=2 * 32 * 8 * 128 * 2,  # K and V × layers × kv heads × head_dim × 2 B = 131,072
    embedding_params=1_050_673_152,
)


def test_registry_model_matches_hand_facts():
    from gpuledger.models import load_config

    m = inference.serving_model_from_config(load_config("meta-llama/Llama-3.1-8B"), "bf16")
    assert (m.params_total, m.num_layers, m.attn_dim, m.kv_bytes_per_token, m.embedding_params) == (
        LLAMA31_8B.params_total, 32, 4096, 131_072, 1_050_673_152)
    fp8 = inference.serving_model_from_config(load_config("meta-llama/Llama-3.1-8B"), "fp8")
    assert fp8.kv_bytes_per_token == 65_536  # fp8 KV with fp8 weights


def test_weights_bytes_keep_embeddings_16_bit_when_quantised():
    assert inference.weights_bytes(LLAMA31_8B, "bf16") == 8_030_261_248 * 2
    # fp8: (8,030,261,248 − 1,050,673,152) × 1 B + 1,050,673,152 × 2 B
    assert inference.weights_bytes(LLAMA31_8B, "fp8") == 6_979_588_096 + 2_101_346_304
    with pytest.raises(ValueError, match="unknown precision"):
        inference.weights_bytes(LLAMA31_8B, "fp6")


def test_kv_capacity_by_hand_on_h100():
    hw = inference.hardware_for("H100", "bf16")
    vllm = inference.engine_for("vllm")
    budget = 0.90 * hw.memory_gib * GIB - 8_030_261_248 * 2 - 1.5 * GIB
    assert inference.kv_budget_bytes(LLAMA31_8B, hw, "bf16", 1, vllm) == pytest.approx(budget)
    assert inference.kv_capacity_tokens(LLAMA31_8B, hw, "bf16", 1, vllm) == int(budget // 131_072)
    # TensorRT-LLM's published runs give the KV cache 0.95 of the memory: more tokens
    assert inference.kv_capacity_tokens(LLAMA31_8B, hw, "bf16", 1, inference.engine_for("trtllm")) > int(budget // 131_072)
    # two GPUs hold one copy of the weights between them: more than twice the KV
    assert inference.kv_capacity_tokens(LLAMA31_8B, hw, "bf16", 2, vllm) > 2 * int(budget // 131_072)
    assert inference.max_batch_kv(LLAMA31_8B, hw, "bf16", 1500, 300, 1, vllm) == int(budget // 131_072) // 1808


def test_engine_defaults_are_documented_with_versions():
    assert set(inference.ENGINES) == {"vllm", "sglang", "trtllm", "tgi"}
    for e in inference.ENGINES.values():
        assert e.version and e.sources and e.max_num_seqs >= 1 and e.max_batched_tokens >= 1
    v = inference.engine_for(None)
    assert v.name == "vllm" and v.chunked_prefill and not v.reserve_full_request
    assert inference.engine_limits(v, inference.hardware_for("H100", "bf16")) == (1024, 8192)
    assert inference.engine_limits(v, inference.hardware_for("A100-80GB", "bf16")) == (256, 2048)  # vLLM's A100 rule
    assert inference.engine_for("trtllm").reserve_full_request
    with pytest.raises(ValueError, match="known: vllm, sglang, trtllm, tgi"):
        inference.engine_for("lmdeploy")


def test_step_cost_batch_one_by_hand():
    hw = inference.hardware_for("A100", "bf16")  # 40 GB, 1,555 GB/s, 312 TFLOPS bf16
    assert hw.generation == "ampere"
    vllm = inference.engine_for("vllm")
    c = inference.step_cost(LLAMA31_8B, hw, "bf16", vllm)
    weight_s = 8_030_261_248 * 2 / (1555e9 * 0.82)
    assert c.weight_s == pytest.approx(weight_s)
    kv_s = 131_072 / (1555e9 * 0.75)
    ctx = 1024 + 64
    step = c.step_s(1, ctx, 0, 0.0)
    assert step == pytest.approx(weight_s + ctx * kv_s + 0.4e-3 + 10e-6)  # + vLLM's per-sequence CPU time
    # 75 tokens/s measured (tests/data/serving_latency.csv): the model is within 5%
    assert 1 / step == pytest.approx(75, rel=0.05)


def test_hopper_small_batch_decode_matches_vllm_ci():
    # vLLM performance CI (tests/data/serving_latency.csv): H200, batch 8, 32 -> 128 tokens, Llama-3.1-8B bf16:
    # 833 ms end to end = 6.51 ms per token; the decode step at batch 8 (mean context 32 + 64) is within 10%
    hw = inference.hardware_for("H200", "bf16")
    step = inference.step_cost(LLAMA31_8B, hw, "bf16", inference.engine_for("vllm")).step_s(8, 8 * 96, 0, 0.0)
    assert step == pytest.approx(6.51e-3, rel=0.10)
    # TensorRT-LLM keeps the 0.82 its perf-overview rows fit
    trt = inference.step_cost(LLAMA31_8B, hw, "bf16", inference.engine_for("trtllm"))
    assert trt.weight_s == pytest.approx(16_060_522_496 / (4800e9 * 0.82), rel=1e-3)


def test_step_is_compute_bound_at_large_token_counts():
    hw = inference.hardware_for("H100", "fp8")
    c = inference.step_cost(LLAMA31_8B, hw, "fp8", inference.engine_for("trtllm"))
    assert c.step_s(1, 0, 0, 0) < c.step_s(8192, 0, 0, 0)
    t = c.step_s(0, 0, 8192, 0.0) - c.overhead_s
    dense = 8_030_261_248 - 1_050_673_152 / 2
    assert t == pytest.approx(8192 * 2 * dense / (1979e12 * 0.50 * 1.08))  # Hopper fp8 GEMM MFU × TensorRT-LLM 1.08


def test_fp8_on_a_gpu_without_fp8_tensor_cores_computes_at_16_bit():
    a100 = inference.hardware_for("A100-80GB", "fp8")
    assert not a100.native_fp8 and a100.peak_tflops == 312
    assert inference.hardware_for("H100", "fp8").peak_tflops == 1979


def test_physical_floors():
    hw = inference.hardware_for("H100", "bf16")
    assert inference.tpot_floor_s(LLAMA31_8B, hw, "bf16") == pytest.approx(16_060_522_496 / 3350e9)  # 4.79 ms
    # TP 8: an eighth of the weights each, plus 2 all-reduces per layer of at least 2 µs (NVLink)
    assert inference.tpot_floor_s(LLAMA31_8B, hw, "bf16", tp=8) == pytest.approx(16_060_522_496 / 3350e9 / 8 + 64 * 2e-6)
    assert inference.step_cost(LLAMA31_8B, hw, "bf16", inference.ENGINES["vllm"], 8).comm_s == pytest.approx(64 * 8e-6)
    flops = 2 * 8_030_261_248 * 1500 + 2 * 32 * 4096 * 1500**2
    assert inference.ttft_floor_s(LLAMA31_8B, hw, "bf16", 1500) == pytest.approx(flops / 989e12)
    # every engine's step is slower than the floor
    for e in inference.ENGINES.values():
        assert inference.step_cost(LLAMA31_8B, hw, "bf16", e).step_s(1, 1, 0, 0) > inference.tpot_floor_s(LLAMA31_8B, hw, "bf16")


def test_tensor_parallel_efficiency_tables():
    h100, l4 = inference.hardware_for("H100", "bf16"), inference.hardware_for("L4", "bf16")
    assert inference.tp_efficiency(h100, 8) == 0.80 and inference.tp_efficiency(l4, 8) == 0.60
    with pytest.raises(ValueError):
        inference.tp_efficiency(h100, 3)
    one = inference.step_cost(LLAMA31_8B, h100, "bf16", inference.engine_for("vllm"), 1)
    two = inference.step_cost(LLAMA31_8B, h100, "bf16", inference.engine_for("vllm"), 2)
    assert two.weight_s == pytest.approx(one.weight_s / (2 * 0.9))


def test_every_catalog_accelerator_has_a_generation():
    from gpuledger.catalog import gpu_kinds

    for name in gpu_kinds():
        assert inference.GENERATION_OF[name] in inference.GENERATIONS


def test_engines_as_they_run_cpu_ceiling_chat_overhead_and_hopper_gemms():
    """vLLM on an H100: the API server's streaming ceiling binds a small model at a large batch, the GPU
    step does not; the chat endpoint's per-request cost is the TTFT floor at concurrency 1."""
    h100 = inference.hardware_for("H100", "bf16")
    v = inference.engine_for("vllm")
    c = inference.step_cost(LLAMA31_8B, h100, "bf16", v)
    gpu = c.step_s(512, 512 * 300, 0, 0.0) - 0.0
    assert 512 / gpu == pytest.approx(1 / v.frontend_s_per_token, rel=0.01)  # the ceiling binds: ~9,100 tok/s
    offline = inference.engine_with(v, endpoint="offline")
    free = inference.step_cost(LLAMA31_8B, h100, "bf16", offline)
    assert free.step_s(512, 512 * 300, 0, 0.0) < gpu  # no API server: the GPU step alone
    assert inference.request_overhead_for(v) == v.request_overhead_chat_s == 45e-3
    assert inference.request_overhead_for(inference.engine_with(v, endpoint="completions")) == v.request_overhead_s
    assert inference.request_overhead_for(offline) == 0.0
    # Hopper GEMMs in vLLM at 0.65 × TensorRT-LLM's MFU, A100's unchanged
    t = inference.step_cost(LLAMA31_8B, h100, "bf16", inference.engine_for("trtllm"))
    assert c.flop_s_per_token / t.flop_s_per_token == pytest.approx(1.08 / (0.95 * 0.65), rel=1e-9)
    with pytest.raises(ValueError, match="unknown endpoint"):
        inference.engine_with(v, endpoint="grpc")


def test_speculative_decoding_cuts_tpot_at_small_batches_not_at_large():
    h100 = inference.hardware_for("H100", "bf16")
    v = inference.engine_for("vllm")
    base = inference.step_cost(LLAMA31_8B, h100, "bf16", v)
    spec = inference.spec_decode("eagle3", 3, 0.7, LLAMA31_8B, h100, "bf16", v)
    assert spec.tokens_per_step == pytest.approx((1 - 0.7**4) / 0.3)  # 2.53 tokens per verification
    fast = inference.step_cost(LLAMA31_8B, h100, "bf16", v, spec=spec)
    one, one_spec = base.step_s(1, 1000, 0, 0.0), fast.step_s(1, 1000, 0, 0.0)
    assert one / one_spec > 1.8  # batch 1: bandwidth-bound, ~2.5 tokens per weight read
    big, big_spec = base.step_s(256, 256 * 500, 0, 0.0), fast.step_s(256, 256 * 500, 0, 0.0)
    assert big / big_spec < one / one_spec  # compute-bound at 256: verifying 4 tokens each costs more
    ngram = inference.spec_decode("ngram", 3, 0.0, LLAMA31_8B, h100, "bf16", v)
    assert ngram.tokens_per_step == 1.0 and ngram.draft_s(8) == 0.0
    with pytest.raises(ValueError, match="draft model"):
        inference.spec_decode("draft_model", 3, 0.5, LLAMA31_8B, h100, "bf16", v)
