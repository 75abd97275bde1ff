"""Estimation: per-GPU memory by component, FLOPs per token, training time. Pure functions.

`estimate(Workload(...)) -> Estimate`; `train_time_s(...)`: THE compute time of a workload on a GPU
kind, which `estimate --tokens` and the planner both call (the step model of `throughput.py` via
`training_step(...)`; generation-bound methods at `compute.rollout_time_s`);
`kv_cache_bytes_per_token(cfg, kv_precision)`. Memory physics in `memory.py` (components),
`training.py` (phases of a training step) and `breakdown.py` (`memory_breakdown`: which shape a
workload takes); compute in `compute.py`; `calibration.py` fits measured memory to the estimate;
`inference.py` step costs of serving engines; `workload.py` the `Workload` options.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from gpuledger.estimate.breakdown import memory_breakdown
from gpuledger.estimate.compute import (
    CPU_TRAINING_EFFICIENCY,
    ROLLOUT_MFU,
    active_params,
    attention_flops_per_token,
    cpu_compute_s,
    flops_per_token,
    rollout_time_s,
)
from gpuledger.estimate.memory import (
    GIB,
    MemoryBreakdown,
    kv_cache_bytes_per_token,
    layer_activation_bytes_per_token,
)
from gpuledger.estimate.throughput import (
    ModelShape,
    StepTime,
    TrainSetup,
    framework_class,
    mean_real_tokens,
    step_time,
)
from gpuledger.estimate.workload import STACK_FIELDS, Workload, stack_note
from gpuledger.models import load_config
from gpuledger.vocabulary import RL_METHODS

MEMORY_KEYS = ("weights", "gradients", "optimizer", "optimizer_temporaries", "activations", "logits", "kv_cache", "buffers",
               "allocated", "reserved", "device")

__all__ = [
    "CPU_TRAINING_EFFICIENCY", "MEMORY_KEYS", "ROLLOUT_MFU", "STACK_FIELDS", "Estimate", "Workload",
    "active_params", "attention_flops_per_token", "cpu_compute_s", "time_basis",
    "estimate", "kv_cache_bytes_per_token", "layer_activation_bytes_per_token", "load_config",
    "eval_passes", "eval_time_s", "run_costs_note", "run_overheads_s", "sample_lengths_note", "train_time_s", "train_setup", "training_step", "StepTime",
]


@dataclass(frozen=True)
class Estimate:
    """What a workload needs per GPU: memory (GiB) by component and level, params, FLOPs per token."""

    workload: Workload
    params_total: int
    params_trainable: int
    exact: bool
    memory_gib: dict[str, float]
    flops_per_token: float
    assumptions: list[str] = field(default_factory=list)
    notes: dict[str, str] = field(default_factory=dict)
    #: allocated GiB at each phase of a training step (load, forward_end, backward_end,
    #: optimizer_step, generation) and the phase that sets the peak; empty for inference/CPU runs.
    phases_gib: dict[str, float] = field(default_factory=dict)
    peak_phase: str = ""
    #: persistent per-GPU GiB of weights, gradients and optimizer states, whatever the phase
    states_gib: dict[str, float] = field(default_factory=dict)

    def _repr_html_(self) -> str:
        """The estimate as a notebook shows it: the setup, parameters, memory per GPU by component."""
        import html

        w = self.workload
        rows = [("setup", f"{w.model}: {w.method}, {w.precision}, batch {w.micro_batch} x seq {w.seq_len}, "
                          f"{w.gpus} GPU(s), {w.device}"),
                ("params", f"{self.params_total:,} total ({'exact' if self.exact else 'estimate'}), "
                           f"{self.params_trainable:,} trainable"),
                ("flops/token", f"{self.flops_per_token:.3e}"), ("peak phase", self.peak_phase or "-"),
                *((f"{k} GiB", f"{v:.3f}") for k, v in self.memory_gib.items())]
        cells = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>"
                        for k, v in rows)
        return f"<div><b>estimate per GPU</b><table>{cells}</table></div>"

    def to_json(self) -> dict[str, Any]:
        """Returns the JSON object `gpuledger estimate --json` prints."""
        w = self.workload
        return {
            "model": w.model,
            "method": w.method,
            "precision": w.precision,
            "device": w.device,
            "gpus": w.gpus,
            "params_total": self.params_total,
            "params_trainable": self.params_trainable,
            "exact": self.exact,
            "memory_gib": {k: round(v, 4) for k, v in self.memory_gib.items()},
            "flops_per_token": self.flops_per_token,
            "assumptions": list(self.assumptions),
            "notes": dict(self.notes),
            "peak_phase": self.peak_phase,
            "phases_gib": {k: round(v, 4) for k, v in self.phases_gib.items()},
            "states_gib": {k: round(v, 4) for k, v in self.states_gib.items()},
            "workload": w.model_dump(),
        }

    def fits(self, memory_gib: float, level: str = "device") -> bool:
        """True when the estimate at `level` fits in `memory_gib` (per GPU)."""
        return self.memory_gib[level] <= memory_gib


@functools.lru_cache(maxsize=4096)
def estimate(w: Workload) -> Estimate:
    """Returns the per-GPU memory, parameter counts and FLOPs per token of workload `w`."""
    cfg = load_config(w.model)
    m: MemoryBreakdown = memory_breakdown(w)
    mem = {
        "weights": m.weights, "gradients": m.gradients, "optimizer": m.optimizer,
        "optimizer_temporaries": m.optimizer_temporaries, "activations": m.activations,
        "logits": m.logits, "kv_cache": m.kv_cache, "buffers": m.buffers, "allocated": m.allocated,
        "reserved": m.reserved, "device": m.device,
    }
    seq = w.seq_len
    if w.method in ("grpo", "ppo", "inference") and (w.prompt_len or w.completion_len):
        seq = (w.prompt_len or 0) + (w.completion_len or 0)
    fpt = flops_per_token(cfg, m.params_total, active_params(cfg), "full" if w.method in RL_METHODS else w.method,
                          seq, w.grad_ckpt, m.params_trainable)
    assumptions = [
        f"{cfg.name} ({cfg.model_type}): {m.params_total:,} params"
        + ("" if m.exact else " (generic estimate, not exact)"),
        "levels: allocated = live tensors (torch.cuda.max_memory_allocated); reserved = + "
        f"{m.overhead:.0%} allocator fragmentation; device = + CUDA context"
        + (" + NCCL buffers" if w.gpus > 1 else "") + " (nvidia-smi)",
        f"training code habits: {stack_note(w.framework, w.stack)}",
        *m.assumptions,
    ]
    if cfg.resolved:
        assumptions.insert(0, f"model: {cfg.resolved}")
    if w.device == "cpu":
        assumptions.append("CPU mode: NOT yet calibrated against gpuledger/trainers/demo_lora.py's measured peak RSS "
                           "(the trainer was not runnable when this was written); interpreter baseline assumed")
    return Estimate(
        workload=w,
        params_total=m.params_total,
        params_trainable=m.params_trainable,
        exact=m.exact,
        memory_gib={k: v / GIB for k, v in mem.items()},
        flops_per_token=float(fpt),
        assumptions=assumptions,
        notes=dict(m.notes),
        phases_gib={k: v / GIB for k, v in m.phases.items()},
        peak_phase=m.peak_phase,
        states_gib={k: v / GIB for k, v in m.states.items()},
    )


def train_setup(est: Estimate, accelerator: str, gpus: int | None = None, method: str | None = None,
                precision: str | None = None) -> TrainSetup:
    """Returns the throughput model's TrainSetup of an estimate's workload on `accelerator`
    (`gpus`, `method`, `precision` override the workload's)."""
    w = est.workload
    method = method or w.method
    if method in ("grpo", "ppo", "inference"):
        method = "full"  # the training step of an RL trainer (generation is not modelled here)
    return TrainSetup(
        accelerator=accelerator, method=method, framework=w.framework, gpus=gpus or w.gpus, nodes=w.nodes,
        precision=precision or w.precision, micro_batch=w.micro_batch, seq_len=w.seq_len,
        grad_accum=w.grad_accum, checkpointing=w.checkpointing_mode, packing=w.packing, padding=w.padding,
        sample_tokens=w.sample_tokens,
        compile=w.compile or None, flash_attn=w.flash_attn, sharding=w.sharding,
        tensor_parallel=w.tensor_parallel, pipeline_parallel=w.pipeline_parallel,
        params_trainable=float(est.params_trainable), lora_r=w.lora_r, optimizer=w.optimizer,
        offload=w.offload, sequence_parallel=w.sequence_parallel, expert_parallel=w.expert_parallel,
        stack=w.stack)


def sample_lengths_note(w: Workload) -> str | None:
    """Returns what the time assumes of an unpacked run's sample lengths (None when packed: the stack's habit
    or `packing`), for `estimate --tokens` to say under its table."""
    from gpuledger.estimate.coefficients import DEFAULT_SAMPLE_TOKENS, SAMPLE_LENGTH_CV
    from gpuledger.estimate.throughput import framework_class

    packed = w.packing if w.packing is not None else framework_class(w.framework) == "tuned"
    if packed or w.method in ("grpo", "ppo", "inference"):
        return None
    pad = (f"every sample padded to {w.seq_len} (padding max_length)" if w.padding == "max_length"
           else "each micro-batch padded to its longest sample")
    if w.sample_tokens:
        return f"unpacked: samples of mean {w.sample_tokens} tokens (log-normal, cv {SAMPLE_LENGTH_CV:g}) cut at {w.seq_len}, {pad}"
    return (f"unpacked: samples assumed a typical instruction set's, mean {DEFAULT_SAMPLE_TOKENS} tokens (log-normal, "
            f"cv {SAMPLE_LENGTH_CV:g}) cut at {w.seq_len}, {pad}; --sample-tokens (train.sample_tokens) states your "
            "data's mean, --packing if packed, --padding max_length if padded to the cap")


def training_step(est: Estimate, accelerator: str, gpus: int | None = None, method: str | None = None,
                  precision: str | None = None, *, stack_speedup: dict[str, float] | None = None) -> StepTime:
    """Returns the StepTime (seconds per optimizer step, tokens per step, parts, assumptions) of an
    estimate's workload on `accelerator` (gpuledger/estimate/throughput.py; `stack_speedup` in place of
    STACK_KERNEL_SPEEDUP, for its fit)."""
    return step_time(ModelShape.from_config(load_config(est.workload.model)),
                     train_setup(est, accelerator, gpus, method, precision), stack_speedup=stack_speedup)


def time_basis(method: str) -> str:
    """Returns which model times a method: the step model for training, the rollout rate for
    generation-bound methods (said in every output that prints a time)."""
    if method in RL_METHODS:
        return (f"{method}: one RL step by role (gpuledger/estimate/rl.py): rollouts through the serving simulator, "
                "log-prob forwards and the trainer's step through the training-step model, weight sync")
    if method in ROLLOUT_MFU:
        return (f"{method}: FLOPs at the rollout rate of gpuledger/estimate/compute.py (ROLLOUT_MFU; generation is "
                "not in the step model)")
    return "training-step model (gpuledger/estimate/throughput.py)"


#: Whole-run costs outside the training steps (issue 36: published "trained in H hours" claims came out
#: at half): reading the 16-bit checkpoint into the GPUs at the start (safetensors from the node's local
#: cache/NVMe, ~1.5 GB/s per node; downloading it is the planner's set-up time), and the checkpoints a
#: run writes: HF Trainer's defaults save every `save_steps` = 500 optimizer steps (TrainingArguments)
#: the model and, for a full fine-tune, the optimizer states (AdamW moments in fp32, plus the fp32
#: master copy under DeepSpeed), at ~1 GB/s per node (cloud NVMe / network volumes); LoRA saves only
#: its adapters (negligible). Every stack writes the final model once. A torch.compile'd run warms up
#: ~90 s (Unsloth's docs warn of minutes; torchtitan's compile of an 8B model takes ~1 min).
LOAD_GBPS_PER_NODE = 1.5
SAVE_GBPS_PER_NODE = 1.0
HF_SAVE_STEPS = 500
COMPILE_WARMUP_S = 90.0


def eval_passes(eval_steps: float | None, steps: float) -> int:
    """Returns how many evaluations a run of `steps` optimizer steps does: every `eval_steps` steps (at
    least 1, the Trainer's eval_strategy "steps"), or 1 / eval_steps of them for a ratio below 1."""
    if not eval_steps or steps < 1:
        return 0
    if eval_steps >= 1:
        return int(steps // int(eval_steps))
    # a ratio: floor(1 / r) evaluations (the Trainer's ceil(steps x r) can lose the last one to rounding; an
    # epoch strategy, 1 / epochs here, evaluates at every epoch's end), fewer when the run is shorter than 1 / r
    return min(int(1 / eval_steps + 1e-6), int(steps))


def eval_time_s(est: Estimate, tokens: float, step: StepTime) -> float:
    """Returns the seconds of the evaluations during a run (`eval_steps`, `eval_samples`): each one a
    forward pass over eval_samples x the samples' mean real tokens at the step model's rate of this
    workload (its step time per token x forward / training FLOPs per token, the rule of the RL
    log-prob forwards), no optimizer, no recompute. 0 when the run does not evaluate."""
    w = est.workload
    n = eval_passes(w.eval_steps, float(tokens) / max(1.0, step.tokens_per_step))
    if not n or not w.eval_samples:
        return 0.0
    cfg = load_config(w.model)
    seq = w.seq_len
    fwd = flops_per_token(cfg, est.params_total, active_params(cfg), "inference", seq, False)
    packed = w.packing if w.packing is not None else framework_class(w.framework) == "tuned"
    eval_tokens = n * w.eval_samples * mean_real_tokens(seq, packed, w.sample_tokens)
    return step.time_s(eval_tokens) * fwd / float(est.flops_per_token)


def run_costs_note(w: Workload) -> str:
    """Returns what a whole run's time holds beyond its steps (run_overheads_s), for `estimate --tokens`
    to say under its table: the load, the saves, the compile warm-up and the evaluation or its absence."""
    saves = (f"the Trainer's saves every {HF_SAVE_STEPS} steps with optimizer states, " if w.framework == "hf" and
             w.method == "full" else "")
    parts = [f"reading the checkpoint ({LOAD_GBPS_PER_NODE:g} GB/s per node; downloading it is set-up)",
             f"{saves}the final save ({SAVE_GBPS_PER_NODE:g} GB/s per node)" if w.method == "full" else "adapter saves (negligible)"]
    if w.compile:
        parts.append(f"torch.compile warm-up {COMPILE_WARMUP_S:g} s")
    if w.eval_steps:
        every = (f"every {int(w.eval_steps)} steps" if w.eval_steps >= 1 else
                 f"every {w.eval_steps:.3g} of the run's steps")
        parts.append(f"evaluation {every} over {w.eval_samples:,} samples (forward at the step's rate)")
    else:
        parts.append("no evaluation (--eval-steps/--eval-samples, train.eval_steps/eval_samples, charge one)")
    return "whole run: steps + " + ", ".join(parts) + "; tokenization and data loading not charged"


def run_overheads_s(est: Estimate, tokens: float, step: StepTime) -> dict[str, float]:
    """Returns the seconds of a whole run beyond its training steps: `load` (the checkpoint into the
    GPUs), `checkpoints` (the saves during and at the end of the run), `compile` (warm-up), `eval` (the
    evaluations it runs between steps, eval_time_s)."""
    w = est.workload
    from gpuledger.estimate.coefficients import nodes_for

    nodes = nodes_for(step.gpus, w.nodes)
    total = float(est.params_total)
    load = 2 * total / (LOAD_GBPS_PER_NODE * 1e9)
    final = 2 * total / (SAVE_GBPS_PER_NODE * 1e9 * nodes) if w.method == "full" else 0.0
    periodic = 0.0
    if w.framework == "hf" and w.method == "full":
        steps = float(tokens) / max(1.0, step.tokens_per_step)
        saves = int(steps // HF_SAVE_STEPS)
        state_b = 8 + (4 if w.sharding.startswith("zero") or w.precision in ("bf16-mixed", "fp16-mixed") else 0)
        periodic = saves * (2 + state_b) * total / (SAVE_GBPS_PER_NODE * 1e9 * nodes)
    return {"load": load, "checkpoints": final + periodic, "compile": COMPILE_WARMUP_S if w.compile else 0.0,
            "eval": eval_time_s(est, tokens, step)}


def train_time_s(estimate: Estimate, tokens: float, accelerator: str, gpus: int | None = None, method: str | None = None,
                 precision: str | None = None) -> float:
    """Returns compute seconds to train `tokens` real tokens on `gpus` x `accelerator` (default: the
    workload's GPU count): the throughput model (`training_step`: per-step compute, memory-bound
    work, communication and per-step costs of the workload's stack), plus the run's own costs beyond
    its steps (`run_overheads_s`: loading the checkpoint, the checkpoints it saves, compile warm-up) for
    full/LoRA/QLoRA; for GRPO/PPO the steps of `gpuledger.estimate.rl` (rollout, log-probs, reward,
    critic, trainer, sync) the tokens take, plus loading the checkpoint; FLOPs at the rollout rate
    (`compute.rollout_time_s`) for inference. The one time formula of
    gpuledger: `estimate --tokens` and the planner call it."""
    w = estimate.workload
    method = method or w.method
    if method in RL_METHODS:  # one RL step by role (gpuledger/estimate/rl.py), as many steps as the tokens take
        from gpuledger.estimate.rl_plan import chosen_step

        rl = chosen_step(w, accelerator, gpus, precision)
        load = 2 * float(estimate.params_total) / (LOAD_GBPS_PER_NODE * 1e9)
        return rl.step_s * float(tokens) / rl.tokens + load
    if method in ROLLOUT_MFU:
        g = gpus or w.gpus
        return rollout_time_s(estimate.flops_per_token * float(tokens), accelerator, g, method,
                              precision or w.precision, w.sharding if g > 1 else "none")
    step = training_step(estimate, accelerator, gpus, method, precision)
    return step.time_s(tokens) + sum(run_overheads_s(estimate, tokens, step).values())
