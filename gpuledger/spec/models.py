"""The pydantic models of `kind: sweep` (those of `kind: capacity` in `gpuledger.spec.capacity_models`,
the shared bases in `gpuledger.spec.base`), the union of both kinds and its JSON Schema.

The capacity models are imported only where a capacity spec or the two-kind schema is asked for
(`spec_adapter`, built on first use and kept): a sweep's `validate` does not build them (issue 38)."""

from __future__ import annotations

import functools
import re
from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    TypeAdapter,
    field_validator,
    model_validator,
)
from pydantic.json_schema import SkipJsonSchema

from gpuledger import protocol
from gpuledger.estimate.dynamic_sampling import DynamicSampling
from gpuledger.spec.base import _SpecBase, _Strict
from gpuledger.spec.types import (
    MAX_LATENCY_MS,
    MAX_TRIALS,
    Accelerator,
    Cloud,
    Duration,
    Money,
    PositiveCount,
    Scalar,
)
from gpuledger.vocabulary import (
    FRAMEWORK_NAMES,
    Checkpointing,
    Framework,
    Generation,
    Launcher,
    Method,
    Offload,
    Optimizer,
    Padding,
    RefModel,
    RLPolicy,
    Strategy,
    method_name,
)
from gpuledger.vocabulary import SpecSharding as Sharding

# --------------------------------------------------------------------------------------------
# kind: sweep


class Objective(_Strict):
    metric: str = Field(min_length=1, description="name of the metric the trial reports, e.g. eval_loss")
    goal: Literal["minimize", "maximize"] = "minimize"
    target: float | None = Field(None, description="good-enough value; time/cost to reach it are reported")


class RandomRange(_Strict):
    """A numeric range of a search parameter (`strategy: random | tpe | asha`; a list of values is
    categorical): `suggest_float(low, high, log)` or, with `type: int`, `suggest_int` in Optuna."""

    low: float = Field(description="smallest value (> 0 when log)")
    high: float = Field(description="largest value (>= low)")
    log: bool = Field(False, description="drawn uniformly in log space (learning rates)")
    type: Literal["float", "int"] = Field("float", description="int: whole numbers from low to high")


ParamValues = list[Scalar] | RandomRange


class Pruning(_Strict):
    """ASHA's settings (`gpuledger.search`): a trial's k-th reported value of the objective is its
    resource k; the first rung is at `min_steps` values, each next one `reduction_factor` times later,
    and a trial goes on from a rung only when its value is in the best 1/`reduction_factor` there."""

    min_steps: int = Field(2, ge=1, le=1_000_000, description="objective values a trial reports before it "
                           "can be pruned (its first rung)")
    reduction_factor: int = Field(5, ge=2, le=100, description="1/reduction_factor of the trials at a rung go on "
                                  "(default 5: the customary 3 dropped the demo grid's recipe, docs/search.md)")
    unsafe: Literal["correct", "keep"] = Field("correct", description="settings the measured curves show dropping "
                                               "the best point (gpuledger.search.safety): correct (the cheapest that "
                                               "keeps it, said in the plan) or keep (as written, with a warning)")
    values_per_trial: int | None = Field(None, ge=1, le=1_000_000, description="objective values a trial "
                                         "that runs to its end reports (the planner's successive-halving "
                                         "estimate of the spend under pruning, when no earlier learning curves "
                                         "of the model are measured)")
    suspend: bool = Field(True, description="a trial at a rung whose outcome waits on points not started yet "
                          "is stopped there and relaunched from its start once the rung is decided, when that "
                          "is expected to cost less than running on (gpuledger/search/suspension.py); false: "
                          "it runs on undecided (plain successive halving; for trials whose relaunch is dear "
                          "or not repeatable)")


#: `search.probe_above_usd`'s default (USD): see the field's description.
PROBE_ABOVE_USD = 5.0


class Search(_Strict):
    strategy: Strategy = Field(
        "grid", description="grid and random: every trial drawn up front; tpe and asha: Optuna asks for the "
        "next trial as a slot frees (asha also prunes trials by their intermediate objective values)")
    params: dict[str, ParamValues] = Field(min_length=1, description="a list of values (categorical) or a range "
                                           "{low, high, log, type} (numeric; not for strategy grid)")
    n_trials: int | None = Field(None, ge=1, le=MAX_TRIALS, description="trials to run; required with a range "
                                 "(random, tpe, asha); default for tpe/asha over lists: every point of the grid")
    seed: int = Field(0, description="makes the sweep reproducible: random's draws, asha's points and order, "
                      "tpe's first (random) points")
    pruning: Pruning | None = Field(None, description="strategy asha (default settings when absent), or tpe "
                                    "(pruning only when set)")
    acquisition: Literal["tpe", "ei_per_usd"] = Field("tpe", description="strategy tpe: tpe (Optuna's TPE) or "
                                                      "ei_per_usd (the planned point with the most expected "
                                                      "improvement per estimated dollar; gpuledger.search.acquisition)")
    stopping: Literal["rungs", "cost"] = Field(
        "cost", description="when a running trial stops early (asha, tpe with pruning): cost (default) also stops a "
        "trial whose learning curve, extrapolated from similar measured curves, makes P(it beats the best so far) x "
        "stopping_value_usd worth less than the dollars it still costs (gpuledger.search.extrapolate; never one in "
        "the better half at its step); rungs: successive halving only (`pruning`)")
    stopping_value_usd: Money | None = Field(None, gt=0, description="stopping: cost: what a recipe better than "
                                             "the best so far is worth (USD; default: the plan's full spend)")
    stopping_level: Literal["fifth", "third", "half"] | None = Field(
        None, description="stopping: cost: how boldly (gpuledger.search.extrapolate.LEVELS): never stop a trial as good "
        "as the best fifth, third or half of the similar curves at its step (half: the default without curves of "
        "the kind); default: the boldest that keeps the best measured curve in the plan's replayed check")
    exclude: list[dict[str, Scalar | list[Scalar]]] = Field(
        default_factory=list, description="a trial matching every key of one rule is left out"
    )
    objective: Objective
    probe: Literal["auto", "never"] = Field(
        "never", description="auto: `gpuledger sweep` first probes each shape (GPU type and count, sharding, "
        "micro-batch, sequence length) that has no probe or measured run yet, when the plan costs more than "
        "probe_above_usd and fits the budget, and re-plans on what the probes measured before launching "
        "(docs/probes.md); never (default: a sweep launches only what its plan shows; probes are jobs that "
        "cost money and, on a cloud, minutes of provisioning per shape): plan on the estimates and what "
        "`gpuledger probe` measured by hand")
    probe_above_usd: float = Field(
        PROBE_ABOVE_USD, ge=0, le=1e9, description="search.probe auto probes only a sweep whose plan costs more "
        "than this (USD); default 5: a probe costs one instance's start-up plus ~10 s of steps per shape (on a "
        "cloud GPU with its 10 min of provisioning and set-up, about $0.5 at $3/h), a tenth of a $5 sweep at most, "
        "and it brings the plan's trial times from the formula's typical 30-50% error to what was measured")

    @field_validator("params")
    @classmethod
    def _param_names(cls, params: dict[str, Any]) -> dict[str, Any]:
        for name in params:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                raise ValueError(f"parameter name {name!r} must be an identifier (letters, digits, _)")
        return params


class Train(_Strict):
    seq_len: int = Field(2048, ge=1, le=10_000_000)
    tokens_per_trial: PositiveCount | None = Field(None, description="training tokens per trial (for time and cost): "
                                           "20000000, 20_000_000, 2e7 or 20M")
    samples: PositiveCount | None = Field(None, description="training samples of the data set, instead of "
                                          "tokens_per_trial: tokens_per_trial = samples x epochs x their mean real "
                                          "tokens (sample_tokens, default 250, cut at seq_len when unpacked)")
    epochs: float = Field(1.0, gt=0, le=100_000, description="passes over train.samples (with samples)")
    micro_batch: int = Field(1, ge=1)
    grad_checkpointing: bool = True
    flash_attention: bool = True
    optimizer: Optimizer = "adamw"
    lora_r: int = Field(16, ge=1)
    lora_targets: str = "q,v"
    sharding: Sharding = "auto"
    prompt_len: int | None = Field(None, ge=1)
    completion_len: int | None = Field(None, ge=1)
    group_size: int | None = Field(None, ge=1)
    # optimised-stack options of the memory estimate (gpuledger.estimate.Workload documents each effect)
    framework: Framework = Field("hf", description="training code whose memory habits and speed to assume: an "
                                 "engine, or a stack built on one (axolotl, unsloth, llama-factory, trl, ...: "
                                 "gpuledger.vocabulary.FRAMEWORK_STACKS), timed and sized as its engine (Unsloth's LoRA/QLoRA "
                                 "steps with its own kernels' measured speed-up)",
                                 json_schema_extra={"enum": list(FRAMEWORK_NAMES)})
    #: the stack `framework` named when it is one built on an engine, else None (set by the check, not written)
    stack: SkipJsonSchema[str | None] = Field(None, exclude=True)
    compile: bool = Field(False, description="torch.compile: pointwise intermediates recomputed, not saved")
    activation_offload: bool = Field(False, description="saved activations offloaded to CPU memory")
    chunked_ce: bool | None = Field(None, description="chunked cross-entropy; null = the framework's habit")
    fused_ce: bool = Field(False, description="fused linear cross-entropy (Liger use_liger_kernel, cut-cross-entropy, "
                           "Unsloth): the full logits never materialised")
    double_quant: bool | None = Field(None, description="4-bit base with double quantisation (bitsandbytes "
                                      "bnb_4bit_use_double_quant); null = the framework's habit")
    eval_batch: int | None = Field(None, ge=1, description="sequences per GPU of the run's evaluation "
                                   "(per_device_eval_batch_size): its peak is a phase of the memory estimate; "
                                   "null = no evaluation counted")
    eval_strategy: Literal["no", "steps", "epoch"] | None = Field(
        None, description="evaluation during training (TrainingArguments.eval_strategy): steps (every eval_steps "
        "optimizer steps), epoch (after every epoch of train.samples), no; null = steps when eval_steps is given, "
        "else no. Timed as forward passes over eval_samples (in each trial's time and cost)")
    eval_steps: float | None = Field(None, gt=0, description="eval_strategy steps: every this many optimizer steps, "
                                     "or below 1 that fraction of the run's steps (the Trainer's ratio)")
    eval_samples: int | None = Field(None, ge=1, description="samples each evaluation runs forward (the eval split's "
                                     "size or max_eval_samples), at the samples' mean real tokens")
    optimizer_in_bwd: bool | None = Field(None, description="optimizer step fused into backward (gradients freed per "
                                          "parameter); null = the framework's habit")
    grad_accum: int | None = Field(None, ge=1, description="micro-batches per optimizer step (>1 keeps gradients "
                                   "through forward); null = the framework's habit")
    lora_dropout: float | None = Field(None, ge=0, lt=1, description="LoRA dropout; null = the framework's default")
    zero_bucket_elems: int | None = Field(None, ge=1, description="DeepSpeed reduce/all-gather bucket (elements)")
    ref_model: RefModel = Field(
        "auto", description="GRPO/PPO reference model placement")
    generation: Generation = Field("hf", description="GRPO/PPO rollout engine")
    vllm_gpu_memory_utilization: float = Field(0.3, gt=0, le=1, description="vllm_colocate: GPU share vLLM reserves")
    vllm_sleep: bool = Field(False, description="vllm_colocate: vLLM sleep mode, its share released while training "
                             "(TRL vllm_enable_sleep_mode; verl's hybrid engine does it by default)")
    policy: RLPolicy = Field("full", description="GRPO/PPO: policy trained full or LoRA/QLoRA")
    rollout_gpus: int | None = Field(None, ge=1, le=1024, description="vllm_server: GPUs for vLLM (docs/rl.md)")
    rollout_gpu: str | None = Field(None, min_length=1, max_length=64, description=(
        "vllm_server: the rollouts on rollout_gpus GPUs of this kind on an instance of their own (e.g. L40S); "
        "the trial's GPUs are then the trainer's and both instances are billed (docs/rl.md)"))
    async_rollout: bool = Field(False, description="vllm_server: one-step off-policy rollouts (docs/rl.md)")
    completion_len_p90: int | None = Field(None, ge=1, description="GRPO/PPO: P90 of generated tokens")
    prompts_per_step: int | None = Field(None, ge=1, le=1_000_000, description="GRPO/PPO: prompts per optimizer "
                                         "step, all trainer GPUs (verl's train_batch_size); null = micro_batch x "
                                         "trainer GPUs x grad_accum")
    old_logprob: bool | None = Field(None, description="GRPO/PPO: the trainer recomputes the old policy's log-probs "
                                     "each step; null = PPO, ppo_epochs > 1 or vLLM rollouts (verl always; TRL with vLLM)")
    rollout_eager: bool = Field(False, description="GRPO/PPO vLLM: enforce_eager, no CUDA graphs (verl <= 0.4's "
                                "default rollout.enforce_eager: True)")
    rollout_tp: int = Field(1, ge=1, le=64, description="GRPO/PPO vLLM: tensor-parallel GPUs per rollout engine "
                            "replica (verl's rollout.tensor_model_parallel_size, TRL's vllm_tensor_parallel_size)")
    generation_rounds: int | None = Field(None, ge=1, le=4096, description="GRPO/PPO: sequential generate calls per "
                                          "step (TRL < 0.17: gradient_accumulation_steps; verl, TRL >= 0.17: 1); "
                                          "null = from trl_version, else 1")
    trl_version: str | None = Field(None, pattern=r"^\d+\.\d+(\.\S*)?$", max_length=40, description=(
        "GRPO/PPO with TRL: its version (e.g. 0.15.2); before 0.17 GRPOTrainer generated once per gradient-"
        "accumulation micro-step, so generation_rounds defaults to those micro-steps"))
    ppo_epochs: int = Field(1, ge=1, le=100, description="GRPO/PPO: optimizer passes over each rollout batch (verl "
                            "ppo_epochs, TRL num_iterations); above 1 the old policy's log-probs are recomputed")
    ppo_mini_batches: int = Field(1, ge=1, le=100_000, description="GRPO/PPO: optimizer steps per pass over the "
                                  "rollout batch (verl train_batch_size / ppo_mini_batch_size; TRL 1)")
    param_offload: bool = Field(False, description="GRPO/PPO verl-style: the trainer's FSDP parameters kept on the "
                                "host between phases, loaded over PCIe for each (verl fsdp_config.param_offload)")
    optimizer_offload: bool = Field(False, description="GRPO/PPO verl-style: Adam's states kept on the host but "
                                    "in the update (verl fsdp_config.optimizer_offload)")
    dynamic_sampling: DynamicSampling | None = Field(None, description=(
        "GRPO: DAPO's dynamic sampling (verl algorithm.filter_groups): groups whose rewards are all equal are "
        "dropped and generation batches repeat until prompts_per_step groups are kept; rollout and reward scale "
        "by the expected batches (docs/rl.md); null = off"))
    reward_seconds_per_sample: float = Field(0.0, ge=0, le=3600, description="GRPO/PPO reward function s/sample")
    reward_model: str | None = Field(None, max_length=300, description="GRPO/PPO reward model (registry name or config "
                                     "path) of its own size; null: GRPO reward functions, PPO one like the policy")
    micro_batch_sequences: int | None = Field(None, ge=1, le=100_000, description="GRPO/PPO: sequences per trainer "
                                              "GPU per micro-step (TRL per_device_train_batch_size, verl "
                                              "ppo_micro_batch_size_per_gpu); null = micro_batch x group_size")
    micro_batch_tokens: int | None = Field(None, ge=1, le=10_000_000, description="GRPO/PPO: token budget per "
                                           "trainer GPU per micro-step (verl use_dynamic_bsz with "
                                           "ppo_max_token_len_per_gpu): sequences packed without padding up to it, "
                                           "at least seq_len; null = micro-batches of micro_batch_sequences")
    critic_model: str | None = Field(None, max_length=300, description="PPO value model of its own size (registry name "
                                     "or config path; DeepSpeed-Chat pairs a 6.7B actor with a 350M critic); null: "
                                     "the policy's architecture")
    # what training time depends on (gpuledger/estimate/throughput.py)
    checkpointing: Checkpointing | None = Field(
        None, description="activation checkpointing mode; null = full/none from grad_checkpointing")
    packing: bool | None = Field(None, description="sequences packed to seq_len (true) or padded per micro-batch "
                                 "(false); null = the framework's habit")
    padding: Padding | None = Field(None, description="how samples fill seq_len: longest (each micro-batch padded to its "
                                    "longest sample: TRL SFTTrainer, the Trainer's collators), max_length (every sample "
                                    "padded to seq_len: padding=\"max_length\" in the tokenization, or samples longer "
                                    "than the cap), packed (= packing: true); null = unstated: with train.samples and "
                                    "no sample_tokens an unpacked run is planned as max_length (each sample costs "
                                    "seq_len positions: the budget's safe side), else longest")
    sample_tokens: int | None = Field(None, ge=1, le=10_000_000, description="mean real tokens per sample before "
                                      "padding (the data set's; unpacked runs); null = a typical instruction set's "
                                      "(250) cut at seq_len")
    tensor_parallel: int = Field(1, ge=1, le=64, description="tensor-parallel degree of training")
    pipeline_parallel: int = Field(1, ge=1, le=256, description="pipeline-parallel degree of training")
    nodes: int | None = Field(None, ge=1, le=4096, description="nodes a trial spans; null = ceil(GPUs / 8)")
    offload: Offload = Field("none", description="CPU offload: optimizer (ZeRO offload_optimizer) or params "
                             "(ZeRO-3 offload_param, FSDP cpu_offload: parameters, gradients and optimizer)")
    sequence_parallel: int = Field(1, ge=1, le=1024, description="sequence/context parallel degree (Ulysses, "
                                   "ring attention): each sequence split over this many GPUs")
    expert_parallel: int = Field(1, ge=1, le=1024, description="MoE expert parallel degree: routed experts split "
                                 "over this many GPUs, tokens exchanged by all-to-all")

    @model_validator(mode="before")
    @classmethod
    def _stack_named(cls, data):
        """A stack's name in `framework` (`axolotl`, `Unsloth`, ...): its engine, the name kept in `stack`, the
        stack's own defaults where the spec does not say (`gpuledger.estimate.workload.stack_inputs`)."""
        from gpuledger.estimate.workload import stack_inputs

        if isinstance(data, dict) and "stack" in data:
            raise ValueError("stack is not a key to write: name the stack in train.framework")
        return stack_inputs(data)

    @field_validator("framework", mode="before")
    @classmethod
    def _framework(cls, value):
        from gpuledger.estimate.workload import check_framework

        return check_framework(value)

    @model_validator(mode="after")
    def _eval_schedule(self) -> Train:
        """eval_strategy as the Trainer reads it, into eval_steps (what the time model counts): epoch = one
        evaluation per epoch of train.samples (the ratio 1 / epochs of the run's steps); no = none."""
        strategy = self.eval_strategy or ("steps" if self.eval_steps is not None else "no")
        if strategy == "no":
            if self.eval_steps is not None:
                raise ValueError("train.eval_steps needs train.eval_strategy steps (it is no)")
            if self.eval_samples is not None and self.eval_strategy == "no":
                raise ValueError("train.eval_samples with train.eval_strategy no: nothing evaluates")
            if self.eval_samples is not None:
                raise ValueError("train.eval_samples needs train.eval_steps (every N optimizer steps) or "
                                 "train.eval_strategy epoch")
            return self
        if self.eval_samples is None:
            raise ValueError(f"train.eval_strategy {strategy} needs train.eval_samples (the samples each evaluation runs)")
        if strategy == "steps" and self.eval_steps is None:
            raise ValueError("train.eval_strategy steps needs train.eval_steps (every N optimizer steps)")
        if strategy == "epoch":
            if self.samples is None:
                raise ValueError("train.eval_strategy epoch needs train.samples and train.epochs (what an epoch is)")
            if self.epochs < 1:
                raise ValueError(f"train.eval_strategy epoch with train.epochs {self.epochs}: no epoch ends")
            # the fraction of the run's steps one epoch is, just under 1 for one epoch (a ratio, not "every step")
            ratio = min(1.0 / self.epochs, 1 - 1e-9)
            if self.eval_steps is not None and self.eval_steps != ratio:  # equal: this spec read back
                raise ValueError("train.eval_steps goes with train.eval_strategy steps, not epoch")
            object.__setattr__(self, "eval_steps", ratio)
        elif self.eval_steps > 1 and self.eval_steps != int(self.eval_steps):
            raise ValueError(f"train.eval_steps {self.eval_steps}: a whole number of optimizer steps, or a fraction "
                             "below 1 of the run's steps")
        return self

    @model_validator(mode="after")
    def _padding_resolved(self) -> Train:
        """`padding` as the time model reads it (never null after this): packed = packing true; unstated =
        max_length for an unpacked run of train.samples whose lengths are not stated (`throughput.resolved_padding`),
        else longest."""
        from gpuledger.estimate.throughput import resolved_padding

        try:
            packing, padding = resolved_padding(self.packing, self.padding, self.sample_tokens, self.framework,
                                                samples=self.samples is not None)
        except ValueError as e:
            raise ValueError(f"train.padding: {e}") from None
        object.__setattr__(self, "packing", packing)
        object.__setattr__(self, "padding", padding)
        return self

    @model_validator(mode="after")
    def _tokens_from_samples(self) -> Train:
        """`samples` (x `epochs`) stands for `tokens_per_trial`: the samples' mean real tokens from the time
        model's length assumption (gpuledger.estimate.throughput.mean_real_tokens), so that the planner counts
        the data set's samples, not tokens / seq_len of them."""
        if self.samples is None:
            if "epochs" in self.model_fields_set and self.epochs != 1.0:
                raise ValueError("train.epochs goes with train.samples (the data set's samples); with "
                                 "train.tokens_per_trial give the tokens of all epochs")
            return self
        from gpuledger.estimate.throughput import framework_class, mean_real_tokens

        packed = self.packing if self.packing is not None else framework_class(self.framework) == "tuned"
        tokens = max(1, round(self.samples * self.epochs * mean_real_tokens(self.seq_len, packed, self.sample_tokens)))
        if self.tokens_per_trial is not None and self.tokens_per_trial != tokens:  # equal: this spec read back
            raise ValueError("give train.tokens_per_trial or train.samples (with train.epochs), not both")
        object.__setattr__(self, "tokens_per_trial", tokens)
        return self


MAX_GPUS_PER_TRIAL = 1024  # the most GPUs `resources.gpus_per_trial` may ask (several nodes above 8)
MAX_PARALLEL = 1024  # the most trials `resources.max_parallel` (and `--max-parallel`) may run at once


class Resources(_Strict):
    accelerators: list[Accelerator] = Field(default_factory=list)
    gpus_per_trial: Literal["auto"] | Annotated[int, Field(ge=1, le=MAX_GPUS_PER_TRIAL)] = Field(
        "auto", description="GPUs of one trial; auto: 1, 2, 4 or 8 on one node, the cheapest that fits; above 8 the "
        "trial spans train.nodes nodes (default ceil(GPUs / 8)) of at most 8 GPUs each, one instance per node, "
        "launched as one SkyPilot task of num_nodes nodes")
    clouds: list[Cloud] = Field(default_factory=lambda: ["aws", "gcp"])
    regions: list[str] | None = None
    spot: Literal["auto", "always", "never"] = "auto"
    pool: Literal["auto", "always", "never"] = Field(
        "auto", description="cloud: a SkyPilot pool of workers (start-up once per worker) or per-trial managed jobs; "
        "auto picks by deadline, then expected cost")
    max_parallel: Literal["auto"] | Annotated[int, Field(ge=1, le=MAX_PARALLEL)] = Field(
        4, description="trials running at once; auto: the slots that meet budget.deadline at the least expected cost "
        "under the search strategy (gpuledger/plan/parallel.py; the plan shows each K's makespan and cost)")
    trials_per_gpu: Literal["auto"] | Annotated[int, Field(ge=1, le=16)] = Field(
        1, description="packed trials: k one-GPU trials side by side in one job per slot (k agents, each billed its "
        "share; gpuledger/plan/packing.py); auto: the plan's recommended k (1 without a packing option)")
    preemption_per_hour: float | None = Field(
        None, ge=0, le=10, description="overrides the default spot preemption rate (per hour)"
    )
    deadline_confidence: float = Field(0.9, gt=0, lt=1)


class Budget(_Strict):
    max_usd: Money = Field(gt=0)
    deadline: Duration | None = None
    confidence: Literal["p50", "p90"] | None = Field(
        None, description="the quantile of the estimates' bands the budget guard, the deadline check and the spot "
                          "choice decide at (p90: 9 in 10 such runs cost and take no more); null = the project's "
                          "setting budget.confidence, default p90")

    @property
    def deadline_s(self) -> float | None:
        return self.deadline


class Local(_Strict):
    usd_per_hour: Money = 0.0
    trial_timeout: Duration | None = None


class Task(_Strict):
    setup: str | None = None
    run: str = Field(min_length=1)
    rollout_run: str | None = Field(None, min_length=1, description=(
        "train.rollout_gpu: the command that serves the rollouts on their own instance, the rollout task of the "
        "trial's SkyPilot job group (e.g. trl vllm-serve --model MODEL --port $GPULEDGER_ROLLOUT_PORT; docs/rl.md)"))
    workdir: str = "."
    env: dict[str, str] = Field(default_factory=dict)

    @field_validator("env")
    @classmethod
    def _env_names(cls, env: dict[str, str]) -> dict[str, str]:
        for key in env:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
                raise ValueError(f"environment variable name {key!r} is not valid")
        reserved = protocol.ledger_env_names(env)
        if reserved:
            raise ValueError(f"{', '.join(reserved)}: {protocol.LEDGER_ENV_PREFIX}* variables are gpuledger's own "
                             "(ids, placement, paths), set by the launcher; a spec cannot set them. Rename the "
                             "variable (a trainer's own setting needs another prefix)")
        return env


class ServeSlo(_Strict):
    p95_ttft_ms: float = Field(gt=0, le=MAX_LATENCY_MS, description="time to first token, 95th percentile (ms)")
    p95_tpot_ms: float = Field(gt=0, le=MAX_LATENCY_MS, description="time per output token, 95th percentile (ms)")


class Serve(_Strict):
    """Serving settings of a `method: inference` sweep (each may also be a search parameter of the
    same name, which overrides it per trial; every field is a task-template placeholder)."""

    engine: Literal["tiny", "vllm", "sglang", "trtllm"] = Field(
        "vllm", description="server the trial starts: tiny (gpuledger/trainers/tiny_serve.py, CPU) or a GPU engine")
    prompt_tokens: int = Field(512, ge=1, le=1_000_000, description="prompt tokens per request")
    output_tokens: int = Field(128, ge=2, le=1_000_000, description="output tokens per request (>= 2: TPOT)")
    max_num_seqs: int = Field(256, ge=1, le=4096, description="sequences batched together (engine flag)")
    max_num_batched_tokens: int | None = Field(None, ge=1, description="tokens per engine step (engine flag)")
    tensor_parallel: int = Field(1, ge=1, le=8, description="GPUs per server (tensor-parallel size)")
    kv_cache_dtype: Literal["auto", "fp8", "bf16", "fp16"] = Field("auto", description="auto: the weights' dtype")
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1, description="fraction of GPU memory the engine takes")
    concurrency: int | None = Field(None, ge=1, le=4096, description="requests in flight (closed loop)")
    request_rate: float | None = Field(None, gt=0, description="Poisson arrivals per second (open loop)")
    num_prompts: int = Field(200, ge=1, le=100_000, description="requests per trial at most")
    max_duration: Duration = Field(60.0, gt=0, description="no new request after this long (per trial)")
    slo: ServeSlo | None = Field(None, description="latency objective the report marks and prices against")


class SweepSpec(_SpecBase):
    kind: Literal["sweep"]
    method: Method = "lora"
    train: Train = Field(default_factory=Train)
    serve: Serve = Field(default_factory=Serve, description="serving settings (method: inference only)")
    search: Search
    resources: Resources = Field(default_factory=Resources)
    budget: Budget
    launcher: Launcher = "local"
    local: Local = Field(default_factory=Local)
    task: Task

    @field_validator("method", mode="before")
    @classmethod
    def _method(cls, value):
        return method_name(value)


@functools.cache
def spec_adapter() -> TypeAdapter:
    """Returns the TypeAdapter of either spec kind (`kind` the discriminator), built on first use and kept:
    it imports the capacity models, which a sweep spec does not need (`gpuledger.spec.load` validates
    each spec by its own kind's model)."""
    from gpuledger.spec.capacity_models import CapacitySpec

    return TypeAdapter(Annotated[SweepSpec | CapacitySpec, Field(discriminator="kind")])


def json_schema() -> dict[str, Any]:
    """Returns the JSON Schema of both spec kinds (for editor completion)."""
    schema = spec_adapter().json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "gpuledger spec"
    return schema

