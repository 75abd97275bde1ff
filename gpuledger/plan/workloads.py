"""The trials' workloads and what the estimator says of each, without polars (what `gpuledger validate`
needs from the planner, so that it starts fast): `estimate_rows` is the body of
`gpuledger.plan.estimates.trial_estimates` (which frames it), `tokens_problem`/`require_tokens` the
planner's one requirement beyond the schema, `sharding_options` the sharding rule."""

from __future__ import annotations

import json
from collections.abc import Sequence

from gpuledger.errors import UserError
from gpuledger.plan.settings import AUTO_GPU_COUNTS
from gpuledger.spec.problems import Problem
from gpuledger.vocabulary import RL_METHODS

#: Search parameters that change a trial's workload (CONTRACTS.md); value: the Workload field.
PARAM_TO_WORKLOAD = {
    "lora_r": "lora_r",
    "lora_targets": "lora_targets",
    "micro_batch": "micro_batch",
    "seq_len": "seq_len",
    "group_size": "group_size",
    "precision": "precision",
    "optimizer": "optimizer",
    "prompt_len": "prompt_len",
    "completion_len": "completion_len",
}

SHARDING_RULE = (
    "sharding auto: none on 1 GPU; on >1 GPU, fsdp for full/grpo/ppo (states sharded), and for "
    "lora/qlora both ddp (replicated frozen base, faster) and fsdp (sharded base, when it does not "
    "fit replicated) are estimated and the cheaper fitting one wins"
)

#: the columns of one estimate row (`gpuledger.plan.estimates.ESTIMATE_SCHEMA` types them)
ESTIMATE_COLUMNS = ("trial_id", "trial_index", "gpus", "sharding", "precision", "est_memory_gib", "flops_total",
                    "est_error", "workload")


TOKENS_NEEDED = "train.tokens_per_trial is needed to estimate time and cost (training tokens per trial, e.g. 20_000_000)"


def tokens_problem(spec) -> Problem | None:
    """Returns the problem of a training spec without `train.tokens_per_trial` (the planner prices
    a trial by its tokens), else None. A `method: inference` spec takes its tokens from `serve`."""
    if spec.method == "inference" or spec.train.tokens_per_trial is not None:
        return None
    file, line, col = spec.position("train")
    return Problem(file, line, col, "", TOKENS_NEEDED)


def rl_problem(spec) -> Problem | None:
    """Returns the problem of a GRPO/PPO spec that asks for rollouts on GPUs of their own
    (`train.rollout_gpus`, `train.async_rollout`) without `train.generation: vllm_server`, else None
    (docs/rl.md: colocated rollouts share the trainer's GPUs and cannot overlap its step)."""
    t = spec.train
    asked = [name for name in ("rollout_gpus", "rollout_gpu", "async_rollout") if getattr(t, name)]
    if not asked:
        return None
    file, line, col = spec.position("train")
    if t.generation == "vllm_server":
        if t.rollout_gpu is None:
            return None
        if not t.rollout_gpus:
            return Problem(file, line, col, "", "train.rollout_gpu needs train.rollout_gpus (how many "
                           f"{t.rollout_gpu} GPUs the rollout instance holds)")
        from gpuledger.catalog import UnknownAccelerator, normalize_accelerator

        try:
            normalize_accelerator(t.rollout_gpu)
        except UnknownAccelerator as err:
            return Problem(file, line, col, "", f"train.rollout_gpu: {err}")
        return None
    return Problem(file, line, col, "", f"train.{' and train.'.join(asked)} need train.generation: vllm_server "
                   f"(rollouts on GPUs of their own; {t.generation} generates on the trainer's GPUs)")


ROLLOUT_RUN_NEEDED = ("rollouts on an instance of their own (train.rollout_gpu) need task.rollout_run to launch: the "
                      "command that serves them there, the job group's rollout task beside the trainer's task.run "
                      "(e.g. trl vllm-serve --model MODEL --port $GPULEDGER_ROLLOUT_PORT; docs/rl.md)")


def rollout_run_problem(spec) -> Problem | None:
    """Returns the problem of a GRPO/PPO spec launched on a cloud whose rollouts run on an instance of their own
    (`train.rollout_gpu`, the split on two instances) without `task.rollout_run`, located at `train.rollout_gpu`;
    else None. Not a planning problem: a plan and a dry run need no rollout command; `gpuledger validate` and the
    launch (gpuledger/runtime/launching.py) say it."""
    t = spec.train
    if spec.method not in RL_METHODS or not getattr(t, "rollout_gpu", None) or spec.launcher == "local" \
            or getattr(spec.task, "rollout_run", None):
        return None
    file, line, col = spec.position("train", "rollout_gpu")
    return Problem(file, line, col, "train.rollout_gpu", ROLLOUT_RUN_NEEDED)


def require_tokens(spec) -> None:
    """Raises the planner's one-line UserError when `tokens_problem(spec)` or `rl_problem(spec)` finds one."""
    problem = tokens_problem(spec) or rl_problem(spec)
    if problem is not None:
        raise UserError(str(problem))


def sharding_options(method: str, gpus: int, spec_sharding: str = "auto") -> list[str]:
    """Returns the sharding strategies to estimate for `gpus` GPUs (see SHARDING_RULE)."""
    if gpus == 1:
        return ["none"]
    if spec_sharding not in ("auto", "none"):
        return [spec_sharding]
    if method in ("lora", "qlora"):
        return ["ddp", "fsdp"]
    return ["fsdp"]


def estimate_rows(spec, trials, gpu_counts: Sequence[int] | None = None, *, device: str = "gpu") -> dict[str, list]:
    """Returns the columns (`ESTIMATE_COLUMNS`) of `trial_estimates` as lists (see there)."""
    from gpuledger import estimate as estimate_package

    t = spec.train
    tokens = t.tokens_per_trial
    inference = spec.method == "inference"
    if inference:  # a serving benchmark: its workload and tokens come from its serve settings
        from gpuledger.serving import inference_workload, serve_settings, serving_memory_gib, serving_tokens
    require_tokens(spec)  # the same check `gpuledger validate` reports (gpuledger/plan/requirements.py)
    base = {
        "model": spec.model, "method": spec.method, "precision": spec.precision, "optimizer": t.optimizer,
        "micro_batch": t.micro_batch, "seq_len": t.seq_len,
        # unset in the spec: the stack's own habit (workload.FRAMEWORK_CHECKPOINTING), else on
        "grad_ckpt": t.grad_checkpointing if "grad_checkpointing" in t.model_fields_set else None,
        "flash_attn": t.flash_attention, "lora_r": t.lora_r, "lora_targets": t.lora_targets,
        "prompt_len": t.prompt_len, "completion_len": t.completion_len, "group_size": t.group_size,
        "device": device,
        **{name: getattr(t, name) for name in estimate_package.STACK_FIELDS},
    }
    if gpu_counts is None:
        gpt = spec.resources.gpus_per_trial
        gpu_counts = AUTO_GPU_COUNTS if gpt == "auto" else (int(gpt),)
    cache: dict[tuple, tuple[float | None, float | None, str | None, str | None]] = {}
    rows: dict[str, list] = {k: [] for k in ESTIMATE_COLUMNS}
    for trial in trials:
        wl = dict(base)
        for name, value in trial.params.items():
            if name in PARAM_TO_WORKLOAD:
                wl[PARAM_TO_WORKLOAD[name]] = value
        counts = gpu_counts
        if "gpus_per_trial" in trial.params:
            counts = (int(trial.params["gpus_per_trial"]),)
        settings = None
        if inference:  # weights + KV cache of max_num_seqs sequences on tensor_parallel GPUs + one step's
            settings = serve_settings(spec, trial.params)  # activations, at the engine's memory fraction
            wl.update(inference_workload(settings))  # (gpuledger/serving/workload.py)
            counts = (wl.pop("gpus"),) if device == "gpu" else (1,)
            tokens = serving_tokens(settings)
        for g in counts:
            for sh in sharding_options(spec.method, g, t.sharding) if device == "gpu" else ["none"]:
                key = tuple(sorted({**wl, "gpus": g, "sharding": sh, "_t": tokens, "_s": str(settings)}.items(), key=lambda kv: kv[0]))
                if key not in cache:
                    try:
                        w = estimate_package.Workload(**{**wl, "gpus": g, "sharding": sh})
                        e = estimate_package.estimate(w)
                        mem = serving_memory_gib(e.memory_gib, settings) if inference else float(e.memory_gib["device"])
                        text = json.dumps({"workload": w.model_dump(mode="json"), "tokens": float(tokens)}, sort_keys=True)
                        cache[key] = (mem, float(e.flops_per_token) * tokens, None, text)
                    except UserError:
                        raise
                    except Exception as err:  # the estimator refused this one workload: the trial says why
                        cache[key] = (None, None, f"estimator: {str(err).splitlines()[0] if str(err) else type(err).__name__}", None)
                mem, flops, err, text = cache[key]
                for col, value in (("trial_id", trial.trial_id), ("trial_index", trial.index), ("gpus", g),
                                   ("sharding", sh), ("precision", str(wl["precision"])), ("est_memory_gib", mem),
                                   ("flops_total", flops), ("est_error", err), ("workload", text)):
                    rows[col].append(value)
    return rows
