"""`Workload`: what one training or inference setup is (the `gpuledger estimate` options)."""

from __future__ import annotations

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_serializer,
    model_validator,
)

from gpuledger.estimate.coefficients import STACK_KERNEL_SPEEDUP
from gpuledger.estimate.dynamic_sampling import DynamicSampling
from gpuledger.vocabulary import (
    FRAMEWORK_NAMES,
    FRAMEWORK_STACKS,
    FRAMEWORKS,
    QUANTISED_PRECISIONS,
    RL_METHODS,
    Checkpointing,
    Device,
    Framework,
    Generation,
    Method,
    Offload,
    Optimizer,
    Padding,
    Precision,
    RefModel,
    RLPolicy,
    Sharding,
    framework_engine,
    framework_name,
    method_name,
    precision_name,
)

#: Workload fields a spec's `train` section carries under the same name (gpuledger/spec/models.py Train).
STACK_FIELDS = ("framework", "stack", "compile", "activation_offload", "chunked_ce", "fused_ce", "double_quant", "eval_batch",
                "eval_steps", "eval_samples", "optimizer_in_bwd", "grad_accum",
                "lora_dropout", "zero_bucket_elems", "ref_model", "generation", "vllm_gpu_memory_utilization",
                "vllm_sleep", "policy", "rollout_gpus", "rollout_gpu", "async_rollout", "completion_len_p90", "prompts_per_step",
                "generation_rounds", "trl_version", "ppo_epochs", "ppo_mini_batches", "param_offload",
                "optimizer_offload", "dynamic_sampling", "rollout_tp", "old_logprob", "rollout_eager", "reward_seconds_per_sample", "reward_model", "critic_model", "micro_batch_sequences", "micro_batch_tokens",
                "checkpointing", "packing", "padding", "sample_tokens", "tensor_parallel", "pipeline_parallel", "nodes", "offload",
                "sequence_parallel",
                "expert_parallel")


#: Activation checkpointing of a stack when the workload does not say (neither `checkpointing` nor
#: `grad_ckpt` given): the pre-training stacks' own defaults. Megatron-Core's `recompute_granularity`
#: is None by default (megatron/core/transformer/transformer_config.py) and NeMo's Megatron recipes
#: for 1-70B models leave it off; with flash attention the "selective" recompute (the attention core)
#: costs almost nothing, so it is what those runs' time and memory look like; torchtitan's
#: `activation_checkpoint.mode` is "selective" in its Llama 3 8B config (full for 70B/405B); nanotron's
#: `recompute_layer` defaults to false. llm-foundry's MPT yamls set `activation_checkpointing: true`
#: (full). The fine-tuning stacks (hf, litgpt, torchtune) keep `grad_ckpt`'s default (on: TRL's
#: SFTConfig and most PEFT recipes turn gradient checkpointing on).
FRAMEWORK_CHECKPOINTING = {"megatron": "selective", "nemo": "selective", "torchtitan": "selective",
                           "nanotron": "none", "llm-foundry": "full"}


#: What a stack built on an engine (`vocabulary.FRAMEWORK_STACKS`) does by default that its engine does not,
#: applied when the workload does not say (each value a Workload field). Unsloth: no logits are returned
#: "from 2024.11 onwards" (unsloth_zoo's LOGITS_ERROR_STRING; the loss runs fused over chunks,
#: unsloth_zoo fused_losses), so `fused_ce`; `FastLanguageModel.get_peft_model(use_gradient_checkpointing=
#: "unsloth")`, its default, checkpoints every block and offloads the checkpointed inputs to CPU memory,
#: so `activation_offload`. XTuner's configs pack samples to the cap (`pack_to_max_length = True`). Liger
#: Kernel's `apply_liger_kernel_to_*` / `AutoLigerKernelForCausalLM` replace the loss with its fused linear
#: cross-entropy (`fused_linear_cross_entropy=True` by default: no logits materialised), so `fused_ce`.
#: Their speed is their engine's, but for Unsloth's adapter runs: its own kernels (coefficients.STACK_KERNEL_SPEEDUP,
#: from the published Unsloth / Transformers ratios of gpuledger/estimate/data/stack_speed.csv).
STACK_HABITS: dict[str, dict[str, object]] = {
    "unsloth": {"fused_ce": True, "activation_offload": True},
    "xtuner": {"packing": True},
    "liger-kernel": {"fused_ce": True}, "liger": {"fused_ce": True},
}


def stack_inputs(data: object) -> object:
    """Returns the inputs of a Workload (or a spec's `train`) with a stack's name resolved: `framework`
    names the engine the stack runs on, `stack` the stack as written (None for an engine), and each of
    the stack's `STACK_HABITS` the inputs do not set is set (and TRL's version habit, `trl_version_habits`).
    Inputs that are not a mapping, or a framework that names nothing known, are returned as they are (the
    field's check names them)."""
    if not isinstance(data, dict):
        return data
    name = framework_name(data["framework"]) if "framework" in data else None
    engine = framework_engine(name) if name is not None else None
    if engine is None or engine == data["framework"]:
        out = data
    elif engine == name:  # an engine written in another case or with `_`
        out = {**data, "framework": engine}
    else:
        out = {**data, "framework": engine, "stack": name}
        for key, value in STACK_HABITS.get(name, {}).items():
            if out.get(key) is None:
                out[key] = value
    return trl_version_habits(out)


#: TRL's SFTTrainer computes the loss as `loss_type="chunked_nll"` by default from v1.4.0 (huggingface/trl #5846,
#: 2026-06-14; the chunked loss itself #5575): the lm_head runs only on the tokens with labels and the cross-entropy in
#: checkpointed chunks, so the full [tokens x vocabulary] logits are never held (docs/source/reducing_memory_usage.md:
#: "~30 % less peak VRAM, up to ~50 %" on Qwen3-1.7B, wall time neutral): `fused_ce` for its SFT runs, unless the
#: workload says (`use_liger_kernel` turns it off in TRL: Liger's own fused loss is `fused_ce` too). Before 1.4 (and
#: a version not stated) the loss is the full-logits one. Sized as `fused_ce` (memory.loss_bytes_per_token: ~3 hidden
#: widths per token kept); TRL's transient 256-token chunk of fp32 logits and their gradient (~0.3 GB at a 152k
#: vocabulary) is not counted.
TRL_CHUNKED_NLL_SINCE = (1, 4)
#: the names `fused_ce` is written under (Workload's and the spec's aliases)
FUSED_CE_KEYS = ("fused_ce", "fused_cross_entropy", "use_liger_kernel", "liger_kernel", "cut_cross_entropy")


def trl_version_habits(data: dict) -> dict:
    """Returns the inputs with TRL's own loss habit of its stated version: `fused_ce` for an SFT run (not GRPO/PPO)
    of TRL's SFTTrainer (framework hf, or the trl / sfttrainer stack) at `trl_version` >= 1.4 that does not set it."""
    version = data.get("trl_version")
    if (not isinstance(version, str) or any(data.get(k) is not None for k in FUSED_CE_KEYS)
            or data.get("method") in (*RL_METHODS, "inference")
            or data.get("stack") not in (None, "trl", "sfttrainer")
            or str(data.get("framework") or "hf") != "hf"):
        return data
    try:
        major, minor = (int(p) for p in version.split(".")[:2])
    except ValueError:  # the field's pattern names it
        return data
    return {**data, "fused_ce": True} if (major, minor) >= TRL_CHUNKED_NLL_SINCE else data


def _shown(value: object) -> str:
    """Returns a value as a message shows it: its repr, cut at 60 characters whatever was typed."""
    shown = repr(value)
    return shown if len(shown) <= 60 else shown[:57] + "..."


def check_framework(value: object) -> object:
    """The `framework` field's check before its type's: an engine's or a stack's name in any case, with
    `_` or spaces for `-`, becomes its engine; one message lists what is known."""
    engine = framework_engine(value)
    if engine is not None:
        return engine
    if value is not None:
        raise ValueError(f"unknown framework {_shown(value)}: an engine ({', '.join(FRAMEWORKS)}) or a stack built on one "
                         f"({', '.join(FRAMEWORK_STACKS)})")
    return value


def stack_note(framework: str, stack: str | None) -> str:
    """Returns what the estimate assumes of the training code: the engine's habits, and the stack they stand
    for with the stack's own defaults (the estimate's "training code habits" line, the plan's line on a stack)."""
    if not stack:
        return f"{framework} (logits/loss dtype, adapter dtype)"
    habits = STACK_HABITS.get(stack, {})
    own = (f"; {stack}'s own defaults: " + ", ".join(f"{k} {str(v).lower()}" for k, v in habits.items())
           if habits else "")
    speed = STACK_KERNEL_SPEEDUP.get(stack)
    timed = (f"sized as it and timed as it with {stack}'s own kernels on LoRA/QLoRA (matmul, memory-bound and launch "
             f"time / {speed:g}, from published {stack} / {framework} ratios: stack_speed.csv)" if speed
             else "timed and sized as it")
    return f"{framework} (logits/loss dtype, adapter dtype), the engine {stack} runs on, {timed}{own}"


def memory_habits(framework: str) -> str:
    """Returns the framework whose memory habits a stack shares: the tuned pre-training stacks
    (torchtitan, Megatron, NeMo, llm-foundry, nanotron) keep 16-bit adapters/activations, fused AdamW
    and FSDP2-style sharding like torchtune; the others are themselves."""
    return framework if framework in ("hf", "litgpt", "torchtune") else "torchtune"


class Workload(BaseModel):
    """One setup to estimate, per GPU. Field names follow the `gpuledger estimate` options.

    `micro_batch` is sequences per GPU per step (for GRPO/PPO: prompts per GPU; each gets
    `group_size` completions). `seq_len` is tokens per sequence for training (and the context for
    inference when prompt/completion lengths are not given).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    model: str
    method: Method = "lora"
    precision: Precision = "bf16"
    optimizer: Optimizer = "adamw"
    micro_batch: int = Field(1, ge=1)
    seq_len: int = Field(2048, ge=1)
    grad_ckpt: bool = True
    #: activation checkpointing mode: none, selective (the attention core recomputed: Megatron,
    #: torchtitan, NeMo), full (every block recomputed). None = from grad_ckpt (full / none).
    checkpointing: Checkpointing | None = None
    flash_attn: bool = True
    lora_r: int = Field(16, ge=1)
    lora_targets: str = "q,v"
    #: LoRA dropout probability; > 0 keeps a dropout output and mask per adapted linear for backward.
    #: None = the framework's default: PEFT LoraConfig 0.0 (hf), lit-gpt 0.05, torchtune recipes 0.0.
    lora_dropout: float | None = Field(None, ge=0, lt=1)
    gpus: int = Field(1, ge=1)
    sharding: Sharding = "none"
    prompt_len: int | None = Field(None, ge=1)
    completion_len: int | None = Field(None, ge=1)
    group_size: int | None = Field(None, ge=1)
    device: Device = "gpu"
    #: the training code whose memory habits to assume (loss and adapter dtypes differ; see memory.py):
    #: hf = Transformers + PEFT (+ TRL), the default and what trainers/ ships; litgpt; torchtune.
    #: tuned pre-training stacks (torchtitan, megatron, nemo, llm-foundry, nanotron) share torchtune's
    #: memory habits (`memory_habits`) and run at their own speed (throughput.py)
    framework: Framework = Field("hf", json_schema_extra={"enum": list(FRAMEWORK_NAMES)})
    #: the stack the workload named in `framework` when it is one built on an engine (`axolotl`,
    #: `unsloth`, ...; `vocabulary.FRAMEWORK_STACKS`), else None; said in the estimate's notes, and timed where
    #: the stack has kernels of its own (coefficients.STACK_KERNEL_SPEEDUP). Dumped only when set, so the
    #: workload text of an engine's run (the plan's, the estimates') is what it was before stacks were named.
    stack: str | None = None
    #: GRPO/PPO reward model (registry name or config path); None: GRPO uses rule-based rewards
    #: (no model), PPO a reward model of the policy's architecture.
    reward_model: str | None = None
    #: GRPO/PPO: sequences per trainer GPU per micro-step (TRL per_device_train_batch_size, verl
    #: ppo_micro_batch_size_per_gpu); None: micro_batch prompts x group_size
    micro_batch_sequences: int | None = Field(None, ge=1)
    #: GRPO/PPO: token budget per trainer GPU per micro-step (verl actor.use_dynamic_bsz with
    #: ppo_max_token_len_per_gpu): sequences packed without padding up to this many tokens, so a micro-step may hold
    #: less than one group; None: micro-batches of sequences (micro_batch_sequences)
    micro_batch_tokens: int | None = Field(None, ge=1, le=10_000_000)
    #: PPO value model (registry name or config path) of its own size; None: the policy's architecture
    critic_model: str | None = None

    # --- optimised-stack options (see memory.py / training.py for each effect and its source) ---
    #: torch.compile: pointwise ops fused, their intermediates recomputed in backward (AOTAutograd
    #: min-cut rematerialisation) instead of saved.
    compile: bool = Field(False, validation_alias=AliasChoices("compile", "torch_compile"))
    #: saved activations (block checkpoints, or every saved tensor without checkpointing) moved to
    #: CPU memory as the forward pass goes (torchtune `enable_activation_offloading`).
    activation_offload: bool = Field(False, validation_alias=AliasChoices(
        "activation_offload", "activation_offloading", "enable_activation_offloading", "offload_activations"))
    #: cross-entropy over chunks of the output (torchtune CEWithChunkedOutputLoss, litgpt
    #: chunked_cross_entropy); None = the framework's habit (litgpt and torchtune chunk, hf does not).
    chunked_ce: bool | None = Field(None, validation_alias=AliasChoices(
        "chunked_ce", "chunked_cross_entropy", "chunked_loss"))
    #: fused linear cross-entropy (Liger's `LigerFusedLinearCrossEntropyLoss`, TRL/Transformers
    #: `use_liger_kernel`; Apple's cut-cross-entropy; Unsloth's fused loss): the lm_head and the loss run
    #: chunk by chunk of tokens and the full [tokens x vocab] logits never exist (memory.loss_bytes_per_token).
    fused_ce: bool = Field(False, validation_alias=AliasChoices(
        "fused_ce", "fused_cross_entropy", "use_liger_kernel", "liger_kernel", "cut_cross_entropy"))
    #: a 4-bit base's absmax constants quantised themselves (bitsandbytes `bnb_4bit_use_double_quant`,
    #: the QLoRA paper's recipe; torchao's NF4 always): ~0.127 instead of 0.5 bit per weight. None = the
    #: framework's habit: torchtune yes, the others bitsandbytes' default (False in transformers'
    #: BitsAndBytesConfig).
    double_quant: bool | None = Field(None, validation_alias=AliasChoices(
        "double_quant", "bnb_4bit_use_double_quant", "use_double_quant"))
    #: sequences per GPU of the evaluation the run does between steps (Trainer/TRL
    #: `per_device_eval_batch_size`, 8 by default there): an `eval` phase with the model's states, one
    #: block's no-grad working set and the eval batch's logits and loss (training.py). None: no eval phase
    #: (the peak is the training step's).
    eval_batch: int | None = Field(None, ge=1, validation_alias=AliasChoices(
        "eval_batch", "per_device_eval_batch_size", "eval_batch_size"))
    #: how often the run evaluates (Trainer/TRL `eval_steps` under `eval_strategy="steps"`): at least 1,
    #: every that many optimizer steps; below 1, that fraction of the run's steps (the Trainer's ratio:
    #: eval every ceil(total x ratio) steps). None: no evaluation during training (the Trainer's default
    #: `eval_strategy="no"`). Timed with `eval_samples` (run_overheads_s "eval").
    eval_steps: float | None = Field(None, gt=0, validation_alias=AliasChoices("eval_steps", "eval_every_steps"))
    #: samples of the evaluation set each evaluation runs forward (the eval split's size, or
    #: `max_eval_samples`), at the samples' mean real tokens (sample_tokens or the default).
    eval_samples: int | None = Field(None, ge=1, validation_alias=AliasChoices(
        "eval_samples", "max_eval_samples", "eval_dataset_size"))
    #: optimizer step fused into backward: each gradient freed as soon as its parameter is updated
    #: (torchtune `optimizer_in_bwd`), so the full gradient set never exists. None = the framework's
    #: habit: torchtune's single-device full fine-tuning configs that use a paged bitsandbytes
    #: optimizer set it (recipes/configs/{llama3,llama3_1,llama3_2,qwen2,qwen2_5,qwen3}/*full_single_device).
    optimizer_in_bwd: bool | None = Field(None, validation_alias=AliasChoices(
        "optimizer_in_bwd", "optimizer_in_backward", "fused_optimizer_step"))
    #: micro-batches per optimizer step; above 1 the gradients persist through the next forward pass.
    #: None = the framework's habit: lit-gpt's finetune scripts accumulate to a global batch (its
    #: resource tables: 128 sequences; config hub: global_batch_size > micro_batch_size), hf and
    #: torchtune recipes step every micro-batch by default (gradient_accumulation_steps=1).
    grad_accum: int | None = Field(None, ge=1)
    #: DeepSpeed ZeRO reduce / all-gather bucket size in elements; None = HF "auto" (hidden^2).
    zero_bucket_elems: int | None = Field(None, ge=1)
    #: GRPO/PPO reference model: same_gpu (a second copy of the policy), offload (kept on CPU),
    #: shared_base (LoRA: the policy with adapters disabled, TRL's PEFT path), none (beta = 0);
    #: auto = shared_base under LoRA/QLoRA-style methods, same_gpu otherwise.
    ref_model: RefModel = "auto"
    #: GRPO/PPO generation: hf (model.generate on the training GPU), vllm_colocate (a vLLM engine in
    #: the training process holding `vllm_gpu_memory_utilization` of the GPU), vllm_server (a separate
    #: vLLM server on other GPUs: nothing on the training GPU).
    generation: Generation = "hf"
    #: TRL GRPOConfig.vllm_gpu_memory_utilization (default 0.3) for vllm_colocate.
    vllm_gpu_memory_utilization: float = Field(0.3, gt=0, le=1)
    #: vllm_colocate: vLLM sleep mode (TRL vllm_enable_sleep_mode; verl's hybrid engine frees its cache by default):
    #: the engine's share released while the trainer steps (memory), a wake/sleep per step (time)
    vllm_sleep: bool = False
    #: GRPO/PPO: how the policy is trained: full, or LoRA/QLoRA adapters on a frozen base (TRL's peft_config;
    #: the reference is then the base with adapters disabled, ref_model auto)
    policy: RLPolicy = "full"
    #: RL time (gpuledger/estimate/rl.py, docs/rl.md): vllm_server: GPUs of the trial given to the vLLM
    #: server (the rest train); None: a quarter and a half tried, the faster kept
    rollout_gpus: int | None = Field(None, ge=1)
    #: vllm_server: the rollouts on `rollout_gpus` GPUs of this kind on an instance of their own (the trial's
    #: `gpus` are then the trainer's); None: the rollout GPUs are `rollout_gpus` of the trial's own
    rollout_gpu: str | None = None
    #: vllm_server: one-step off-policy rollouts (step N+1 generated while step N trains)
    async_rollout: bool = False
    #: the 90th percentile of the generated tokens (the rollout waits for the longest); None: all completion_len
    completion_len_p90: int | None = Field(None, ge=1)
    #: prompts per optimizer step over all trainer GPUs (verl's train_batch_size; TRL: per_device_train_batch_size x
    #: processes x grad accumulation / num_generations); None: micro_batch x trainer GPUs x grad_accum
    prompts_per_step: int | None = Field(None, ge=1)
    #: sequential generate calls per step (TRL before 0.17: gradient_accumulation_steps; else 1); None: from trl_version
    generation_rounds: int | None = Field(None, ge=1, le=4096)
    #: the TRL version a GRPO/PPO run uses ("0.15", "0.16.1"): before 0.17 it generated once per micro-step
    trl_version: str | None = Field(None, pattern=r"^\d+\.\d+(\.\S*)?$", max_length=40)
    #: optimizer passes over each rollout batch (verl ppo_epochs, TRL num_iterations)
    ppo_epochs: int = Field(1, ge=1, le=100)
    #: optimizer steps per pass over the rollout batch (verl train_batch_size / ppo_mini_batch_size)
    ppo_mini_batches: int = Field(1, ge=1, le=100_000)
    #: verl-style offload of the trainer's FSDP shard between phases (fsdp_config.param_offload / optimizer_offload)
    param_offload: bool = False
    optimizer_offload: bool = False
    #: the old policy's log-probs recomputed by the trainer each step; None: PPO, several PPO epochs, or vLLM rollouts
    #: (verl always recomputes them; TRL 1.x does with vLLM, for its importance-sampling correction)
    old_logprob: bool | None = None
    #: GRPO: DAPO's group filter (gpuledger/estimate/dynamic_sampling.py, docs/rl.md): generation batches until
    #: prompts_per_step groups whose rewards vary are kept; None: every generated group trains
    dynamic_sampling: DynamicSampling | None = None
    #: vllm: enforce_eager (no CUDA graphs; verl <= 0.4's default)
    rollout_eager: bool = False
    #: vllm: tensor-parallel GPUs per rollout engine replica
    rollout_tp: int = Field(1, ge=1, le=64)
    #: a reward function's seconds per sample (each trainer rank scores its own samples)
    reward_seconds_per_sample: float = Field(0.0, ge=0, le=3600)
    #: memory of the GPU (GiB), used only for vllm_colocate's share.
    gpu_memory_gib: float | None = Field(None, gt=0)

    # --- what time depends on (gpuledger/estimate/throughput.py) ---
    #: sequences packed to seq_len (True) or padded to the longest of their micro-batch (False);
    #: None = the framework's habit (pre-training stacks pack, fine-tuning recipes pad)
    packing: bool | None = None
    #: unpacked runs: each micro-batch padded to its longest sample (longest: TRL / Trainer collators) or every
    #: sample to seq_len (max_length: `padding="max_length"` in the tokenization); packed = packing True
    padding: Padding = "longest"
    #: mean real tokens per sample before padding (unpacked runs: each micro-batch is padded to its longest);
    #: None = a typical instruction set's lengths (coefficients.DEFAULT_SAMPLE_TOKENS) cut at seq_len
    sample_tokens: int | None = Field(None, ge=1)
    #: tensor- and pipeline-parallel degrees for training (gpus = data x tensor x pipeline)
    tensor_parallel: int = Field(1, ge=1, le=64)
    pipeline_parallel: int = Field(1, ge=1, le=256)
    #: nodes the GPUs span; None = ceil(gpus / 8)
    nodes: int | None = Field(None, ge=1, le=4096)
    #: CPU offload of the training state (vocabulary.Offload): none, optimizer, params
    offload: Offload = Field("none", validation_alias=AliasChoices("offload", "cpu_offload"))
    #: sequence / context parallel degree (DeepSpeed-Ulysses, ring attention, Megatron context parallel):
    #: each sequence split over this many GPUs of a data-parallel group (gpus = dp x sp x tp x pp)
    sequence_parallel: int = Field(1, ge=1, le=1024, validation_alias=AliasChoices(
        "sequence_parallel", "context_parallel", "ulysses_degree"))
    #: MoE expert parallel degree: the routed experts split over this many GPUs of the data-parallel group
    #: (Megatron --expert-model-parallel-size, DeepSpeed-MoE ep_size); tokens travel by all-to-all
    expert_parallel: int = Field(1, ge=1, le=1024)

    @property
    def checkpointing_mode(self) -> str:
        """Returns none | selective | full: `checkpointing`, else full/none from `grad_ckpt`."""
        return self.checkpointing or ("full" if self.grad_ckpt else "none")

    @field_validator("*", mode="before")
    @classmethod
    def _strict_scalars(cls, value, info):
        """The strict scalars of specs (`gpuledger.spec.strict`), for every face that builds a Workload (the
        Python API, the CLI, the MCP tool): a bool is no number, a bool field takes only true/false, a number is
        finite, given as a number (not text) and at most `MAX_COUNT`."""
        from gpuledger.spec.strict import number_problem, scalar_problems

        problems = scalar_problems({info.field_name: value}, cls)
        problem = problems[0][1] if problems else number_problem(value, cls.model_fields[info.field_name].annotation)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("lora_targets")
    @classmethod
    def _targets(cls, value: str) -> str:
        from gpuledger.models.params import parse_lora_targets

        return ",".join(parse_lora_targets(value)) if value.strip().lower() not in ("all-linear", "all") else "all-linear"

    @field_validator("method", mode="before")
    @classmethod
    def _method(cls, value):
        return method_name(value)

    @field_validator("precision", mode="before")
    @classmethod
    def _precision(cls, value):
        return precision_name(value)

    @model_serializer(mode="wrap")
    def _dump(self, handler):
        data = handler(self)
        if isinstance(data, dict) and data.get("stack") is None:
            data.pop("stack", None)
        return data

    @field_validator("framework", mode="before")
    @classmethod
    def _framework(cls, value):
        return check_framework(value)

    @model_validator(mode="before")
    @classmethod
    def _checkpointing_decides(cls, data):
        data = stack_inputs(data)
        # the mode decides; grad_ckpt (the older switch) follows it, so memory and time see one thing
        if isinstance(data, dict) and data.get("checkpointing") is None and data.get("grad_ckpt") is None:
            data = {k: v for k, v in data.items() if k != "grad_ckpt"}
            default = FRAMEWORK_CHECKPOINTING.get(str(data.get("framework") or "hf"))
            if default:
                data["checkpointing"] = default
        if isinstance(data, dict) and data.get("checkpointing") is not None:
            data = {**data, "grad_ckpt": data["checkpointing"] == "full"}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> Workload:
        if self.stack is not None and FRAMEWORK_STACKS.get(self.stack) != self.framework:
            engine, shown = FRAMEWORK_STACKS.get(self.stack), _shown(self.stack)
            raise ValueError(f"stack {shown} runs on {engine}, not {self.framework}: name the stack in framework"
                             if engine else f"stack {shown} is not a stack built on an engine (one of "
                             f"{', '.join(FRAMEWORK_STACKS)}); name it in framework")
        if self.gpus % (self.tensor_parallel * self.pipeline_parallel * self.sequence_parallel):
            raise ValueError(f"gpus ({self.gpus}) must be a multiple of tensor_parallel x pipeline_parallel x "
                             f"sequence_parallel ({self.tensor_parallel} x {self.pipeline_parallel} x "
                             f"{self.sequence_parallel})")
        dp = self.gpus // (self.tensor_parallel * self.pipeline_parallel)
        if self.expert_parallel > 1 and dp % self.expert_parallel:
            raise ValueError(f"expert_parallel ({self.expert_parallel}) must divide the data-parallel GPUs "
                             f"(gpus / (tensor_parallel x pipeline_parallel) = {dp})")
        if (self.eval_steps is None) != (self.eval_samples is None):
            raise ValueError("eval_steps (how often the run evaluates) and eval_samples (the samples each evaluation "
                             "runs) go together: give both, or neither for a run that does not evaluate")
        if self.eval_steps is not None and self.eval_steps > 1 and self.eval_steps != int(self.eval_steps):
            raise ValueError(f"eval_steps ({self.eval_steps}) is a whole number of optimizer steps, or a fraction "
                             "below 1 of the run's steps")
        if self.padding == "packed":
            if self.packing is False:
                raise ValueError("padding packed with packing false: packed samples are packing true")
            object.__setattr__(self, "packing", True)  # frozen model: set once, in validation
        if self.micro_batch_tokens is not None:
            if self.method not in ("grpo", "ppo"):
                raise ValueError(f"micro_batch_tokens is a GRPO/PPO trainer's token budget; method {self.method} "
                                 "batches by micro_batch")
            if self.micro_batch_sequences is not None:
                raise ValueError("micro_batch_tokens (a token budget per micro-step) and micro_batch_sequences (a "
                                 "count) are two ways to size one micro-batch: give one")
            if self.micro_batch_tokens < self.seq_len:
                raise ValueError(f"micro_batch_tokens ({self.micro_batch_tokens}) is below seq_len ({self.seq_len}), "
                                 "the longest sequence: a token budget must hold any one sequence (verl asserts "
                                 "ppo_max_token_len_per_gpu >= the longest)")
        if self.dynamic_sampling is not None and self.method != "grpo":
            raise ValueError(f"dynamic_sampling filters GRPO groups (DAPO); method {self.method} has none")
        if self.nodes is not None and self.nodes > self.gpus:
            raise ValueError(f"nodes ({self.nodes}) cannot exceed gpus ({self.gpus})")
        if self.method == "full" and self.precision in QUANTISED_PRECISIONS:
            raise ValueError(f"full fine-tuning cannot train {self.precision} weights; use --method qlora or lora "
                             "(a frozen quantised base) or a float precision")
        return self


