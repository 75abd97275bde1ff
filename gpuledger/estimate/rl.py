"""RL fine-tuning (GRPO/PPO) timed by role: one step composed from the serving simulator and the
training-step model (issue 40, docs/rl.md).

One step of an on-policy RL trainer (TRL's GRPOTrainer, verl, OpenRLHF) runs, in order:

1. **rollout**: `prompts_per_step x group_size` responses generated. Through vLLM: the serving
   simulator (`gpuledger.capacity.simulate`, vLLM V1's continuous batching, the per-engine step cost
   of `gpuledger.estimate.inference`) with every request sent at once (an offline batch, no HTTP),
   response lengths drawn log-normally from their mean and P90, each rollout replica (`tp` GPUs)
   given its share; the step waits for the slowest replica, so the tail of the response length
   counts. A group's `group_size` copies of one prompt are prefilled once (vLLM V1's automatic prefix
   cache, on by default: prefix-cache hit (G-1)/G of the prompt tokens). Through the trainer's own `model.generate` (hf): static batches of the per-GPU generation
   batch, each decoding until its longest response ends (finished rows keep their slot), the same
   step cost without CUDA graphs and with the eager per-layer launch overhead `HF_GENERATE_LAYER_S`.
2. **reference / old-policy log-probs**: forward passes over the step's tokens through the training
   model: the trainer's step time on those tokens x forward FLOPs / training FLOPs per token
   (`compute.flops_per_token`), i.e. at the trainer's own utilisation. Reference: when a reference
   model is kept (KL term; `ref_model` not none). Old policy: when the batch is reused for more than
   one update (`ppo_epochs` > 1, or always for PPO/verl-style recompute: `old_logprob`).
3. **reward**: a reward model's forward (the same rule as 2, at its own size), or a function at a
   stated `reward_s_per_sample`, run on the trainer ranks in parallel (TRL computes each rank's own
   samples' rewards).
4. **critic** (PPO): the value model's forward and its training step on the same tokens.
5. **train**: `ppo_epochs` passes over the step's tokens, each in `ppo_mini_batches` optimizer steps
   (`throughput.step_time` with the micro-batches of one mini-batch as its gradient accumulation: the
   per-micro-batch work scales with the tokens, the optimizer step and the step's fixed cost are paid
   once per mini-batch), on the trainer's `trainer_tp` x data-parallel GPUs (`trainer_ep`: MoE experts
   split over that many). verl-style offload (`param_offload`, `optimizer_offload`: verl's
   `fsdp_config.param_offload` / `optimizer_offload`): the trainer's FSDP shard is moved to the host
   between phases and back before each one that uses it, over PCIe at `PCIE_HOST_GBPS`, not hidden: the
   policy's parameters (fp32 for a full policy, verl's actor; 16-bit for a LoRA base, 4-bit for QLoRA)
   in and out around the old-policy forward, the update and the sync (the reference's 16-bit copy around
   its forward; a LoRA policy's reference is the policy itself), Adam's two fp32 states of the trained
   parameters in and out around the update (the optimizer step itself stays on the GPU).
6. **sync**: the new weights into the rollout engine. None when the trainer generates itself
   (`engine` hf, `model.generate`: the rollout is the trained model). Colocated: the 16-bit weights gathered over the
   node's link (FSDP shards all-gathered, `INTERCONNECT_GBPS`) and copied in place at HBM bandwidth,
   plus `SYNC_FIXED_S`; with vLLM sleep mode, the KV cache re-allocated each wake (`SLEEP_WAKE_S`).
   Split: an NCCL broadcast of the 16-bit weights from the trainer to the rollout GPUs over the link
   between them (the node's link when both fit one node, else the network figure of
   `INTERCONNECT_GBPS["network"]`), plus `SYNC_FIXED_S`.

MoE policies roll out as such: decode compute at the active parameters (routed top-k + shared experts,
`compute.active_params`), weight memory and the per-step weight read at all of them
(`inference.serving_model_from_config`).

Step time: the sum of 1-6 (on-policy), or with `async_rollout` (one-step off-policy: rollouts of step
N+1 generated while step N trains, on their own GPUs) max(rollout, 2-5) + sync. Colocated rollouts
share the trainer's GPUs, so they cannot overlap: async is refused there.

Plans (the workload's RLSetup, the placements tried, time and dollars by role):
`gpuledger.estimate.rl_plan`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from gpuledger.estimate.dynamic_sampling import DynamicSampling

#: Eager `model.generate` (Transformers, no CUDA graphs, no static cache): CPU time per decoder layer
#: per decode step (kernel launches and Python of one layer, ~15-20 kernels). Derived from the
#: Transformers docs (LLM inference optimization, v4.45-4.57: a static KV cache + torch.compile
#: "up to 4x" faster decoding): a 32-layer 7B model whose weights stream in ~8.5 ms on an A100 thus
#: decodes in ~34 ms eager at batch 1, i.e. ~25 ms of launch overhead / 32 layers ~ 0.7 ms; 0.6 ms
#: taken (batches above 1 hide a little of it). A judgement from that one claim, not a measurement.
HF_GENERATE_LAYER_S = 0.6e-3
#: vLLM with enforce_eager inside an RL trainer (verl <= 0.4's default `rollout.enforce_eager: True`, SPMD
#: `external_launcher` engines, one per rollout rank): CPU time per decoder layer per decode step that no CUDA graph
#: hides (the engine's flat `eager_step_overhead_s` of 2 ms was measured on a standalone server). Fitted on the five
#: verl-data GRPO-LoRA logs of gpuledger/estimate/data/rl_step_times.csv (Qwen2.5-3B..72B, TP 2 and 8, github.com/eric-haibin-lin/
#: verl-data math/*.log, July 2025): their `timing_s/generate_sequences` over the 512 decode steps of the longest
#: response is 45 ms (7B, 28 layers, TP 2) to 186 ms (72B, 80 layers, TP 8), 1.6-2.5 ms a layer; the median of
#: those rows' error is smallest near 2 ms. Checked against rows it was not fitted on (the ROCm blog's verl v0.3
#: GRPO/PPO rows, vLLM 0.6.3 eager: docs/accuracy.md).
VLLM_EAGER_LAYER_S = 2.0e-3
#: Fixed cost of one weight sync (gathering parameter names, NCCL group / IPC handles, vLLM's
#: `load_weights` loop over ~300 tensors, cache reset): 0.5 s, a judgement (no public timing gathered).
SYNC_FIXED_S = 0.5
#: vLLM sleep mode (`enable_sleep_mode`, level 1: weights kept, KV cache freed): waking re-allocates
#: the KV cache and resets the prefix cache each step: 0.3 s, a judgement.
SLEEP_WAKE_S = 0.3
#: Effective share of HBM bandwidth of the in-place weight copy (read + write): 0.5, a judgement.
COPY_BW_EFFICIENCY = 0.5
#: The seed of the response-length draws (rollouts are reproducible plans).
SEED = 20_260_401
#: z of the 90th percentile of a normal (the log-normal's P90 from its mean and spread).
Z90 = 1.2815515655446004
#: The longest response a draw may take, as a multiple of the mean (`lengths.CLIP_MULTIPLE`, 8);
#: response P90 / mean above this log-normal's reach (2.27) is clipped to it.
MAX_P90_RATIO = 2.27

#: The response length's coefficient of variation when a spec states no P90 (`completion_len_p90`): RL
#: responses are long-tailed, and the step waits for its longest. A judgement from one public log: verl's
#: GRPO of Qwen2.5-7B-Instruct on MATH (github.com/eric-haibin-lin/verl-data, math/Qwen2.5-7B-bsz64_8-
#: prompt1024-resp512-score0.6513.log, last step: response mean 314, 19% clipped at 512) needs a log-normal of
#: cv 0.8 or more to clip that often; 0.6 (P90 ~1.8x the mean) is taken, since a capped mean understates it.
DEFAULT_RESPONSE_CV = 0.6

ENGINES = ("vllm", "hf")
PLACEMENTS = ("colocated", "split")


def response_cv(mean: float, p90: float | None) -> float:
    """Returns the coefficient of variation of a log-normal response length with this mean and
    90th percentile (0 when no P90, or P90 <= mean: every response the mean's length).

    ln(P90 / mean) = z90·σ − σ²/2 (the log-normal's quantile with mu = ln(mean) − σ²/2), smaller root."""
    if not p90 or p90 <= mean:
        return 0.0
    r = min(p90 / mean, MAX_P90_RATIO)
    disc = Z90**2 - 2 * math.log(r)
    sigma = Z90 - math.sqrt(max(disc, 0.0))
    return math.sqrt(math.expm1(sigma**2))


def setup_cv(s) -> float:
    """The response length's cv of a setup: from its P90, else `DEFAULT_RESPONSE_CV` (a P90 at or below
    the mean: every response the mean's length)."""
    if s.response_len_p90 is None:
        return DEFAULT_RESPONSE_CV
    return response_cv(s.response_len, s.response_len_p90)


@dataclass(frozen=True)
class RLSetup:
    """One RL step's shape and placement."""

    model: str
    algorithm: str = "grpo"  # grpo | ppo
    precision: str = "bf16"
    policy_method: str = "full"  # full | lora | qlora: how the policy is trained
    prompts_per_step: int = 64
    group_size: int = 8
    prompt_len: int = 512
    response_len: int = 1024  # mean generated tokens
    response_len_max: int | None = None  # the trainer's max completion length: responses are cut there
    response_len_p90: int | None = None  # None: a log-normal of cv DEFAULT_RESPONSE_CV; <= mean: all the mean
    engine: str = "vllm"  # vllm | hf (the trainer's model.generate)
    placement: str = "colocated"  # colocated | split
    trainer_accelerator: str = "H100"
    trainer_gpus: int = 8
    rollout_accelerator: str | None = None  # split: default the trainer's
    rollout_gpus: int | None = None  # split: default the trainer's count
    rollout_tp: int = 1
    gpu_memory_utilization: float | None = None  # vLLM's share of each rollout GPU; None: 0.3 colocated, 0.9 split
    sleep_mode: bool = False  # colocated vLLM: KV cache freed while training (more of the GPU for vLLM)
    generation_batch: int | None = None  # hf: sequences per GPU per generate call; None: all of the GPU's share
    prefix_cache: bool = True  # vllm: a group's shared prompt prefilled once (vLLM V1's prefix cache)
    #: vllm: sequential generate calls per optimizer step, each with 1/rounds of the step's requests (TRL before
    #: 0.17 generated once per gradient-accumulation micro-step: rounds = grad accumulation; verl, OpenRLHF and
    #: TRL >= 0.17 (one generation per effective batch) generate the whole step at once: 1)
    generation_rounds: int = 1
    #: vllm: enforce_eager (no CUDA graphs: every decode step pays the engine's eager overhead; verl <= 0.4's default,
    #: rollout.enforce_eager: True in verl/trainer/config/ppo_trainer.yaml)
    eager: bool = False
    async_rollout: bool = False
    reference: bool = True  # a reference model's log-probs (KL penalty)
    old_logprob: bool | None = None  # None: PPO, ppo_epochs > 1, or vLLM rollouts (verl; TRL importance sampling)
    ppo_epochs: int = 1  # optimizer passes over each rollout batch (verl ppo_epochs, TRL num_iterations)
    #: optimizer steps per pass over the rollout batch (verl: train_batch_size / ppo_mini_batch_size; TRL:
    #: steps_per_generation / gradient_accumulation_steps, 1 by default)
    ppo_mini_batches: int = 1
    param_offload: bool = False  # verl fsdp_config.param_offload: the trainer's shard on the host between phases
    optimizer_offload: bool = False  # verl fsdp_config.optimizer_offload: Adam's states on the host but in the update
    trainer_tp: int = 1  # the trainer's tensor-parallel degree (the rest of its GPUs data-parallel)
    trainer_ep: int = 1  # the trainer's MoE expert-parallel degree (within its data-parallel GPUs)
    #: nodes the trainer's GPUs span (the spec's train.nodes); None: ceil(trainer GPUs / 8)
    trainer_nodes: int | None = None
    reward_model: str | None = None
    reward_s_per_sample: float = 0.0  # a reward function's seconds per sample (when no reward model)
    critic_model: str | None = None  # PPO: default the policy's architecture
    lora_r: int = 16  # policy_method lora/qlora: adapter rank and targets
    lora_targets: str = "q,v"
    micro_batch: int = 4  # trainer sequences per GPU per micro-step
    #: a token budget per trainer GPU per micro-step instead (verl use_dynamic_bsz, ppo_max_token_len_per_gpu):
    #: sequences packed without padding up to it; None: `micro_batch` sequences
    micro_batch_tokens: int | None = None
    framework: str = "hf"
    sharding: str = "auto"
    grad_ckpt: bool = True
    #: trainer micro-batches packed (verl's use_remove_padding, TRL's padding_free: every position a real token)
    #: or padded to the longest of the micro-batch (None: padded, TRL's default)
    packing: bool | None = None
    #: DAPO's group filter (gpuledger/estimate/dynamic_sampling.py): generation batches until prompts_per_step
    #: groups with varied rewards are kept; None: every generated group trains
    dynamic_sampling: DynamicSampling | None = None


@dataclass(frozen=True)
class RLStep:
    """Seconds of one RL step, by phase, and the GPUs each role holds."""

    setup: RLSetup
    phases_s: dict[str, float]  # rollout, reference, old_logprob, reward, critic, train, sync
    step_s: float
    sequences: int
    tokens: float  # prompt + response tokens of the step (what the trainer trains on)
    response_tokens: float
    groups: dict[str, dict]  # role group -> {accelerator, gpus}
    rollout_detail: dict = field(default_factory=dict)
    assumptions: list[str] = field(default_factory=list)

    @property
    def sync_step_s(self) -> float:
        """The on-policy step (every phase in sequence), whatever `async_rollout` says."""
        return sum(self.phases_s.values())

    def gpu_seconds(self) -> dict[str, float]:
        """Returns GPU-seconds per step of each role group (trainer, rollout): the GPUs it holds x the step."""
        return {name: g["gpus"] * self.step_s for name, g in self.groups.items()}

    def to_json(self) -> dict:
        s = self.setup
        return {"algorithm": s.algorithm, "placement": s.placement, "engine": s.engine, "async": s.async_rollout,
                "step_s": round(self.step_s, 3), "sync_step_s": round(self.sync_step_s, 3),
                "phases_s": {k: round(v, 3) for k, v in self.phases_s.items()},
                "sequences": self.sequences, "tokens_per_step": round(self.tokens),
                "response_tokens_per_step": round(self.response_tokens),
                "groups": {k: dict(v) for k, v in self.groups.items()},
                "rollout": dict(self.rollout_detail), "assumptions": list(self.assumptions)}


def _check(s: RLSetup) -> None:
    if s.algorithm not in ("grpo", "ppo"):
        raise ValueError(f"rl algorithm {s.algorithm!r}: one of grpo, ppo")
    if s.engine not in ENGINES:
        raise ValueError(f"rl rollout engine {s.engine!r}: one of {', '.join(ENGINES)}")
    if s.placement not in PLACEMENTS:
        raise ValueError(f"rl placement {s.placement!r}: one of {', '.join(PLACEMENTS)}")
    if s.async_rollout and s.placement == "colocated":
        raise ValueError("rl async rollouts need placement: split (colocated rollouts share the trainer's GPUs "
                         "and cannot overlap its step)")
    if s.placement == "split" and s.engine == "hf":
        raise ValueError("rl placement split needs a rollout engine (vllm); hf generates on the trainer's GPUs")
    for name in ("prompts_per_step", "group_size", "prompt_len", "response_len", "trainer_gpus", "rollout_tp",
                 "ppo_epochs", "ppo_mini_batches", "trainer_tp", "trainer_ep"):
        if int(getattr(s, name)) < 1:
            raise ValueError(f"rl {name} must be >= 1")
    if s.trainer_gpus % s.trainer_tp:
        raise ValueError(f"rl trainer: tensor_parallel {s.trainer_tp} does not divide its {s.trainer_gpus} GPU(s)")
    if (s.trainer_gpus // s.trainer_tp) % s.trainer_ep:
        raise ValueError(f"rl trainer: expert_parallel {s.trainer_ep} does not divide its data-parallel GPUs "
                         f"({s.trainer_gpus} / tensor_parallel {s.trainer_tp} = {s.trainer_gpus // s.trainer_tp})")


def _rollout_gpus(s: RLSetup) -> tuple[str, int]:
    if s.placement == "colocated":
        return s.trainer_accelerator, s.trainer_gpus
    return s.rollout_accelerator or s.trainer_accelerator, s.rollout_gpus or s.trainer_gpus


def _serving(s: RLSetup, accelerator: str):
    from gpuledger.estimate import inference
    from gpuledger.models import load_config

    precision = "bf16" if s.precision in ("bf16-mixed", "fp16-mixed", "qlora") else s.precision
    if precision not in inference.WEIGHT_BYTES_PER_PARAM:
        precision = "bf16"
    model = inference.serving_model_from_config(load_config(s.model), precision)
    return model, inference.hardware_for(accelerator, precision), precision


def response_mix(s: RLSetup):
    """The response lengths of a setup: a log-normal of mean `response_len` and cv `setup_cv`, cut at
    `response_len_max` (the trainer's max completion length: a response stops there) when given."""
    from gpuledger.capacity.lengths import LengthMix

    mix = LengthMix(mean=float(s.response_len), cv=setup_cv(s), source="rl response length")
    cap = s.response_len_max
    if cap is None or mix.longest <= cap:
        return mix
    # the stated mean is the cut responses' mean (what a trainer logs): the uncut log-normal's mean is raised
    # until the cut one's mean matches it
    mean = float(s.response_len)
    for _ in range(8):
        draws = np.minimum(replace(mix, mean=mean).sample(4096, [SEED, 3]), cap)
        mean *= s.response_len / max(1.0, float(draws.mean()))
    values, counts = np.unique(draws, return_counts=True)
    hist = tuple((int(v), float(c) / len(draws)) for v, c in zip(values, counts, strict=True))
    return LengthMix(mean=float(draws.mean()), histogram=hist, source=f"rl response length, cut at {cap}")


def _lengths(s: RLSetup, n: int, seed) -> np.ndarray:
    return response_mix(s).sample(n, seed)


def _rollout_vllm(s: RLSetup, accelerator: str, gpus: int) -> tuple[float, dict]:
    from gpuledger.capacity.simulate import Scheduler, simulate
    from gpuledger.estimate import inference

    model, hw, precision = _serving(s, accelerator)
    tp = s.rollout_tp
    replicas = max(1, gpus // tp)
    frac = s.gpu_memory_utilization or (0.9 if s.placement == "split" or s.sleep_mode else 0.3)
    # a group's prompts are one prompt: vLLM V1's prefix cache (on by default) computes it once
    # (TRL sends each prompt group_size times with n=1 colocated, once with n=group_size to a server)
    hit = (s.group_size - 1) / s.group_size if s.prefix_cache else 0.0
    engine = inference.engine_with(inference.engine_for("vllm"), gpu_memory_utilization=frac, endpoint="offline",
                                   prefix_cache_hit=hit)
    if s.eager:
        engine = replace(engine, cuda_graph_max_batch=0, eager_step_overhead_s=VLLM_EAGER_LAYER_S * model.num_layers)
    kv = inference.kv_capacity_tokens(model, hw, precision, tp, engine)
    cv = setup_cv(s)
    mix = response_mix(s)
    longest = s.prompt_len + mix.longest + 1
    if kv < longest:
        raise ValueError(f"rollout: vLLM's KV cache on {tp} x {accelerator} at gpu_memory_utilization {frac:g} holds "
                         f"{kv:,} tokens, less than one prompt + the longest response ({longest:,})")
    seqs, tokens = inference.engine_limits(engine, hw)
    sched = Scheduler(max_num_seqs=seqs, max_batched_tokens=max(tokens, seqs), chunked_prefill=engine.chunked_prefill,
                      kv_capacity_tokens=kv, reserve_full_request=False, request_overhead_s=0.0)
    cost = inference.step_cost(model, hw, precision, engine, tp)
    n = s.prompts_per_step * s.group_size
    rounds = max(1, min(int(s.generation_rounds), n))
    per = math.ceil(n / rounds / replicas)  # the busiest replica's share of one round: the step waits for it
    r = simulate(cost, sched, prompt_tokens=s.prompt_len, output_tokens=s.response_len, concurrency=per,
                 n_requests=per, seed=SEED, output_mix=mix if cv > 0 else None)
    return r.duration_s * rounds, {"engine": "vllm", "replicas": replicas, "tp": tp, "requests_per_replica": per,
                          "generation_rounds": rounds,
                          "kv_capacity_tokens": kv, "gpu_memory_utilization": frac, "preemptions": r.preemptions,
                          "prefix_cache_hit": round(hit, 3),
                          "weights_gib_per_gpu": round(inference.weights_bytes(model, precision) / tp / inference.GIB, 2),
                          "kv_cache_gib_per_gpu": round(kv * model.kv_bytes_per_token / tp / inference.GIB, 2),
                          "max_running": r.max_running, "response_cv": round(cv, 3),
                          "params_total": model.params_total, "params_active": model.active_params or model.params_total,
                          "output_tokens_per_s": round(r.output_tokens_per_s * replicas, 1)}


def _rollout_hf(s: RLSetup, accelerator: str, gpus: int) -> tuple[float, dict]:
    from gpuledger.estimate import inference

    model, hw, precision = _serving(s, accelerator)
    eager = replace(inference.engine_for("vllm"), step_overhead_s=HF_GENERATE_LAYER_S * model.num_layers,
                    cuda_graph_max_batch=0, eager_step_overhead_s=0.0, step_overhead_per_seq_s=0.0,
                    frontend_s_per_token=0.0, speculative=None, prefix_cache_hit=0.0)
    cost = inference.step_cost(model, hw, precision, eager, 1)
    n = math.ceil(s.prompts_per_step * s.group_size / gpus)  # each rank generates its own share
    # TRL < 0.17 generated once per gradient-accumulation micro-step: rounds calls of 1/rounds of the share each
    rounds = max(1, min(int(s.generation_rounds), n))
    share = math.ceil(n / rounds)
    batch = max(1, min(s.generation_batch or share, share))
    lengths = _lengths(s, n, [SEED, 1])
    total = 0.0
    P = s.prompt_len
    starts = [r * share + k for r in range(rounds) for k in range(0, share, batch) if r * share + k < n]
    for start in starts:
        b = lengths[start:min(start + batch, (start // share + 1) * share)]
        rows, longest = len(b), int(b.max())
        total += cost.step_s(0, 0.0, rows * P, rows * P * (P + 1) / 2)  # the padded prompts' prefill
        t = np.arange(longest, dtype=float)
        ctx = rows * (P + t)  # every row keeps its slot until the longest ends (padded)
        flop = np.maximum(cost.weight_s, rows * cost.flop_s_per_token)
        total += float(np.sum(flop + ctx * cost.kv_s_per_token + cost.overhead_s + cost.comm_s))
    return total, {"engine": "hf", "generate_calls_per_gpu": len(starts), "generation_batch": batch,
                   "generation_rounds": rounds,
                   "sequences_per_gpu": n, "response_cv": round(setup_cv(s), 3)}


def _step(model: str, s: RLSetup, method: str, accelerator: str, gpus: int):
    """Returns the training-step model's StepTime of `model` trained by `method` on one micro-batch of the
    step's sequences (the estimator's Workload options of `_workload`, as `estimate.train_setup` maps them;
    the trainer's tensor and expert parallel degrees)."""
    from gpuledger.estimate.breakdown import memory_breakdown
    from gpuledger.estimate.throughput import ModelShape, TrainSetup, step_time
    from gpuledger.models import load_config

    w = _workload(s, model, method, gpus)
    trainable = float(memory_breakdown(w).params_trainable) if method in ("lora", "qlora") else 0.0
    setup = TrainSetup(accelerator=accelerator, method=method, framework=w.framework, gpus=gpus, precision=w.precision,
                       micro_batch=w.micro_batch, seq_len=w.seq_len, checkpointing=w.checkpointing_mode,
                       packing=w.packing, sample_tokens=w.sample_tokens, flash_attn=w.flash_attn, sharding=w.sharding,
                       params_trainable=trainable, lora_r=w.lora_r, optimizer=w.optimizer,
                       tensor_parallel=w.tensor_parallel, expert_parallel=w.expert_parallel, nodes=s.trainer_nodes)
    return step_time(ModelShape.from_config(load_config(model)), setup)


def _forward_s(model: str, s: RLSetup, tokens: float, accelerator: str, gpus: int) -> float:
    """Seconds of a forward pass over `tokens` through `model` on the trainer's GPUs: its training
    step's time on those tokens x forward / training FLOPs per token."""
    from gpuledger.estimate.compute import active_params, flops_per_token
    from gpuledger.models import count_params, load_config

    cfg = load_config(model)
    total = count_params(cfg).total
    seq = s.prompt_len + s.response_len
    fwd = flops_per_token(cfg, total, active_params(cfg), "inference", seq, False)
    train = flops_per_token(cfg, total, active_params(cfg), "full", seq, s.grad_ckpt)
    return _step(model, s, "full", accelerator, gpus).time_s(tokens) * fwd / train


def _workload(s: RLSetup, model: str, method: str, gpus: int):
    from gpuledger.estimate.workload import Workload

    sharding = s.sharding
    if sharding == "auto":
        sharding = "none" if gpus == 1 else ("ddp" if method in ("lora", "qlora") else "fsdp")
    # the step's sequences: the prompt + a response of the mean length (real tokens), padded, each micro-batch
    # to its longest response (P90 when stated, else twice the mean within the cap of the log-normal)
    longest = s.response_len_p90 or s.response_len
    seq_len, micro, packing = s.prompt_len + max(longest, s.response_len), s.micro_batch, bool(s.packing)
    if s.micro_batch_tokens:
        # a token budget: sequences of the mean length packed without padding, as many as it holds (verl's
        # rearrange_micro_batches fills ceil(tokens / budget) micro-batches; each sequence's attention its own)
        seq_len = s.prompt_len + s.response_len
        micro, packing = max(1, s.micro_batch_tokens // seq_len), True
    return Workload(model=model, method=method, precision=s.precision, micro_batch=micro,
                    seq_len=seq_len, grad_ckpt=s.grad_ckpt, gpus=gpus,
                    sharding=sharding, framework=s.framework, lora_r=s.lora_r, lora_targets=s.lora_targets,
                    packing=packing, sample_tokens=s.prompt_len + s.response_len,
                    tensor_parallel=s.trainer_tp, expert_parallel=s.trainer_ep)


def _train_s(model: str, s: RLSetup, method: str, tokens: float, accelerator: str, gpus: int) -> float:
    """Seconds of one pass of `ppo_mini_batches` optimizer steps over `tokens`: the micro-batches' work
    (a micro-step's time less its optimizer step and fixed cost) x the micro-steps the tokens take, plus
    the optimizer step and fixed cost once per mini-batch (at most one per micro-step)."""
    st = _step(model, s, method, accelerator, gpus)
    per_opt = st.parts_s["optimizer"] + st.parts_s["fixed"]
    micro_steps = tokens / st.tokens_per_step
    return micro_steps * (st.step_s - per_opt) + min(float(s.ppo_mini_batches), max(1.0, micro_steps)) * per_opt


#: Bytes per parameter of the trainer's FSDP shard that verl's param_offload moves: fp32 for a full policy
#: (verl's actor keeps fp32 parameters under bf16 mixed precision), the 16-bit base of a LoRA policy, QLoRA's 4-bit.
OFFLOAD_PARAM_BYTES = {"full": 4.0, "lora": 2.0, "qlora": 0.5}
#: Adam's two fp32 states (exp_avg, exp_avg_sq) per trained parameter: what optimizer_offload moves.
OFFLOAD_OPTIMIZER_BYTES = 8.0


def _offload_s(s: RLSetup, phases: dict[str, float]) -> dict[str, float]:
    """Returns the seconds verl-style offload adds to each phase (see the module docstring, step 5): one
    host-to-GPU load and one GPU-to-host offload (2 x the shard's bytes over PCIe) around each phase that uses
    the state; none when neither flag is set."""
    from gpuledger.estimate.breakdown import memory_breakdown
    from gpuledger.estimate.coefficients import PCIE_HOST_GBPS
    from gpuledger.models import count_params, load_config

    out: dict[str, float] = {}
    if not (s.param_offload or s.optimizer_offload):
        return out
    g, pcie = s.trainer_gpus, PCIE_HOST_GBPS * 1e9
    total = float(count_params(load_config(s.model)).total)
    if s.param_offload:
        trip = 2 * total * OFFLOAD_PARAM_BYTES[s.policy_method] / g / pcie
        users = ["train", "old_logprob", "rollout" if s.engine == "hf" else "sync"]
        for phase in users:
            if phase == "train" or phases.get(phase, 0.0) > 0:
                out[phase] = out.get(phase, 0.0) + trip
        if phases.get("reference", 0.0) > 0:  # a LoRA policy's reference is the policy itself, else a 16-bit copy
            out["reference"] = trip if s.policy_method != "full" else 2 * total * 2.0 / g / pcie
    if s.optimizer_offload:
        trained = total if s.policy_method == "full" else float(
            memory_breakdown(_workload(s, s.model, s.policy_method, g)).params_trainable)
        out["train"] = out.get("train", 0.0) + 2 * trained * OFFLOAD_OPTIMIZER_BYTES / g / pcie
    return out


def _sync_s(s: RLSetup, rollout_acc: str) -> tuple[float, str]:
    from gpuledger.catalog import gpu_kinds, normalize_accelerator
    from gpuledger.estimate.coefficients import INTERCONNECT_GBPS, generation, nodes_for
    from gpuledger.estimate.throughput import _bus_gbps, _intra_node_gbps
    from gpuledger.models import count_params, load_config

    if s.engine == "hf":
        return 0.0, "none: the trainer's own model.generate rolls out (no second copy of the weights)"

    weights = 2.0 * float(count_params(load_config(s.model)).total)  # 16-bit weights
    kinds = gpu_kinds()
    tk = kinds[normalize_accelerator(s.trainer_accelerator)]
    if s.placement == "colocated":
        # the FSDP shards all-gathered over the trainer's GPUs: the node's link, or the network between nodes
        # when they span several (the training-step model's rule, throughput._bus_gbps)
        bus, _ = _bus_gbps(tk, nodes_for(s.trainer_gpus, s.trainer_nodes), None)
        n = s.trainer_gpus
        gather = weights * (n - 1) / n / (bus * 1e9) if n > 1 else 0.0
        copy = weights / s.rollout_tp / (tk.bandwidth_gbps * 1e9 * COPY_BW_EFFICIENCY)
        wake = SLEEP_WAKE_S if s.sleep_mode else 0.0
        return (gather + copy + SYNC_FIXED_S + wake,
                f"colocated: 16-bit weights all-gathered over {bus:g} GB/s and copied in place at "
                f"{COPY_BW_EFFICIENCY:g} x HBM, + {SYNC_FIXED_S:g} s" + (f" + {SLEEP_WAKE_S:g} s wake" if wake else ""))
    rk = kinds[normalize_accelerator(rollout_acc)]
    rgpus = s.rollout_gpus or s.trainer_gpus
    one_node = s.rollout_accelerator is None and s.trainer_gpus + rgpus <= 8
    if one_node:
        link, gbps = _intra_node_gbps(tk)
        where = f"one node ({link}, {gbps:g} GB/s)"
    elif s.rollout_accelerator is not None:
        # rollouts on an instance of their own (of another kind, or the spec's rollout_gpu): no shared fabric,
        # the clouds' 100-400 Gb/s per node (INTERCONNECT_GBPS "default", coefficients.py)
        gbps = INTERCONNECT_GBPS["network"]["default"]
        where = f"between two instances ({gbps:g} GB/s, a cloud node's network: INTERCONNECT_GBPS default)"
    else:
        net = INTERCONNECT_GBPS["network"]
        gbps = min(net.get(generation(tk), net["default"]), net.get(generation(rk), net["default"]))
        where = f"between nodes ({gbps:g} GB/s)"
    return weights / (gbps * 1e9) + SYNC_FIXED_S, f"split: NCCL broadcast of the 16-bit weights {where} + {SYNC_FIXED_S:g} s"


def rl_step(s: RLSetup) -> RLStep:
    """Returns the `RLStep` of setup `s` (ValueError for a setup that cannot run: a KV cache that
    holds no request, async rollouts colocated, unknown names)."""
    _check(s)
    racc, rgpus = _rollout_gpus(s)
    n = s.prompts_per_step * s.group_size
    response_tokens = float(np.sum(_lengths(s, n, [SEED, 2])))
    tokens = n * s.prompt_len + response_tokens
    from gpuledger.estimate.dynamic_sampling import step_batches

    ds = step_batches(s)
    gen = replace(s, prompts_per_step=ds["gen_batch_size"]) if ds else s  # one generation batch
    if s.engine == "vllm":
        rollout, detail = _rollout_vllm(gen, racc, rgpus)
    else:
        rollout, detail = _rollout_hf(gen, racc, rgpus)
    batches = ds["generation_batches"] if ds else 1.0
    single = rollout  # one generation batch
    rollout *= batches
    generated = ds["generated_over_kept"] if ds else 1.0  # scored samples over trained ones
    if ds:
        from gpuledger.estimate.dynamic_sampling import rollout_note

        if gen is not s:  # the rollout time without the filter: the step's own prompts in one batch
            single = (_rollout_vllm if s.engine == "vllm" else _rollout_hf)(s, racc, rgpus)[0]
        ds["rollout_factor"] = round(rollout / single, 4)
        ds["note"] = rollout_note(s.dynamic_sampling, s.group_size, s.prompts_per_step, rollout / single,
                                  generated, batches, ds["gen_batch_size"], ds["p_over_cap"])
        detail["dynamic_sampling"] = ds
    acc, g = s.trainer_accelerator, s.trainer_gpus
    phases = {"rollout": rollout}
    phases["reference"] = _forward_s(s.model, s, tokens, acc, g) if s.reference else 0.0
    # verl recomputes the old policy's log-probs every step (actor compute_log_prob); TRL does with vLLM rollouts
    # (GRPOConfig.vllm_importance_sampling_correction, default true in TRL 1.x) or num_iterations > 1
    old = s.old_logprob if s.old_logprob is not None else (
        s.algorithm == "ppo" or s.ppo_epochs > 1 or s.engine == "vllm")
    phases["old_logprob"] = _forward_s(s.model, s, tokens, acc, g) if old else 0.0
    if s.reward_model:
        phases["reward"] = _forward_s(s.reward_model, s, tokens * generated, acc, g)
    else:
        phases["reward"] = s.reward_s_per_sample * math.ceil(n * generated / g)
    if s.algorithm == "ppo":
        critic = s.critic_model or s.model
        phases["critic"] = (_forward_s(critic, s, tokens, acc, g)
                            + s.ppo_epochs * _train_s(critic, s, "full", tokens, acc, g))
    else:
        phases["critic"] = 0.0
    phases["train"] = s.ppo_epochs * _train_s(s.model, s, s.policy_method, tokens, acc, g)
    phases["sync"], sync_note = _sync_s(s, racc)
    offload = _offload_s(s, phases)
    for phase, sec in offload.items():
        phases[phase] += sec
    if ds and s.placement == "colocated" and s.engine == "vllm":
        # verl's hybrid engine reshards the weights into vLLM on entering every generate_sequences call
        phases["sync"] *= batches
    if s.async_rollout:
        learner = sum(v for k, v in phases.items() if k not in ("rollout", "sync"))
        step = max(phases["rollout"], learner) + phases["sync"]
    else:
        step = sum(phases.values())
    groups = {"trainer": {"accelerator": acc, "gpus": g}}
    if s.placement == "split":
        groups["rollout"] = {"accelerator": racc, "gpus": rgpus}
    notes = [f"rollout: {detail['engine']} on {rgpus} x {racc}" + (" (the trainer's GPUs)" if s.placement == "colocated" else ""),
             "log-probs, reward and critic forwards at the trainer's utilisation (forward / training FLOPs)",
             f"sync: {sync_note}",
             f"train: {s.ppo_epochs} epoch(s) x {s.ppo_mini_batches} optimizer step(s) over the step's tokens"
             + (f", micro-steps of a {s.micro_batch_tokens:,}-token budget per GPU packed (~"
                f"{max(1, s.micro_batch_tokens // (s.prompt_len + s.response_len))} sequences of the mean length)"
                if s.micro_batch_tokens else "")
             + (f" on tensor_parallel {s.trainer_tp}" if s.trainer_tp > 1 else "")
             + (f", expert_parallel {s.trainer_ep}" if s.trainer_ep > 1 else ""),
             *([f"verl-style offload over PCIe: +{', +'.join(f'{v:.2f} s {k}' for k, v in offload.items())}"]
               if offload else []),
             *([ds["note"]] if ds else []),
             "step = max(rollout, learner) + sync (one-step off-policy)" if s.async_rollout else "step = sum of the phases (on-policy)"]
    return RLStep(setup=s, phases_s=phases, step_s=step, sequences=n, tokens=tokens, response_tokens=response_tokens,
                  groups=groups, rollout_detail=detail, assumptions=notes)
