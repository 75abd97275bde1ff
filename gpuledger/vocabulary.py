"""The one home of gpuledger's words: every name a spec, a command line, a record, the warehouse or
a report may use for a method, precision, optimizer, sharding, framework, launcher, status or
price source, and the groups of statuses the code asks about ("wasted", "terminal", ...).

Each enumeration is written once, as a `Literal` type (what pydantic models and type checkers
read); the tuple beside it (`METHODS = get_args(Method)`) is what `argparse` choices, pandera
checks and loops read. Stdlib only and import-free on purpose: the in-job agent imports it.
`tests/unit/test_vocabulary.py` checks that every status literal the warehouse's SQL compares a
status column with is one of these.

Statuses, from the smallest unit up:
- an attempt (one result record, the warehouse's `runs.status`): `RUN_STATUSES`; those whose
  spend bought no result: `WASTED_RUN_STATUSES` (the reports' and `v_run_facts`' waste);
- what a launcher's `poll` answers while an attempt runs: `LAUNCH_STATUSES` (terminal ones in
  `LAUNCH_TERMINAL`); `launch_status_of(run_status)` maps a record's status onto it;
- a trial (the warehouse's `trials.status`): `TRIAL_STATUSES` = pending/running, an attempt's
  status, or one the sweep gives a trial it did not run (`NOT_RUN_STATUSES`: `skipped-budget`; for
  the adaptive search `pruned`: stopped early because it could not beat the best, and `not-asked`:
  a candidate point the search ended without asking for, n_trials being reached);
- a sweep run (the warehouse's `sweeps.status`, the flow's summary): `SWEEP_STATUSES`.
"""

from __future__ import annotations

import re
from typing import Literal, get_args

# -- what a workload is (spec `method`/`precision`/`train`, `gpuledger estimate` options) -----------

Method = Literal["full", "lora", "qlora", "grpo", "ppo", "inference"]
METHODS: tuple[str, ...] = get_args(Method)
#: Methods that train a policy with a rollout (GRPO, PPO).
RL_METHODS: tuple[str, ...] = ("grpo", "ppo")

Precision = Literal["fp32", "bf16", "fp16", "bf16-mixed", "fp16-mixed", "fp8", "int8", "int4", "nf4"]
PRECISIONS: tuple[str, ...] = get_args(Precision)
#: Precisions of a quantised, frozen base (full fine-tuning cannot train them).
QUANTISED_PRECISIONS: tuple[str, ...] = ("int8", "int4", "nf4")

#: What users write for a method or a precision beyond the names above (read in any case, `_` and spaces as
#: `-`): a full fine-tune and pre-training train every weight (`full`); bitsandbytes' 4-bit base
#: (`load_in_4bit`, its fp4 or nf4 quant type: the same kernels' cost) is `nf4`, its LLM.int8 base
#: (`load_in_8bit`) `int8`; torch's dtype names; automatic mixed precision (`amp_bf16`, Composer's and
#: Lightning's `bf16-mixed`) the `-mixed` precisions.
METHOD_SPELLINGS: dict[str, str] = {
    "full-finetune": "full", "full-fine-tune": "full", "full-fine-tuning": "full", "full-finetuning": "full",
    "full-ft": "full", "fft": "full", "full-parameter": "full", "full-sft": "full", "pretrain": "full",
    "pretraining": "full", "pre-training": "full", "serving": "inference", "serve": "inference",
}
PRECISION_SPELLINGS: dict[str, str] = {
    "bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32", "float8": "fp8",
    "4bit": "nf4", "4-bit": "nf4", "bnb-4bit": "nf4", "load-in-4bit": "nf4", "fp4": "nf4", "bnb-nf4": "nf4",
    "8bit": "int8", "8-bit": "int8", "bnb-8bit": "int8", "load-in-8bit": "int8", "llm-int8": "int8",
    "amp-bf16": "bf16-mixed", "bf16-amp": "bf16-mixed", "mixed-bf16": "bf16-mixed",
    "amp-fp16": "fp16-mixed", "fp16-amp": "fp16-mixed", "mixed-fp16": "fp16-mixed",
}


def _dashed(text: str) -> str:
    """`text` in lower case with `_` and runs of spaces as one `-`: the one spelling of the names here."""
    return "-".join(text.strip().lower().replace("_", " ").split())


def _spelled(value: object, names: tuple[str, ...], spellings: dict[str, str]) -> object:
    if not isinstance(value, str):
        return value
    key = _dashed(value)
    return key if key in names else spellings.get(key, value)


def method_name(value: object) -> str:
    """Returns `value` as `METHODS` spells it ("QLoRA" -> "qlora", "full fine-tune" -> "full"); other values
    unchanged (the field's check names them)."""
    return _spelled(value, METHODS, METHOD_SPELLINGS)  # type: ignore[return-value]


def precision_name(value: object) -> str:
    """Returns `value` as `PRECISIONS` spells it ("BF16", "bfloat16" -> "bf16", "4bit" -> "nf4"); other values
    unchanged (the field's check names them)."""
    return _spelled(value, PRECISIONS, PRECISION_SPELLINGS)  # type: ignore[return-value]


Optimizer = Literal["adamw", "adamw-8bit", "paged-adamw", "paged-adamw-8bit", "sgd", "adafactor"]
OPTIMIZERS: tuple[str, ...] = get_args(Optimizer)

#: How a multi-GPU trial splits its states; the estimator takes one of these.
Sharding = Literal["none", "ddp", "zero1", "zero2", "zero3", "fsdp"]
SHARDINGS: tuple[str, ...] = get_args(Sharding)
#: What a spec may say: a sharding, or `auto` (the planner tries each that applies).
SpecSharding = Literal["auto", "none", "ddp", "zero1", "zero2", "zero3", "fsdp"]
SPEC_SHARDINGS: tuple[str, ...] = get_args(SpecSharding)

#: The training code whose memory habits and speed the estimate assumes (the tuned pre-training
#: stacks share torchtune's memory habits: `gpuledger.estimate.workload.memory_habits`).
Framework = Literal["hf", "litgpt", "torchtune", "torchtitan", "megatron", "nemo", "llm-foundry", "nanotron"]
FRAMEWORKS: tuple[str, ...] = get_args(Framework)
#: The stacks users name that run on one of those engines, each with the engine it is timed and sized as
#: (`train.framework: axolotl` is the Transformers Trainer's run; its own habits, e.g. Unsloth's loss
#: without logits, are in `gpuledger.estimate.workload.STACK_HABITS`): Axolotl's AxolotlTrainer,
#: LLaMA-Factory's CustomSeq2SeqTrainer and ms-swift's Seq2SeqTrainer subclass `transformers.Trainer`;
#: Unsloth patches Transformers models under TRL's SFTTrainer; XTuner trains Transformers models (MMEngine
#: runner); DeepSpeed here is the Trainer's integration (say `train.sharding: zero1|zero2|zero3`); verl
#: (FSDP workers), OpenRLHF (DeepSpeed) and NeMo RL (its DTensor policy) train Transformers models;
#: FastChat (Vicuna), Stanford Alpaca, alpaca-lora, llama-recipes / llama-cookbook, the alignment handbook,
#: open-instruct, H2O LLM Studio, AutoTrain, Oumi and DeepSpeed-Chat train Transformers models with the
#: Trainer, accelerate or DeepSpeed; Liger Kernel patches a Transformers model (its fused linear
#: cross-entropy: `STACK_HABITS`). Native PyTorch (a training loop of its own over FSDP/FSDP2, DDP,
#: torch.compile: fms-fsdp, KempnerForge, NeMo AutoModel's FSDP2 recipes, nanoGPT / modded-nanogpt,
#: nanochat, llm.c) is timed as torchtitan, PyTorch's own reference of that stack. Megatron-Bridge and
#: Megatron-DeepSpeed run Megatron-Core; Composer is llm-foundry's trainer; lit-llama is litgpt's
#: predecessor; picotron is nanotron's teaching twin.
FRAMEWORK_STACKS: dict[str, str] = {
    "transformers": "hf", "huggingface": "hf", "hugging-face": "hf", "hf-trainer": "hf", "peft": "hf", "trl": "hf",
    "accelerate": "hf", "axolotl": "hf", "llama-factory": "hf", "llamafactory": "hf", "ms-swift": "hf",
    "swift": "hf", "unsloth": "hf", "xtuner": "hf", "deepspeed": "hf", "verl": "hf", "openrlhf": "hf",
    "nemo-rl": "hf", "sfttrainer": "hf", "fastchat": "hf", "alpaca-lora": "hf", "stanford-alpaca": "hf",
    "llama-recipes": "hf", "llama-cookbook": "hf", "alignment-handbook": "hf", "open-instruct": "hf",
    "h2o-llmstudio": "hf", "autotrain": "hf", "oumi": "hf", "deepspeed-chat": "hf", "liger-kernel": "hf",
    "liger": "hf",
    "pytorch": "torchtitan", "torch": "torchtitan", "fsdp": "torchtitan", "fsdp2": "torchtitan",
    "fms-fsdp": "torchtitan", "kempnerforge": "torchtitan", "nemo-automodel": "torchtitan",
    "nanogpt": "torchtitan", "modded-nanogpt": "torchtitan", "nanochat": "torchtitan", "llm-c": "torchtitan",
    "lit-gpt": "litgpt", "lit-llama": "litgpt", "torch-tune": "torchtune", "picotron": "nanotron",
    "megatron-lm": "megatron", "megatron-core": "megatron", "mcore": "megatron",
    "megatron-bridge": "megatron", "megatron-deepspeed": "megatron", "nemo2": "nemo", "nemo-framework": "nemo",
    "nemo-megatron": "nemo",
    "llmfoundry": "llm-foundry", "composer": "llm-foundry", "mosaicml": "llm-foundry",
}
#: Every name `train.framework` and `estimate --framework` take: an engine or a stack built on one.
FRAMEWORK_NAMES: tuple[str, ...] = FRAMEWORKS + tuple(FRAMEWORK_STACKS)
#: Names that say less than the others beside them in a name of several ("torchtune + FSDP2", "Transformers +
#: PEFT + DeepSpeed ZeRO-3", "Megatron-Core via NeMo"): the runtime (weakest: a Transformers model under FSDP
#: is the Trainer's run) and the libraries a stack is built of ("Axolotl (DeepSpeed)" is Axolotl, NeMo runs
#: Megatron-Core).
_RUNTIME_WORDS = frozenset({"pytorch", "torch", "fsdp", "fsdp2"})
#: Words beside a runtime word that do not name another stack ("native PyTorch FSDP2", "PyTorch DDP + compile").
_QUALIFIER_WORDS = frozenset({"native", "plain", "vanilla", "ddp", "compile", "zero", "bf16", "fp8", "float8"})
_LIBRARY_WORDS = frozenset({"hf", "transformers", "huggingface", "hugging-face", "hf-trainer", "peft", "trl",
                            "accelerate", "deepspeed", "sfttrainer", "megatron", "megatron-core", "mcore"})


_KNOWN_FRAMEWORKS = frozenset(FRAMEWORK_NAMES)


def framework_name(value: object) -> str:
    """Returns `value` as the one spelling `FRAMEWORK_NAMES` holds: lower case, `_`, `.` and spaces as `-`
    ("LLaMA-Factory", "llama_factory" -> "llama-factory", "llm.c" -> "llm-c"); a name of several ("Hugging Face
    Transformers + PEFT", "torchtune (FSDP2)", "NeMo 2.0") as the most telling name in it, where all of them run
    on one engine; other values unchanged (the caller's check names them)."""
    if not isinstance(value, str):
        return value  # type: ignore[return-value]
    name = _dashed(value[:200].replace(".", " "))
    if name in _KNOWN_FRAMEWORKS:
        return name
    return _named_in(name) or name


def _named_in(name: str) -> str | None:
    """The known name a name of several words holds (its words, or two or three of them joined by `-`): the
    first that says most (not a runtime word, not a library word, where there is another), where
    every name it holds at that level runs on one engine; None where none or several engines are named, or where
    only runtime words are known among words of something else."""
    words = [w for w in re.split(r"[-+/()]+", name) if w]
    found: list[str] = []
    for size in (3, 2, 1):
        for i in range(len(words) - size + 1):
            joined = "-".join(words[i:i + size])
            if joined in _KNOWN_FRAMEWORKS and not any(f"-{joined}-" in f"-{f}-" for f in found):
                found.append(joined)
    if not found:
        return None
    named_words = {w for f in found for w in f.split("-")}
    unknown = [w for w in words if w not in named_words and not w.isdigit() and w not in _QUALIFIER_WORDS]
    if unknown and all(f in _RUNTIME_WORDS for f in found):
        return None  # "pytorch-magic": a runtime word alone does not name what else was written
    for level in (lambda n: n not in _RUNTIME_WORDS and n not in _LIBRARY_WORDS,
                  lambda n: n not in _RUNTIME_WORDS, lambda n: True):
        named = [n for n in found if level(n)]
        if named:
            engines = {n if n in FRAMEWORKS else FRAMEWORK_STACKS[n] for n in named}
            return named[0] if len(engines) == 1 else None
    return None


def framework_engine(value: object) -> str | None:
    """Returns the engine (`FRAMEWORKS`) a framework name runs on, or None for a name of neither."""
    name = framework_name(value)
    if not isinstance(name, str):
        return None
    return name if name in FRAMEWORKS else FRAMEWORK_STACKS.get(name)


#: Activation checkpointing: none, selective (the attention core recomputed), full (every block).
Checkpointing = Literal["none", "selective", "full"]
CHECKPOINTINGS: tuple[str, ...] = get_args(Checkpointing)
RefModel = Literal["auto", "same_gpu", "offload", "shared_base", "none"]
REF_MODELS: tuple[str, ...] = get_args(RefModel)
Generation = Literal["hf", "vllm_colocate", "vllm_server"]
GENERATIONS: tuple[str, ...] = get_args(Generation)
#: How a GRPO/PPO policy is trained: all its weights, or LoRA/QLoRA adapters on a frozen base (docs/rl.md).
RLPolicy = Literal["full", "lora", "qlora"]
RL_POLICIES: tuple[str, ...] = get_args(RLPolicy)
#: CPU offload of training state: optimizer (DeepSpeed ZeRO offload_optimizer: fp32 master weights and
#: moments in host memory, the step on the CPU), params (also the parameters and gradients: ZeRO-3
#: offload_param, FSDP CPUOffload(offload_params=True), torchtune's fsdp_cpu_offload).
Offload = Literal["none", "optimizer", "params"]
OFFLOADS: tuple[str, ...] = get_args(Offload)
#: How an unpacked run pads its samples: to the longest of each micro-batch (TRL SFTTrainer and the Trainer's
#: collators: tokenized with padding=False, DataCollatorForLanguageModeling / DataCollatorForSeq2Seq pad per
#: batch), or every sample to max_length (`tokenizer(..., padding="max_length")` in a script's preprocessing);
#: packed: samples concatenated into seq_len sequences (TRL `packing=True`), the same as `packing: true`.
Padding = Literal["longest", "max_length", "packed"]
PADDINGS: tuple[str, ...] = get_args(Padding)
Device = Literal["gpu", "cpu"]
DEVICES: tuple[str, ...] = get_args(Device)

# -- where trials run ----------------------------------------------------------------------------

#: Launchers a spec, `--launcher` and `gpuledger.launch.get_launcher` know. Tests register their
#: own (`gpuledger.launch.register_launcher`); production code knows only these.
Launcher = Literal["local", "skypilot"]
LAUNCHERS: tuple[str, ...] = get_args(Launcher)
#: Launchers a stored record may name: the above, `fake`, the tests' in-process launcher
#: (tests/helpers/fake_launcher.py), whose records go through the same checks and warehouse, and
#: `external`: a run gpuledger did not launch (an ad-hoc run of `gpuledger.track.init` or a Trainer
#: callback in a notebook or a team's own job, or one `gpuledger import` read from W&B, MLflow, Parquet).
RecordLauncher = Literal["local", "skypilot", "fake", "external"]
RECORD_LAUNCHERS: tuple[str, ...] = get_args(RecordLauncher)
LAUNCHER_EXTERNAL = "external"

#: What a row of `sweeps` groups: a sweep of a spec, a capacity plan, the ad-hoc runs of a project
#: (`gpuledger.runtime.external`: runs started outside a sweep) or the runs one import brought in.
SweepKind = Literal["sweep", "capacity", "adhoc", "import"]
SWEEP_KINDS: tuple[str, ...] = get_args(SweepKind)

#: Where a billing line's price came from.
PriceSource = Literal["local", "catalog", "invoice"]
PRICE_SOURCES: tuple[str, ...] = get_args(PriceSource)
#: What a billing line paid for when a run's roles ran on instances of their own (an RL job group: the
#: trainer's instance, the rollouts', a reward or reference model's); a line of a run on one instance
#: has none (every role of the run on it). The warehouse's `billing.role`.
BillingRole = Literal["trainer", "rollout", "reward", "ref"]
BILLING_ROLES: tuple[str, ...] = get_args(BillingRole)

# -- what a run was for ----------------------------------------------------------------------------
#: An attempt of a trial, or a short probe that measured a shape of the sweep for the planner
#: (`gpuledger probe`, docs/probes.md): the warehouse's `runs.purpose`.
Purpose = Literal["trial", "probe"]
PURPOSES: tuple[str, ...] = get_args(Purpose)

# -- how a sweep searches ----------------------------------------------------------------------------
#: `search.strategy`: grid and random draw every trial up front; tpe and asha ask for the next as a
#: slot frees (adaptive; asha also prunes by the intermediate objective values).
Strategy = Literal["grid", "random", "tpe", "asha"]
STRATEGIES: tuple[str, ...] = get_args(Strategy)
ADAPTIVE_STRATEGIES: tuple[str, ...] = ("tpe", "asha")
TRIAL_PURPOSE, PROBE_PURPOSE = PURPOSES

# -- statuses --------------------------------------------------------------------------------------

SUCCEEDED = "succeeded"
FAILED = "failed"
OOM = "oom"
PREEMPTED = "preempted"
CANCELLED = "cancelled"
PENDING = "pending"
RUNNING = "running"
RECOVERING = "recovering"
SKIPPED_BUDGET = "skipped-budget"
PRUNED = "pruned"
NOT_ASKED = "not-asked"

#: Terminal states of one attempt (a result record's `status`).
RunStatus = Literal["succeeded", "failed", "oom", "preempted", "cancelled"]
RUN_STATUSES: tuple[str, ...] = get_args(RunStatus)
#: Attempts whose spend bought no result: the waste of the reports and of `v_run_facts.wasted`.
WASTED_RUN_STATUSES: tuple[str, ...] = (FAILED, OOM, PREEMPTED, CANCELLED)
#: What a launcher's `poll` answers.
LaunchStatus = Literal["pending", "running", "recovering", "succeeded", "failed", "cancelled"]
LAUNCH_STATUSES: tuple[str, ...] = get_args(LaunchStatus)
LAUNCH_TERMINAL: frozenset[str] = frozenset({SUCCEEDED, FAILED, CANCELLED})
#: Statuses a sweep gives a trial it did not run to the end itself.
NOT_RUN_STATUSES: tuple[str, ...] = (SKIPPED_BUDGET, PRUNED, NOT_ASKED)
#: Every status a trial can have.
TRIAL_STATUSES: tuple[str, ...] = (PENDING, RUNNING, *RUN_STATUSES, *NOT_RUN_STATUSES)
#: A trial in one of these will not change any more (a re-run of the sweep still retries failures).
TRIAL_TERMINAL: tuple[str, ...] = (*RUN_STATUSES, *NOT_RUN_STATUSES)

# Sweep run statuses (one run of the sweep flow).
SWEEP_PLANNED = "planned"  # registered, nothing finished yet
SWEEP_RUNNING = RUNNING
SWEEP_DRY_RUN = "dry-run"  # planned and guarded only; nothing launched, nothing written
SWEEP_SUCCEEDED = SUCCEEDED  # every trial to run ran and succeeded, every record stored
SWEEP_PARTIAL = "partial"  # some trials failed or were not feasible; every record stored
SWEEP_BUDGET_STOPPED = "budget-stopped"  # launching stopped at the budget; every record stored
SWEEP_UNRECORDED = "unrecorded"  # results exist but some records could not be stored (still in landing)
SWEEP_INTERRUPTED = "interrupted"  # stopped by the user (Ctrl-C) or a signal
SWEEP_FAILED = FAILED  # the flow itself broke
SWEEP_STATUSES: tuple[str, ...] = (SWEEP_PLANNED, SWEEP_RUNNING, SWEEP_DRY_RUN, SWEEP_SUCCEEDED, SWEEP_PARTIAL,
                                   SWEEP_BUDGET_STOPPED, SWEEP_UNRECORDED, SWEEP_INTERRUPTED, SWEEP_FAILED)

#: Every status word of any kind (what the warehouse's SQL may compare a `status` column with).
ALL_STATUSES: frozenset[str] = frozenset((*TRIAL_STATUSES, *LAUNCH_STATUSES, *SWEEP_STATUSES))

_LAUNCH_STATUS_OF_RUN = {SUCCEEDED: SUCCEEDED, FAILED: FAILED, OOM: FAILED, PREEMPTED: FAILED,
                         CANCELLED: CANCELLED}


def launch_status_of(run_status: str) -> str:
    """Returns what `poll` answers for an attempt whose record says `run_status` (oom/preempted: failed)."""
    return _LAUNCH_STATUS_OF_RUN.get(run_status, FAILED)
