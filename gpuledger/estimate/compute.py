"""Compute: FLOPs per token; the time of the methods the step model of `throughput.py` does not
cover (GRPO/PPO rollouts, serving benchmarks) at a documented utilisation; the local CPU launcher's
rate.

Training time on GPUs (full, LoRA, QLoRA) comes from `throughput.py` alone (`gpuledger.estimate.
train_time_s`, which the planner and `estimate --tokens` both call). This module holds the two
other rates, each used in one place: `ROLLOUT_MFU` for generation-bound methods and
`CPU_TRAINING_EFFICIENCY` for the numpy demo trainer on the local CPU."""

from __future__ import annotations

from gpuledger.models import ModelConfig, count_params, layer_linears

#: Model FLOPs utilisation of the methods whose wall-clock is dominated by generation, which the
#: training-step model does not model: achieved FLOP/s (all FLOPs counted as training FLOPs of the
#: policy) / the catalog's dense peak.
#: - GRPO without vLLM: generation is memory-bound decode (<10% MFU) and takes most of the
#:   wall-clock (TRL docs: "generation is the bottleneck"): 0.15 overall;
#: - PPO: GRPO's generation bottleneck plus a critic (value model) trained and a reward model run
#:   on every batch, smaller matmuls below the policy's rate: 0.12 (0.8 x GRPO; a stated assumption,
#:   not a measurement; the planner replaces it with a rate calibrated on measured runs when any);
#: - inference (prefill + decode mix of a serving benchmark): 0.25.
#: Newer/bigger GPUs achieve a lower fraction of a much higher peak (Hopper's fp16 rate is 3.2x
#: A100's but HBM only 1.6x): Hopper/Blackwell x0.85; consumer/inference cards (L4, A10G, T4,
#: RTX4090) are clock/power-limited below datasheet peaks under sustained load: x0.8.
ROLLOUT_MFU = {"grpo": 0.15, "ppo": 0.12, "inference": 0.25}
ROLLOUT_KIND_FACTOR = {"H100": 0.85, "H200": 0.85, "B200": 0.8, "L4": 0.8, "A10G": 0.8, "A10": 0.8, "T4": 0.8,
                       "RTX4090": 0.8, "V100": 0.9}
#: Multi-GPU throughput of a rollout method relative to GPUs x one GPU's (gradient all-reduce for
#: DDP; parameter all-gather + reduce-scatter for FSDP/ZeRO-3 around the policy update), in a node.
ROLLOUT_SCALING = {"none": 1.0, "ddp": 0.90, "zero1": 0.90, "zero2": 0.88, "zero3": 0.85, "fsdp": 0.85}


#: Local launcher (numpy on the CPU): achieved training FLOP/s / one core's measured float32 matmul
#: rate (`gpuledger.inputs.machine`). Calibrated against `gpuledger/trainers/demo_lora.py` (model
#: `gpuledger/demo-char-gpt`, one BLAS thread) on a 2-core machine: r=16/B=8 took 7.7 s of CPU for
#: 124.9 GFLOP (estimator), r=4/B=32 8.6 s for 95.9 GFLOP, against a 92.6 GFLOP/s one-core matmul
#: probe: 0.175 and 0.12 (Python per-op overhead on tiny matrices, evaluation passes, start-up). The
#: 12-trial demo sweep (196,608 tokens each, 2 at a time on 2 cores) measured 17.7-23.2 s per trial
#: (agent wall-clock incl. interpreter start, base load and evaluations) against 15.8 s planned at
#: 0.15, i.e. 0.15 x 12.8 / 17.9 = 0.107 on the compute part: 0.11. Once a sweep has run, the planner
#: calibrates this on the measured runs instead (gpuledger/plan/throughput_calibration.py).
CPU_TRAINING_EFFICIENCY = 0.11


def rollout_mfu(accelerator: str, method: str) -> float:
    """Returns the assumed utilisation of a generation-bound method on a GPU kind (see ROLLOUT_MFU)."""
    from gpuledger.catalog import normalize_accelerator

    if method not in ROLLOUT_MFU:
        raise ValueError(f"no rollout rate for method {method!r} (one of {', '.join(ROLLOUT_MFU)})")
    return round(ROLLOUT_MFU[method] * ROLLOUT_KIND_FACTOR.get(normalize_accelerator(accelerator), 1.0), 4)


def rollout_time_s(flops: float, accelerator: str, gpus: int, method: str, precision: str, sharding: str) -> float:
    """Returns seconds of a generation-bound method: FLOPs / (GPUs x dense peak at `precision` x
    ROLLOUT_MFU x ROLLOUT_SCALING[sharding] on more than one GPU)."""
    from gpuledger.catalog import gpu_kinds, normalize_accelerator

    kind = gpu_kinds()[normalize_accelerator(accelerator)]
    eff = ROLLOUT_SCALING.get(sharding, ROLLOUT_SCALING["fsdp"]) if gpus > 1 else 1.0
    return flops / (gpus * kind.peak_tflops(precision) * 1e12 * rollout_mfu(accelerator, method) * eff)


def cpu_compute_s(flops: float, matmul_gflops_one_core: float) -> float:
    """Returns seconds of the numpy demo trainer on one core: FLOPs / (the core's measured float32
    matmul rate x CPU_TRAINING_EFFICIENCY)."""
    return flops / (matmul_gflops_one_core * 1e9 * CPU_TRAINING_EFFICIENCY)


def attention_flops_per_token(cfg: ModelConfig, seq: int) -> float:
    """Returns forward attention FLOPs per token: QK^T and AV, 2 matmuls x 2 FLOPs x heads x head_dim
    x seq/2 average causal context (Kaplan et al. 2020 Table 1: 2·n_layer·n_ctx·d_attn, causal half)."""
    return 2 * 2 * cfg.num_layers * cfg.num_heads * cfg.head_dim * seq / 2


def flops_per_token(cfg: ModelConfig, params_total: int, params_active: int, method: str, seq: int,
                    grad_ckpt: bool, params_trainable: int = 0) -> float:
    """Returns training (or inference) FLOPs per token.

    Dense matmul FLOPs are 2 per parameter forward, 4 backward (activation and weight gradients;
    Kaplan et al. 2020; Narayanan et al. 2021 "6·P"); full recompute adds one more forward
    (8·P, Korthikanti et al. 2022). A frozen base (LoRA/QLoRA) skips weight gradients: 2P forward +
    2P activation-gradient (+2P forward again with checkpointing), plus 6 per adapter param.
    Embedding lookups cost nothing; the lm_head counts (it is in params_active).
    """
    attn = attention_flops_per_token(cfg, seq)
    fwd = 2 * params_active + attn
    if method == "inference":
        return fwd
    if method in ("lora", "qlora"):
        per = fwd + fwd + (fwd if grad_ckpt else 0) + 6 * params_trainable
        return per
    per = 3 * fwd + (fwd if grad_ckpt else 0)
    return per


def active_params(cfg: ModelConfig) -> int:
    """Returns the parameters a token's matmuls touch: all but input embeddings (the lm_head
    counts, tied or not) and a multimodal checkpoint's vision tower, and only the routed experts of an
    MoE layer."""
    pc = count_params(cfg)
    d = cfg.hidden_size
    active = pc.language - pc.embedding + cfg.vocab_size * d  # a vision tower is not run by a text step
    if cfg.num_experts > 1:
        expert = sum(lin.weight_params for lin in layer_linears(cfg) if lin.count > 1)
        active -= int(cfg.moe_layers * expert * (1 - cfg.experts_per_token / cfg.num_experts))
    return active
