"""Training throughput: seconds per optimizer step from the parts a step is made of.

A step of one data-parallel replica (`tensor_parallel` x `pipeline_parallel` GPUs) is
- matmul time: model FLOPs of the passes run (forward 2P; backward 4P trained / 2P frozen base;
  recompute: full = one more forward, selective = the attention core again, Korthikanti et al. 2022)
  at the GPU's dense 16-bit peak x the stack's matmul efficiency x a small-matmul factor; fp8 as a
  measured speed-up over bf16 on the linear layers only;
- attention time: the causal attention FLOPs at FlashAttention's own rate (not the matmul rate);
- memory-bound time: elementwise ops (norms, activations, residuals, RoPE), LoRA adapter matmuls,
  QLoRA dequantisation, the loss over the vocabulary, at HBM bandwidth;
- per-step costs: the optimizer's pass over the trained parameters at HBM bandwidth, kernel launches
  (a floor under GPU time when kernels are too short), a fixed cost per step (data, logging);
- communication: DDP all-reduce, FSDP/ZeRO-3 all-gathers and reduce-scatter, tensor-parallel
  all-reduces, over NVLink, PCIe or the inter-node network (more than 8 GPUs = several nodes),
  partly hidden behind compute; pipeline bubbles.
Tokens per step count real tokens: without packing, sequences are padded to the longest of their
micro-batch (lengths log-normal of `sample_tokens`, by default DEFAULT_SAMPLE_TOKENS, cut at `seq_len`)
or, `padding` max_length, every one to `seq_len`. A spec of train.samples that states neither its lengths nor
its padding is planned at max_length (`resolved_padding`: a sample then costs seq_len positions, the most it
can; the typical lengths padded to the longest would cost less).

Pure functions; the coefficients are in `coefficients.py`, each with its source.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

from gpuledger.estimate.coefficients import (
    ATTENTION_EFFICIENCY,
    AUTOCAST_CAST_BYTES_PER_PARAM,
    BYTES_PER_ADAPTED_ELEMENT,
    CPU_ADAM_PARAMS_PER_S,
    DEFAULT_SAMPLE_TOKENS,
    DEQUANT_BYTES_PER_PARAM_PASS,
    EAGER_ATTENTION_FACTOR,
    EAGER_SCORE_BYTES,
    ELEMENTWISE_BYTES_PER_HIDDEN,
    FIXED_STEP_S,
    FP8_MATMUL_SPEEDUP,
    FRAMEWORK_CLASS,
    GENERATION_FACTOR,
    GPUS_PER_NODE,
    HBM_EFFICIENCY,
    INT8_BASE_MATMUL_FACTOR,
    INTERCONNECT_GBPS,
    KERNEL_LAUNCH_S,
    KERNELS_PER_LAYER,
    KIND_FACTOR,
    MATMUL_EFFICIENCY,
    MOE_KERNELS_PER_EXPERT,
    OPTIMIZER_BYTES_PER_PARAM,
    OVERLAP,
    PCIE_HOST_GBPS,
    PRIOR_MATMUL_EFFICIENCY,
    QUANT_KERNELS_PER_LINEAR,
    QUANTISED_LINEARS_PER_LAYER,
    SAMPLE_LENGTH_CV,
    SMALL_MATMUL_TOKENS,
    STACK_GENERATION_FACTOR,
    STACK_KERNEL_METHODS,
    STACK_KERNEL_SPEEDUP,
    ZERO_STEP_S_PER_PARAM,
    generation,
    nodes_for,
)
from gpuledger.vocabulary import CHECKPOINTINGS

CHECKPOINTING = CHECKPOINTINGS
#: bytes per weight of a 4-bit base as FSDP moves it (NF4 packed two per byte)
DEQUANT_PACKED_BYTES = 0.5


@dataclass(frozen=True)
class ModelShape:
    """What time depends on in a model: parameter counts and the attention's dimensions."""

    params_total: float
    params_active: float  # parameters a token's matmuls touch (lm_head included, input embedding not)
    layers: int
    hidden: int
    attn_dim: int  # heads x head_dim
    vocab: int
    experts: int = 1  # MoE: routed experts per layer
    experts_per_token: int = 1  # MoE: top-k
    #: MoE: of params_active, the routed experts' weights a token passes through (top-k x one expert x MoE layers)
    expert_params_active: float = 0.0
    moe_layers: int = 0  # MoE: decoder layers with routed experts
    heads: int = 0  # query heads (0: attn_dim / 128)

    @classmethod
    def from_config(cls, cfg) -> ModelShape:
        from gpuledger.estimate.compute import active_params
        from gpuledger.models import count_params, layer_linears

        routed = 0.0
        if cfg.num_experts > 1:
            per_expert = sum(lin.weight_params for lin in layer_linears(cfg) if lin.count > 1) / cfg.num_experts
            routed = float(cfg.moe_layers * cfg.experts_per_token * per_expert)
        return cls(float(count_params(cfg).total), float(active_params(cfg)), cfg.num_layers, cfg.hidden_size,
                   cfg.num_heads * cfg.head_dim, cfg.vocab_size, cfg.num_experts, cfg.experts_per_token, routed,
                   cfg.moe_layers, cfg.num_heads)

    @classmethod
    def from_sizes(cls, params_total: float, layers: int, hidden: int, vocab: int) -> ModelShape:
        """A GPT-style model known by its sizes only: the input embedding (vocab x hidden) touches no
        matmul, the output head does (tied or not)."""
        return cls(float(params_total), float(params_total), layers, hidden, hidden, vocab)


@dataclass(frozen=True)
class TrainSetup:
    """One training configuration, as far as its speed is concerned."""

    accelerator: str
    method: str = "lora"
    framework: str = "hf"
    gpus: int = 1
    nodes: int | None = None  # None: ceil(gpus / 8)
    precision: str = "bf16"
    micro_batch: int = 1
    seq_len: int = 2048
    grad_accum: int | None = None  # micro-batches per optimizer step (None: 1; pipelines: 8 x stages)
    checkpointing: str = "full"
    packing: bool | None = None  # None: the framework's habit (pre-training stacks pack, fine-tuning pads)
    padding: str = "longest"  # unpacked: longest (per micro-batch) | max_length (every sample to seq_len) | packed
    #: mean real tokens per sample before padding (unpacked runs); None: DEFAULT_SAMPLE_TOKENS (coefficients.py)
    sample_tokens: int | None = None
    compile: bool | None = None  # None: the framework's habit (tuned stacks ship fused kernels)
    flash_attn: bool = True
    sharding: str = "none"
    tensor_parallel: int = 1
    pipeline_parallel: int = 1
    params_trainable: float = 0.0
    lora_r: int = 16
    optimizer: str = "adamw"
    interconnect: str | None = None  # nvlink | pcie; None: the GPU kind's usual one
    offload: str = "none"  # none | optimizer | params (vocabulary.Offload)
    sequence_parallel: int = 1  # GPUs each sequence is split over (Ulysses / ring attention / context parallel)
    expert_parallel: int = 1  # GPUs the routed experts are split over (MoE)
    #: the stack built on the engine (`vocabulary.FRAMEWORK_STACKS`), None for the engine itself; a stack with
    #: its own kernels (STACK_KERNEL_SPEEDUP) runs an adapter step faster than its engine
    stack: str | None = None


@dataclass(frozen=True)
class StepTime:
    """Seconds of one optimizer step and the tokens it trains (all GPUs together)."""

    step_s: float
    tokens_per_step: float
    gpus: int
    parts_s: dict[str, float] = field(default_factory=dict)
    assumptions: list[str] = field(default_factory=list)

    @property
    def tokens_per_s_per_gpu(self) -> float:
        return self.tokens_per_step / self.step_s / self.gpus

    def time_s(self, tokens: float) -> float:
        """Seconds to train `tokens` real tokens."""
        return float(tokens) / (self.tokens_per_step / self.step_s)


def framework_class(framework: str) -> str:
    """Returns the efficiency class of a training stack (hf, litgpt, torchtune, tuned)."""
    try:
        return FRAMEWORK_CLASS[framework]
    except KeyError:
        raise ValueError(f"unknown framework {framework!r} (one of {', '.join(FRAMEWORK_CLASS)})") from None


def resolved_padding(packing: bool | None, padding: str | None, sample_tokens: int | None, framework: str,
                     samples: bool = False) -> tuple[bool | None, str]:
    """Returns (packing, padding) as the time model reads a spec's `train.packing` / `train.padding`:
    padding "packed" is packing true (a contradiction with packing false is refused); padding unstated
    (None) is "max_length" for an unpacked run counted in samples (`samples`) whose mean length is not
    stated either, else "longest".

    Why max_length when nothing is stated: the time of train.samples is samples x what one sample costs,
    and a sample costs at most seq_len positions (padded to the cap, or a sample at least that long, or a
    benchmark of fixed-length rows); the typical instruction set padded to its micro-batch's longest
    costs less (for 250-token samples under a 2,048 cap, 1.2-8x less by micro-batch). A budget planned on
    the typical lengths is blown by any data set longer than them; one planned at the cap is not. Issue 36:
    37 of 37 single-GPU Transformers/PEFT/TRL runs of a third-party set (512-4,096-token caps) took ~2.8x
    the plan made on the typical lengths. A run counted in tokens keeps "longest": its tokens are real
    tokens, and the padding waste around them is its safe side."""
    if padding == "packed":
        if packing is False:
            raise ValueError("padding packed with packing false: packed samples are packing true")
        return True, "packed"
    if padding is not None:
        return packing, padding
    packed = packing if packing is not None else framework_class(framework) == "tuned"
    return packing, ("max_length" if samples and not packed and sample_tokens is None else "longest")


@functools.lru_cache(maxsize=4096)
def padding_factors(micro_batch: int, packing: bool, seq_len: int | None = None,
                    sample_tokens: int | None = None, padding: str = "longest") -> tuple[float, float]:
    """Returns (real tokens per sequence, padded tokens per sequence) as fractions of seq_len.

    Packed: every position is a real token (1, 1). Padded: lengths log-normal of mean `sample_tokens`
    (DEFAULT_SAMPLE_TOKENS when not given: a typical instruction set's, whatever the cap) and
    SAMPLE_LENGTH_CV, truncated at seq_len; real = E[min(X, L)], padded = E[max of b such lengths]
    (integrated numerically); padding "max_length": every sequence padded to seq_len (padded = 1).
    Without a seq_len (a bare call): spread evenly over (0, 1] of it (mean 1/2, E[max of b uniforms] =
    b / (b + 1))."""
    if packing:
        return 1.0, 1.0
    if not seq_len:
        return 0.5, micro_batch / (micro_batch + 1)
    sample_tokens = sample_tokens or DEFAULT_SAMPLE_TOKENS
    sigma2 = math.log(1 + SAMPLE_LENGTH_CV ** 2)
    mu = math.log(sample_tokens) - sigma2 / 2
    steps = 2000
    dx = seq_len / steps
    real = padded = 0.0
    for i in range(steps):
        x = (i + 0.5) * dx
        cdf = 0.5 * (1 + math.erf((math.log(x) - mu) / math.sqrt(2 * sigma2)))
        real += (1 - cdf) * dx
        padded += (1 - cdf ** micro_batch) * dx
    return real / seq_len, (1.0 if padding == "max_length" else padded / seq_len)


def mean_real_tokens(seq_len: int, packing: bool, sample_tokens: int | None = None) -> float:
    """Returns the mean real tokens a sample trains: its length (`sample_tokens`, default DEFAULT_SAMPLE_TOKENS),
    cut at seq_len when unpacked (E[min(X, seq_len)] of the log-normal); packed samples are concatenated
    whole."""
    if packing:
        return float(sample_tokens or DEFAULT_SAMPLE_TOKENS)
    return seq_len * padding_factors(1, False, seq_len, sample_tokens)[0]


def _intra_node_gbps(kind) -> tuple[str, float]:
    """Returns (link, collective bus GB/s per GPU) inside a node: a declared kind's own figures
    (gpuledger.toml [[gpus]] interconnect, interconnect_gbps), else INTERCONNECT_GBPS."""
    if kind.interconnect_gbps:
        return kind.interconnect or "declared link", kind.interconnect_gbps
    for link in ("nvlink", "xgmi"):
        if kind.name in INTERCONNECT_GBPS[link]:
            return link, INTERCONNECT_GBPS[link][kind.name]
    return "pcie", INTERCONNECT_GBPS["pcie"]


def _bus_gbps(kind, nodes: int, interconnect: str | None) -> tuple[float, str]:
    link, intra = _intra_node_gbps(kind)
    if interconnect == "pcie":
        link, intra = "pcie", INTERCONNECT_GBPS["pcie"]
    if nodes > 1:
        inter = INTERCONNECT_GBPS["network"].get(generation(kind), INTERCONNECT_GBPS["network"]["default"])
        return min(intra, inter), f"{nodes} nodes ({inter:g} GB/s per GPU between nodes)"
    return intra, f"one node ({link}, {intra:g} GB/s per GPU)"


def step_time(shape: ModelShape, s: TrainSetup, *, efficiency: dict[str, float] | None = None,
              stack_speedup: dict[str, float] | None = None) -> StepTime:
    """Returns the StepTime of setup `s` for a model of `shape`.

    `efficiency` overrides MATMUL_EFFICIENCY per class (the fit of `fit_efficiency` uses it), `stack_speedup`
    STACK_KERNEL_SPEEDUP (the fit of `public.fit_stack_speedup` uses it)."""
    from gpuledger.catalog import gpu_kinds, normalize_accelerator

    kind = gpu_kinds()[normalize_accelerator(s.accelerator)]
    if s.checkpointing not in CHECKPOINTING:
        raise ValueError(f"checkpointing {s.checkpointing!r} is not one of {', '.join(CHECKPOINTING)}")
    cls = framework_class(s.framework)
    gen = generation(kind)
    tp, pp, sp = max(1, s.tensor_parallel), max(1, s.pipeline_parallel), max(1, s.sequence_parallel)
    gpus = max(1, s.gpus)
    if gpus % (tp * pp * sp):
        raise ValueError(f"{gpus} GPUs do not divide into tensor_parallel {tp} x pipeline_parallel {pp} x "
                         f"sequence_parallel {sp}")
    dp = gpus // (tp * pp)  # ranks that hold the same model part (data and sequence parallel): the sharding group
    nodes = nodes_for(gpus, s.nodes)
    if s.padding == "packed" and s.packing is False:
        raise ValueError("padding packed with packing false: packed samples are packing true")
    packing = s.packing if s.packing is not None else (s.padding == "packed" or cls == "tuned")
    compiled = s.compile if s.compile is not None else cls == "tuned"
    frozen = s.method in ("lora", "qlora")
    notes: list[str] = []

    real_frac, padded_frac = padding_factors(s.micro_batch, packing, s.seq_len, s.sample_tokens, s.padding)
    seq_run = s.seq_len * padded_frac  # positions computed per sequence
    tokens_mb = s.micro_batch * seq_run  # positions per micro-batch (one replica)
    if not packing:
        lengths = (f"lengths of mean {s.sample_tokens} (log-normal, cv {SAMPLE_LENGTH_CV:g}) cut at {s.seq_len}"
                   if s.sample_tokens else f"lengths assumed a typical instruction set's (mean {DEFAULT_SAMPLE_TOKENS}, "
                   f"log-normal, cv {SAMPLE_LENGTH_CV:g}) cut at {s.seq_len} (train.sample_tokens states your data's mean)")
        to = (f"to {s.seq_len} (train.padding: max_length{'' if s.sample_tokens else ', also what train.samples is planned at when neither padding nor sample_tokens is stated: a sample costs at most seq_len positions'})"
              if s.padding == "max_length" else "to its longest")
        notes.append(f"padding: {lengths}, each micro-batch of {s.micro_batch} "
                     f"padded {to} ({padded_frac / real_frac:.2f} positions per real token); "
                     "train.packing: true removes it")
    accum = s.grad_accum or (8 * pp if pp > 1 else 1)

    # --- matmul FLOPs per position (model FLOPs + recompute) ---
    p = shape.params_active
    passes = 1 + (1 if frozen else 2) + (1 if s.checkpointing == "full" else 0)
    matmul_flops = 2 * p * passes + (6 * s.params_trainable if frozen else 0)
    attn_fwd = 2 * 2 * shape.layers * shape.attn_dim * seq_run / 2  # QK^T and AV, causal half (Kaplan 2020)
    attn_passes = 3 + (1 if s.checkpointing in ("full", "selective") else 0)
    attn_flops = attn_fwd * attn_passes

    bf16_peak = kind.peak_tflops("bf16" if s.precision not in ("fp32", "tf32") else s.precision) * 1e12
    eff_table = {**MATMUL_EFFICIENCY, **(efficiency or {})}
    small = tokens_mb / sp / (tokens_mb / sp + SMALL_MATMUL_TOKENS)
    gen_factor = kind.sustained_factor or KIND_FACTOR.get(kind.name, GENERATION_FACTOR.get(gen, GENERATION_FACTOR["other"]))
    # a stack whose kernels were tuned for a generation (Transformer Engine on Hopper) departs from the
    # generation's sustained rate that the other stacks see
    gen_factor *= STACK_GENERATION_FACTOR.get((s.framework, gen), 1.0)
    eff = eff_table[cls] * gen_factor * small
    rate = bf16_peak * eff
    if s.precision == "fp8" and kind.tflops.get("fp8"):
        rate *= FP8_MATMUL_SPEEDUP
        notes.append(f"fp8: linear layers x{FP8_MATMUL_SPEEDUP} over bf16 (measured), attention stays 16-bit")
    # a card that departs from its generation's sustained rate (KIND_FACTOR) does so on attention's tensor work too
    kind_vs_gen = gen_factor / GENERATION_FACTOR.get(gen, GENERATION_FACTOR["other"])
    attn_rate = bf16_peak * ATTENTION_EFFICIENCY.get(gen, ATTENTION_EFFICIENCY["other"]) * kind_vs_gen * (
        1.0 if s.flash_attn else EAGER_ATTENTION_FACTOR)
    bw = kind.bandwidth_gbps * 1e9 * HBM_EFFICIENCY
    positions = tokens_mb  # per micro-batch per replica; the replica's GPUs split the work
    mshard = tp * pp  # GPUs a model replica's parameters are split over
    shard = mshard * sp  # GPUs a micro-batch's work is split over (sequence parallel splits the tokens)
    # the frozen base's share of the matmul FLOPs (LoRA/QLoRA: everything but the adapters)
    base_flops = 2 * p * passes if frozen else 0.0
    quant = "int8" if s.precision == "int8" and frozen else ("nf4" if (s.method == "qlora" or s.precision in (
        "nf4", "int4")) and frozen else "")
    matmul_s = positions * matmul_flops / rate / shard
    if shape.experts > 1 and shape.expert_params_active:
        # routed experts see tokens x top-k / experts rows each: their GEMMs are small (the same wave
        # quantization as a small micro-batch), whatever the micro-batch
        per_expert_tokens = tokens_mb * shape.experts_per_token / shape.experts
        small_e = per_expert_tokens / (per_expert_tokens + SMALL_MATMUL_TOKENS)
        share = shape.expert_params_active / max(1.0, p)
        matmul_s += positions * matmul_flops * share * (small / small_e - 1) / rate / shard
        notes.append(f"MoE: {shape.experts} experts, top-{shape.experts_per_token}: ~{per_expert_tokens:,.0f} tokens "
                     f"per expert per micro-batch (expert GEMMs at small-matmul {small_e:.2f})")
    if quant == "int8":
        # bitsandbytes LLM.int8(): int8 matmuls with fp16 outlier decomposition, per-row quantisation of every
        # input and a dequantised weight for the input gradient: the base's matmuls run far below the 16-bit rate
        matmul_s += positions * base_flops * (INT8_BASE_MATMUL_FACTOR - 1) / rate / shard
        notes.append(f"LLM.int8 base (bitsandbytes 8-bit): its matmuls x{INT8_BASE_MATMUL_FACTOR:g} the 16-bit time")
    attention_s = positions * attn_flops / attn_rate / shard

    # --- memory-bound work per micro-batch ---
    fused = "fused" if (compiled or cls == "tuned") else "eager"
    ew_passes = 1 + (1 if s.checkpointing == "full" else 0) / 3
    mem_bytes = positions * shape.layers * shape.hidden * ELEMENTWISE_BYTES_PER_HIDDEN[fused] * ew_passes
    mem_bytes += positions * shape.vocab * (12 if fused == "eager" else 4)  # logits, softmax, loss grad
    if frozen and s.params_trainable:
        # a LoRA linear of rank r << d is bandwidth-bound: its input (d_in) and output (d_out) elements are
        # read/written again per pass (x·A, ·B, the add); trainable = r (d_in + d_out) per linear
        adapted = s.params_trainable / max(1, s.lora_r)
        mem_bytes += positions * adapted * BYTES_PER_ADAPTED_ELEMENT * passes
    if s.precision in ("bf16-mixed", "fp16-mixed"):
        # autocast over fp32 weights: every forward (and recompute) casts each weight it uses to 16 bit, reading
        # 4 B and writing 2 B (torch.autocast caches the copy within one forward only; PyTorch AMP docs)
        fwd_passes = 1 + (1 if s.checkpointing == "full" else 0)
        mem_bytes += shape.params_active * AUTOCAST_CAST_BYTES_PER_PARAM * fwd_passes
        notes.append("autocast: fp32 weights cast to 16 bit in every forward")
    if quant == "nf4":
        mem_bytes += shape.params_active * DEQUANT_BYTES_PER_PARAM_PASS * passes
        notes.append(f"QLoRA: {DEQUANT_BYTES_PER_PARAM_PASS} B per base parameter per pass of dequantisation")
    if not s.flash_attn and fused == "eager":
        # eager attention (Transformers' `eager`, no fused softmax as tuned stacks ship) materialises the scores (micro-batch x heads x positions^2 per layer) and runs the scale,
        # mask, fp32 softmax, cast and dropout over them in memory, forward, recompute and backward
        heads = shape.heads or max(1, shape.attn_dim // 128)
        scores = s.micro_batch * heads * seq_run ** 2 * shape.layers
        mem_bytes += scores * EAGER_SCORE_BYTES * ew_passes
        notes.append(f"eager attention: {heads} heads x {seq_run:,.0f}^2 scores per sequence and layer through memory "
                     f"({EAGER_SCORE_BYTES} B each per forward+backward); train.flash_attention: true removes it")
    memory_s = mem_bytes / bw / shard
    kernel_speedup = (stack_speedup or STACK_KERNEL_SPEEDUP).get(s.stack or "", 1.0) if s.method in STACK_KERNEL_METHODS else 1.0
    if kernel_speedup != 1.0:
        # a stack's own kernels (Unsloth): the matmul, memory-bound and launch time of an adapter step / the factor
        matmul_s /= kernel_speedup
        memory_s /= kernel_speedup
        notes.append(f"{s.stack}'s own kernels: an adapter step's matmul, memory-bound and launch time / "
                     f"{kernel_speedup:.2f} (published {s.stack} / {s.framework} ratios, stack_speed.csv); "
                     "attention, optimizer and communication as the engine")

    gpu_s = matmul_s + attention_s + memory_s
    # kernel launches: a floor under each micro-batch's GPU time (eager Python dispatch)
    per_layer = KERNELS_PER_LAYER[fused]
    if quant:
        per_layer += QUANTISED_LINEARS_PER_LAYER * QUANT_KERNELS_PER_LINEAR[quant]
    if shape.experts > 1 and fused == "eager":
        # Transformers' sparse MoE blocks loop over the experts a micro-batch hits (modeling_mixtral.py /
        # modeling_qwen3_moe.py: where, index, gate/up/down, act, mul, index_add_ per expert)
        hit = min(shape.experts, tokens_mb * shape.experts_per_token)
        per_layer += hit * MOE_KERNELS_PER_EXPERT
    kernels = shape.layers / pp * per_layer * (passes + (0.5 if frozen else 0))
    launch_s = kernels * KERNEL_LAUNCH_S[fused] / kernel_speedup
    micro_s = max(gpu_s, launch_s)
    if launch_s > gpu_s:
        notes.append(f"launch-bound: {kernels:,.0f} kernels per micro-batch take longer to launch than to run")

    # --- communication per micro-batch / per step ---
    bus, net_note = _bus_gbps(kind, nodes, s.interconnect)
    bus *= 1e9
    comm_step = 0.0
    comm_micro = 0.0
    w_bytes = 2  # 16-bit weights and gradients on the wire
    if tp > 1:  # Megatron: 2 all-reduces forward + 2 backward per layer (+2 with full recompute)
        ar = 2 * (tp - 1) / tp * s.micro_batch * seq_run * shape.hidden * 2
        tp_bus = _intra_node_gbps(kind)[1] * 1e9
        comm_micro += shape.layers / pp * (4 + (2 if s.checkpointing == "full" else 0)) * ar / tp_bus
    if dp > 1:
        frac = (dp - 1) / dp
        trained = s.params_trainable if frozen else shape.params_total
        if s.sharding in ("fsdp", "zero3"):
            # all-gather forward + backward, reduce-scatter of the gradients, every micro-batch
            comm_micro += (2 * shape.params_total / mshard + trained / mshard) * w_bytes * frac / bus
        else:  # ddp / zero1 / zero2: one all-reduce (= reduce-scatter + all-gather) of the gradients per step
            comm_step += 2 * trained / mshard * w_bytes * frac / bus
    sp_comm = 0.0
    if sp > 1:
        # DeepSpeed-Ulysses: an all-to-all before attention (q, k, v) and one after (the output) per layer and
        # pass, ~3 hidden-widths per local token; synchronous with the compute around it (Jacobs et al. 2023)
        a2a = 3 * shape.hidden * 2 * (tokens_mb / sp) * (sp - 1) / sp
        sp_passes = 3 + (1 if s.checkpointing == "full" else 0)
        sp_comm = shape.layers / pp * sp_passes * a2a / (_intra_node_gbps(kind)[1] * 1e9 if nodes == 1 else bus)
        notes.append(f"sequence parallel {sp}: all-to-alls around attention, not hidden")
    ep = max(1, s.expert_parallel)
    if ep > 1 and shape.experts > 1 and shape.moe_layers:
        # expert parallelism: every MoE layer dispatches each token's top-k copies to the experts' GPUs and
        # combines them back (2 all-to-alls per pass), not hidden behind the expert GEMMs they feed
        a2a_e = 2 * (tokens_mb / sp) * shape.experts_per_token * shape.hidden * 2 * (ep - 1) / ep
        ep_bus = _intra_node_gbps(kind)[1] * 1e9 if ep <= GPUS_PER_NODE else bus
        sp_comm += shape.moe_layers / pp * (3 + (1 if s.checkpointing == "full" else 0)) * a2a_e / ep_bus
        notes.append(f"expert parallel {ep}: token all-to-alls per MoE layer, not hidden")
    host_micro = 0.0
    if s.offload == "params":
        # each micro-batch copies this GPU's shard of the parameters host -> device for the forward and the
        # backward gathers and its gradients back (FSDP CPUOffload / ZeRO-3 offload_param), prefetched
        weight_b = DEQUANT_PACKED_BYTES if quant == "nf4" else (1 if quant == "int8" else 2)
        own = 1 / (mshard * (dp if s.sharding in ("fsdp", "zero3") else 1))
        host_micro = (2 * shape.params_total * weight_b + (s.params_trainable if frozen else shape.params_total) * 2
                      ) * own / (PCIE_HOST_GBPS * 1e9)
    exposed_micro = max(0.0, comm_micro - OVERLAP * micro_s) + (1 - OVERLAP) * min(comm_micro, micro_s)
    exposed_micro += sp_comm + max(0.0, host_micro - OVERLAP * micro_s) + (1 - OVERLAP) * min(host_micro, micro_s)
    backward_s = micro_s * 0.6
    exposed_step = max(0.0, comm_step - OVERLAP * backward_s) + (1 - OVERLAP) * min(comm_step, backward_s)
    if comm_micro or comm_step:
        notes.append(f"communication over {net_note}; {OVERLAP:.0%} hidden behind compute")

    # --- per optimizer step ---
    trained = s.params_trainable if frozen else shape.params_total
    opt_shards = mshard * (dp if s.sharding in ("fsdp", "zero1", "zero2", "zero3") else 1)
    optimizer_s = trained / opt_shards * OPTIMIZER_BYTES_PER_PARAM.get(s.optimizer, 16) / bw
    if s.sharding in ("zero1", "zero2", "zero3") and dp > 1 and cls != "tuned":
        # DeepSpeed's unfused passes over the partition; a tuned stack's "zero1" is its own distributed optimizer
        # (Megatron-Core / NeMo: a fused multi-tensor Adam over the shard), the fused pass above
        optimizer_s += trained / opt_shards * ZERO_STEP_S_PER_PARAM
    if s.offload != "none":
        # the step runs on the host: DeepSpeed's CPUAdam (ZeRO offload) or torch's AdamW on CPU tensors (FSDP
        # CPUOffload), then the updated 16-bit parameters go back over PCIe (the gradients' copy overlaps backward)
        engine = "deepspeed" if s.sharding.startswith("zero") else "torch"
        own = trained / opt_shards
        optimizer_s = own / CPU_ADAM_PARAMS_PER_S[engine] + own * 2 / (PCIE_HOST_GBPS * 1e9) * (
            1 + (1 - OVERLAP))
        notes.append(f"CPU offload ({s.offload}): optimizer step on the host ({engine}, "
                     f"{CPU_ADAM_PARAMS_PER_S[engine]:.1e} params/s per GPU), PCIe {PCIE_HOST_GBPS:g} GB/s")
    bubble = (pp - 1) / (accum + pp - 1) if pp > 1 else 0.0
    micro_total = accum * (micro_s + exposed_micro)
    step_s = micro_total / (1 - bubble) + exposed_step + optimizer_s + FIXED_STEP_S[cls]
    tokens = accum * s.micro_batch * s.seq_len * real_frac * (dp // sp)
    parts = {"matmul": accum * matmul_s, "attention": accum * attention_s, "memory_bound": accum * memory_s,
             "launch_floor": accum * max(0.0, launch_s - gpu_s), "communication": accum * exposed_micro + exposed_step,
             "pipeline_bubble": micro_total * bubble / (1 - bubble), "optimizer": optimizer_s, "fixed": FIXED_STEP_S[cls]}
    notes.insert(0, f"{s.framework} ({cls} stack) on {kind.name} ({gen}): matmuls at {eff:.2f} of the 16-bit peak "
                    f"({eff_table[cls]:.2f} x {kind.name} {gen_factor:.2f} "
                    f"x small-matmul {small:.2f}); checkpointing {s.checkpointing}; "
                    f"{'packed' if packing else 'padded'} sequences; {'fused/compiled' if fused == 'fused' else 'eager'} kernels")
    return StepTime(step_s, tokens, gpus, parts, notes)


def tokens_per_s_per_gpu(shape: ModelShape, s: TrainSetup, **kw) -> float:
    """Returns real training tokens per second per GPU."""
    return step_time(shape, s, **kw).tokens_per_s_per_gpu


def fit_efficiency(cases: list[tuple], rounds: int = 4) -> dict[str, tuple[float, int]]:
    """Returns {class: (matmul efficiency, cases)} fitted on measured cases (shape, setup, measured
    tokens/s per GPU[, source]): each class's efficiency scaled by the median over its sources of
    each source's median measured/predicted throughput (one source, one vote: a table of 18 rows from
    one stack version does not outvote two others), repeated (the per-step parts do not scale with it),
    starting from the priors. Classes without cases are absent (they keep PRIOR_MATMUL_EFFICIENCY)."""
    import statistics

    eff = dict(PRIOR_MATMUL_EFFICIENCY)
    counts: dict[str, int] = {}
    for _ in range(rounds):
        ratios: dict[str, dict[str, list[float]]] = {}
        for case in cases:
            shape, setup, measured = case[:3]
            source = case[3] if len(case) > 3 else ""
            pred = tokens_per_s_per_gpu(shape, setup, efficiency=eff)
            ratios.setdefault(framework_class(setup.framework), {}).setdefault(source, []).append(measured / pred)
        for cls, by_source in ratios.items():
            eff[cls] = min(0.95, eff[cls] * statistics.median(statistics.median(rs) for rs in by_source.values()))
            counts[cls] = sum(len(rs) for rs in by_source.values())
    return {cls: (round(eff[cls], 4), n) for cls, n in counts.items()}
