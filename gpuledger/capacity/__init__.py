"""Inference capacity planning: traffic × tokens × latency targets → GPUs per accelerator → $/month.

- `gpuledger.capacity.simulate`: a discrete-event simulation of continuous batching (one replica,
  Poisson arrivals or a closed loop at a concurrency) over the step-cost model of
  `gpuledger.estimate.inference`; p50/p95/p99 TTFT and TPOT, throughput.
- `gpuledger.capacity.plan`: per accelerator, the latency–throughput curve, the operating point
  that meets the SLO, the fleet and its price (`plan_capacity`), returned as a `CapacityPlan`
  (`gpuledger.capacity.plan_types`: its keys and their types, named once).
"""

from gpuledger.capacity.plan import (
    HOURS_PER_DAY,
    HOURS_PER_MONTH,
    OPTION_KEYS,
    assumptions,
    cheapest_offer,
    fleet_cost,
    gpus_needed,
    plan_capacity,
)

__all__ = ["HOURS_PER_DAY", "HOURS_PER_MONTH", "OPTION_KEYS", "assumptions", "cheapest_offer", "fleet_cost",
           "gpus_needed", "plan_capacity"]
