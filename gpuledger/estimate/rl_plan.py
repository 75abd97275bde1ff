"""RL (GRPO/PPO) steps planned: a Workload's `RLSetup`, the placements tried for it, and each role's time,
GPU-hours and dollars over a run (issue 40, docs/rl.md). The step itself is `gpuledger.estimate.rl`.

GPU time per role: colocated, every GPU is busy in every phase, so a phase's GPU-seconds are its
seconds x all GPUs; split, the rollout GPUs and the trainer GPUs are both held for the whole step
(the idle share of each is reported).
"""

from __future__ import annotations

import functools

from gpuledger.estimate.rl import RLSetup, RLStep, rl_step


def role_costs(step: RLStep, steps: float, usd_per_gpu_hour: dict[str, float] | None = None) -> dict[str, dict]:
    """Returns, per role, seconds over `steps` steps, GPU-hours and dollars (`usd_per_gpu_hour` by group name,
    trainer / rollout, else by accelerator; None or absent: no dollars). Phases (rollout, reference, ...) are the step's
    time by role; colocated, each phase holds all the GPUs; split, the rollout phase is the rollout
    GPUs' and the others the trainer's, and each group also pays for its idle share of the step."""
    prices = usd_per_gpu_hour or {}
    s = step.setup
    out: dict[str, dict] = {}

    def price(grp: dict, hours: float) -> float | None:
        rate = prices.get(grp["name"], prices.get(grp["accelerator"]))
        return round(hours * rate, 2) if rate is not None else None

    groups = {name: {**g, "name": name} for name, g in step.groups.items()}
    tr = groups["trainer"]
    for phase, sec in step.phases_s.items():
        if sec <= 0:
            continue
        grp = groups.get("rollout") if (phase == "rollout" and s.placement == "split") else tr
        hours = sec * steps * grp["gpus"] / 3600
        out[phase] = {"seconds": round(sec * steps, 1), "seconds_per_step": round(sec, 3),
                      "accelerator": grp["accelerator"], "gpus": grp["gpus"], "gpu_hours": round(hours, 2),
                      "usd": price(grp, hours)}
    if s.placement == "split":
        for name, grp in groups.items():
            busy = step.phases_s["rollout"] if name == "rollout" else sum(
                v for k, v in step.phases_s.items() if k != "rollout")
            idle = max(0.0, step.step_s - busy)
            if idle > 0:
                hours = idle * steps * grp["gpus"] / 3600
                out[f"{name}_idle"] = {"seconds": round(idle * steps, 1), "seconds_per_step": round(idle, 3),
                                       "accelerator": grp["accelerator"], "gpus": grp["gpus"],
                                       "gpu_hours": round(hours, 2), "usd": price(grp, hours)}
    return out


#: The first TRL release whose GRPOTrainer generates once per optimizer step ("Generate once per effective batch",
#: huggingface/trl PR 3283, in v0.17.0: modelscope/ms-swift PR 3969 "updates GRPOTrainer compatible with trl 0.17"
#: lists it; steps_per_generation followed in 0.18); before it, each gradient-accumulation micro-step generated its
#: own completions.
TRL_WHOLE_STEP_GENERATION = (0, 17)


def trl_before_whole_step(version: str | None) -> bool:
    """True when a TRL version ("0.15", "0.16.1", "0.16.0.dev0") generates per micro-step (before 0.17)."""
    if not version:
        return False
    major, minor = (int(p) for p in version.split(".")[:2])
    return (major, minor) < TRL_WHOLE_STEP_GENERATION


def generation_rounds(w, sequences: int, micro_batch: int, trainer_gpus: int) -> int:
    """Returns the sequential generate calls of one step: the workload's `generation_rounds` when given; with
    `trl_version` below 0.17, one per gradient-accumulation micro-step (`grad_accum`, else the step's sequences
    over micro_batch x trainer GPUs); else 1 (verl, OpenRLHF, TRL >= 0.17 generate the whole step at once)."""
    if w.generation_rounds is not None:
        return int(w.generation_rounds)
    if trl_before_whole_step(w.trl_version):
        return int(w.grad_accum or max(1, -(-sequences // max(1, micro_batch * trainer_gpus))))
    return 1


def setup_from_workload(w, accelerator: str, gpus: int | None = None, precision: str | None = None,
                        rollout_gpus: int | None = None) -> RLSetup:
    """Returns the `RLSetup` of an estimator `Workload` of method grpo/ppo on `gpus` x `accelerator`:
    `micro_batch` prompts per trainer GPU (x `grad_accum`; or `prompts_per_step` in all) each with `group_size` responses of
    `completion_len` tokens (P90 `completion_len_p90`) after `prompt_len`; `generation` hf (the
    trainer's generate), vllm_colocate (vLLM on the trainer's GPUs at `vllm_gpu_memory_utilization`)
    or vllm_server (vLLM on `rollout_gpus` of the trial's GPUs, the same kind, the rest training;
    `async_rollout` overlaps them); a reference model unless `ref_model: none`; the `reward_model`
    when given, else a reward function at `reward_seconds_per_sample`."""
    from gpuledger.catalog import normalize_accelerator
    from gpuledger.estimate.memory import GRPO_DEFAULT_GROUP

    g = gpus or w.gpus
    group = w.group_size or (GRPO_DEFAULT_GROUP if w.method == "grpo" else 1)
    prompt = w.prompt_len or max(1, w.seq_len // 3)
    response = w.completion_len or max(1, w.seq_len - prompt)
    # seq_len - prompt_len is the max completion length: responses are cut there; at or below the mean, every
    # response is taken at the stated length (no tail beyond what the trainer allows)
    room = w.seq_len - prompt
    cap = room if room > response else None
    p90 = w.completion_len_p90 if cap is not None or w.completion_len_p90 else response
    engine = "hf" if w.generation == "hf" else "vllm"
    split = w.generation == "vllm_server"
    r = rollout_gpus or w.rollout_gpus or 0
    own = split and bool(w.rollout_gpu)  # rollouts on an instance of their own: the trial's GPUs all train
    if own and r < 1:
        raise ValueError(f"rollout_gpu {w.rollout_gpu} needs rollout_gpus (the rollout instance's GPU count)")
    if split and not own and not 1 <= r < g:
        raise ValueError(f"generation vllm_server on {g} GPU(s): rollout_gpus {r} leaves no GPU to train "
                         "(give the trial 2 or more GPUs)")
    trainer = g - r if split and not own else g
    prompts = w.prompts_per_step or w.micro_batch * trainer * (w.grad_accum or 1)
    micro = w.micro_batch_sequences or w.micro_batch * group
    return RLSetup(model=w.model, algorithm=w.method, precision=precision or w.precision,
                   prompts_per_step=prompts, generation_rounds=generation_rounds(w, prompts * group, micro, trainer),
                   rollout_tp=w.rollout_tp, ppo_epochs=w.ppo_epochs, ppo_mini_batches=w.ppo_mini_batches,
                   param_offload=w.param_offload, optimizer_offload=w.optimizer_offload,
                   trainer_tp=w.tensor_parallel, trainer_ep=w.expert_parallel,
                   # the spec's nodes are the trial's: the trainer's when it holds every GPU of the trial
                   trainer_nodes=w.nodes if not split or own else None,
                   sleep_mode=bool(w.vllm_sleep and engine == "vllm" and not split), packing=w.packing,
                   old_logprob=w.old_logprob, eager=w.rollout_eager, dynamic_sampling=w.dynamic_sampling,
                   group_size=group, prompt_len=prompt,
                   response_len=response, response_len_p90=p90, response_len_max=cap, engine=engine,
                   placement="split" if split else "colocated", trainer_accelerator=accelerator, trainer_gpus=trainer,
                   rollout_gpus=r if split else None,
                   rollout_accelerator=normalize_accelerator(w.rollout_gpu) if own else None,
                   gpu_memory_utilization=w.vllm_gpu_memory_utilization if engine == "vllm" and not split else None,
                   async_rollout=bool(w.async_rollout and split), reference=w.ref_model != "none",
                   reward_model=w.reward_model, reward_s_per_sample=w.reward_seconds_per_sample,
                   critic_model=w.critic_model,
                   policy_method=w.policy, lora_r=w.lora_r, lora_targets=w.lora_targets,
                   micro_batch=micro, micro_batch_tokens=w.micro_batch_tokens, framework=w.framework,
                   sharding=w.sharding, grad_ckpt=w.grad_ckpt)


def placement_candidates(w, accelerator: str, gpus: int | None = None, precision: str | None = None) -> list[dict]:
    """Returns the placements tried for a workload on `gpus` x `accelerator`, each {rollout_gpus,
    trainer_gpus, step_s, tokens_per_s, chosen, reason}: one (the workload's) unless `generation:
    vllm_server` leaves `rollout_gpus` open, then a quarter and a half of the GPUs for rollouts. The
    chosen one trains the most tokens per second (all are billed the same GPUs, so it is also the
    cheapest and the likeliest to meet a deadline); ValueError when none can run."""
    g = gpus or w.gpus
    if w.generation == "vllm_server" and w.rollout_gpus is None:
        shares = sorted({max(1, g // 4), max(1, g // 2)} - {g}) or [0]
    else:
        shares = [None]
    out, errors = [], []
    for r in shares:
        try:
            s = setup_from_workload(w, accelerator, g, precision, rollout_gpus=r)
            st = rl_step_cached(s)
        except ValueError as err:
            errors.append(str(err))
            continue
        out.append({"rollout_gpus": s.rollout_gpus, "trainer_gpus": s.trainer_gpus, "step_s": round(st.step_s, 3),
                    "tokens_per_s": st.tokens / st.step_s, "chosen": False, "setup": s})
    if not out:
        raise ValueError(errors[0] if errors else "no RL placement can run")
    max(out, key=lambda c: c["tokens_per_s"])["chosen"] = True
    return out


def chosen_step(w, accelerator: str, gpus: int | None = None, precision: str | None = None) -> RLStep:
    """Returns the RLStep of the placement `placement_candidates` chooses (what `train_time_s` times)."""
    best = next(c for c in placement_candidates(w, accelerator, gpus, precision) if c["chosen"])
    return rl_step_cached(best["setup"])


@functools.lru_cache(maxsize=1024)
def rl_step_cached(s: RLSetup) -> RLStep:
    """`rl_step`, remembered per setup (the planner times one workload on many GPU kinds and counts)."""
    return rl_step(s)
