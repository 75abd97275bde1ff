"""The memory phases of a training step beside forward and backward: an evaluation between steps and a
GRPO/PPO rollout on the training GPU (their components; `training.training_breakdown` takes the maximum)."""

from __future__ import annotations

from gpuledger.estimate.memory import (
    GIB,
    MemoryBreakdown,
    _act_bytes,
    eval_loss_bytes_per_token,
    kv_cache_bytes_per_token,
)
from gpuledger.estimate.workload import Workload, memory_habits
from gpuledger.models import ModelConfig

#: Sequences per GPU of an evaluation when the run evaluates (`eval_steps`) without saying its batch:
#: Transformers' TrainingArguments (and TRL's configs) `per_device_eval_batch_size` = 8; torchtune's and
#: lit-gpt's validation loops reuse the training micro-batch.
HF_EVAL_BATCH = 8


def eval_batch_of(w: Workload) -> int | None:
    """Returns the sequences per GPU of the run's evaluation: `eval_batch`, else (the run evaluates:
    `eval_steps` given) the framework's default, else None (no eval phase)."""
    if w.eval_batch:
        return w.eval_batch
    if w.eval_steps is None:
        return None
    return HF_EVAL_BATCH if memory_habits(w.framework) == "hf" else w.micro_batch


def eval_phase(w: Workload, cfg: ModelConfig, fw: str, eval_b: int, static: dict, split: int,
               m: MemoryBreakdown) -> dict:
    """Returns the components of a no-grad evaluation step of `eval_b` sequences of `w.seq_len` tokens:
    the model's states (the gradients were set to None by the last step's zero_grad, Trainer's habit), one
    block's working set (the no-grad forward frees each block's intermediates: the prefill working set
    `inference_breakdown` counts) and the eval logits and loss (`eval_loss_bytes_per_token`), split over the
    sequence- and tensor-parallel ranks like the training step's."""
    a, d = _act_bytes(w.precision), cfg.hidden_size
    tokens = eval_b * w.seq_len
    act = tokens * (4 * d + (3 if cfg.gated_mlp else 2) * cfg.mlp_width_per_token) * a
    if not w.flash_attn:
        act += eval_b * cfg.num_heads * w.seq_len * w.seq_len * (4 + a)
    logits = tokens * eval_loss_bytes_per_token(cfg, w.precision, fw if fw != "torchtune" else w.framework,
                                                w.chunked_ce, w.fused_ce)
    said = "eval_batch" if w.eval_batch else ("per_device_eval_batch_size's default" if eval_b == HF_EVAL_BATCH
                                              and not w.eval_batch and memory_habits(w.framework) == "hf"
                                              else "the training micro-batch")
    m.assumptions.append(f"evaluation of {eval_b} x {w.seq_len} tokens per GPU between steps ({said}): "
                         "its no-grad peak is the eval phase")
    return dict(static, activations=act / split, logits=logits / split)


def generation_phase(w: Workload, cfg: ModelConfig, n_seq: int, seq: int, static: dict,
                     m: MemoryBreakdown) -> dict | None:
    """Returns the rollout phase's components on the training GPU, None when generation runs elsewhere.

    hf: `model.generate` keeps the KV cache of every sequence (2·layers·kv_heads·head_dim per token,
    Kwon et al. 2023) and fp32 next-token logits; vllm_colocate: TRL's colocate mode starts a vLLM
    engine in the training process that pre-allocates `vllm_gpu_memory_utilization` x the GPU's memory
    for its own weight copy and KV cache (vLLM docs, gpu_memory_utilization), for the whole run; with
    `vllm_sleep` (vLLM sleep mode: TRL's vllm_enable_sleep_mode, verl's hybrid engine with
    free_cache_engine, its default) that share is released while the trainer steps, so it is a phase
    of its own beside the trainer's states instead of a reservation on top of every phase;
    vllm_server: `trl vllm-serve` on other GPUs, nothing here.
    """
    if w.generation == "vllm_server":
        m.notes["kv_cache"] = "generation on a separate vLLM server (not on this GPU)"
        return None
    if w.generation == "vllm_colocate":
        gpu_gib = w.gpu_memory_gib or 80.0
        if w.gpu_memory_gib is None:
            m.assumptions.append("vllm_colocate without gpu_memory_gib: an 80 GiB GPU assumed for vLLM's share")
        share = w.vllm_gpu_memory_utilization * gpu_gib * GIB
        if w.vllm_sleep:
            m.notes["kv_cache"] = (f"vLLM colocated with sleep mode: {w.vllm_gpu_memory_utilization:.0%} of {gpu_gib:g} "
                                   "GiB (weights copy + KV cache) during the rollouts, released while training")
            return dict(static, kv_cache=share)
        m.notes["kv_cache"] = (f"vLLM colocated: {w.vllm_gpu_memory_utilization:.0%} of {gpu_gib:g} GiB "
                               "pre-allocated (weights copy + KV cache), held in every phase")
        m.extra_device += share
        return None
    kv = n_seq * seq * kv_cache_bytes_per_token(cfg, "fp32" if w.precision == "fp32" else "bf16")
    m.notes["kv_cache"] = "rollout KV cache of HF generate (freed before the training step)"
    return dict(static, kv_cache=kv, logits=n_seq * cfg.vocab_size * 4 * 2)
