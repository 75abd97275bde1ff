"""`Workload`: what one training or inference setup is (the `gpuledger estimate` options)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Method = Literal["full", "lora", "qlora", "grpo", "ppo", "inference"]
Precision = Literal["fp32", "bf16", "fp16", "bf16-mixed", "fp16-mixed", "fp8", "int8", "int4", "nf4"]
Optimizer = Literal["adamw", "adamw-8bit", "paged-adamw-8bit", "sgd", "adafactor"]
Sharding = Literal["none", "ddp", "zero1", "zero2", "zero3", "fsdp"]


class Workload(BaseModel):
    """One setup to estimate, per GPU. Field names follow the `gpuledger estimate` options.

    `micro_batch` is sequences per GPU per step (for GRPO/PPO: prompts per GPU; each gets
    `group_size` completions). `seq_len` is tokens per sequence for training (and the context for
    inference when prompt/completion lengths are not given).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str
    method: Method = "lora"
    precision: Precision = "bf16"
    optimizer: Optimizer = "adamw"
    micro_batch: int = Field(1, ge=1)
    seq_len: int = Field(2048, ge=1)
    grad_ckpt: bool = True
    flash_attn: bool = True
    lora_r: int = Field(16, ge=1)
    lora_targets: str = "q,v"
    gpus: int = Field(1, ge=1)
    sharding: Sharding = "none"
    prompt_len: int | None = Field(None, ge=1)
    completion_len: int | None = Field(None, ge=1)
    group_size: int | None = Field(None, ge=1)
    device: Literal["gpu", "cpu"] = "gpu"
    #: the training code whose memory habits to assume (loss and adapter dtypes differ; see memory.py):
    #: hf = Transformers + PEFT (+ TRL), the default and what trainers/ ships; litgpt; torchtune.
    framework: Literal["hf", "litgpt", "torchtune"] = "hf"
    #: GRPO/PPO reward model (registry name or config path); None: GRPO uses rule-based rewards
    #: (no model), PPO a reward model of the policy's architecture.
    reward_model: str | None = None

    @field_validator("lora_targets")
    @classmethod
    def _targets(cls, value: str) -> str:
        from gpuledger.models.params import parse_lora_targets

        return ",".join(parse_lora_targets(value)) if value.strip().lower() not in ("all-linear", "all") else "all-linear"

    @model_validator(mode="after")
    def _consistent(self) -> Workload:
        if self.method == "full" and self.precision in ("int8", "int4", "nf4"):
            raise ValueError(f"full fine-tuning cannot train {self.precision} weights; use --method qlora or lora "
                             "(a frozen quantised base) or a float precision")
        return self


