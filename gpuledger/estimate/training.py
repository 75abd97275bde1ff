"""Per-GPU memory of a training step, as the maximum over its phases.

Tensors of a step do not all coexist. The phases, each a sum of components:
- `load`: the weights as they are loaded (a quantised base passes through 16 bit tensor by tensor);
- `forward_end`: weights, optimizer states, every saved activation and the logits/loss tensors at
  the start of backward (plus the gradients when accumulation keeps them across micro-batches); under
  checkpointing the saved activations are the block inputs only: the loss's backward runs (and frees its
  fp32 tensors) before any block is recomputed;
- `backward_recompute` (checkpointing): the last block recomputed and its backward's working gradients
  next to every block input, the logits gone;
- `backward_end`: the first block's backward: its activations (recomputed under checkpointing) next to
  every gradient (none with optimizer-in-backward);
- `optimizer_step`: gradients + states + the optimizer's temporaries;
- `generation` (GRPO/PPO): the rollout's KV cache and sampling logits next to the models.
With checkpointing or without, backward frees activations block by block while it allocates the
gradients of the same blocks, so max(forward_end, backward_end) bounds the backward pass (a linear
trade between the two has its maximum at an end). Bytes throughout.
"""

from __future__ import annotations

from gpuledger.estimate.memory import (
    CUDA_CONTEXT_GIB,
    DEFAULT_LORA_DROPOUT,
    FSDP1_ALLOCATOR_OVERHEAD,
    FSDP1_FRAMEWORKS,
    GIB,
    GRPO_DEFAULT_GROUP,
    NCCL_GIB,
    SHARDED_ALLOCATOR_OVERHEAD,
    WEIGHT_BYTES,
    MemoryBreakdown,
    _act_bytes,
    _frozen_weight_bytes,
    _optimizer_state_bytes,
    _resid_bytes,
    _seq_lengths,
    attention_score_bytes_per_token,
    layer_activation_bytes_per_token,
    loss_bytes_per_token,
)
from gpuledger.estimate.phases import eval_batch_of, eval_phase, generation_phase
from gpuledger.estimate.workload import Workload, memory_habits
from gpuledger.models import ModelConfig, count_params, layer_linears, load_config, lora_linears
from gpuledger.vocabulary import RL_METHODS

#: DeepSpeed's own defaults when no HF "auto" applies: reduce_bucket_size = allgather_bucket_size =
#: 5e8 elements (deepspeed/runtime/zero/config.py). HF's "auto" sets hidden^2 (transformers
#: integrations/deepspeed.py); `zero_bucket_elems` overrides.
HF_AUTO_BUCKET = "hidden^2"
#: Blocks whose saved tensors stay on the GPU with activation offloading: the block being computed
#: and the one whose copy to/from the host is in flight (torchtune OffloadActivations overlaps the
#: transfer of one layer with the compute of the next).
OFFLOAD_RESIDENT_BLOCKS = 2
PHASES = ("load", "forward_end", "backward_recompute", "backward_end", "optimizer_step", "generation", "eval")


def _sharding(w: Workload, m: MemoryBreakdown, dp: int | None = None) -> str:
    """Returns the data-parallel sharding over the `dp` replicas (default: every GPU is one)."""
    dp = w.gpus if dp is None else dp
    sharding = w.sharding
    if dp > 1 and sharding == "none":
        sharding = "ddp"
        m.assumptions.append(f"{dp} data-parallel replicas with sharding none: assumed DDP (a full replica each)")
    if dp == 1 and sharding != "none":
        m.assumptions.append(f"sharding {sharding} over 1 data-parallel replica divides nothing")
    return sharding


def _optimizer_in_bwd(w: Workload) -> bool:
    """Returns whether the optimizer steps inside backward: the option, else torchtune's habit (its
    single-device full fine-tuning configs pair paged bitsandbytes optimizers with optimizer_in_bwd)."""
    if w.optimizer_in_bwd is not None:
        return w.optimizer_in_bwd
    return memory_habits(w.framework) == "torchtune" and w.method == "full" and w.gpus == 1 and w.optimizer.startswith("paged")


#: bitsandbytes pages an optimizer state only for tensors of more than 1e5 elements
#: (bitsandbytes/optim/optimizer.py `get_state_buffer`); smaller ones stay ordinary device tensors.
PAGED_MIN_NUMEL = 1e5


def _paged_fraction(w: Workload, cfg: ModelConfig, lora_lins: list, head_targets: list[str]) -> float:
    """Returns the share of the optimizer states a paged bitsandbytes optimizer keeps in CUDA unified
    memory (cudaMallocManaged via `F.get_paged`): outside PyTorch's allocator, resident on the GPU
    while there is room and evicted to the host under pressure, so it never causes an OOM."""
    if not w.optimizer.startswith("paged"):
        return 0.0
    if w.method not in ("lora", "qlora"):
        return 1.0
    r, d, vocab = w.lora_r, cfg.hidden_size, cfg.vocab_size
    mats = [(r * lin.d_in, lin.count * cfg.num_layers) for lin in lora_lins]
    mats += [(r * lin.d_out, lin.count * cfg.num_layers) for lin in lora_lins]
    for _ in head_targets:
        mats += [(r * d, 1), (r * vocab, 1)]
    total = sum(n * c for n, c in mats)
    return sum(n * c for n, c in mats if n > PAGED_MIN_NUMEL) / total if total else 0.0


def _foreach_temp(w: Workload, state_b: int, trainable: float, in_bwd: bool) -> float:
    """Returns the optimizer step's temporaries. torch.optim.AdamW's default foreach path on CUDA
    (torch/optim/adamw.py `_multi_tensor_adamw`) builds `exp_avg_sq_sqrt = _foreach_sqrt(...)`, one
    tensor per state, before `_foreach_addcdiv_`: one more state-sized copy. torchtune's configs set
    `fused: True` (one kernel per group, no copy); bitsandbytes 8-bit optimizers update per tensor."""
    if w.optimizer != "adamw" or memory_habits(w.framework) == "torchtune" or in_bwd:
        return 0.0
    return trainable * state_b


#: The pre-training stacks that keep fp32 master parameters under 16-bit or fp8 compute.
TUNED_MASTER_FRAMEWORKS = ("torchtitan", "megatron", "nemo", "llm-foundry", "nanotron")


def _tuned_master(w: Workload, sharding: str) -> str:
    """Returns how a tuned pre-training stack stores a full fine-tune / pre-train run in bf16, fp16 or
    fp8: "fsdp" (torchtitan, llm-foundry, nanotron, or Megatron/NeMo under FSDP: fp32 sharded
    parameters, 16-bit or fp8 compute copies gathered per block), "distopt" (Megatron/NeMo's
    distributed optimizer), or "" (not such a run: the precision means what it says)."""
    if w.method != "full" or w.framework not in TUNED_MASTER_FRAMEWORKS or w.precision not in ("bf16", "fp16", "fp8"):
        return ""
    if w.framework in ("megatron", "nemo") and sharding not in ("fsdp", "zero3"):
        return "distopt"
    return "fsdp"


def _tuned_states(w: Workload, total: int, master: str, cfg: ModelConfig, m: MemoryBreakdown):
    """Returns (weights, gradients, optimizer states, weight bytes, state bytes) of a tuned stack's
    full run, unsharded (the sharding step divides them).

    fsdp: torchtitan's FSDP2 `MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)` over a
    model built in fp32 (torchtitan config `mixed_precision_param` bfloat16, `mixed_precision_reduce`
    float32; llm-foundry's FSDP and nanotron likewise keep fp32 sharded parameters): fp32 parameters
    (4 B), fp32 gradients (4 B), AdamW moments in fp32 (8 B): 16 B per parameter, sharded; no autocast
    cache (the compute copies are the all-gathered blocks, counted as buffers). fp8 (torchao float8)
    keeps the same storage and casts per matmul.
    distopt: Megatron-LM's distributed optimizer with bf16 parameters and fp32 gradient buffers
    (Megatron-LM docs, "Distributed Optimizer": 6 + 12/d bytes per parameter): 2 B parameters and
    4 B main gradients in every data-parallel rank, the fp32 main parameters and both moments (12 B)
    sharded (`_sharding` divides the optimizer only)."""
    if master == "distopt":
        weights, grads, opt = total * 2.0, total * 4.0, total * 4.0 + _optimizer_state_bytes(w.optimizer, 4, total, cfg)
        m.notes["weights"] = f"{total:,} params x 2 B (bf16 model parameters, every data-parallel rank)"
        m.notes["gradients"] = "fp32 main-gradient buffer (Megatron: accumulate and all-reduce in fp32)"
        m.notes["optimizer"] = f"fp32 main parameters + {w.optimizer} states, sharded over data-parallel ranks"
        return weights, grads, opt, 2, 4
    weights, grads, opt = total * 4.0, total * 4.0, _optimizer_state_bytes(w.optimizer, 4, total, cfg)
    m.notes["weights"] = f"{total:,} params x 4 B (fp32 sharded parameters; {w.precision} compute copies per block)"
    m.notes["gradients"] = "fp32 gradient per parameter (FSDP2 reduce_dtype float32)"
    m.notes["optimizer"] = f"{w.optimizer} states in fp32"
    return weights, grads, opt, 4, 4


def training_breakdown(w: Workload, cfg: ModelConfig, total: int, m: MemoryBreakdown) -> MemoryBreakdown:
    p = w.precision
    # tensor x pipeline parallel: each GPU holds 1/(tp x pp) of the model (Megatron: the layers split over
    # pipeline stages, every linear and the vocabulary split over tensor ranks); data-parallel sharding
    # (distributed optimizer, ZeRO, FSDP) divides over the dp = gpus / (tp x pp) replicas only
    tp, pp, sp = w.tensor_parallel, w.pipeline_parallel, w.sequence_parallel
    mp = tp * pp
    # data-parallel sharding (ZeRO, FSDP) spans the sequence-parallel ranks too (they hold the same model)
    gpus = w.gpus
    if w.method in RL_METHODS and w.generation == "vllm_server" and gpus > 1 and not w.rollout_gpu:
        # a split RL trial: vLLM holds `rollout_gpus` of them (unset: the larger share the time model tries,
        # half), the policy's states are sharded over the rest only (docs/rl.md)
        gpus -= min(gpus - 1, w.rollout_gpus or gpus // 2)
        m.assumptions.append(f"vllm_server: the trainer's states sharded over {gpus} of the {w.gpus} GPUs "
                             "(the others run vLLM)")
    n = max(1, gpus // mp)
    fw = memory_habits(w.framework)
    a, r_b = _act_bytes(p), _resid_bytes(p)
    mixed = p in ("bf16-mixed", "fp16-mixed", "fp8")
    sharding = _sharding(w, m, n)
    rl = w.method in RL_METHODS
    d, vocab = cfg.hidden_size, cfg.vocab_size
    pc = count_params(cfg)
    layer_params = (total - pc.embedding) / max(1, cfg.num_layers)
    # a GRPO/PPO policy trained with LoRA/QLoRA adapters (TRL's peft_config): the LoRA states, the frozen base
    policy = w.method if w.method in ("lora", "qlora") else (w.policy if rl else "full")
    lora_like = policy in ("lora", "qlora")
    targets = w.lora_targets.split(",") if w.lora_targets != "all-linear" else []

    # --- weights, gradients, optimizer states of the trained parameters ---
    lora_lins: list = []
    head_lora = 0
    base_p = p
    # Autocast mixed precision (HF Trainer bf16=True, Lightning "bf16-mixed", accelerate) keeps fp32
    # parameters and gradients (they are the master weights) and, during forward and backward, the
    # 16-bit copies autocast caches for every trainable leaf weight (torch.autocast cache_enabled,
    # PyTorch AMP docs). DeepSpeed ZeRO's bf16/fp16 mode keeps 16-bit params and grads and the fp32
    # master in the optimizer partition (Rajbhandari et al. 2020, §3: 2 + 2 + 12 B/param).
    autocast_params = mixed and not sharding.startswith("zero")
    autocast_cache = 0.0
    master = _tuned_master(w, sharding)
    if not lora_like and master:
        trainable = total
        weights, grads, opt, w_b, state_b = _tuned_states(w, total, master, cfg, m)
        quant_consts = 0.0
        frozen_elem = 2  # gathered / replicated in 16 bit
    elif not lora_like:
        trainable = total
        w_b = 4 if p == "fp32" or autocast_params else 2
        g_b = w_b
        # DeepSpeed's bf16 / fp16 modes (`bf16.enabled`, ZeRO 1-3) keep 16-bit parameters and gradients and,
        # in the optimizer's partition, fp32 master weights and fp32 moments whatever the model's dtype
        # (deepspeed/runtime/zero/stage_1_and_2.py `single_partition_of_fp32_groups`, stage3.py
        # `fp32_partitioned_groups_flat`): 2 + 2 + 12 B per parameter, as under mixed precision
        ds_master = sharding.startswith("zero") and p in ("bf16", "fp16")
        state_b = 2 if p in ("bf16", "fp16") and not ds_master else 4
        weights = total * w_b
        grads = trainable * g_b
        opt = _optimizer_state_bytes(w.optimizer, state_b, trainable, cfg)
        if (mixed and not autocast_params) or ds_master:
            opt += 4 * trainable  # fp32 master weights (Rajbhandari et al. 2020, ZeRO §3: 2+2+12 B/param)
        if autocast_params:
            autocast_cache = trainable * 2
        quant_consts = 0.0
        m.notes["weights"] = f"{total:,} params x {w_b} B ({'fp32' if w_b == 4 else '16-bit'})"
        m.notes["optimizer"] = (f"fp32 master weights + {w.optimizer} states in fp32 ({total:,} params"
                                + ("; DeepSpeed keeps them whatever the model's dtype)" if ds_master else ")")
                                if (mixed and not autocast_params) or ds_master
                                else f"{w.optimizer} states in {'fp32' if state_b == 4 else '16-bit'}")
        m.notes["gradients"] = f"{'fp32' if g_b == 4 else '16-bit'} gradient per trained parameter"
        frozen_elem = w_b
        if autocast_params and sharding == "fsdp" and n > 1:
            # FSDP's MixedPrecision (accelerate's FSDP plugin under bf16/fp16: param_dtype 16-bit) all-gathers
            # each unit in 16 bit from the fp32 shards, so the compute copies are the gathered units (buffers)
            # and autocast's weight cache holds nothing more
            frozen_elem, autocast_cache = 2, 0.0
    else:  # lora / qlora
        lora_lins = lora_linears(cfg, w.lora_targets)
        trainable = cfg.num_layers * sum(w.lora_r * (lin.d_in + lin.d_out) * lin.count for lin in lora_lins)
        # LoRA on the output head / the embedding (litgpt lora_head, PEFT target "lm_head"/"embed_tokens"):
        # A is r x d_in, B is d_out x r (Hu et al. 2021), so r·(d + vocab) each.
        for t in ("lm_head", "embed"):
            if t in targets:
                head_lora += w.lora_r * (d + vocab)
        trainable += head_lora
        if policy == "qlora" and p not in ("nf4", "int4", "int8", "fp8"):
            base_p = "nf4"
        quantised = base_p in ("nf4", "int4", "int8", "fp8")
        # prepare_model_for_kbit_training (PEFT) upcasts every non-quantised param to fp32
        # ... except for sharded QLoRA (FSDP / ZeRO-3): a flat parameter holds one dtype, so TRL skips
        # the upcast (`is_sharded_qlora`), the 4-bit weights are stored in 16-bit words
        # (bnb_4bit_quant_storage) and every other param and the adapters stay 16 bit (fsdp_qlora README:
        # "sharded and unsharded params will be stored in bf16").
        sharded_flat = sharding in ("fsdp", "zero3")
        other_b = 4 if (quantised and fw == "hf" and not sharded_flat) else (4 if p == "fp32" else 2)
        double_quant = w.double_quant if w.double_quant is not None else fw == "torchtune"
        weights, quant_consts = _frozen_weight_bytes(cfg, total, base_p, other_b, double_quant=double_quant)
        # adapters: PEFT keeps them in fp32 (autocast_adapter_dtype=True) under a 16-bit or quantised
        # base; lit-gpt/torchtune keep them in the model dtype (pure bf16 -> 16-bit states).
        adapter_fp32 = p == "fp32" or mixed or (fw == "hf" and not sharded_flat)
        ad_b = 4 if adapter_fp32 else 2
        weights += trainable * ad_b
        grads = trainable * ad_b
        ds_master = sharding.startswith("zero") and not adapter_fp32  # DeepSpeed: fp32 master + moments, as above
        state_b = ad_b if not (mixed or ds_master) else 4
        opt = _optimizer_state_bytes(w.optimizer, state_b, trainable, cfg)
        if (mixed or ds_master) and not adapter_fp32:
            opt += 4 * trainable
        m.notes["weights"] = (f"frozen base {base_p}" + (" + quantisation constants" if quant_consts else "")
                              + f"; {trainable:,} LoRA params (r={w.lora_r}, {w.lora_targets}) in "
                              + ("fp32" if ad_b == 4 else "16-bit"))
        m.notes["gradients"] = "LoRA adapters only"
        m.notes["optimizer"] = f"{w.optimizer} states of the adapters"
        frozen_elem = WEIGHT_BYTES[base_p] + (quant_consts / max(1, total))
    m.params_trainable = int(trainable)
    in_bwd = _optimizer_in_bwd(w)
    opt_temp = _foreach_temp(w, state_b, trainable, in_bwd)
    paged = opt * _paged_fraction(w, cfg, lora_lins, [t for t in ("lm_head", "embed") if t in targets])
    if paged:
        opt -= paged
        m.assumptions.append(f"paged optimizer: {paged / GIB:.2f} GiB of states in CUDA unified memory, outside "
                             "PyTorch's allocator and evicted to the host under pressure: not counted")

    # --- load transient: a quantised base is loaded tensor by tensor in 16 bit and quantised on the
    # GPU (transformers' bitsandbytes quantizer `create_quantized_param`; Params4bit.cuda quantises on
    # transfer): the largest 16-bit linear weight exists next to the already quantised ones.
    load_extra = 0.0
    if lora_like and base_p in ("nf4", "int4", "int8", "fp8"):
        load_extra = max((lin.d_in * lin.d_out for lin in layer_linears(cfg)), default=0) * 2

    # --- RL extra models ---
    extra_frozen = 0.0
    ref = w.ref_model
    if rl and ref == "auto":
        ref = "shared_base" if lora_like else "same_gpu"
    if rl:
        ref_b = 4 if (p == "fp32" or (mixed and fw == "hf")) else 2  # TRL loads the ref like the policy
        if ref == "same_gpu":
            extra_frozen += total * ref_b  # reference policy for the KL term
        reward_total = 0
        if w.reward_model:
            reward_total = count_params(load_config(w.reward_model)).total
        elif w.method == "ppo":
            reward_total = total
        extra_frozen += reward_total * ref_b
        critic_share = 1.0
        if w.method == "ppo":  # value model: trained; the policy's architecture (TRL PPOTrainer) unless critic_model
            if w.critic_model:
                critic_share = count_params(load_config(w.critic_model)).total / max(1, total)
            weights *= 1 + critic_share
            grads *= 1 + critic_share
            opt *= 1 + critic_share
            m.params_trainable = int(m.params_trainable * (1 + critic_share))
        ref_note = {"same_gpu": "reference model on the GPU", "offload": "reference model offloaded to CPU",
                    "shared_base": "reference = the frozen base with adapters disabled (no copy)",
                    "none": "no reference model (beta = 0)"}[ref]
        m.notes["weights"] += (f"; {ref_note}{'; + reward model' if reward_total else ''}"
                               f"{'; + value model' if w.method == 'ppo' else ''}")
        if w.method == "grpo" and not w.reward_model:
            m.assumptions.append("GRPO rewards from functions (no reward model); give reward_model to add one")

    # --- sharding: per-GPU share of states, plus buffers ---
    buffers = quant_consts
    if w.gpus > 1:
        m.extra_device += NCCL_GIB * GIB
    ckpt = w.grad_ckpt
    unsharded_weights = False
    root_grad = 0.0  # FSDP full fine-tune: the root unit's unsharded gradient at the end of backward
    if master == "distopt":
        opt /= n
        opt_temp /= n
        m.notes["buffers"] = "none beyond the main-gradient buffer (it is the all-reduce bucket)"
    elif sharding == "ddp":
        # DDP gradient buckets: a second copy of the trained grads (PyTorch DDP docs, gradient_as_bucket_view
        # False by default); frozen params have no bucket.
        buffers += grads
        m.notes["buffers"] = "DDP gradient buckets (one more copy of the trained gradients)"
    elif sharding in ("zero1", "zero2"):
        opt /= n
        opt_temp /= n
        if sharding == "zero2":
            grads /= n
        bucket = w.zero_bucket_elems or d * d
        # reduce bucket (gradients, 16 bit) + all-gather bucket (updated params): only trained params
        # travel, so a frozen base adds nothing (DeepSpeed partitions trainable params only).
        buffers += min(bucket, trainable) * 2 * 2
        m.notes["buffers"] = f"ZeRO reduce/all-gather buckets ({'hidden^2' if not w.zero_bucket_elems else bucket} elements)"
    elif sharding in ("zero3", "fsdp"):
        if n > 1:
            # (not for GRPO/PPO: the overhead multiplies every component, vLLM's preallocated pool too, which
            # record_stream does not fragment; they keep the sharded default)
            fsdp1 = sharding == "fsdp" and fw in FSDP1_FRAMEWORKS and not rl
            m.overhead = FSDP1_ALLOCATOR_OVERHEAD if fsdp1 else SHARDED_ALLOCATOR_OVERHEAD
            m.assumptions.append(f"{sharding} over {n} GPUs: reserved = allocated + {m.overhead:.0%} (units "
                                 "all-gathered and reduce-scattered on their own streams fragment the caching "
                                 "allocator" + ("; FSDP1 frees them with record_stream: llama-recipes' FSDP run "
                                                "measured reserved 1.27x its peak active)" if fsdp1 else ")"))
        if sharding == "fsdp" and lora_like and fw == "litgpt":
            # lit-gpt's FSDPStrategy checkpoints every Block (activation_checkpointing_policy={Block})
            # and puts frozen and LoRA params into one FlatParameter (use_orig_params=True), so FSDP
            # allocates gradients for all of them ("equivalent to not freezing", PyTorch FSDP docs),
            # and the blocks' post-backward reshard does not free the frozen flat parameters: the
            # resource tables show the 2-GPU peak at the 1-GPU peak for 1.3B/7B and Llama-2-13B OOM
            # on 2 x 40 GB but 35.6 GB on 4 GPUs.
            ckpt = True
            unsharded_weights = True
            grads = total * 2 / n
            m.assumptions.append("lit-gpt FSDP with LoRA: blocks checkpointed, flat parameters keep gradients "
                                 "for frozen weights (sharded) and stay unsharded after backward")
        else:
            weights /= n
            grads /= n
            opt /= n
            opt_temp /= n
            extra_frozen /= n
            # unsharded units live at once: the current and the prefetched decoder block (BACKWARD_PRE /
            # DeepSpeed prefetch) at their storage bytes (a 4-bit base is gathered 4-bit: FSDP QLoRA
            # shards Params4bit stored as bf16 words, bnb_4bit_quant_storage), one block's unsharded
            # gradient before reduce-scatter for trained params only, and for FSDP the root unit
            # (embeddings, final norm, lm_head, kept 16 bit), which stays unsharded through the step.
            root = pc.embedding * (4 if p == "fp32" else 2) if sharding == "fsdp" else 0
            block_grad = layer_params * (4 if p == "fp32" else 2) if not lora_like else 0
            if master:  # FSDP2 reduce_dtype fp32: the block's 16-bit gradient and its fp32 copy for reduce-scatter
                block_grad = layer_params * (2 + 4)
            buffers += 2 * layer_params * frozen_elem + root + block_grad
            if sharding == "fsdp" and not lora_like:
                # the root unit's (embeddings, lm_head) gradient stays unsharded until its post-backward
                # reduce-scatter, the last of the step: the lm_head's part from the start of backward, the
                # whole at the end, there with FSDP2's fp32 reduce_dtype copy beside it
                # (FSDP1, Transformers/accelerate and llama-recipes: one flat parameter of embeddings, final norm
                # and lm_head, its gradient the whole unit's; torchtitan's FSDP2 units the embedding and
                # [norm, output] apart, so one vocabulary matrix at a time with its fp32 reduce_dtype copy:
                # apply_fsdp in https://github.com/pytorch/torchtitan/blob/db82f8b4615d518060990c8f7c3b22b423b8997d/
                # torchtitan/models/llama3/infra/parallelize.py)
                root_grad = (vocab * d * (2 + 4)) if master else pc.embedding * (4 if p == "fp32" else 2)
            m.notes["buffers"] = ("all-gathered params of 2 blocks" + (" + 1 block's gradient" if block_grad else "")
                                  + (" + the unsharded root unit (embeddings, lm_head)" if root else ""))
    if quant_consts:
        m.notes["buffers"] = (m.notes.get("buffers", "") + "; " if m.notes.get("buffers") else "") + \
            f"{'NF4 absmax' if base_p == 'nf4' else 'quantisation'} constants"
    del unsharded_weights
    if mp > 1:
        weights, grads, opt, opt_temp, extra_frozen, buffers, autocast_cache = (
            x / mp for x in (weights, grads, opt, opt_temp, extra_frozen, buffers, autocast_cache))
        m.assumptions.append(f"tensor_parallel {tp} x pipeline_parallel {pp}: weights, gradients and optimizer "
                             f"states split {mp} ways before data-parallel sharding over {n}")
    if w.expert_parallel > 1 and cfg.num_experts > 1:
        # expert parallelism: each GPU keeps 1/ep of the routed experts (and their gradients and states)
        routed = cfg.moe_layers * sum(lin.params for lin in layer_linears(cfg) if lin.count > 1)
        keep = 1 - routed / total * (1 - 1 / w.expert_parallel)
        weights, grads, opt, opt_temp = (x * keep for x in (weights, grads, opt, opt_temp))
        m.assumptions.append(f"expert_parallel {w.expert_parallel}: each GPU holds 1/{w.expert_parallel} of the "
                             f"routed experts ({routed / total:.0%} of the parameters)")
    if w.offload != "none":
        # host memory holds what is offloaded; the GPU keeps what each step works on: the gathered blocks
        # (buffers) and, with optimizer offload, the 16-bit parameters and gradients
        opt, opt_temp = 0.0, 0.0
        m.notes["optimizer"] = m.notes.get("optimizer", "") + " (offloaded to CPU memory: not on the GPU)"
        if w.offload == "params":
            weights, grads = 0.0, 0.0
            m.notes["weights"] = m.notes.get("weights", "") + " (offloaded to CPU; gathered per block into buffers)"
            m.notes["gradients"] = m.notes.get("gradients", "") + " (offloaded to CPU per block)"
            if sharding not in ("fsdp", "zero3"):
                m.assumptions.append("offload params without fsdp/zero3 sharding: the gathered blocks are the "
                                     "whole model's per block (counted as two blocks, as FSDP/ZeRO-3 prefetch)")
                buffers += 2 * layer_params * frozen_elem
        m.assumptions.append(f"CPU offload ({w.offload}): host memory holds the offloaded state")

    # --- activations and logits ---
    if rl:
        prompt, completion = _seq_lengths(w)
        group = w.group_size or (GRPO_DEFAULT_GROUP if w.method == "grpo" else 1)
        # sequences per micro-step: micro_batch prompts x the group, or what the trainer says (TRL's
        # per_device_train_batch_size counts completions: micro-batches smaller than one group are usual)
        n_seq = w.micro_batch_sequences or w.micro_batch * group
        seq = prompt + completion
        if w.micro_batch_tokens:  # a token budget (verl use_dynamic_bsz): sequences packed up to it, no padding
            n_seq = w.micro_batch_tokens / seq
        logit_tokens = n_seq * completion  # TRL computes logits for completion tokens only (logits_to_keep)
        shape = (f"{w.micro_batch_tokens:,} tokens per micro-step packed (train.micro_batch_tokens: ~{n_seq:.1f} "
                 "sequences of the mean length)" if w.micro_batch_tokens
                 else f"{n_seq} sequence(s) per micro-step (train.micro_batch_sequences)" if w.micro_batch_sequences
                 else f"{w.micro_batch} prompt(s) x {group} completions")
        m.assumptions.append(f"{w.method.upper()}: {shape}, {prompt}+{completion} tokens; generation: {w.generation}")
    else:
        n_seq, seq = w.micro_batch, w.seq_len
        logit_tokens = n_seq * seq
    tokens = n_seq * seq
    dropout = w.lora_dropout if w.lora_dropout is not None else DEFAULT_LORA_DROPOUT[fw]
    # selective checkpointing keeps what no checkpointing keeps: Megatron's selective recompute
    # (Korthikanti et al. 2022 §4.2) recomputes only the attention core, which flash attention does not
    # save anyway; torchtitan's per-op policy saves less (every other matmul output), so this errs high
    per_layer = layer_activation_bytes_per_token(cfg, p, lora_lins=lora_lins, lora_r=w.lora_r, compiled=w.compile,
                                                 fused=w.framework in ("megatron", "nemo", "nanotron"),
                                                 lora_dropout=dropout > 0)
    if lora_like:
        m.assumptions.append(f"LoRA dropout {dropout:g}" + (" (the framework's default)" if w.lora_dropout is None else ""))
    if not w.flash_attn:
        per_layer += attention_score_bytes_per_token(cfg, p, seq)
    # the one block whose backward runs (recomputed first under checkpointing) and the residual stream's
    # working gradients: what a step holds of its activations when its last block's backward runs, next to
    # nearly every gradient
    block = tokens * (per_layer + 2 * d * a)
    if ckpt:
        # checkpoint each decoder block: its input stays, one block is recomputed at a time in backward
        kept = cfg.num_layers if not w.activation_offload else OFFLOAD_RESIDENT_BLOCKS
        act = tokens * (kept * d * r_b + per_layer)
        m.notes["activations"] = "gradient checkpointing per block: block inputs + one block recomputed"
    else:
        kept = cfg.num_layers if not w.activation_offload else OFFLOAD_RESIDENT_BLOCKS
        act = tokens * kept * per_layer
        m.notes["activations"] = ("every block's saved tensors (selective checkpointing: the attention core "
                                  "recomputed, which flash attention does not save)"
                                  if w.checkpointing_mode == "selective" else "every block's saved tensors (no checkpointing)")
    if w.activation_offload:
        m.notes["activations"] += f"; offloaded to CPU but {OFFLOAD_RESIDENT_BLOCKS} blocks in flight"
    m.notes["activations"] += (", flash attention (no seq^2 scores)" if w.flash_attn
                               else ", materialised attention scores (seq^2 per head)")
    if w.compile:
        m.notes["activations"] += ", torch.compile (pointwise outputs recomputed)"
    act += tokens * (d * r_b + d * a)  # final norm input + lm_head input
    act += tokens * 2 * d * a  # backward working gradients of the residual stream
    if head_lora and "lm_head" in targets:
        act += logit_tokens * w.lora_r * a  # lm_head LoRA A-output
    # the tuned pre-training stacks compute the loss unchunked (torchtitan `cross_entropy_loss`:
    # F.cross_entropy(pred.flatten(0, 1).float(), ...); Megatron's vocab-parallel cross-entropy upcasts
    # the logits to fp32): hf's unchunked path, not torchtune's chunked habit
    logits = logit_tokens * loss_bytes_per_token(cfg, p, fw if fw != "torchtune" else w.framework, w.chunked_ce,
                                                 w.compile, fused=w.fused_ce)
    if rl:
        logits += logit_tokens * a * vocab  # logits / temperature copy (TRL)
        if w.method == "ppo":  # the value model's forward/backward on the same tokens, at its size
            critic = 1 + (count_params(load_config(w.critic_model)).total / max(1, total) if w.critic_model else 1.0)
            act, block = act * critic, block * critic
    chunked = w.chunked_ce if w.chunked_ce is not None else w.framework in ("litgpt", "torchtune")
    m.notes["logits"] = (f"[{logit_tokens:,} tokens x {vocab:,} vocab] logits + loss ({w.framework}, "
                         f"{'fused linear' if w.fused_ce else 'chunked' if chunked else 'unchunked'} cross-entropy"
                         + (": one chunk of logits at a time" if w.fused_ce else "") + ")")
    if sp > 1:
        # sequence / context parallel: each GPU keeps the activations and logits of seq / sp tokens of every
        # sequence (DeepSpeed-Ulysses all-to-alls heads around attention; ring attention passes K/V blocks)
        act, block = act / sp, block / sp
        logits /= sp
        m.notes["activations"] += f"; sequence split over {sp} GPUs (sequence parallel)"
    if tp > 1:
        # Megatron sequence parallelism (on with tensor parallelism in NeMo's recipes, Korthikanti et al. 2022
        # §4.2.2): every saved activation split over the tensor ranks; vocab-parallel cross-entropy: each
        # rank holds V / tp of the logits and their fp32 softmax
        act, block = act / tp, block / tp
        logits /= tp
        m.notes["logits"] += f"; vocab-parallel over {tp} tensor ranks"
        m.notes["activations"] += f"; sequence parallel over {tp} tensor ranks"
    if pp > 1:
        # 1F1B: the first stage keeps pp micro-batches of its 1/pp of the layers in flight (= one micro-batch
        # of the whole model's activations, Narayanan et al. 2021 §2.2); the last stage holds the logits
        # but one micro-batch of its layers: the peak GPU is the larger of the two
        logits = max(0.0, logits - act * (1 - 1 / pp))
        m.notes["logits"] += f"; only on the last of {pp} pipeline stages (the peak stage's extra)"

    # --- the phases ---
    accum = w.grad_accum if w.grad_accum is not None else (2 if fw == "litgpt" else 1)
    accum_grads = grads if accum > 1 and not in_bwd else 0.0
    # the output head's gradient (full fine-tuning) is allocated at the start of backward, next to the
    # logits' gradient
    # logits' gradient (under FSDP unsharded: the lm_head is in the root unit, reduce-scattered last)
    head_grad = 0.0 if lora_like or in_bwd else min(grads * (n if root_grad else 1), vocab * d * (
        4 if p == "fp32" else 2) / (n if sharding in ("zero2", "zero3") or (sharding == "fsdp" and not root_grad) else 1))
    live_grads = 0.0 if in_bwd else grads
    if in_bwd:
        # torchtune optimizer_in_bwd: a post-accumulate-grad hook steps and frees each parameter's
        # gradient, so at most the largest single gradient exists.
        live_grads = min(grads, max(vocab * d, max((lin.weight_params for lin in layer_linears(cfg)), default=0))
                         * (4 if p == "fp32" else 2))
        m.notes["gradients"] += " (optimizer in backward: freed per parameter)"
    comps = {
        "load": dict(weights=weights + extra_frozen + load_extra, buffers=quant_consts),
        "forward_end": dict(weights=weights + extra_frozen + autocast_cache / (
                                n if sharding in ("zero3", "fsdp") else 1),
                            optimizer=opt, buffers=buffers, activations=act - (block if ckpt else 0.0),
                            logits=logits,
                            # Megatron's main-gradient buffer is allocated once and lives through the step
                            gradients=grads if master == "distopt" else max(accum_grads, head_grad)),
        # checkpointing: the first block recomputed after the loss's backward has freed the logits and their
        # gradients (the loss's fp32 tensors and a recomputed block never coexist)
        "backward_recompute": dict(weights=weights + extra_frozen + autocast_cache / (
                                       n if sharding in ("zero3", "fsdp") else 1),
                                   optimizer=opt, buffers=buffers, activations=act,
                                   gradients=grads if master == "distopt" else max(accum_grads, head_grad)),
        # the first block's backward (recomputed first under checkpointing): its activations next to every
        # gradient but its own
        "backward_end": dict(weights=weights + extra_frozen, optimizer=opt, buffers=buffers,
                             gradients=live_grads + (0.0 if in_bwd else root_grad), activations=block),
        "optimizer_step": dict(weights=weights + extra_frozen, optimizer=opt, optimizer_temporaries=opt_temp,
                               buffers=buffers, gradients=0.0 if in_bwd else grads),
    }
    if not ckpt:
        del comps["backward_recompute"]  # every block's tensors are in forward_end already
    eval_b = eval_batch_of(w)
    if eval_b and not rl:
        comps["eval"] = eval_phase(w, cfg, fw, eval_b, dict(weights=weights + extra_frozen, optimizer=opt,
                                                              buffers=buffers), sp * tp, m)
    if rl:
        gen = generation_phase(w, cfg, n_seq, seq, dict(weights=weights + extra_frozen, optimizer=opt, buffers=buffers), m)
        if gen is not None:
            comps["generation"] = gen
    m.states = {"weights": weights + extra_frozen, "gradients": grads, "optimizer": opt}
    if master == "distopt":
        # Megatron's parameter and main-gradient buffers are allocated once, contiguous, for the whole run:
        # the caching allocator's fragmentation concerns what comes and goes (activations, logits, temporaries)
        static = weights + grads
        peak_alloc = sum(comps[max(comps, key=lambda k: sum(comps[k].values()))].values())
        if peak_alloc > 0:
            m.overhead = m.overhead * max(0.0, 1 - static / peak_alloc)
    phases = {k: sum(v.values()) for k, v in comps.items()}
    peak = max(phases, key=lambda k: (phases[k], -PHASES.index(k)))
    m.phases = phases
    m.peak_phase = peak
    at = comps[peak]
    if ckpt and peak == "forward_end":
        m.notes["activations"] = m.notes["activations"].replace(
            "block inputs + one block recomputed", "block inputs (the loss's backward runs before a block is recomputed)")
    elif ckpt and peak == "backward_end":
        m.notes["activations"] = m.notes["activations"].replace(
            "block inputs + one block recomputed", "the first block recomputed for its backward, next to every gradient")
    if peak == "eval":
        m.notes["activations"] = f"evaluation ({eval_b} x {w.seq_len} tokens, no grad): one block's working set"
        m.notes["logits"] = f"evaluation logits + loss of {eval_b * w.seq_len:,} tokens x {vocab:,} vocab (no grad)"
        m.notes["gradients"] = "none at evaluation (set to None by the last step)"
    for attr in ("weights", "gradients", "optimizer", "optimizer_temporaries", "activations", "logits", "kv_cache",
                 "buffers"):
        setattr(m, attr, at.get(attr, 0.0))
    m.notes["optimizer_temporaries"] = (
        f"foreach AdamW's sqrt(v) copy, {state_b} B per trained parameter, during the step" if opt_temp
        else "none (fused/8-bit/in-backward optimizer, or not at this phase)")
    m.extra_device += CUDA_CONTEXT_GIB * GIB
    return m
