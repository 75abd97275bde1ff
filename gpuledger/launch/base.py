"""The `Launcher` protocol (docs/CONTRACTS.md, "Launchers"): submit, poll, cancel, collect.

A launcher turns a `LaunchRequest` (one trial, already planned) into a running job and, at the end,
into result records (`gpuledger.record`), one per attempt. It never writes to the warehouse: the
flow ingests what `collect` returns.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from gpuledger.vocabulary import LAUNCH_TERMINAL, LaunchStatus

if TYPE_CHECKING:
    from gpuledger.record import ResultRecord

#: What `poll` answers (`gpuledger.vocabulary.LAUNCH_STATUSES`). Terminal: succeeded, failed, cancelled.
TrialStatus = LaunchStatus
TERMINAL: frozenset[str] = LAUNCH_TERMINAL


@dataclass(frozen=True)
class RolloutRequest:
    """The rollouts' task of an RL trial whose rollouts run on an instance of their own (`train.rollout_gpu`,
    launched beside the trainer as one SkyPilot job group, gpuledger/launch/skypilot_group.py): the rendered
    `task.rollout_run`, its GPUs, the instance the plan priced (cloud, region, type, $/hour), the port its
    server listens on."""

    run: str
    accelerator: str
    gpus: int
    usd_per_hour: float
    instance_type: str | None = None
    cloud: str | None = None
    region: str | None = None
    price_description: str = ""
    port: int = 8000


@dataclass(frozen=True)
class LaunchRequest:
    """Everything a launcher needs to run one trial. Plain values; built by the flow from the plan."""

    sweep_id: str
    sweep_name: str
    trial_id: str
    params: dict[str, Any]
    run: str  # the rendered shell command (values already shlex-quoted)
    setup: str | None = None  # rendered set-up command, run once before `run`
    workdir: Path = Path(".")  # what the command runs in (local) / is synced (skypilot)
    env: dict[str, str] = field(default_factory=dict)
    timeout_s: float | None = None
    # placement chosen by the planner (None for local)
    accelerator: str | None = None
    gpus: int = 0
    cloud: str | None = None
    region: str | None = None
    instance_type: str | None = None
    spot: bool = False
    #: price of the chosen offer (local: the plan's local rate); None: the launcher's own default
    usd_per_hour: float | None = None
    on_demand_usd_per_hour: float | None = None
    price_source: str = "local"  # gpuledger.vocabulary.PRICE_SOURCES
    price_description: str = ""  # where the price comes from, for the billing line
    #: metrics the in-job agent echoes to the job's logs while it runs (`--echo-metrics`): the sweep's
    #: objective when its trials can be pruned, so a launcher that only reads logs (SkyPilot) sees them
    echo_metrics: tuple[str, ...] = ()
    #: the SkyPilot pool the trial runs on (`gpuledger.plan.pools`: the plan chose a pool of
    #: `pool_workers` workers); None: its own managed job
    pool: str | None = None
    pool_workers: int = 0
    #: a probe's own variables (`gpuledger.runtime.probe.probe_env`: GPULEDGER_PURPOSE, _PROBE_SHAPE,
    #: _PROBE_STEPS/_SECONDS), set by the launcher like the ids: a spec's `env` may not set GPULEDGER_*
    probe_env: dict[str, str] = field(default_factory=dict)
    #: packed trials (`resources.trials_per_gpu` k > 1): this trial's weight in its slot's bill, the
    #: planner's compute seconds of its work (`PlannedTrial.compute_s`); None: an equal share
    pack_weight: float | None = None
    #: the nodes the trial spans (`gpuledger.estimate.coefficients.nodes_for`): `gpus` split evenly over them,
    #: one instance of `instance_type` each (SkyPilot `num_nodes`); 1: one machine
    num_nodes: int = 1
    #: the rollouts' own task (`train.rollout_gpu`); `usd_per_hour` above is then the trainer's instance alone
    rollout: RolloutRequest | None = None


@runtime_checkable
class Launcher(Protocol):
    name: str

    def submit(self, request: LaunchRequest) -> Any:
        """Starts the trial; returns an opaque handle."""

    def poll(self, handle: Any) -> TrialStatus:
        """Returns the current status; never blocks for long."""

    def cancel(self, handle: Any) -> None:
        """Stops the trial (idempotent)."""

    def collect(self, handle: Any) -> list[ResultRecord]:
        """Returns the validated result records (`gpuledger.record.ResultRecord`), one per attempt.

        Call after `poll` returned a terminal status.
        """
