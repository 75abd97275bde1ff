"""Inference capacity planning: traffic × tokens × latency targets → GPUs per accelerator → $/month.

- `gpuledger.capacity.simulate`: a discrete-event simulation of continuous batching (one replica,
  Poisson arrivals or a closed loop at a concurrency) over the step-cost model of
  `gpuledger.estimate.inference`; p50/p95/p99 TTFT and TPOT, throughput.
- `gpuledger.capacity.plan`: per accelerator, the latency–throughput curve, the operating point
  that meets the SLO, the fleet and its price (`plan_capacity`), returned as a `CapacityPlan`
  (`gpuledger.capacity.plan_types`: its keys and their types, named once); its fleet sizing and bands
  in `gpuledger.capacity.sizing`, its prices in `gpuledger.capacity.prices`.
"""

from gpuledger.capacity.plan import OPTION_KEYS, assumptions, plan_capacity
from gpuledger.capacity.prices import HOURS_PER_DAY, HOURS_PER_MONTH, cheapest_offer, fleet_cost
from gpuledger.capacity.sizing import gpus_needed

__all__ = ["HOURS_PER_DAY", "HOURS_PER_MONTH", "OPTION_KEYS", "assumptions", "cheapest_offer", "fleet_cost",
           "gpus_needed", "plan_capacity"]
