"""A Transformers `TrainerCallback` that reports to gpuledger (also for TRL's trainers, which are
`Trainer`s): tokens, steps, loss, learning rate and evaluation metrics, with one line.

    from gpuledger.integrations.transformers import GpuledgerCallback
    trainer = Trainer(model=model, args=args, train_dataset=ds, callbacks=[GpuledgerCallback()])

or, once this module is imported (it registers the name in Transformers' integration table,
`transformers.integrations.integration_utils.INTEGRATION_TO_CALLBACK`):

    import gpuledger.integrations.transformers  # noqa: F401
    args = TrainingArguments(..., report_to="gpuledger")

Outside a sweep the training is an ad-hoc run (`gpuledger.track.init`: wall-clock, GPU inventory,
peak memory and cost, stored in the ledger when training ends); inside one the agent measures it and
the points go to its channel. The run's config: the model's name and class, whether it is a PEFT
(LoRA) model, and the TrainingArguments. `tokens` is `TrainerState.num_input_tokens_seen`: the
callback turns the Trainer's own count on (`include_num_input_tokens_seen="all"`) when it is off, so
the run says how many tokens it processed (pass `count_tokens=False` to leave it off).
"""

from __future__ import annotations

import math
import os
from typing import Any

from transformers import TrainerCallback

from gpuledger import track

#: TrainingArguments kept in a run's config (the rest is noise for cost and calibration)
ARGS_KEPT = ("per_device_train_batch_size", "gradient_accumulation_steps", "learning_rate", "num_train_epochs",
             "max_steps", "warmup_steps", "weight_decay", "lr_scheduler_type", "optim", "bf16", "fp16",
             "gradient_checkpointing", "seed", "output_dir", "run_name")


def _numbers(logs: dict[str, Any] | None) -> dict[str, float]:
    out = {}
    for key, value in (logs or {}).items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if math.isfinite(float(value)):
            out[str(key)] = float(value)
    return out


def _model_config(model: Any) -> dict[str, Any]:
    """Returns what the run's config says of the model: name, class, method (lora when it is a PEFT model)."""
    if model is None:
        return {}
    base = getattr(model, "base_model", None)
    is_peft = hasattr(model, "peft_config")
    cfg = getattr(model, "config", None) or getattr(getattr(base, "model", None), "config", None)
    name = getattr(cfg, "_name_or_path", None) or getattr(cfg, "name_or_path", None) or None
    out: dict[str, Any] = {"model": name or type(model).__name__, "model_class": type(model).__name__,
                           "method": "lora" if is_peft else "full"}
    try:
        out["params_total"] = int(sum(p.numel() for p in model.parameters()))
        out["params_trainable"] = int(sum(p.numel() for p in model.parameters() if p.requires_grad))
    except Exception:  # a model without parameters() (a wrapper): the counts stay out
        pass
    return out


class GpuledgerCallback(TrainerCallback):
    """Reports a Trainer's training to gpuledger (see the module).

    `project`: the ad-hoc runs' project (default `$GPULEDGER_ADHOC_PROJECT`, else 'adhoc'); `name`:
    the run's name (default the TrainingArguments' `run_name`); `usd_per_hour`: its rate (default: the
    catalog price of its GPUs, else the local reference rate); `method`: the run's method (default: lora
    for a PEFT model, else full; gpuledger.integrations.trl sets grpo); `objective`: the metric the run is judged
    by (eval_loss; TRL GRPO runs: reward)."""

    def __init__(self, project: str | None = None, name: str | None = None, *, usd_per_hour: float | None = None,
                 count_tokens: bool = True, method: str | None = None, objective: str = "eval_loss") -> None:
        self.project, self.name, self.usd_per_hour, self.count_tokens = project, name, usd_per_hour, count_tokens
        self.method, self.objective = method, objective
        self._owns_run = False
        self.finished: Any = None

    def on_init_end(self, args, state, control, **kwargs):
        if self.count_tokens and getattr(args, "include_num_input_tokens_seen", None) in ("no", False, None):
            args.include_num_input_tokens_seen = "all"

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if not state.is_world_process_zero:
            return
        described = _model_config(model)
        if self.method:
            described["method"] = self.method
        config = {**described, **{k: getattr(args, k) for k in ARGS_KEPT if hasattr(args, k)},
                  "world_size": getattr(args, "world_size", 1), "trainer": "transformers"}
        self._owns_run = track.run is None
        if self._owns_run:
            name = self.name or (args.run_name if getattr(args, "run_name", None) else None) \
                or os.path.basename(str(args.output_dir).rstrip("/")) or None
            track.init(project=self.project, name=name, config=config, model=described.get("model"),
                       method=described.get("method"), usd_per_hour=self.usd_per_hour, objective=self.objective)
        elif track.run.adhoc is not None:
            track.run.adhoc.update_config(config)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero:
            return
        metrics = _numbers(logs)
        tokens = getattr(state, "num_input_tokens_seen", 0) or 0
        if tokens:
            metrics["tokens"] = float(tokens)
        if metrics:
            track.log(metrics, step=int(state.global_step))

    def on_train_end(self, args, state, control, **kwargs):
        if not state.is_world_process_zero:
            return
        final = {"steps": float(state.global_step)}
        tokens = getattr(state, "num_input_tokens_seen", 0) or 0
        if tokens:
            final["tokens"] = float(tokens)
        track.log(final, step=int(state.global_step))
        if self._owns_run:
            self.finished = track.finish()


def register() -> None:
    """Makes `report_to="gpuledger"` name `GpuledgerCallback` (Transformers' integration table)."""
    from transformers.integrations import integration_utils

    integration_utils.INTEGRATION_TO_CALLBACK["gpuledger"] = GpuledgerCallback


register()
