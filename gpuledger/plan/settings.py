"""The planner's constants (each one an assumption the plan states) and `PlanSettings`.

One time unit inside the planner: seconds (`_s`). Prices stay per hour (`usd_per_hour`, as every
catalog quotes them) and preemption rates per hour (as measured and published); the two places that
multiply them by a duration divide by `S_PER_H`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

#: Seconds per hour: the one conversion between per-hour prices/rates and durations in seconds.
S_PER_H = 3600.0

#: Usable device memory = nvidia-smi total × this fraction − MEMORY_RESERVE_GIB. 1.0: the estimate the
#: planner compares is already the `device` level (live tensors + the allocator's fragmentation
#: (ALLOCATOR_OVERHEAD) + the CUDA context + NCCL buffers), so a second 5% off the card (0.95, until
#: 2026-12-01) refused runs that really ran: a run measured at 77 GiB of nvidia-smi on an 80 GB card was
#: refused even when the estimate was exact. The estimate's own error is the band's business
#: (gpuledger/estimate/bands.py), not a hidden margin here.
MEMORY_SAFETY_FRACTION = 1.0
#: GiB kept free per GPU for things no estimator sees: NCCL/communication buffers, cuBLAS
#: workspaces of a second stream, a monitoring process's context.
MEMORY_RESERVE_GIB = 0.5

#: Seconds from `sky jobs launch` to the job's first line on a fresh cloud VM (provisioning, image
#: pull, SkyPilot runtime set-up): 3-8 min observed for GPU VMs; we plan with 5 min.
CLOUD_PROVISIONING_S = 5 * 60.0
#: Seconds of `task.setup` (pip install of the trainer's requirements, model download): 5 min.
CLOUD_SETUP_S = 5 * 60.0
#: Local launcher: no provisioning; a Python + numpy start-up of a few seconds.
LOCAL_PROVISIONING_S = 0.0
LOCAL_SETUP_S = 3.0

#: GPU counts `gpus_per_trial: auto` tries.
AUTO_GPU_COUNTS = (1, 2, 4, 8)

#: Local launcher: the fraction of this machine's total RAM (as stored with its measured speed)
#: that trials may use. Total, not "available now": a plan must not change with the load of the
#: moment (two plans in a row are identical).
LOCAL_MEMORY_FRACTION = 0.80


@dataclass(frozen=True)
class PlanSettings:
    """What the choice step needs from a spec (plain values; tests build it by hand)."""

    sweep: str = "sweep"
    method: str = "lora"
    precision: str = "bf16"
    launcher: str = "skypilot"
    spot: str = "auto"  # auto | always | never
    deadline_s: float | None = None
    deadline_confidence: float = 0.9
    max_parallel: int = 4
    budget_usd: float = math.inf
    provisioning_s: float = CLOUD_PROVISIONING_S
    setup_s: float = CLOUD_SETUP_S
    #: seconds lost to a restart after a preemption (re-provision + set-up); None: provisioning + setup
    restart_overhead_s: float | None = None
    #: seconds between checkpoints; None: the trial is assumed NOT to checkpoint (a preemption loses
    #: on average half of the compute done so far, i.e. half the trial)
    checkpoint_interval_s: float | None = None
    preemption_per_hour: float | None = None
    measured_preemption: dict[tuple[str, str], tuple[float, float]] | None = None
    #: rates learned from the FOCUS bill (`gpuledger.catalog.pricing.BilledRates`), from the ledger
    billed_rates: Any = None
    target: float | None = None
    #: the quantile the budget guard, the deadline check and the spot choice decide at (p50 | p90,
    #: `budget.confidence`; gpuledger/plan/bands.py)
    confidence: str = "p90"
    #: the bands' table (`gpuledger.estimate.bands.BandTable`: the public rows + the team's runs); None: public
    band_table: Any = None
    #: the deadline test's time quantile: (accelerator, gpus, precision) -> the compute time's P90 / P50 of
    #: that cell (budget.confidence p90); None: the test at P50
    deadline_factor: Any = None
    #: train.samples planned at the cap, neither padding nor sample_tokens stated (`assumptions.lengths_unstated`):
    #: each trial's time P10 reaches the typical lengths' time (plan/bands.py)
    lengths_unstated: bool = False
    memory_safety_fraction: float = MEMORY_SAFETY_FRACTION
    memory_reserve_gib: float = MEMORY_RESERVE_GIB
    #: the nodes a trial spans as the spec states them (`train.nodes`); None: ceil(GPUs / 8)
    #: (`gpuledger.estimate.coefficients.nodes_for`): a trial of several nodes rents one instance per node
    nodes: int | None = None

    @property
    def overhead_s(self) -> float:
        return self.provisioning_s + self.setup_s

    @property
    def restart_s(self) -> float:
        return self.overhead_s if self.restart_overhead_s is None else self.restart_overhead_s
