"""Compute: FLOPs per token and training time on a GPU kind at a documented MFU.

This module holds THE utilisation table of gpuledger (`BASE_MFU` × `KIND_FACTOR` for GPUs,
`CPU_TRAINING_EFFICIENCY` for the local CPU launcher); the planner and the estimator both read it,
and no other module keeps a copy or a fallback."""

from __future__ import annotations

from gpuledger.models import ModelConfig, count_params, layer_linears

#: Model FLOPs utilisation by GPU kind and method: achieved dense FLOP/s / catalog peak.
#: Sources and reasoning:
#: - full fine-tuning / pre-training of 7B-70B models with FSDP or Megatron on A100/H100 reaches
#:   40-55% (Chowdhery et al. 2022 PaLM Table 3: 46% on TPUv4; Meta Llama-3 paper §3.3.2:
#:   38-43% BF16 MFU on H100 at scale; torchtitan Llama-3-8B on H100: ~40%); single-node
#:   fine-tuning with HF Trainer sits lower: 0.40 on A100/H100;
#: - LoRA: the frozen base skips weight gradients (4P instead of 6P FLOPs) but runs the same
#:   kernels; small adapter matmuls and dropout add overhead: 0.35;
#: - QLoRA: dequantising NF4 weights before each matmul costs 30-40% of throughput over LoRA
#:   (Dettmers et al. 2023 §5 / Unsloth and HF benchmarks): 0.25;
#: - GRPO without vLLM: generation is memory-bound decode (<10% MFU) and takes most of the
#:   wall-clock (TRL docs: "generation is the bottleneck"): 0.15 overall;
#: - PPO: GRPO's generation bottleneck plus a critic (value model) trained and a reward model run
#:   on every batch, smaller matmuls below the policy's rate: 0.12 (0.8 x GRPO; a stated assumption,
#:   not a measurement; the planner replaces it with a rate calibrated on measured runs when any);
#: - inference (prefill + decode mix): 0.25.
#: Newer/bigger GPUs achieve a lower fraction of a much higher peak (Hopper's fp16 rate is 3.2x
#: A100's but HBM only 1.6x): Hopper/Blackwell x0.85; consumer/inference cards (L4, A10G, T4,
#: RTX4090) are clock/power-limited below datasheet peaks under sustained load: x0.8.
BASE_MFU = {"full": 0.40, "lora": 0.35, "qlora": 0.25, "grpo": 0.15, "ppo": 0.12, "inference": 0.25}
KIND_FACTOR = {"H100": 0.85, "H200": 0.85, "B200": 0.8, "L4": 0.8, "A10G": 0.8, "A10": 0.8, "T4": 0.8,
               "RTX4090": 0.8, "V100": 0.9}


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


def default_mfu(accelerator: str, method: str) -> float:
    """Returns the assumed model FLOPs utilisation for a GPU kind and method (see BASE_MFU)."""
    from gpuledger.catalog import normalize_accelerator

    if method not in BASE_MFU:
        raise ValueError(f"unknown method {method!r} (one of {', '.join(BASE_MFU)})")
    kind = normalize_accelerator(accelerator)
    return round(BASE_MFU[method] * KIND_FACTOR.get(kind, 1.0), 4)


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
    counts, tied or not), and only the routed experts of an MoE layer."""
    pc = count_params(cfg)
    d = cfg.hidden_size
    active = pc.non_embedding + cfg.vocab_size * d
    if cfg.num_experts > 1:
        expert = sum(lin.weight_params for lin in layer_linears(cfg) if lin.count > 1)
        active -= int(cfg.num_layers * expert * (1 - cfg.experts_per_token / cfg.num_experts))
    return active
