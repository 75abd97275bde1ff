"""Per-GPU memory of a training or inference setup, by component, at three levels.

Pure arithmetic over the model's architecture (`gpuledger.models`); no torch. Bytes throughout,
GiB (2**30) only in the returned `Estimate`. Levels:
- `allocated`: live tensors at the peak, what `torch.cuda.max_memory_allocated()` reports;
- `reserved`: the caching allocator's segments (`max_memory_reserved()`): allocated plus fragmentation;
- `device`: what `nvidia-smi` shows: reserved plus the CUDA context (and NCCL buffers on >1 GPU).
With `device="cpu"` the levels describe a CPU run (numpy demo trainer) and `device` is resident memory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from gpuledger.estimate.workload import Workload
from gpuledger.models import ModelConfig, layer_linears, load_config

GIB = 2**30

# --- constants, each with its source -------------------------------------------------------------

#: Bytes per element of a float dtype.
FLOAT_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "bf16-mixed": 2, "fp16-mixed": 2, "fp8": 1}
#: Bytes per weight of a stored (frozen or served) matrix at each precision, before quantisation
#: constants. int4/nf4 pack two weights per byte (bitsandbytes, GPTQ/AWQ).
WEIGHT_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "bf16-mixed": 2, "fp16-mixed": 2, "fp8": 1, "int8": 1,
                "int4": 0.5, "nf4": 0.5}
#: Quantisation constants per quantised weight, bytes:
#: nf4: bitsandbytes blockwise NF4, one fp32 absmax per 64 weights = 4/64 (Dettmers et al. 2023,
#:   arXiv:2305.14314 §3; `bnb_4bit_use_double_quant` is False by default in transformers'
#:   BitsAndBytesConfig; with it the constants shrink to 0.127 bit/param);
#: int4: GPTQ/AWQ group size 128 with an fp16 scale and a 4-bit zero point = 2.5/128;
#: int8: LLM.int8() keeps one fp32 scale per row (Dettmers et al. 2022): ~4/d_in, taken as 4/4096;
#: fp8: one scale per tensor (Transformer Engine): ~0.
QUANT_CONST_BYTES = {"nf4": 4 / 64, "int4": 2.5 / 128, "int8": 4 / 4096, "fp8": 0.0}
#: torchtune's NF4 (torchao NF4Tensor, torchao/dtypes/nf4tensor.py: block_size 64, scaler_block_size
#: 256) double-quantises the absmax scalers: one int8 scaler per 64 weights plus one fp32 factor per
#: 256 scalers: (1 + 4/256) / 64 B per weight. bitsandbytes' `bnb_4bit_use_double_quant` is the same
#: layout (8-bit absmax, nested blocksize 256 with an fp32 absmax each; QLoRA paper §3 "Double
#: Quantization": 0.127 bit per parameter).
NF4_DQ_CONST_BYTES = (1 + 4 / 256) / 64
#: LoRA dropout when the workload does not say: the frameworks' defaults (peft LoraConfig
#: lora_dropout=0.0; lit-gpt finetune/lora.py lora_dropout=0.05; torchtune's recipes/configs
#: lora_dropout: 0.0). With p > 0 each adapted linear keeps its dropout output and a 1-byte mask
#: for backward; with 0 the layer is nn.Identity and saves nothing.
DEFAULT_LORA_DROPOUT = {"hf": 0.0, "litgpt": 0.05, "torchtune": 0.0}
#: PyTorch caching allocator: reserved / allocated at the peak. torchtune's Llama-2-7B LoRA run
#: reports 13.98 GB reserved right after loading 13.48 GB of bf16 weights (3.7%), and training
#: steps with varying sequence lengths fragment further; 6% is the middle of what the PyTorch
#: memory docs' snapshots and the calibration rows show (see benchmarks/estimator_accuracy.py).
ALLOCATOR_OVERHEAD = 0.06
#: ... and under FSDP / ZeRO-3 on more than one GPU: the parameters all-gathered per unit and the
#: gradients reduce-scattered per unit come and go on their own streams (the caching allocator caches
#: per stream, and FSDP1 frees them with record_stream, so a freed block waits for the other stream),
#: interleaved with the activations: reserved runs well above allocated. Public: llama-recipes' Llama-2-7B
#: LoRA FSDP on 4 A100-40GB, peak active 15.22 GB vs peak reserved 19.36 GB (+27%, meta-llama/llama-cookbook
#: PR #41); its full fine-tune 29 GB reserved (issue #100) vs 22.3 GiB allocated estimated (+29%); 70B on 16
#: A100s, 59 GB active vs 63 GB reserved (+7%, issue #120); Answer.AI's fsdp_qlora table (FSDP1, 2 GPUs) sits
#: 5-15% over its allocated estimate. 0.18: the middle of those, in the rows of memory_public.csv.
SHARDED_ALLOCATOR_OVERHEAD = 0.18
#: ... and FSDP1 (`FullyShardedDataParallel`: what Transformers' Trainer / accelerate, llama-recipes and lit-gpt's
#: FSDPStrategy run) frees each unsharded flat parameter and gradient with `record_stream`, so a freed block is
#: reusable only once the other stream has passed it: llama-recipes' own Llama-2-7B LoRA FSDP run reports peak
#: reserved 19.36 GB over peak active 15.22 GB (1.27; meta-llama/llama-cookbook PR #41), its 70B full fine-tune
#: 63 GB reserved over 42 GB allocated (issue #120); the hf FSDP rows of memory_public.csv sit at a median 1.28 of
#: their allocated estimate once the loss and the recomputed block no longer add (2026-12-03). FSDP2
#: (`fully_shard`, torchtitan / torchtune) waits on events instead and keeps SHARDED_ALLOCATOR_OVERHEAD: a
#: torchtitan log of Llama-3-8B on 4 GPUs (FSDP 2 x context parallel 2, full AC, 8,192 tokens; pytorch/torchtitan
#: PR #1884, 2025-10: 44.84 GiB reserved) is estimated at 44.3 GiB with it.
FSDP1_ALLOCATOR_OVERHEAD = 0.27
#: the frameworks whose FSDP is FSDP1
FSDP1_FRAMEWORKS = ("hf", "litgpt")
#: CUDA context + cuBLAS/cuDNN workspaces outside the allocator (nvidia-smi minus
#: max_memory_reserved): ~300-500 MiB with lazy module loading on A100/H100 (CUDA >= 11.7,
#: PyTorch docs "CUDA_MODULE_LOADING"); 0.5 GiB.
CUDA_CONTEXT_GIB = 0.5
#: NCCL communicator buffers per GPU when more than one GPU takes part (NCCL_BUFFSIZE 4 MiB per
#: channel and peer, a few dozen channels): ~0.25 GiB, outside the PyTorch allocator.
NCCL_GIB = 0.25
#: HF-default DeepSpeed buckets ("auto" in transformers' DeepSpeed integration):
#: reduce_bucket_size = hidden**2, stage3_prefetch_bucket_size = 0.9 * hidden**2 elements.
ZERO_BUCKET_FACTOR = 1.0
#: TRL GRPOTrainer's default num_generations (completions per prompt) when no group size is given.
GRPO_DEFAULT_GROUP = 8
#: CPU runs (numpy demo trainer): resident memory of the Python interpreter with numpy and the
#: trainer's imports loaded, before any model array, and the factor by which numpy's expression
#: temporaries (softmax/GELU intermediates, the activation gradients of the backward pass held next
#: to the saved forward tensors) inflate the saved activations and logits. Both fitted to two
#: measurements of `gpuledger/trainers/demo_lora.py` (r=16, seq 64) under `gpuledger.agent` on this project's
#: 2-core CI machine: peak RSS 61 MiB at micro-batch 8 and 120 MiB at micro-batch 32
#: (`python -c "import numpy"` alone peaks at ~30 MiB, consistent with the fitted baseline).
CPU_BASELINE_MIB = 33.0
CPU_TEMPORARIES_FACTOR = 1.5


@dataclass
class MemoryBreakdown:
    """Per-GPU bytes by component; levels derive from them."""

    weights: float = 0.0
    gradients: float = 0.0
    optimizer: float = 0.0  # the states only (master weights, moments)
    optimizer_temporaries: float = 0.0  # what the optimizer step allocates next to them, at its phase
    activations: float = 0.0
    logits: float = 0.0
    kv_cache: float = 0.0
    buffers: float = 0.0
    extra_device: float = 0.0  # outside the allocator (CUDA context, NCCL)
    overhead: float = ALLOCATOR_OVERHEAD
    notes: dict[str, str] = field(default_factory=dict)
    assumptions: list[str] = field(default_factory=list)
    params_total: int = 0
    params_trainable: int = 0
    exact: bool = True
    #: allocated bytes at each phase of a step (load, forward_end, backward_end, optimizer_step,
    #: generation); the components above are those of `peak_phase`, the largest.
    phases: dict[str, float] = field(default_factory=dict)
    peak_phase: str = ""
    #: the step's persistent tensors whatever the phase: weights (all models), every gradient of the
    #: trained params, optimizer states (no temporaries); bytes per GPU
    states: dict[str, float] = field(default_factory=dict)

    @property
    def allocated(self) -> float:
        return (self.weights + self.gradients + self.optimizer + self.optimizer_temporaries + self.activations
                + self.logits + self.kv_cache + self.buffers)

    @property
    def reserved(self) -> float:
        return self.allocated * (1 + self.overhead)

    @property
    def device(self) -> float:
        return self.reserved + self.extra_device


# --- helpers ---------------------------------------------------------------------------------------


def _act_bytes(precision: str) -> int:
    """Bytes of a saved activation: fp32 runs compute in fp32; everything else computes in 16 bit."""
    return 4 if precision == "fp32" else 2


def _resid_bytes(precision: str) -> int:
    """Bytes of the residual stream (norm inputs, checkpoints): fp32 under fp32 or autocast (AMP keeps
    the fp32 residual adds and runs norms in fp32), else 16 bit."""
    return 4 if precision in ("fp32", "bf16-mixed", "fp16-mixed") else 2


#: families that normalise queries and keys before attention (their inputs are saved for backward)
QK_NORM_FAMILIES = ("qwen3", "qwen3_moe", "gemma3_text", "olmo2", "olmo3")


def _norms_per_layer(cfg: ModelConfig) -> tuple[int, bool]:
    """Returns (norm inputs saved per block, attention and MLP share one normed input)."""
    t = cfg.model_type
    if t in ("gemma2", "gemma3_text"):
        return 4, False
    if t in ("phi", "gptj") or (t == "stablelm" and cfg.get("use_parallel_residual", False)):
        return 1, True
    if t == "falcon":
        if not cfg.get("parallel_attn", True):
            return 2, False
        if cfg.get("new_decoder_architecture") and int(cfg.get("num_ln_in_parallel_attn") or 2) == 2:
            return 2, False
        return 1, True
    return 2, False


def layer_activation_bytes_per_token(cfg: ModelConfig, precision: str, *, lora_lins=(), lora_r: int = 0,
                                     compiled: bool = False, lora_dropout: bool = True, fused: bool = False) -> float:
    """Returns the bytes one decoder block keeps for backward per token (flash attention; no s^2 term).

    After Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer Models",
    arXiv:2205.05198, §4.1: 34·s·b·h bytes per layer for GPT with 16-bit activations and dropout),
    re-derived per tensor for modern blocks: every linear's input (frozen ones too: autograd saves
    the input to compute the input gradient's partner), each norm's input, q/k/v and the output
    saved by the fused attention kernel plus its reshaped copy fed to the output projection, the MLP
    intermediates (gated: gate, act(gate), up, product; plain: fc1 output, activation output), MoE
    token copies per routed expert, and LoRA's dropout output + mask and A-output per adapted linear.
    `compiled` (torch.compile): AOTAutograd's min-cut partitioner
    (torch._functorch.partitioners.min_cut_rematerialization_partition) recomputes cheap pointwise
    ops in backward instead of saving their outputs: the gated MLP keeps gate and up (act(gate) and
    the product are recomputed), a plain MLP keeps fc1's output only, and the attention output's
    contiguous copy disappears into the fused graph.
    `fused` (Megatron-Core / NeMo / nanotron with Transformer Engine): the gated MLP's fused SwiGLU saves
    its fc1 output (gate and up, one tensor) and the product fc2 needs for its weight gradient, not the
    activation's output (3 inter-widths, not 4; megatron/core/fusions/fused_bias_swiglu.py), and the
    attention output goes to the output projection without a contiguous copy.
    """
    a, r = _act_bytes(precision), _resid_bytes(precision)
    d = cfg.hidden_size
    q, kv = cfg.num_heads * cfg.head_dim, cfg.num_kv_heads * cfg.head_dim
    k_e = cfg.experts_per_token
    n_norm, shared = _norms_per_layer(cfg)
    b = n_norm * d * r  # norm inputs
    if cfg.model_type in QK_NORM_FAMILIES or (cfg.model_type == "stablelm" and cfg.get("qk_layernorm", False)):
        b += (q + kv) * a  # q_norm / k_norm inputs
    b += d * a  # attention input (normed) shared by q/k/v projections
    b += (q + 2 * kv) * a  # q, k, v saved by the attention kernel
    b += (1 if compiled or fused else 2) * q * a  # attention output (kernel) + contiguous copy into o_proj
    if not shared:
        b += d * a  # MLP input (normed)
    mlp_saved = (4 if cfg.gated_mlp else 2) // (2 if compiled else 1)
    if fused and not compiled:
        mlp_saved = 3 if cfg.gated_mlp else 2
    b += mlp_saved * cfg.mlp_width_per_token * a  # the routed top-k experts (+ shared) for MoE
    if cfg.num_experts > 1:
        b += d * a * k_e + cfg.num_experts * 4  # gathered tokens per expert, fp32 router logits
    dropout = float(cfg.get("resid_pdrop", 0.0) or cfg.get("dropout", 0.0) or 0.0)
    if dropout > 0:  # GPT-2 / OPT keep residual dropout masks (1 byte each) after attention and MLP
        b += 2 * d
    if lora_lins:
        for lin in lora_lins:
            if lora_dropout:
                b += lin.d_in * (a + 1) * lin.count
            b += lora_r * a * lin.count
    return b


def attention_score_bytes_per_token(cfg: ModelConfig, precision: str, seq: int) -> float:
    """Returns per-token bytes of materialised attention scores without flash attention.

    Eager/math attention keeps the softmax output for backward: HF's eager_attention_forward runs
    softmax in fp32 (4 B) and casts to the compute dtype (a B), so (4 + a)·heads·seq per token per
    layer (Korthikanti et al. 2022 count 5·a·s² per layer with dropout, 16-bit softmax).
    """
    return cfg.num_heads * seq * (4 + _act_bytes(precision))


def loss_bytes_per_token(cfg: ModelConfig, precision: str, framework: str, chunked: bool | None = None,
                         compiled: bool = False, fused: bool = False) -> float:
    """Returns the peak bytes per token of logits and the loss around the start of backward.

    Unchunked (hf's habit): Transformers' ForCausalLMLoss keeps the 16-bit logits (a·V, returned to
    the caller), upcasts to fp32 and log-softmaxes (4·V saved), and backward allocates the fp32
    gradient of the log-probs and of the logits (4·V + 4·V) while the activations are still alive:
    (a + 12)·V. (Whether the 16-bit logits are freed before backward depends on the caller; 12·V instead
    put the PEFT, fsdp_qlora, TRL and torchtune rows of memory_public.csv 1-4 points lower, median 6.5% ->
    8.4%, tried 2026-12-01, so the measured peaks keep them.) torchtitan and llm-foundry: the same.
    megatron / nemo / nanotron: Megatron's vocab-parallel cross-entropy (`_VocabParallelCrossEntropy`,
    megatron/core/tensor_parallel/cross_entropy.py) keeps the fp32 exp-logits it computed in place and
    writes the gradient into that same buffer in backward: the 16-bit logits + one fp32 copy, (a + 4)·V
    (the caller divides by the tensor-parallel degree).
    litgpt: the lm_head runs in 128-token chunks and cross-entropy stays in 16 bit (lit-gpt
    `chunked_cross_entropy`): logits, log-probs and their two gradients, 4·a·V.
    torchtune / `chunked=True` (CEWithChunkedOutputLoss, 8 chunks): the 16-bit logits of every chunk
    stay (a·V); each chunk's `F.cross_entropy(chunk.float())` saves its fp32 log-softmax until
    backward (4·V over all chunks); backward adds one chunk's fp32 and 16-bit gradient ((4 + a)·V/8).
    With torch.compile the per-chunk loss is one fused graph (torchtune compiles `compute_cross_entropy`)
    that saves only its 16-bit input and recomputes the softmax in backward, writing the chunk's
    gradient in 16 bit: a·V + a·V/8.
    torchtitan: the same ops as hf, but its train step deletes the model's 16-bit output before backward
    (`del pred`, "need to free to before bwd to avoid peaking memory"): the fp32 log-softmax and its two
    gradients, 12·V.
    `fused` (Liger's fused linear cross-entropy, TRL/Transformers `use_liger_kernel`; cut-cross-entropy):
    the lm_head and the loss run over chunks of tokens (Liger: chunk = BT / ceil(V / d) tokens, so one
    chunk's logits hold about BT·d elements) and the gradient of the lm_head's input is computed in forward
    and kept for backward: that gradient (d·a), one chunk's logits and their in-place gradient (~2·d·a per
    token of the micro-batch): 3·d·a, whatever the vocabulary.
    `chunked` None = the framework's habit (litgpt and torchtune chunk, hf does not).
    """
    a, vocab = _act_bytes(precision), cfg.vocab_size
    if fused:
        return 3 * a * cfg.hidden_size
    if chunked is None:
        chunked = framework in ("litgpt", "torchtune")
    if not chunked and framework in ("megatron", "nemo", "nanotron"):
        return (a + 4) * vocab
    if not chunked and framework == "torchtitan":
        return 12 * vocab
    if not chunked:
        return (a + 12) * vocab
    if framework == "litgpt" and not compiled:
        return 4 * a * vocab
    if compiled:
        return (a + a / 8) * vocab
    return (a + 4 + (4 + a) / 8) * vocab


def eval_loss_bytes_per_token(cfg: ModelConfig, precision: str, framework: str, chunked: bool | None = None,
                              fused: bool = False) -> float:
    """Returns the peak bytes per token of the logits and loss of a no-grad evaluation step (no gradients:
    what `loss_bytes_per_token` holds before backward). hf / torchtitan: the 16-bit logits, their fp32
    copy and the fp32 log-softmax, (a + 8)·V (Trainer.evaluate without compute_metrics keeps the loss
    only, but the model returns the logits); megatron / nemo / nanotron: (a + 4)·V; chunked (torchtune,
    litgpt): every chunk's 16-bit logits and one chunk's fp32 copy and log-softmax, (a + 8/8)·V; fused:
    one chunk, ~2·d·a."""
    a, vocab = _act_bytes(precision), cfg.vocab_size
    if fused:
        return 2 * a * cfg.hidden_size
    if chunked is None:
        chunked = framework in ("litgpt", "torchtune")
    if not chunked and framework in ("megatron", "nemo", "nanotron"):
        return (a + 4) * vocab
    if not chunked:
        return (a + 8) * vocab
    return (a + 1) * vocab


def kv_cache_bytes_per_token(cfg: ModelConfig | str, kv_precision: str = "bf16") -> int:
    """Returns KV-cache bytes per token: 2 (K and V) · layers · kv_heads · head_dim · bytes.

    Kwon et al. 2023 (vLLM, arXiv:2309.06180 §3): OPT-13B holds 2·5120·40·2 B = 800 KB per token.
    """
    if isinstance(cfg, str):
        cfg = load_config(cfg)
    bytes_per = {"fp32": 4, "bf16": 2, "fp16": 2, "bf16-mixed": 2, "fp16-mixed": 2, "fp8": 1, "int8": 1,
                 "int4": 2, "nf4": 2}.get(kv_precision)
    if bytes_per is None:
        raise ValueError(f"unknown KV precision {kv_precision!r}")
    return 2 * cfg.num_layers * cfg.num_kv_heads * cfg.head_dim * bytes_per


def _quantised_split(cfg: ModelConfig, total: int) -> tuple[int, int]:
    """Returns (params in decoder-block linear weights, every other param)."""
    q = cfg.num_layers * sum(lin.weight_params for lin in layer_linears(cfg) if lin.targets or lin.count > 1)
    return q, total - q


def _frozen_weight_bytes(cfg: ModelConfig, total: int, precision: str, other_bytes: float,
                         double_quant: bool = False) -> tuple[float, float]:
    """Returns (weight bytes, quantisation-constant bytes) of a frozen base at `precision`;
    non-quantised params (embeddings, lm_head, norms, biases) take `other_bytes` each;
    `double_quant`: NF4 scalers themselves quantised (torchtune/torchao)."""
    if precision in ("int8", "int4", "nf4", "fp8"):
        qp, rest = _quantised_split(cfg, total)
        const = NF4_DQ_CONST_BYTES if (double_quant and precision == "nf4") else QUANT_CONST_BYTES[precision]
        return qp * WEIGHT_BYTES[precision] + rest * other_bytes, qp * const
    return total * WEIGHT_BYTES[precision], 0.0


def _optimizer_state_bytes(optimizer: str, state_bytes: int, params: int, cfg: ModelConfig | None = None) -> float:
    """Returns optimizer-state bytes for `params` trainable parameters (master weights excluded).

    adamw / paged-adamw: two moments (Loshchilov & Hutter 2019) in the state dtype; adamw-8bit / paged: two
    blockwise-quantised 8-bit moments, 2 B/param plus fp32 absmax per 2048 (Dettmers et al. 2022,
    arXiv:2110.02861); sgd: one momentum buffer; adafactor: factored second moment, rows + columns
    per matrix in fp32, no first moment (Shazeer & Stern 2018; HF Adafactor beta1=None).
    """
    if optimizer in ("adamw", "paged-adamw"):
        return 2 * state_bytes * params
    if optimizer in ("adamw-8bit", "paged-adamw-8bit"):
        return params * (2 + 2 * 4 / 2048)
    if optimizer == "sgd":
        return state_bytes * params
    # adafactor: rows + cols of each d_in x d_out matrix instead of d_in*d_out
    if cfg is None:
        return 4 * params * 0.01
    d = cfg.hidden_size
    return 4 * params * (2 / d)


# --- the estimate ----------------------------------------------------------------------------------


def _seq_lengths(w: Workload) -> tuple[int, int]:
    """Returns (prompt tokens, completion tokens) for GRPO/PPO/inference."""
    if w.prompt_len is None and w.completion_len is None:
        if w.method == "inference":
            return w.seq_len, 0
        completion = max(1, w.seq_len // 2)
        return max(1, w.seq_len - completion), completion
    completion = w.completion_len if w.completion_len is not None else max(1, w.seq_len - (w.prompt_len or 0))
    prompt = w.prompt_len if w.prompt_len is not None else max(1, w.seq_len - completion)
    return prompt, completion


def inference_breakdown(w: Workload, cfg: ModelConfig, total: int, m: MemoryBreakdown) -> MemoryBreakdown:
    p = w.precision
    a = _act_bytes(p)
    other = 4 if p == "fp32" else 2
    weights, consts = _frozen_weight_bytes(cfg, total, p, other)
    prompt, completion = _seq_lengths(w)
    context = prompt + completion
    kv = w.micro_batch * context * kv_cache_bytes_per_token(cfg, "fp32" if p == "fp32" else "bf16")
    # prefill working set: one block's intermediates for the prompt (freed block by block)
    d = cfg.hidden_size
    act = w.micro_batch * prompt * (4 * d + (3 if cfg.gated_mlp else 2) * cfg.mlp_width_per_token) * a
    if not w.flash_attn:
        act += w.micro_batch * cfg.num_heads * prompt * prompt * (4 + a)
    logits = w.micro_batch * cfg.vocab_size * 4 * 2  # last-token logits in fp32 + sampling probs
    m.params_trainable = 0
    m.weights = weights
    m.buffers = consts
    m.kv_cache = kv
    m.activations = act
    m.logits = logits
    m.extra_device = CUDA_CONTEXT_GIB * GIB
    m.notes.update({
        "weights": f"{total:,} params at {p}" + (" (block linears quantised; embeddings, lm_head 16-bit)" if consts else ""),
        "kv_cache": f"{w.micro_batch} x {context} tokens x {kv_cache_bytes_per_token(cfg, 'bf16'):,} B/token (16-bit)",
        "activations": "prefill working set of one block",
        "logits": "last-token logits and sampling buffers",
        "buffers": "quantisation constants" if consts else "none",
    })
    if w.gpus > 1:
        m.assumptions.append(f"inference on {w.gpus} GPUs: tensor parallel, weights and KV split evenly")
        for attr in ("weights", "buffers", "kv_cache"):
            setattr(m, attr, getattr(m, attr) / w.gpus)
        m.extra_device += NCCL_GIB * GIB
    return m


def gib(x: float) -> float:
    return x / GIB


def ceil_gib(x: float) -> float:
    return math.ceil(x / GIB * 100) / 100
