"""Inference speed of a decoder LLM on one accelerator kind and serving engine: pure functions.

The unit of work is one **engine step** of continuous batching: every running sequence that is
decoding adds one token, and (with chunked prefill) some prompt tokens are computed in the same
forward pass. `step_time_s` prices one step as the kernels run, one after the other:

- the dense matmuls (weights × tokens): max(weights / (bandwidth × `weight_bw_efficiency`),
  2·P_dense·tokens / (peak × `gemm_mfu`)) — bandwidth-bound at small batches, compute-bound at large;
- the attention: decoding sequences read their KV cache (`kv_bw_efficiency` of the bandwidth:
  paged-attention kernels reach less than the weight GEMV), prompt chunks compute causal attention
  (4·L·d_attn·c·(start + c/2) FLOPs for a chunk of c tokens after `start` earlier ones);
- a fixed per-step cost (scheduler, sampling, launch gaps CUDA graphs do not hide).

The efficiencies depend on the GPU generation (`GENERATIONS`) and the engine (`ENGINES`); each
engine also carries its scheduler limits (max sequences, max batched tokens, chunked prefill,
CUDA-graph batch sizes, KV memory fraction, admission policy), with its default and the version it
comes from (`gpuledger.estimate.engines`, with the server's terms and speculative decoding; its names
are re-exported here). `gpuledger.capacity.simulate` runs these steps through a discrete-event simulation.

Calibration (benchmarks/capacity_accuracy.py reproduces it against tests/data/serving_*.csv):
batch-1 decode of Llama-3.1-8B bf16 on an A100-40GB runs at 75 tokens/s in vLLM, 77% of the
1,555 GB/s roofline; the maximum throughput of Llama-3.1-8B fp8 in TensorRT-LLM on H100/H200
(NVIDIA's perf-overview table) fixes the GEMM MFU and the KV-read efficiency.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from gpuledger.estimate.engines import ENDPOINTS as ENDPOINTS
from gpuledger.estimate.engines import ENGINE_NAMES as ENGINE_NAMES
from gpuledger.estimate.engines import ENGINES, SPEC_METHODS, Engine, SpecDecode
from gpuledger.estimate.engines import engine_for as engine_for
from gpuledger.estimate.engines import engine_with as engine_with
from gpuledger.estimate.engines import request_overhead_for as request_overhead_for

GIB = 2**30

# --------------------------------------------------------------------------------------------
# Weights

#: Bytes per weight by serving precision, the same widths and quantisation constants as the memory
#: estimator: 16-bit = 2; fp8/int8 = 1; int4 = 4 bits plus an fp16 scale and a 4-bit zero point per
#: group of 128 (GPTQ/AWQ default): 0.5 + 2.5/128; nf4 = 4 bits plus one fp32 absmax per 64
#: (bitsandbytes default, QLoRA paper §3): 0.5 + 4/64.
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

#: Quantised checkpoints keep the token embedding and lm_head in 16 bit (NVIDIA ModelOpt FP8,
#: llm-compressor FP8/INT8, AutoAWQ and GPTQ all skip them): those parameters count 2 bytes.
EMBEDDING_BYTES_QUANTISED = 2.0

#: Activation peak + sampler workspace per GPU that the engine's start-up profile subtracts before
#: the KV cache (vLLM reports ~1-1.5 GiB for an 8B Llama at 8k batched tokens).
ACTIVATION_RESERVE_GIB = 1.5

#: Paged KV cache block size in tokens (vLLM `block_size` 16; SGLang pages of 1, TRT-LLM
#: `tokens_per_block` 32 — 16 is a fair middle for rounding).
KV_BLOCK_TOKENS = 16

# --------------------------------------------------------------------------------------------
# GPU generations


@dataclass(frozen=True)
class Generation:
    """Kernel efficiencies reached on one GPU generation (before the engine's scale)."""

    name: str
    weight_bw_efficiency: float  # batch-1 decode weight stream, fraction of datasheet bandwidth
    kv_bw_efficiency: float  # paged attention KV reads
    gemm_mfu: float  # dense matmuls at large token counts, fraction of dense peak
    gemm_mfu_fp8: float  # the same with fp8 tensor cores (fraction of the fp8 peak)
    attn_mfu: float  # flash attention of prompts, fraction of the 16-bit dense peak
    source: str


#: Batch-1 decode reaches 75-80% of HBM bandwidth on current engines (A100-40GB + Llama-3.1-8B bf16
#: in vLLM: 75 tokens/s = 77% of the roofline, tests/data/serving_latency.csv); GDDR6X cards the same
#: share (RTX 4090 + Mistral-7B at concurrency 4: 52 tokens/s per stream ≈ 77%). GEMM MFU and KV
#: efficiency on Hopper from NVIDIA's TensorRT-LLM max-throughput table (serving_throughput.csv).
#: Older parts (Volta/Turing) get lower figures by judgement: their kernels are less tuned.
GENERATIONS: dict[str, Generation] = {
    "volta": Generation("volta", 0.72, 0.60, 0.45, 0.45, 0.45, "judgement (no measurement here)"),
    "turing": Generation("turing", 0.72, 0.60, 0.45, 0.45, 0.45, "judgement (no measurement here)"),
    "ampere": Generation("ampere", 0.82, 0.75, 0.62, 0.62, 0.65, "A100-40GB batch-1 vLLM measurement"),
    "ada": Generation("ada", 0.82, 0.75, 0.62, 0.45, 0.65, "RTX 4090 vLLM concurrency sweep"),
    "hopper": Generation("hopper", 0.82, 0.75, 0.62, 0.50, 0.70, "TensorRT-LLM perf overview H100/H200"),
    "blackwell": Generation("blackwell", 0.80, 0.72, 0.50, 0.45, 0.65, "judgement: Hopper figures, newer kernels"),
}

#: Catalog accelerator → generation.
GENERATION_OF: dict[str, str] = {
    "V100": "volta", "T4": "turing", "A100": "ampere", "A100-80GB": "ampere", "A10G": "ampere",
    "A10": "ampere", "A6000": "ampere", "L4": "ada", "L40": "ada", "L40S": "ada", "RTX4090": "ada",
    "H100": "hopper", "H200": "hopper", "B200": "blackwell",
    "H800": "hopper", "H20": "hopper", "GH200": "hopper", "GB200": "blackwell", "A800": "ampere", "A40": "ampere",
    "RTX6000-Ada": "ada", "H100-PCIe": "hopper", "H100-NVL": "hopper",
    "MI300X": "ampere",  # AMD CDNA 3 under vLLM's ROCm kernels: no measurement here; the default figures
}

#: Tensor-parallel efficiency: two all-reduces per layer. NVLink parts lose ~10% at TP2 rising to
#: ~20% at TP8; PCIe parts ~20% rising to ~40%. Judgement from published vLLM/TensorRT-LLM scaling.
TP_EFFICIENCY_NVLINK: dict[int, float] = {1: 1.0, 2: 0.90, 4: 0.85, 8: 0.80}
TP_EFFICIENCY_PCIE: dict[int, float] = {1: 1.0, 2: 0.80, 4: 0.70, 8: 0.60}
NVLINK_KINDS = frozenset({"A100", "A100-80GB", "H100", "H200", "B200", "V100"})
TP_DEGREES = (1, 2, 4, 8)

#: One small all-reduce between the GPUs of a tensor-parallel replica (a decode step's activations,
#: kilobytes): a Megatron-style layer runs two per step (after attention and after the MLP;
#: Shoeybi et al. 2019, §3), so a step at TP > 1 pays 2 × layers of these, however small the batch.
#: Typical: ~8 µs over NVLink/NVSwitch (vLLM's custom one-shot all-reduce; NCCL's small-message
#: all-reduce on 8 × H100 is ~10-20 µs in nccl-tests), ~25 µs over PCIe (NCCL through host bridges).
#: Floor: the least one can take, a kernel launch plus one link round trip (~2 µs NVLink, ~5 µs PCIe);
#: what `tpot_floor_s` adds, so no measured point at TP > 1 beats it.
ALLREDUCE_LATENCY_S: dict[str, float] = {"nvlink": 8e-6, "pcie": 25e-6}
ALLREDUCE_FLOOR_S: dict[str, float] = {"nvlink": 2e-6, "pcie": 5e-6}


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
    embedding_params: int = 0  # input embedding (+ untied lm_head): kept 16 bit when quantised
    active_params: int | None = None  # parameters one token passes through (MoE); default all


@dataclass(frozen=True)
class Hardware:
    """One accelerator kind at one serving precision."""

    name: str
    memory_gib: float
    bandwidth_gbps: float  # GB/s, 1e9 bytes/s
    peak_tflops: float  # dense peak at the compute precision
    nvlink: bool = False
    generation: str = "hopper"
    native_fp8: bool = False  # fp8 tensor cores (Ada, Hopper, Blackwell); else fp8 is weight-only
    peak_tflops_16bit: float | None = None  # attention runs in 16 bit


def kv_precision_for(precision: str) -> str:
    """Returns the KV-cache precision served with `precision`: fp8 KV with fp8 weights, fp32 with
    fp32, else 16 bit (int4/int8/nf4 are weight-only schemes whose KV stays 16 bit)."""
    return {"fp8": "fp8", "fp32": "fp32"}.get(precision, "bf16")


def weight_bytes_per_param(precision: str) -> float:
    """Returns bytes per weight at a serving precision (`WEIGHT_BYTES_PER_PARAM`)."""
    try:
        return WEIGHT_BYTES_PER_PARAM[precision]
    except KeyError:
        raise ValueError(f"unknown precision {precision!r} (known: {', '.join(WEIGHT_BYTES_PER_PARAM)})") from None


def _fast_link(kind) -> bool:
    """A kind with a GPU-to-GPU link faster than PCIe in its node (the time model's table or a declared one)."""
    from gpuledger.estimate.throughput import _intra_node_gbps

    return _intra_node_gbps(kind)[0] != "pcie"


def _generation_of(kind) -> str:
    """The serving generation of a kind GENERATION_OF does not name: its catalog arch (GA102 as Ampere;
    any other architecture, e.g. AMD CDNA, as Ampere, the default before it)."""
    from gpuledger.estimate.coefficients import generation

    gen = generation(kind)
    return gen if gen in GENERATIONS else "ampere"


def hardware_for(accelerator: str, precision: str) -> Hardware:
    """Returns the `Hardware` of a catalog accelerator kind at a serving precision."""
    from gpuledger.catalog import gpu_kinds, normalize_accelerator

    name = normalize_accelerator(accelerator)
    kind = gpu_kinds()[name]
    native_fp8 = bool(kind.tflops.get("fp8"))
    compute = precision if precision in ("fp8",) and native_fp8 else ("fp32" if precision == "fp32" else "bf16")
    if compute not in kind.tflops and compute == "bf16":
        compute = "fp16"
    peak = kind.tflops.get(compute) or kind.peak_tflops(precision)
    p16 = kind.tflops.get("bf16") or kind.tflops.get("fp16") or peak
    return Hardware(
        name=name,
        memory_gib=kind.memory_gib,
        bandwidth_gbps=kind.bandwidth_gbps,
        peak_tflops=float(peak),
        nvlink=name in NVLINK_KINDS or _fast_link(kind),
        generation=GENERATION_OF.get(name) or _generation_of(kind),
        native_fp8=native_fp8,
        peak_tflops_16bit=float(p16),
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

    Parameter count (and its embedding share) and KV bytes per token come from the estimator
    (`gpuledger.models.count_params`, `gpuledger.estimate.kv_cache_bytes_per_token`) unless given.
    """
    embedding = 0
    if params_total is None:
        from gpuledger.models import count_params

        counted = count_params(cfg)
        params_total = int(counted.total)
        embedding = int(getattr(counted, "embedding", 0) or 0)
    if kv_bytes_per_token is None:
        from gpuledger.estimate.memory import kv_cache_bytes_per_token

        kv_bytes_per_token = int(kv_cache_bytes_per_token(cfg, kv_precision_for(precision)))
    layers = _cfg_int(cfg, "num_hidden_layers", "num_layers", "n_layer", "n_layers")
    heads = _cfg_int(cfg, "num_attention_heads", "num_heads", "n_head")
    hidden = _cfg_int(cfg, "hidden_size", "d_model", "n_embd")
    head_dim = _cfg_int(cfg, "head_dim")
    if head_dim is None and heads and hidden:
        head_dim = hidden // heads
    if not layers or not heads or not head_dim:
        raise ValueError("model config lacks num_hidden_layers / num_attention_heads / head_dim")
    experts = _cfg_int(cfg, "num_experts", "num_local_experts") or 1
    per_tok = _cfg_int(cfg, "experts_per_token", "num_experts_per_tok") or 1
    active = None
    inter = _cfg_int(cfg, "intermediate_size")
    from gpuledger.models import ModelConfig

    if isinstance(cfg, ModelConfig) and cfg.num_experts > 1:
        # the estimator's own count: routed top-k + shared experts, dense layers, MoE expert widths
        from gpuledger.estimate.compute import active_params

        # (active_params counts the lm_head but not the input embedding, which params_total holds)
        active = min(params_total, int(active_params(cfg)) + cfg.vocab_size * cfg.hidden_size)
    elif experts > 1 and inter and hidden:
        ffn = 3 * hidden * inter * layers  # gated MLP weights of one expert, all layers
        active = params_total - (experts - per_tok) * ffn
    name = (cfg.get("_name_or_path") if isinstance(cfg, dict) else getattr(cfg, "name", None)) or "model"
    return ServingModel(name=str(name), params_total=params_total, num_layers=layers, attn_dim=heads * head_dim,
                        kv_bytes_per_token=kv_bytes_per_token, embedding_params=embedding, active_params=active)


# --------------------------------------------------------------------------------------------
# Memory


def weights_bytes(model: ServingModel, precision: str) -> float:
    """Returns the bytes of the whole model's weights at a serving precision: quantised formats
    (below 16 bit) keep the embedding parameters at 2 bytes."""
    w = weight_bytes_per_param(precision)
    if w < 2.0 and model.embedding_params:
        return (model.params_total - model.embedding_params) * w + model.embedding_params * EMBEDDING_BYTES_QUANTISED
    return model.params_total * w


def allreduce_s(model: ServingModel, hw: Hardware, tp: int, *, floor: bool = False) -> float:
    """Returns the all-reduce latency one engine step pays at `tp` GPUs: 2 × layers × the latency of
    one small all-reduce (`ALLREDUCE_LATENCY_S`, or `ALLREDUCE_FLOOR_S` with `floor`); 0 at TP 1."""
    if tp <= 1:
        return 0.0
    link = "nvlink" if hw.nvlink else "pcie"
    return 2 * model.num_layers * (ALLREDUCE_FLOOR_S if floor else ALLREDUCE_LATENCY_S)[link]


def tp_efficiency(hw: Hardware, tp: int) -> float:
    """Returns the tensor-parallel efficiency of `tp` GPUs of this kind (`TP_EFFICIENCY_*`)."""
    table = TP_EFFICIENCY_NVLINK if hw.nvlink else TP_EFFICIENCY_PCIE
    if tp not in table:
        raise ValueError(f"tensor parallel degree must be one of {sorted(table)} (got {tp})")
    return table[tp]


def is_large_gpu(hw: Hardware, engine: Engine | None = None) -> bool:
    """Whether the engine's larger scheduler defaults apply: vLLM's rule >= 70 GiB and not an A100;
    SGLang's >= 35 GB (`Engine.large_gpu_min_gib`, `a100_is_small`)."""
    e = engine or ENGINES["vllm"]
    return hw.memory_gib >= e.large_gpu_min_gib and not (e.a100_is_small and hw.name.startswith("A100"))


def engine_limits(engine: Engine, hw: Hardware) -> tuple[int, int]:
    """Returns (max sequences, max batched tokens) of the engine on this GPU."""
    if is_large_gpu(hw, engine):
        return engine.max_num_seqs, engine.max_batched_tokens
    return engine.max_num_seqs_small_gpu, engine.max_batched_tokens_small_gpu


def kv_budget_bytes(model: ServingModel, hw: Hardware, precision: str, tp: int = 1,
                    engine: Engine | None = None) -> float:
    """Returns the KV-cache bytes of one replica of `tp` GPUs (negative when weights do not fit):
    tp × (memory fraction × device memory − weights/tp − activation reserve)."""
    frac = (engine or ENGINES["vllm"]).kv_memory_fraction
    per_gpu = frac * hw.memory_gib * GIB - weights_bytes(model, precision) / tp - ACTIVATION_RESERVE_GIB * GIB
    return tp * per_gpu


def kv_capacity_tokens(model: ServingModel, hw: Hardware, precision: str, tp: int = 1,
                       engine: Engine | None = None) -> int:
    """Returns how many tokens of KV one replica holds (0 when the weights do not fit)."""
    return max(0, int(kv_budget_bytes(model, hw, precision, tp, engine) // model.kv_bytes_per_token))


def kv_tokens_per_request(prompt_tokens: int, output_tokens: int) -> int:
    """Returns the KV tokens one request holds at its end: prompt + output, in whole pages."""
    return math.ceil((prompt_tokens + output_tokens) / KV_BLOCK_TOKENS) * KV_BLOCK_TOKENS


def max_batch_kv(model: ServingModel, hw: Hardware, precision: str, prompt_tokens: int,
                 output_tokens: int, tp: int = 1, engine: Engine | None = None) -> int:
    """Returns the most whole requests the KV cache of one replica holds at once (0 when none)."""
    return kv_capacity_tokens(model, hw, precision, tp, engine) // kv_tokens_per_request(prompt_tokens, output_tokens)


# --------------------------------------------------------------------------------------------
# Time


@dataclass(frozen=True)
class StepCost:
    """The per-step cost model of one replica: engine × hardware × model × precision × TP."""

    weight_s: float  # streaming the weights once
    flop_s_per_token: float  # dense matmul time per token in the step (compute-bound regime)
    kv_s_per_token: float  # reading one token of KV (decode attention)
    attn_s_per_pair: float  # one (query, key) pair of prefill attention, all layers
    overhead_s: float
    eager_extra_s: float
    cuda_graph_max_batch: int
    comm_s: float = 0.0  # tensor-parallel all-reduces of one step (`allreduce_s`)
    per_seq_s: float = 0.0  # serial CPU time per running sequence (`Engine.step_overhead_per_seq_s`)
    frontend_s_per_token: float = 0.0  # overlapped API-server time per emitted token
    prefill_compute_fraction: float = 1.0  # 1 − prefix-cache hit rate: prompt tokens really computed
    spec: SpecDecode | None = None  # speculative decoding: decode steps emit `spec.tokens_per_step`

    def step_s(self, decode_seqs: int, decode_ctx_tokens: float, prefill_tokens: int,
               prefill_pairs: float) -> float:
        """Returns seconds of one step with `decode_seqs` decoding sequences holding
        `decode_ctx_tokens` KV tokens in all, and `prefill_tokens` prompt tokens whose causal
        attention spans `prefill_pairs` (query, key) pairs."""
        tokens = decode_seqs + prefill_tokens
        if tokens == 0:
            return 0.0
        f = self.prefill_compute_fraction
        pre = prefill_tokens * f
        serial = self.overhead_s + self.comm_s + self.per_seq_s * (decode_seqs + (1 if prefill_tokens else 0))
        if prefill_tokens == 0 and decode_seqs > self.cuda_graph_max_batch:
            serial += self.eager_extra_s
        sp = self.spec
        if sp is not None and decode_seqs:
            # one verification step scores k + 1 tokens per sequence and emits `tokens_per_step` on
            # average (Leviathan et al. 2023, eq. 1); the simulation counts one token per step, so a
            # step here is the verification's time / tokens_per_step; the draft's own steps added
            k1 = sp.num_tokens + 1
            verify = max(self.weight_s, (decode_seqs * k1 + pre) * self.flop_s_per_token)
            verify += decode_ctx_tokens * self.kv_s_per_token + prefill_pairs * f * self.attn_s_per_pair + serial
            verify += sp.draft_s(decode_seqs)
            t = verify / sp.tokens_per_step
        else:
            t = max(self.weight_s, (decode_seqs + pre) * self.flop_s_per_token)
            t += decode_ctx_tokens * self.kv_s_per_token + prefill_pairs * f * self.attn_s_per_pair + serial
        # the API server streams every token in its own process: a ceiling, overlapped with the GPU
        return max(t, decode_seqs * self.frontend_s_per_token)


def step_cost(model: ServingModel, hw: Hardware, precision: str, engine: Engine, tp: int = 1, *,
              prefix_cache_hit: float = 0.0, spec: SpecDecode | None = None) -> StepCost:
    """Returns the `StepCost` of one replica (see the module docstring for the formula).
    `prefix_cache_hit`: the share of prompt tokens found in the prefix cache (not computed);
    `spec`: speculative decoding (`spec_decode`); both default to the engine's own settings
    (`Engine.prefix_cache_hit`, `Engine.speculative`)."""
    if spec is None and engine.speculative is not None:
        method, k, a, draft = engine.speculative
        spec = spec_decode(method, k, a, model, hw, precision, replace(engine, speculative=None), tp, draft)
    prefix_cache_hit = prefix_cache_hit or engine.prefix_cache_hit
    gen = GENERATIONS[hw.generation]
    eff_tp = tp * tp_efficiency(hw, tp)
    bw = hw.bandwidth_gbps * 1e9
    fp8_compute = precision == "fp8" and hw.native_fp8
    mfu = ((gen.gemm_mfu_fp8 if fp8_compute else gen.gemm_mfu) * engine.gemm_mfu_scale
           * dict(engine.gemm_mfu_scale_by_generation).get(hw.generation, 1.0))
    active = model.active_params or model.params_total
    # the embedding lookup is a gather, not a matmul; the (untied) lm_head is, so count P − E/2
    dense = active - model.embedding_params / 2
    w_scale = engine.weight_bw_scale * dict(engine.weight_bw_scale_by_generation).get(hw.generation, 1.0)
    weight_s = weights_bytes(model, precision) / (bw * gen.weight_bw_efficiency * w_scale) / eff_tp
    flop_s = 2.0 * dense / (hw.peak_tflops * 1e12 * mfu) / eff_tp
    kv_s = model.kv_bytes_per_token / (bw * gen.kv_bw_efficiency * engine.kv_bw_scale) / eff_tp
    p16 = hw.peak_tflops_16bit or hw.peak_tflops
    attn_s = 4.0 * model.num_layers * model.attn_dim / (p16 * 1e12 * gen.attn_mfu * engine.gemm_mfu_scale) / eff_tp
    return StepCost(weight_s=weight_s, flop_s_per_token=flop_s, kv_s_per_token=kv_s, attn_s_per_pair=attn_s,
                    overhead_s=engine.step_overhead_s, eager_extra_s=engine.eager_step_overhead_s,
                    cuda_graph_max_batch=engine.cuda_graph_max_batch, comm_s=allreduce_s(model, hw, tp),
                    per_seq_s=engine.step_overhead_per_seq_s, frontend_s_per_token=engine.frontend_s_per_token,
                    prefill_compute_fraction=1.0 - min(max(prefix_cache_hit, 0.0), 0.99), spec=spec)


#: EAGLE-3's draft head: one decoder layer over the target's hidden states plus its own lm_head
#: (Li et al. 2025, EAGLE-3 §3): ≈ 1/L of the target's layer weights + the embedding matrix.
def spec_decode(method: str, num_tokens: int, acceptance_rate: float, model: ServingModel, hw: Hardware,
                precision: str, engine: Engine, tp: int = 1, draft: ServingModel | None = None) -> SpecDecode:
    """Returns the `SpecDecode` of a method on this replica: n-gram drafts cost no GPU time (a CPU
    lookup in the prompt); EAGLE-3 one decoder layer + lm_head of the target per drafted token; a
    draft model its own weight stream and FLOPs (`draft`, required)."""
    if method not in SPEC_METHODS:
        raise ValueError(f"unknown speculative method {method!r} (known: {', '.join(SPEC_METHODS)})")
    if not 1 <= num_tokens <= 16:
        raise ValueError(f"num_speculative_tokens must be 1..16 (got {num_tokens})")
    if not 0.0 <= acceptance_rate <= 1.0:
        raise ValueError(f"acceptance_rate must be within 0..1 (got {acceptance_rate})")
    if method == "ngram":
        return SpecDecode(method, num_tokens, acceptance_rate)
    if method == "eagle3":
        layer = (model.params_total - model.embedding_params) / max(model.num_layers, 1)
        params = layer + model.embedding_params / 2  # the head's lm_head; embeddings are shared
        draft = replace(model, params_total=int(params), embedding_params=int(model.embedding_params / 2),
                        num_layers=1, active_params=None)
    elif draft is None:
        raise ValueError("speculative method draft_model needs a draft model (speculative.draft_model)")
    c = step_cost(draft, hw, precision, replace(engine, step_overhead_per_seq_s=0.0, frontend_s_per_token=0.0), tp)
    return SpecDecode(method, num_tokens, acceptance_rate, draft_weight_s=c.weight_s + c.overhead_s,
                      draft_flop_s=c.flop_s_per_token)


def prefill_flops(model: ServingModel, prompt_tokens: int) -> float:
    """Returns the FLOPs of one prompt's prefill: 2·P·s + 2·L·d_attn·s² (causal attention)."""
    s = prompt_tokens
    return 2.0 * model.params_total * s + 2.0 * model.num_layers * model.attn_dim * s * s


# --------------------------------------------------------------------------------------------
# Physical floors (no engine can beat these)


def tpot_floor_s(model: ServingModel, hw: Hardware, precision: str, tp: int = 1) -> float:
    """Returns the least possible time per output token on `tp` GPUs: the weights read once per token
    at the full datasheet bandwidth of the `tp` GPUs (no efficiency loss, no overhead, no KV), plus at
    TP > 1 the least time of the step's all-reduces (`allreduce_s(floor=True)`)."""
    return weights_bytes(model, precision) / (hw.bandwidth_gbps * 1e9 * tp) + allreduce_s(model, hw, tp, floor=True)


def ttft_floor_s(model: ServingModel, hw: Hardware, precision: str, prompt_tokens: int, tp: int = 1) -> float:
    """Returns the least possible time to first token: the prompt's prefill FLOPs at the full dense
    peak of `tp` GPUs, and at least one read of the weights."""
    return max(prefill_flops(model, prompt_tokens) / (hw.peak_tflops * 1e12 * tp), tpot_floor_s(model, hw, precision, tp))
