"""The result record: what one attempt of one trial really did, measured where it ran.

One JSON document per attempt, written by `gpuledger.agent` inside the job (the measured part) and
completed by the launcher (placement and billing), then ingested by the warehouse. Versioned by
`schema`; a reader rejects a version it does not know with a clear message.

This module is deliberately light (stdlib + pydantic) because it also runs inside cloud jobs.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat, NonNegativeInt

from gpuledger.protocol import SCHEMA
from gpuledger.vocabulary import BillingRole, PriceSource, Purpose, RecordLauncher, RunStatus

#: Terminal states of an attempt (the warehouse's `runs.status`), from `gpuledger.vocabulary`.
#: `skipped-budget` and `pruned` are never an attempt's record: the sweep gives them to trials it
#: did not run.
Status = RunStatus
LauncherName = RecordLauncher


class MetricPoint(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1)
    value: float
    step: int | None = None
    t_s: NonNegativeFloat | None = None  # seconds since the attempt started


class BillingLine(BaseModel):
    """One line item of what the attempt cost. `source` says where the price came from."""

    model_config = ConfigDict(extra="forbid")
    source: PriceSource
    description: str  # e.g. "aws p5.48xlarge us-east-1 spot, catalog 2026-05-20"
    usd_per_hour: NonNegativeFloat
    hours: NonNegativeFloat
    cost_usd: NonNegativeFloat
    spot: bool = False
    on_demand_usd_per_hour: NonNegativeFloat | None = None  # for realised spot savings
    #: what the line priced: the instance, its GPU kind and count, and the role it held when the run's roles
    #: ran on instances of their own (an RL job group); role None: the run's one instance, every role on it
    role: BillingRole | None = None
    instance_type: str | None = None
    accelerator: str | None = None
    gpus: NonNegativeInt | None = None


class ResultRecord(BaseModel):
    """The record of one attempt. Units are in the field names (`_s`, `_gib`, `_usd`)."""

    model_config = ConfigDict(extra="forbid")

    schema_: Literal[SCHEMA] = Field(SCHEMA, alias="schema")  # type: ignore[valid-type]
    run_id: str = Field(min_length=1, max_length=200)  # unique per attempt
    sweep_id: str | None = None
    trial_id: str = Field(min_length=1)
    attempt: int = Field(1, ge=1)
    launcher: LauncherName
    cloud: str | None = None  # None for local
    region: str | None = None
    instance_type: str | None = None
    accelerator: str | None = None  # None for a CPU-only local run
    gpus: NonNegativeInt = 0
    spot: bool = False
    started_at: datetime
    ended_at: datetime
    wall_s: NonNegativeFloat
    exit_code: int | None = None
    status: Status
    reason: str | None = None  # why it is not `succeeded`: "exit code 1", "timeout after 30 s", ...
    peak_gpu_mem_gib: NonNegativeFloat | None = None  # max over the job's GPUs, NVML used (device level)
    peak_gpu_util_pct: NonNegativeFloat | None = None
    peak_rss_gib: NonNegativeFloat | None = None  # whole process tree, psutil RSS
    preemptions: NonNegativeInt = 0
    recoveries: NonNegativeInt = 0
    hostname: str | None = None
    command: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    metrics: list[MetricPoint] = Field(default_factory=list)  # time series
    final_metrics: dict[str, float] = Field(default_factory=dict)  # last value of each metric
    billing: list[BillingLine] = Field(default_factory=list)
    stderr_tail: str | None = None  # last lines of stderr when it failed
    log_path: str | None = None  # where the launcher keeps the attempt's whole output (local: landing/logs/RUN_ID.log)
    purpose: Purpose = "trial"  # "probe": a short run that measured a shape of the sweep (docs/probes.md)
    probe_shape: dict[str, Any] | None = None  # a probe's shape (what trials it stands for)
    #: packed trials (k agents in one job on one slot/GPU): the slot's id, this trial's share of its bill,
    #: the trials in the slot and the job's wall-clock (the billing line: price x pack_wall_s x pack_share)
    pack_slot: str | None = None
    pack_share: float | None = Field(None, gt=0, le=1)
    pack_k: int | None = Field(None, ge=1)
    pack_wall_s: NonNegativeFloat | None = None

    @property
    def cost_usd(self) -> float:
        return sum(line.cost_usd for line in self.billing)

    def to_json(self) -> dict[str, Any]:
        """Returns the record as the JSON-ready dict a landing file holds (`schema`, ISO times)."""
        return self.model_dump(mode="json", by_alias=True)


def parse_record(data: dict[str, Any]) -> ResultRecord:
    """Returns the validated record; raises pydantic.ValidationError naming each bad field."""
    return ResultRecord.model_validate(data)
