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
from gpuledger.models import ModelConfig, count_params, layer_linears, load_config, lora_linears

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
#: LoRA dropout assumed by recipes (lit-gpt 0.05, torchtune 0.05, most PEFT examples 0.05-0.1):
#: each adapted linear keeps its dropout output and a 1-byte mask for backward.
LORA_DROPOUT = True
#: PyTorch caching allocator: reserved / allocated at the peak. torchtune's Llama-2-7B LoRA run
#: reports 13.98 GB reserved right after loading 13.48 GB of bf16 weights (3.7%), and training
#: steps with varying sequence lengths fragment further; 6% is the middle of what the PyTorch
#: memory docs' snapshots and the calibration rows show (see benchmarks/estimator_accuracy.py).
ALLOCATOR_OVERHEAD = 0.06
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
#: measurements of `trainers/demo_lora.py` (r=16, seq 64) under `gpuledger.agent` on this project's
#: 2-core CI machine: peak RSS 61 MiB at micro-batch 8 and 120 MiB at micro-batch 32
#: (`python -c "import numpy"` alone peaks at ~30 MiB, consistent with the fitted baseline).
CPU_BASELINE_MIB = 33.0
CPU_TEMPORARIES_FACTOR = 1.5


@dataclass
class MemoryBreakdown:
    """Per-GPU bytes by component; levels derive from them."""

    weights: float = 0.0
    gradients: float = 0.0
    optimizer: float = 0.0
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

    @property
    def allocated(self) -> float:
        return (self.weights + self.gradients + self.optimizer + self.activations + self.logits
                + self.kv_cache + self.buffers)

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


def _norms_per_layer(cfg: ModelConfig) -> tuple[int, bool]:
    """Returns (norm inputs saved per block, attention and MLP share one normed input)."""
    t = cfg.model_type
    if t == "gemma2":
        return 4, False
    if t == "phi":
        return 1, True
    if t == "falcon":
        if not cfg.get("parallel_attn", True):
            return 2, False
        if cfg.get("new_decoder_architecture") and int(cfg.get("num_ln_in_parallel_attn") or 2) == 2:
            return 2, False
        return 1, True
    return 2, False


def layer_activation_bytes_per_token(cfg: ModelConfig, precision: str, *, lora_lins=(), lora_r: int = 0) -> float:
    """Returns the bytes one decoder block keeps for backward per token (flash attention; no s^2 term).

    After Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer Models",
    arXiv:2205.05198, §4.1: 34·s·b·h bytes per layer for GPT with 16-bit activations and dropout),
    re-derived per tensor for modern blocks: every linear's input (frozen ones too: autograd saves
    the input to compute the input gradient's partner), each norm's input, q/k/v and the output
    saved by the fused attention kernel plus its reshaped copy fed to the output projection, the MLP
    intermediates (gated: gate, act(gate), up, product; plain: fc1 output, activation output), MoE
    token copies per routed expert, and LoRA's dropout output + mask and A-output per adapted linear.
    """
    a, r = _act_bytes(precision), _resid_bytes(precision)
    d, inter = cfg.hidden_size, cfg.intermediate_size
    q, kv = cfg.num_heads * cfg.head_dim, cfg.num_kv_heads * cfg.head_dim
    k_e = cfg.experts_per_token
    n_norm, shared = _norms_per_layer(cfg)
    b = n_norm * d * r  # norm inputs
    if cfg.model_type == "qwen3":
        b += (q + kv) * a  # q_norm / k_norm inputs
    b += d * a  # attention input (normed) shared by q/k/v projections
    b += (q + 2 * kv) * a  # q, k, v saved by the attention kernel
    b += 2 * q * a  # attention output (kernel) + contiguous copy into o_proj
    if not shared:
        b += d * a  # MLP input (normed)
    b += (4 if cfg.gated_mlp else 2) * inter * a * k_e
    if cfg.num_experts > 1:
        b += d * a * k_e + cfg.num_experts * 4  # gathered tokens per expert, fp32 router logits
    dropout = float(cfg.get("resid_pdrop", 0.0) or cfg.get("dropout", 0.0) or 0.0)
    if dropout > 0:  # GPT-2 / OPT keep residual dropout masks (1 byte each) after attention and MLP
        b += 2 * d
    if lora_lins:
        for lin in lora_lins:
            if LORA_DROPOUT:
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


def loss_bytes_per_token(cfg: ModelConfig, precision: str, framework: str) -> float:
    """Returns the peak bytes per token of logits and the loss around the start of backward.

    hf: Transformers' ForCausalLMLoss keeps the 16-bit logits (a·V, returned to the caller), upcasts
    to fp32 and log-softmaxes (4·V saved), and backward allocates the fp32 gradient of the
    log-probs and of the logits (4·V + 4·V) while the activations are still alive: (a + 12)·V.
    litgpt: the lm_head runs in 128-token chunks and cross-entropy stays in 16 bit (lit-gpt
    `chunked_cross_entropy`): logits, log-probs and their two gradients, 4·a·V.
    torchtune: CEWithChunkedOutputLoss (8 chunks) keeps 16-bit logits, upcasts one chunk at a time:
    2·a·V + 12·V/8.
    """
    a, vocab = _act_bytes(precision), cfg.vocab_size
    if framework == "litgpt":
        return 4 * a * vocab
    if framework == "torchtune":
        return (2 * a + 12 / 8) * vocab
    return (a + 12) * vocab


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


def _frozen_weight_bytes(cfg: ModelConfig, total: int, precision: str, other_bytes: float) -> tuple[float, float]:
    """Returns (weight bytes, quantisation-constant bytes) of a frozen base at `precision`;
    non-quantised params (embeddings, lm_head, norms, biases) take `other_bytes` each."""
    if precision in ("int8", "int4", "nf4", "fp8"):
        qp, rest = _quantised_split(cfg, total)
        return qp * WEIGHT_BYTES[precision] + rest * other_bytes, qp * QUANT_CONST_BYTES[precision]
    return total * WEIGHT_BYTES[precision], 0.0


def _optimizer_state_bytes(optimizer: str, state_bytes: int, params: int, cfg: ModelConfig | None = None) -> float:
    """Returns optimizer-state bytes for `params` trainable parameters (master weights excluded).

    adamw: two moments (Loshchilov & Hutter 2019) in the state dtype; adamw-8bit / paged: two
    blockwise-quantised 8-bit moments, 2 B/param plus fp32 absmax per 2048 (Dettmers et al. 2022,
    arXiv:2110.02861); sgd: one momentum buffer; adafactor: factored second moment, rows + columns
    per matrix in fp32, no first moment (Shazeer & Stern 2018; HF Adafactor beta1=None).
    """
    if optimizer == "adamw":
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


def memory_breakdown(w: Workload) -> MemoryBreakdown:
    """Returns the per-GPU memory breakdown (bytes) of workload `w`."""
    cfg = load_config(w.model)
    pc = count_params(cfg)
    m = MemoryBreakdown(params_total=pc.total, exact=pc.exact)
    if not pc.exact:
        m.assumptions.append(pc.note)
    if w.device == "cpu":
        return _cpu_breakdown(w, cfg, pc.total, m)
    if w.method == "inference":
        return _inference(w, cfg, pc.total, m)
    return _training(w, cfg, pc.total, m)


def _sharding(w: Workload, m: MemoryBreakdown) -> str:
    sharding = w.sharding
    if w.gpus > 1 and sharding == "none":
        sharding = "ddp"
        m.assumptions.append(f"{w.gpus} GPUs with sharding none: assumed DDP (a full replica per GPU)")
    if w.gpus == 1 and sharding != "none":
        m.assumptions.append(f"sharding {sharding} on 1 GPU divides nothing")
    return sharding


def _training(w: Workload, cfg: ModelConfig, total: int, m: MemoryBreakdown) -> MemoryBreakdown:
    p, n = w.precision, w.gpus
    a, r_b = _act_bytes(p), _resid_bytes(p)
    mixed = p in ("bf16-mixed", "fp16-mixed", "fp8")
    sharding = _sharding(w, m)
    rl = w.method in ("grpo", "ppo")
    d = cfg.hidden_size
    layer_params = (total - count_params(cfg).embedding) / max(1, cfg.num_layers)

    # --- weights, gradients, optimizer of the trained parameters ---
    lora_lins: list = []
    if w.method in ("full", "grpo", "ppo"):
        trainable = total
        w_b = 4 if p == "fp32" else 2
        g_b = w_b
        state_b = 2 if p in ("bf16", "fp16") else 4
        weights = total * w_b
        grads = trainable * g_b
        opt = _optimizer_state_bytes(w.optimizer, state_b, trainable, cfg)
        if mixed:
            opt += 4 * trainable  # fp32 master weights (Rajbhandari et al. 2020, ZeRO §3: 2+2+12 B/param)
        quant_consts = 0.0
        m.notes["weights"] = f"{total:,} params x {w_b} B ({'fp32' if w_b == 4 else '16-bit'})"
        if mixed:
            m.notes["optimizer"] = f"fp32 master weights + {w.optimizer} states in fp32 ({total:,} params)"
        else:
            m.notes["optimizer"] = f"{w.optimizer} states in {'fp32' if state_b == 4 else '16-bit'}"
        m.notes["gradients"] = f"{'fp32' if g_b == 4 else '16-bit'} gradient per trained parameter"
    else:  # lora / qlora
        lora_lins = lora_linears(cfg, w.lora_targets)
        trainable = cfg.num_layers * sum(w.lora_r * (lin.d_in + lin.d_out) * lin.count for lin in lora_lins)
        base_p = p
        if w.method == "qlora" and p not in ("nf4", "int4", "int8", "fp8"):
            base_p = "nf4"
        quantised = base_p in ("nf4", "int4", "int8", "fp8")
        # prepare_model_for_kbit_training (PEFT) upcasts every non-quantised param to fp32
        other_b = 4 if (quantised and w.framework == "hf") else (4 if p == "fp32" else 2)
        weights, quant_consts = _frozen_weight_bytes(cfg, total, base_p, other_b)
        # adapters: PEFT keeps them in fp32 (autocast_adapter_dtype=True) under a 16-bit or quantised
        # base; lit-gpt/torchtune keep them in the model dtype (pure bf16 -> 16-bit states).
        adapter_fp32 = p == "fp32" or mixed or w.framework == "hf"
        ad_b = 4 if adapter_fp32 else 2
        weights += trainable * ad_b
        grads = trainable * ad_b
        opt = _optimizer_state_bytes(w.optimizer, ad_b if not mixed else 4, trainable, cfg)
        if mixed and not adapter_fp32:
            opt += 4 * trainable
        m.notes["weights"] = (f"frozen base {base_p}" + (" + quantisation constants" if quant_consts else "")
                              + f"; {trainable:,} LoRA params (r={w.lora_r}, {w.lora_targets}) in "
                              + ("fp32" if ad_b == 4 else "16-bit"))
        m.notes["gradients"] = "LoRA adapters only"
        m.notes["optimizer"] = f"{w.optimizer} states of the adapters"
    m.params_trainable = int(trainable)

    # --- RL extra models ---
    extra_frozen = 0.0
    if rl:
        ref_b = 4 if (p == "fp32" or (mixed and w.framework == "hf")) else 2  # TRL loads the ref like the policy
        extra_frozen += total * ref_b  # reference policy for the KL term
        reward_total = 0
        if w.reward_model:
            reward_total = count_params(load_config(w.reward_model)).total
        elif w.method == "ppo":
            reward_total = total
        extra_frozen += reward_total * ref_b
        if w.method == "ppo":  # value model: trained, same architecture as the policy (TRL PPOTrainer)
            weights *= 2
            grads *= 2
            opt *= 2
            m.params_trainable *= 2
        m.notes["weights"] += (f"; + reference model{' + reward model' if reward_total else ''}"
                               f"{' + value model' if w.method == 'ppo' else ''}")
        if w.method == "grpo" and not w.reward_model:
            m.assumptions.append("GRPO rewards from functions (no reward model); give reward_model to add one")

    # --- sharding: per-GPU share of states, plus buffers ---
    buffers = quant_consts
    if n > 1:
        m.extra_device += NCCL_GIB * GIB
    w_frozen_part = 0.0
    if sharding == "ddp":
        buffers += grads  # DDP gradient buckets: a second copy of the grads (PyTorch DDP docs, gradient_as_bucket_view)
        m.notes["buffers"] = "DDP gradient buckets (one more copy of the gradients)"
    elif sharding in ("zero1", "zero2"):
        opt /= n
        if sharding == "zero2":
            grads /= n
        buffers += ZERO_BUCKET_FACTOR * d * d * 2 * 2  # reduce + all-gather buckets (HF "auto": hidden^2)
        m.notes["buffers"] = "ZeRO reduce/all-gather buckets (hidden^2 elements each)"
    elif sharding in ("zero3", "fsdp"):
        w_elem = 4 if p == "fp32" else 2
        if sharding == "fsdp" and w.method == "lora" and w.framework == "litgpt":
            # FSDP (use_orig_params=True) with frozen and trainable params in one FlatParameter keeps
            # gradient memory "equivalent to not freezing those parameters" (PyTorch FSDP docs).
            # lit-gpt wraps whole blocks; torchtune (lora_fsdp_wrap_policy) and accelerate's PEFT
            # policy wrap LoRA modules on their own, so they do not pay this.
            grads = total * w_elem
            m.assumptions.append("FSDP with LoRA: frozen and LoRA params share flat parameters, so FSDP "
                                 "allocates gradients for all of them (PyTorch FSDP docs, use_orig_params)")
        weights /= n
        grads /= n
        opt /= n
        extra_frozen /= n
        # unsharded units live at once: the current and the prefetched decoder block (BACKWARD_PRE /
        # DeepSpeed prefetch), one block's unsharded gradient before reduce-scatter, and for FSDP the
        # root unit (embeddings, final norm, lm_head), which stays unsharded through the step.
        root = count_params(cfg).embedding if sharding == "fsdp" else 0
        w_frozen_part = (2 * layer_params + root) * w_elem + layer_params * w_elem
        buffers += w_frozen_part
        m.notes["buffers"] = ("all-gathered params of 2 blocks + 1 block's gradient"
                              + (" + the unsharded root unit (embeddings, lm_head)" if root else ""))
    if quant_consts:
        m.notes["buffers"] = (m.notes.get("buffers", "") + "; " if m.notes.get("buffers") else "") + \
            f"{'NF4 absmax' if 'nf4' in m.notes['weights'] else 'quantisation'} constants"

    # --- activations and logits ---
    if rl:
        prompt, completion = _seq_lengths(w)
        group = w.group_size or (GRPO_DEFAULT_GROUP if w.method == "grpo" else 1)
        n_seq = w.micro_batch * group
        seq = prompt + completion
        logit_tokens = n_seq * completion  # TRL computes logits for completion tokens only (logits_to_keep)
        m.assumptions.append(f"{w.method.upper()}: {w.micro_batch} prompt(s) x {group} completions, "
                             f"{prompt}+{completion} tokens; policy trained in full")
    else:
        n_seq, seq = w.micro_batch, w.seq_len
        logit_tokens = n_seq * seq
    tokens = n_seq * seq
    per_layer = layer_activation_bytes_per_token(cfg, p, lora_lins=lora_lins, lora_r=w.lora_r)
    if not w.flash_attn:
        per_layer += attention_score_bytes_per_token(cfg, p, seq)
    if w.grad_ckpt:
        # checkpoint each decoder block: its input stays, one block is recomputed at a time in backward
        act = tokens * (cfg.num_layers * d * r_b + per_layer)
        m.notes["activations"] = "gradient checkpointing per block: block inputs + one block recomputed"
    else:
        act = tokens * cfg.num_layers * per_layer
        m.notes["activations"] = "every block's saved tensors (no checkpointing)"
    m.notes["activations"] += (", flash attention (no seq^2 scores)" if w.flash_attn
                               else ", materialised attention scores (seq^2 per head)")
    act += tokens * (d * r_b + d * a)  # final norm input + lm_head input
    act += tokens * 2 * d * a  # backward working gradients of the residual stream
    logits = logit_tokens * loss_bytes_per_token(cfg, p, w.framework)
    if rl:
        logits += logit_tokens * a * cfg.vocab_size  # logits / temperature copy (TRL)
        if w.method == "ppo":
            act *= 2  # the value model runs the same forward/backward
    m.notes["logits"] = f"[{logit_tokens:,} tokens x {cfg.vocab_size:,} vocab] logits + loss ({w.framework})"

    kv = 0.0
    if rl:  # rollout phase: KV cache of every sequence (HF generate); peak is the larger phase
        kv_phase = n_seq * seq * kv_cache_bytes_per_token(cfg, "fp32" if p == "fp32" else "bf16") + n_seq * cfg.vocab_size * 4
        if kv_phase > act + logits:
            kv, act, logits = kv_phase, 0.0, 0.0
            m.notes["kv_cache"] = "rollout KV cache (generation phase is the peak)"
        else:
            m.notes["kv_cache"] = "rollout KV cache freed before the training step (training phase is the peak)"
    m.weights = weights + extra_frozen
    m.gradients = grads
    m.optimizer = opt
    m.activations = act
    m.logits = logits
    m.kv_cache = kv
    m.buffers = buffers
    m.extra_device += CUDA_CONTEXT_GIB * GIB
    if w.optimizer == "paged-adamw-8bit":
        m.assumptions.append("paged optimizer states can spill to CPU under pressure; counted on the GPU")
    return m


def _inference(w: Workload, cfg: ModelConfig, total: int, m: MemoryBreakdown) -> MemoryBreakdown:
    p = w.precision
    a = _act_bytes(p)
    other = 4 if p == "fp32" else 2
    weights, consts = _frozen_weight_bytes(cfg, total, p, other)
    prompt, completion = _seq_lengths(w)
    context = prompt + completion
    kv = w.micro_batch * context * kv_cache_bytes_per_token(cfg, "fp32" if p == "fp32" else "bf16")
    # prefill working set: one block's intermediates for the prompt (freed block by block)
    d, inter = cfg.hidden_size, cfg.intermediate_size
    act = w.micro_batch * prompt * (4 * d + (3 if cfg.gated_mlp else 2) * inter * cfg.experts_per_token) * a
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


def _cpu_breakdown(w: Workload, cfg: ModelConfig, total: int, m: MemoryBreakdown) -> MemoryBreakdown:
    """A CPU run of the numpy demo trainer: fp32 everywhere, no flash attention, no checkpointing;
    `device` = resident set size (RSS) including the interpreter baseline."""
    cw = w.model_copy(update={"precision": "fp32", "flash_attn": False, "grad_ckpt": False,
                              "device": "gpu", "gpus": 1, "sharding": "none", "framework": "litgpt"})
    g = _inference(cw, cfg, total, m) if w.method == "inference" else _training(cw, cfg, total, m)
    g.extra_device = CPU_BASELINE_MIB * 2**20
    g.overhead = 0.0  # numpy frees to malloc; RSS tracks live arrays closely
    g.activations *= CPU_TEMPORARIES_FACTOR
    g.logits *= CPU_TEMPORARIES_FACTOR
    g.assumptions.append(
        f"device=cpu: fp32 numpy run, no flash attention or checkpointing; `device` is resident memory: "
        f"a {CPU_BASELINE_MIB:.0f} MiB Python+numpy baseline + arrays, activations x{CPU_TEMPORARIES_FACTOR} "
        f"for numpy temporaries (calibrated on the demo trainer: 61 MiB at micro-batch 8, 120 MiB at 32)")
    return g


def gib(x: float) -> float:
    return x / GIB


def ceil_gib(x: float) -> float:
    return math.ceil(x / GIB * 100) / 100
