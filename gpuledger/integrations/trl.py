"""TRL's `GRPOTrainer` timed by role, reported to gpuledger with one line:

    from gpuledger.integrations.trl import track_roles
    trainer = GRPOTrainer(model=..., reward_funcs=..., args=..., train_dataset=...)
    track_roles(trainer)   # adds GpuledgerCallback (tokens, loss, reward) and the per-role timings
    trainer.train()

Every optimizer step logs, through `gpuledger.track.log` (an ad-hoc run outside a sweep, the agent's
channel inside one; `gpuledger probe` stops the trainer after its steps), the step's seconds by role
(the names are `gpuledger.protocol.RL_ROLE_METRICS`, the same roles as the RL step model,
gpuledger/estimate/rl.py and docs/rl.md):

- `rl_rollout_s`: generating the completions (`GRPOTrainer._generate`: vLLM colocate or server, or the
  trainer's own `generate`), less the weight sync inside it;
- `rl_sync_s`: the weight sync to vLLM (`vllm_generation.sync_weights`; 0 with the trainer's `generate`,
  which needs none);
- `rl_logprob_s`: the reference and old-policy log-probs (`_get_per_token_logps_and_entropies` called
  while the rollouts are scored; the same call inside the loss is the trainer's);
- `rl_reward_s`: the reward functions or models (`_calculate_rewards`);
- `rl_train_s`: the rest of the step's wall-clock: the policy's forward/backward, the optimizer step,
  and the trainer's own bookkeeping;
- `rl_step_s` (the step's wall-clock, on_step_begin to on_step_end), `rl_generated_tokens` (completion
  tokens of the step, this rank's x the number of processes) and `rl_rollout_tokens_per_s`.

A step that reuses buffered rollouts (`steps_per_generation` > 1, or `num_iterations` > 1) logs 0
rollout seconds: what it cost. The hooks are TRL 1.x's method names; a TRL without one of them
is refused at `track_roles` with the missing names (the timing would silently be wrong otherwise).
"""

from __future__ import annotations

import functools
import time
from typing import Any

from transformers import TrainerCallback

from gpuledger import track
from gpuledger.errors import UserError
from gpuledger.protocol import (
    RL_GENERATED_TOKENS_METRIC,
    RL_ROLE_METRICS,
    RL_ROLLOUT_RATE_METRIC,
    RL_STEP_METRIC,
)

#: the GRPOTrainer methods timed (TRL 1.x)
HOOKS = ("_generate", "_generate_and_score_completions", "_get_per_token_logps_and_entropies", "_calculate_rewards")


def _completion_tokens(result: Any) -> int:
    """Returns the completion tokens in `_generate`'s result (TRL 1.x: (prompt_ids, completion_ids, ...)),
    0 when its shape is not that."""
    if isinstance(result, tuple) and len(result) > 1 and isinstance(result[1], list | tuple):
        try:
            return int(sum(len(ids) for ids in result[1]))
        except TypeError:
            return 0
    return 0


class RoleTimings(TrainerCallback):
    """Times a GRPOTrainer's roles (see the module) and logs them each optimizer step; `track_roles`
    makes one and adds it to the trainer. `steps` keeps every step's timings (seconds by role)."""

    def __init__(self, trainer: Any) -> None:
        missing = [name for name in HOOKS if not callable(getattr(trainer, name, None))]
        if missing:
            raise UserError(f"track_roles: {type(trainer).__name__} has no {', '.join(missing)} (the TRL "
                            f"GRPOTrainer methods the role timings hook; TRL 1.x has them): install trl>=1.0")
        self.trainer = trainer
        self.steps: list[dict[str, float]] = []
        self._scoring = 0
        self._step_start: float | None = None
        self._reset()
        self._wrap("_generate", self._timed_generate)
        self._wrap("_calculate_rewards", self._timed("reward"))
        self._wrap("_generate_and_score_completions", self._scoring_pass)
        self._wrap("_get_per_token_logps_and_entropies", self._timed_logprobs)
        vllm = getattr(trainer, "vllm_generation", None) if getattr(trainer, "use_vllm", False) else None
        if vllm is not None and callable(getattr(vllm, "sync_weights", None)):
            original = vllm.sync_weights
            vllm.sync_weights = functools.wraps(original)(lambda *a, **k: self._time("sync", original, a, k))

    def _reset(self) -> None:
        self._acc = dict.fromkeys(RL_ROLE_METRICS, 0.0)
        self._generated = 0

    def _wrap(self, name: str, make) -> None:
        original = getattr(self.trainer, name)
        setattr(self.trainer, name, functools.wraps(original)(make(original)))

    def _time(self, role: str, fn, args, kwargs):
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            self._acc[role] += time.perf_counter() - t0

    def _timed(self, role: str):
        def make(fn):
            return lambda *a, **k: self._time(role, fn, a, k)
        return make

    def _timed_generate(self, fn):
        def call(*args, **kwargs):
            sync_before, t0 = self._acc["sync"], time.perf_counter()
            result = fn(*args, **kwargs)
            self._acc["rollout"] += time.perf_counter() - t0 - (self._acc["sync"] - sync_before)
            self._generated += _completion_tokens(result)
            return result
        return call

    def _scoring_pass(self, fn):
        def call(*args, **kwargs):
            self._scoring += 1
            try:
                return fn(*args, **kwargs)
            finally:
                self._scoring -= 1
        return call

    def _timed_logprobs(self, fn):
        def call(*args, **kwargs):
            if not self._scoring:  # the loss's own forward: the trainer's time
                return fn(*args, **kwargs)
            return self._time("logprob", fn, args, kwargs)
        return call

    def on_step_begin(self, args, state, control, **kwargs):
        self._step_start = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        if self._step_start is None:
            return
        wall = time.perf_counter() - self._step_start
        acc = self._acc
        acc["train"] = max(0.0, wall - acc["rollout"] - acc["logprob"] - acc["reward"] - acc["sync"])
        processes = int(getattr(getattr(self.trainer, "accelerator", None), "num_processes", 1) or 1)
        generated = self._generated * processes
        point = {RL_ROLE_METRICS[role]: round(seconds, 6) for role, seconds in acc.items()}
        point[RL_STEP_METRIC] = round(wall, 6)
        point[RL_GENERATED_TOKENS_METRIC] = float(generated)
        if generated and acc["rollout"] > 0:
            point[RL_ROLLOUT_RATE_METRIC] = generated / acc["rollout"]
        tokens = getattr(state, "num_input_tokens_seen", 0) or 0
        if tokens:
            point["tokens"] = float(tokens)  # prompt + completion tokens so far (TRL counts them itself)
        self.steps.append(point)
        self._reset()
        self._step_start = None
        if state.is_world_process_zero:
            track.log(point, step=int(state.global_step))  # a probe may end the process here (after the point)


def track_roles(trainer: Any, *, project: str | None = None, name: str | None = None,
                usd_per_hour: float | None = None) -> RoleTimings:
    """Adds gpuledger's reporting to a TRL GRPOTrainer: `GpuledgerCallback` (unless the trainer has one,
    e.g. from `report_to="gpuledger"`; the run's method is `grpo`) and the per-role timings (the module);
    returns the timings' callback."""
    from gpuledger.integrations.transformers import GpuledgerCallback

    callbacks = trainer.callback_handler.callbacks
    if not any(isinstance(c, GpuledgerCallback) for c in callbacks):
        # TRL counts prompt + completion tokens into num_input_tokens_seen itself: the Trainer's count stays off
        trainer.add_callback(GpuledgerCallback(project=project, name=name, usd_per_hour=usd_per_hour,
                                               count_tokens=False, method="grpo", objective="reward"))
    else:
        for c in callbacks:
            if isinstance(c, GpuledgerCallback):
                c.method = "grpo"
    timings = RoleTimings(trainer)
    trainer.add_callback(timings)
    return timings
