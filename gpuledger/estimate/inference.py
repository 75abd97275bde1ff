"""Inference throughput of a decoder LLM on one accelerator kind: pure functions over plain numbers.

The serving model is vLLM-style continuous batching with paged KV cache and chunked prefill:

- prefill is compute-bound: FLOPs = 2·P·s (dense matmuls) + 2·L·d_attn·s² (causal attention:
  QKᵀ and AV, 2·s²·d each, halved by the causal mask), at `PREFILL_MFU` of the dense peak;
- decode is bandwidth-bound: every step reads all weights once plus the KV cache of every sequence
  in the batch, at `decode_bandwidth_efficiency(kind)` of the datasheet bandwidth; at large batches
  the 2·P·b FLOPs of the step can take over (roofline: the step takes the larger of the two);
- the batch is bounded by the KV cache: usable memory (`GPU_MEMORY_UTILIZATION` × memory, as vLLM's
  `gpu_memory_utilization`) minus weights minus an activation/workspace reserve, divided by the KV
  bytes one request holds (prompt + output tokens, rounded up to whole 16-token pages).

Everything here takes numbers (a `ServingModel`, a `Hardware`) and returns numbers, so it is
testable by hand. `serving_model_from_config` adapts the estimator's `ModelConfig`; the capacity
planner (`gpuledger.capacity`) does the choosing, fleet sizing and pricing.

Sanity check (comments cite the figures): Llama-2-7B (6,738,415,616 params, bf16 = 13.48 GB) on one
A100-80GB (2,039 GB/s) has a pure-bandwidth upper bound of 2039/13.48 = 151 tokens/s at batch 1
(`shared/reference/gpu_specs.csv`, column decode_tok_s_upper_bound_7B_bf16 = 151.3). vLLM-class
servers reach about 70-100 tokens/s there. With `DECODE_BANDWIDTH_EFFICIENCY` 0.70 and
`DECODE_STEP_OVERHEAD_S` 1.5 ms this module says 13.48e9 / (2039e9 × 0.70) + 1.5 ms = 10.9 ms per
token = 91 tokens/s (tests/test_inference.py checks the range).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# --------------------------------------------------------------------------------------------
# Constants (each with its source or reasoning)

#: Bytes per weight by serving precision, the same widths and quantisation constants as the memory
#: estimator (`gpuledger.estimate.memory.WEIGHT_BYTES` + `QUANT_CONST_BYTES`): 16-bit = 2;
#: fp8/int8 = 1; int4 = 4 bits plus an fp16 scale and a 4-bit zero point per group of 128 weights
#: (GPTQ/AWQ default group size): 0.5 + 2.5/128; nf4 = 4 bits plus one fp32 absmax per 64 weights
#: (bitsandbytes default, QLoRA paper, Dettmers et al. 2023, §3): 0.5 + 4/64. Simplification: every parameter
#: is counted at this width, although fp8/int checkpoints usually keep embeddings and lm_head in
#: 16 bit (for Llama-3.1-8B at fp8 that is ~1 GB more than we count).
WEIGHT_BYTES_PER_PARAM: dict[str, float] = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "bf16-mixed": 2.0,  # a mixed-precision checkpoint is served in 16 bit
    "fp16-mixed": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5 + 2.5 / 128,
    "nf4": 0.5 + 4 / 64,
}

#: vLLM's default `gpu_memory_utilization` (0.9): the fraction of device memory the engine lets
#: itself use for weights + activations + KV cache; the rest covers the CUDA context, NCCL buffers
#: and fragmentation. https://docs.vllm.ai/en/latest/serving/engine_args.html
GPU_MEMORY_UTILIZATION = 0.90

#: Activation peak + CUDA-graph/sampler workspace per GPU, subtracted before the KV cache. vLLM's
#: start-up profile of an 8B Llama reports an activation peak of roughly 1-1.5 GiB plus a few
#: hundred MiB of CUDA graphs; we take 1.5 GiB flat (it is small next to weights and KV).
ACTIVATION_RESERVE_GIB = 1.5

#: vLLM's paged KV cache allocates in blocks of 16 tokens (default `block_size`), so a request
#: holds ceil(tokens/16) blocks.
KV_BLOCK_TOKENS = 16

#: The scheduler's cap on concurrent sequences: vLLM's long-standing default `max_num_seqs` = 256.
MAX_NUM_SEQS = 256

#: Fraction of datasheet bandwidth a decode step achieves when streaming weights + KV. HBM parts
#: reach ~70% in vLLM/TensorRT-LLM decode kernels; GDDR parts (PCIe cards) about the same fraction
#: of a much smaller number. Calibrated on the Llama-2-7B/A100-80GB figure in the module docstring
#: (70-100 tokens/s at batch 1 against a 151 tokens/s bound). One value for all kinds, because we
#: have no per-kind measurement that would justify different ones; `measured:` rates replace it.
DECODE_BANDWIDTH_EFFICIENCY = 0.70
DECODE_BANDWIDTH_EFFICIENCY_BY_KIND: dict[str, float] = {}

#: Fixed cost of one decode step outside the weight/KV stream: scheduler, sampling, kernel launches
#: (mostly hidden by CUDA graphs) and the non-overlapped tail of each layer. 1.5 ms is what makes
#: the batch-1 figure above come out at ~91 tokens/s instead of 106; it also reproduces the finding
#: that batch-1 decode reaches a smaller fraction of peak bandwidth on faster GPUs ("Memory-Bound
#: but Not Bandwidth-Limited", 2026: 44 configurations of 7-8B GQA models on H100, A100, L40S, L4).
DECODE_STEP_OVERHEAD_S = 1.5e-3

#: Model FLOPs utilisation of prefill (large matmuls, compute-bound). 16-bit prefill of a 1-2k token
#: prompt runs at ~50% of dense peak on A100/H100 in vLLM and TensorRT-LLM; fp8 kernels reach a
#: smaller fraction of their doubled peak, so 0.40 there.
PREFILL_MFU = 0.50
PREFILL_MFU_FP8 = 0.40

#: MFU of the matmuls of a decode step when it turns compute-bound (batch past the ridge point).
DECODE_MFU = 0.50

#: Tensor-parallel efficiency: each layer does two all-reduces of the activations; over NVLink
#: (A100/H100/H200/B200/V100 SXM) the loss is ~10% at TP2 rising to ~20% at TP8; over PCIe (L4, A10G,
#: L40S, RTX cards; no NVLink) ~20% at TP2 rising to ~40% at TP8. Judgement from published vLLM and
#: TensorRT-LLM TP scaling, not a measurement of ours.
TP_EFFICIENCY_NVLINK: dict[int, float] = {1: 1.0, 2: 0.90, 4: 0.85, 8: 0.80}
TP_EFFICIENCY_PCIE: dict[int, float] = {1: 1.0, 2: 0.80, 4: 0.70, 8: 0.60}
NVLINK_KINDS = frozenset({"A100", "A100-80GB", "H100", "H200", "B200", "V100"})
TP_DEGREES = (1, 2, 4, 8)

#: The p95 of an M/M/1 waiting time: P(W > t) = ρ·exp(-(1-ρ)t/S), so t95 = S·ln(ρ/0.05)/(1-ρ).
P95_TAIL = 0.05

GIB = 2**30


# --------------------------------------------------------------------------------------------
# Inputs


@dataclass(frozen=True)
class ServingModel:
    """The facts of a model that inference speed depends on."""

    name: str
    params_total: int
    num_layers: int
    attn_dim: int  # num_attention_heads × head_dim: the width of Q (attention FLOPs)
    kv_bytes_per_token: int  # K and V of every layer for one token, at the KV precision


@dataclass(frozen=True)
class Hardware:
    """One accelerator kind at one serving precision."""

    name: str
    memory_gib: float
    bandwidth_gbps: float  # GB/s, 1e9 bytes/s
    peak_tflops: float  # dense peak at the compute precision
    nvlink: bool = False
    bandwidth_efficiency: float = DECODE_BANDWIDTH_EFFICIENCY
    native_fp8: bool = False  # fp8 tensor cores (Ada, Hopper, Blackwell); else fp8 is weight-only


def kv_precision_for(precision: str) -> str:
    """Returns the KV-cache precision served with `precision`: fp8 KV with fp8 weights, fp32 with
    fp32, else 16 bit (vLLM's `kv_cache_dtype=auto` follows the model dtype; int4/int8/nf4 are
    weight-only schemes whose activations and KV stay 16 bit)."""
    return {"fp8": "fp8", "fp32": "fp32"}.get(precision, "bf16")


def weight_bytes_per_param(precision: str) -> float:
    """Returns bytes per weight at a serving precision (`WEIGHT_BYTES_PER_PARAM`)."""
    try:
        return WEIGHT_BYTES_PER_PARAM[precision]
    except KeyError:
        raise ValueError(
            f"unknown precision {precision!r} (known: {', '.join(WEIGHT_BYTES_PER_PARAM)})"
        ) from None


def hardware_for(accelerator: str, precision: str) -> Hardware:
    """Returns the `Hardware` of a catalog accelerator kind at a serving precision."""
    from gpuledger.catalog import gpu_kinds, normalize_accelerator

    name = normalize_accelerator(accelerator)
    kind = gpu_kinds()[name]
    return Hardware(
        name=name,
        memory_gib=kind.memory_gib,
        bandwidth_gbps=kind.bandwidth_gbps,
        peak_tflops=kind.peak_tflops(precision),
        nvlink=name in NVLINK_KINDS,
        bandwidth_efficiency=DECODE_BANDWIDTH_EFFICIENCY_BY_KIND.get(name, DECODE_BANDWIDTH_EFFICIENCY),
        native_fp8=bool(kind.tflops.get("fp8")),
    )


def _cfg_int(cfg, *names: str) -> int | None:
    for n in names:
        v = cfg.get(n) if isinstance(cfg, dict) else getattr(cfg, n, None)
        if v is not None:
            return int(v)
    return None


def serving_model_from_config(cfg, precision: str, *, params_total: int | None = None,
                              kv_bytes_per_token: int | None = None) -> ServingModel:
    """Returns the `ServingModel` of an estimator `ModelConfig` at a serving precision.

    Parameter count and KV bytes per token come from the estimator (`gpuledger.models.count_params`,
    `gpuledger.estimate.kv_cache_bytes_per_token`) unless given.
    """
    if params_total is None:
        from gpuledger.models import count_params

        params_total = int(count_params(cfg).total)
    if kv_bytes_per_token is None:
        from gpuledger.estimate import kv_cache_bytes_per_token

        kv_bytes_per_token = int(kv_cache_bytes_per_token(cfg, kv_precision_for(precision)))
    layers = _cfg_int(cfg, "num_hidden_layers", "num_layers", "n_layer", "n_layers")
    heads = _cfg_int(cfg, "num_attention_heads", "num_heads", "n_head")
    hidden = _cfg_int(cfg, "hidden_size", "d_model", "n_embd")
    head_dim = _cfg_int(cfg, "head_dim")
    if head_dim is None and heads and hidden:
        head_dim = hidden // heads
    if not layers or not heads or not head_dim:
        raise ValueError("model config lacks num_hidden_layers / num_attention_heads / head_dim")
    name = (cfg.get("_name_or_path") if isinstance(cfg, dict) else getattr(cfg, "name", None)) or "model"
    return ServingModel(
        name=str(name),
        params_total=params_total,
        num_layers=layers,
        attn_dim=heads * head_dim,
        kv_bytes_per_token=kv_bytes_per_token,
    )


# --------------------------------------------------------------------------------------------
# Memory


def weights_bytes(model: ServingModel, precision: str) -> float:
    """Returns the bytes of the model's weights at a serving precision (whole model)."""
    return model.params_total * weight_bytes_per_param(precision)


def tp_efficiency(hw: Hardware, tp: int) -> float:
    """Returns the tensor-parallel efficiency of `tp` GPUs of this kind (`TP_EFFICIENCY_*`)."""
    table = TP_EFFICIENCY_NVLINK if hw.nvlink else TP_EFFICIENCY_PCIE
    if tp not in table:
        raise ValueError(f"tensor parallel degree must be one of {sorted(table)} (got {tp})")
    return table[tp]


def usable_bytes_per_gpu(hw: Hardware) -> float:
    """Returns what the engine may use on one GPU: `GPU_MEMORY_UTILIZATION` × device memory."""
    return GPU_MEMORY_UTILIZATION * hw.memory_gib * GIB


def kv_budget_bytes(model: ServingModel, hw: Hardware, precision: str, tp: int = 1) -> float:
    """Returns the KV-cache bytes of one replica of `tp` GPUs (negative when weights do not fit):
    tp × (usable − weights/tp − activation reserve)."""
    per_gpu = usable_bytes_per_gpu(hw) - weights_bytes(model, precision) / tp - ACTIVATION_RESERVE_GIB * GIB
    return tp * per_gpu


def kv_tokens_per_request(prompt_tokens: int, output_tokens: int) -> int:
    """Returns the KV tokens one request holds at its end: prompt + output, in whole 16-token pages."""
    return math.ceil((prompt_tokens + output_tokens) / KV_BLOCK_TOKENS) * KV_BLOCK_TOKENS


def max_batch_kv(model: ServingModel, hw: Hardware, precision: str, prompt_tokens: int,
                 output_tokens: int, tp: int = 1) -> int:
    """Returns the most requests the KV cache of one replica holds at once (0 when none fits).

    Not capped by the scheduler (`MAX_NUM_SEQS`); the planner applies that cap.
    """
    budget = kv_budget_bytes(model, hw, precision, tp)
    per_request = kv_tokens_per_request(prompt_tokens, output_tokens) * model.kv_bytes_per_token
    return max(0, int(budget // per_request))


# --------------------------------------------------------------------------------------------
# Time


def prefill_mfu(precision: str, hw: Hardware | None = None) -> float:
    """Returns the MFU of prefill at a precision (`PREFILL_MFU`; `PREFILL_MFU_FP8` where fp8 runs on
    fp8 tensor cores — on GPUs without them fp8 is weight-only and computes at the 16-bit rate)."""
    native = hw.native_fp8 if hw is not None else True
    return PREFILL_MFU_FP8 if precision == "fp8" and native else PREFILL_MFU


def prefill_flops(model: ServingModel, prompt_tokens: int) -> float:
    """Returns the FLOPs of one prompt's prefill: 2·P·s + 2·L·d_attn·s² (causal attention)."""
    s = prompt_tokens
    return 2.0 * model.params_total * s + 2.0 * model.num_layers * model.attn_dim * s * s


def prefill_s(model: ServingModel, hw: Hardware, precision: str, prompt_tokens: int, tp: int = 1) -> float:
    """Returns seconds of compute to prefill one prompt on a replica of `tp` GPUs."""
    rate = hw.peak_tflops * 1e12 * prefill_mfu(precision, hw) * tp * tp_efficiency(hw, tp)
    return prefill_flops(model, prompt_tokens) / rate


def decode_step_s(model: ServingModel, hw: Hardware, precision: str, batch: int,
                  context_tokens: float, tp: int = 1) -> float:
    """Returns seconds of one decode step of `batch` sequences with `context_tokens` of KV each.

    max(bytes moved / (bandwidth × efficiency), FLOPs / (peak × DECODE_MFU)), split over `tp`
    GPUs at `tp_efficiency`, plus `DECODE_STEP_OVERHEAD_S`.
    """
    bytes_moved = weights_bytes(model, precision) + batch * context_tokens * model.kv_bytes_per_token
    flops = batch * (2.0 * model.params_total + 4.0 * model.num_layers * model.attn_dim * context_tokens)
    t_mem = bytes_moved / (hw.bandwidth_gbps * 1e9 * hw.bandwidth_efficiency)
    t_flops = flops / (hw.peak_tflops * 1e12 * DECODE_MFU)
    return max(t_mem, t_flops) / (tp * tp_efficiency(hw, tp)) + DECODE_STEP_OVERHEAD_S


def p95_wait_s(utilization: float, service_s: float) -> float:
    """Returns the p95 waiting time of an M/M/1 queue (inf when utilization ≥ 1).

    P(W > t) = ρ·exp(-(1-ρ)·t/S)  ⇒  t95 = S·ln(ρ/0.05)/(1-ρ), zero when ρ ≤ 0.05.
    """
    if utilization >= 1.0:
        return math.inf
    if utilization <= P95_TAIL:
        return 0.0
    return service_s * math.log(utilization / P95_TAIL) / (1.0 - utilization)


@dataclass(frozen=True)
class ServingPoint:
    """One replica serving `batch` concurrent streams of a request mix (times in seconds)."""

    batch: int
    tp: int
    decode_step_s: float  # one decode step of the whole batch
    prefill_s: float  # compute for one prompt
    tpot_s: float  # decode step + the prefill time the step carries (interference)
    ttft_p95_s: float  # p95 queueing behind other prompts + own prefill + the decode it rides with
    prefill_utilization: float  # share of replica time spent on prefill at the planned load
    output_tokens_per_s_per_replica: float
    output_tokens_per_s_per_gpu: float
    prefill_tokens_per_s_per_gpu: float  # prefill capacity if a GPU did nothing else


def serving_point(model: ServingModel, hw: Hardware, precision: str, *, batch: int, prompt_tokens: int,
                  output_tokens: int, tp: int = 1, headroom: float = 0.0) -> ServingPoint:
    """Returns TTFT, TPOT and sustainable throughput of one replica at a batch size.

    Model (continuous batching with chunked prefill, every step carries the whole decode batch):
    - each stream's KV holds on average prompt + output/2 tokens during decode;
    - TPOT = T_decode(b) + (b / output_tokens) · T_prefill: in steady state b/O requests finish per
      step and as many new prompts are prefilled within the steps, so each output token of a stream
      also waits for that share of prefill (decode and prefill share GPU time; the TPOT of a
      request averages over its O tokens, so its p95 is close to this mean);
    - output tokens/s per replica = b / TPOT; the prefill load is inside that rate, so sizing on it
      already checks prefill (prefill utilisation = (b/O)·T_prefill / TPOT < 1 by construction);
    - TTFT p95 = own prefill + one decode step it rides with + p95 wait behind earlier prompts
      (M/M/1 with service T_prefill and utilisation = prefill share at the planned load, i.e. at
      1/(1+headroom) of capacity). M/M/1 is pessimistic for equal prompts (M/D/1 waits about half
      as long); we keep that margin.
    """
    context = prompt_tokens + output_tokens / 2.0
    t_dec = decode_step_s(model, hw, precision, batch, context, tp)
    t_pre = prefill_s(model, hw, precision, prompt_tokens, tp)
    prefill_share_per_step = batch / output_tokens * t_pre
    tpot = t_dec + prefill_share_per_step
    rho = prefill_share_per_step / tpot / (1.0 + headroom)
    ttft = t_pre + t_dec + p95_wait_s(rho, t_pre)
    per_replica = batch / tpot
    return ServingPoint(
        batch=batch,
        tp=tp,
        decode_step_s=t_dec,
        prefill_s=t_pre,
        tpot_s=tpot,
        ttft_p95_s=ttft,
        prefill_utilization=rho,
        output_tokens_per_s_per_replica=per_replica,
        output_tokens_per_s_per_gpu=per_replica / tp,
        prefill_tokens_per_s_per_gpu=prompt_tokens / t_pre / tp,
    )


def best_batch(model: ServingModel, hw: Hardware, precision: str, *, prompt_tokens: int, output_tokens: int,
               tp: int, p95_ttft_s: float, p95_tpot_s: float, headroom: float = 0.0,
               batch_limit: int) -> ServingPoint | None:
    """Returns the serving point of the largest batch ≤ `batch_limit` meeting both p95 targets, or None.

    Throughput per GPU rises with the batch (T_decode(b)/b falls), so the largest batch that meets
    the SLO is the cheapest. TPOT and TTFT rise with the batch, so a binary search is exact.
    """
    def ok(b: int) -> ServingPoint | None:
        p = serving_point(model, hw, precision, batch=b, prompt_tokens=prompt_tokens,
                          output_tokens=output_tokens, tp=tp, headroom=headroom)
        return p if p.tpot_s <= p95_tpot_s and p.ttft_p95_s <= p95_ttft_s else None

    if batch_limit < 1 or ok(1) is None:
        return None
    lo, hi = 1, batch_limit  # ok(lo) holds
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ok(mid) is not None:
            lo = mid
        else:
            hi = mid - 1
    return ok(lo)
