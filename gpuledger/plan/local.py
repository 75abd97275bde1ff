"""The local launcher's one offer: this machine, from its stored measured speed (pure)."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from gpuledger.plan.estimates import ACCEL_SCHEMA
from gpuledger.plan.settings import LOCAL_MEMORY_FRACTION, MEMORY_RESERVE_GIB, MEMORY_SAFETY_FRACTION


def local_offers(machine, usd_per_hour: float, rate_source: str, rate_as_of: str) -> pl.DataFrame:
    """Returns the one offer `local/CPU` (this machine) at `usd_per_hour`, with the rate's source and date."""
    from gpuledger.catalog.offers import OFFER_SCHEMA, price_snapshot_id

    offers = pl.DataFrame(
        [{"cloud": "local", "region": "local", "instance_type": machine.hostname, "accelerator": "CPU",
          "accelerator_count": 1, "usd_per_hour_on_demand": float(usd_per_hour), "usd_per_hour_spot": None,
          "vcpus": float(machine.cores), "memory_gib": float(machine.total_ram_gib), "source": rate_source,
          "as_of": rate_as_of}],
        schema=OFFER_SCHEMA,
    )
    return offers.with_columns(spot_suspicious=pl.lit(False), price_snapshot=pl.lit(price_snapshot_id(offers)))


def local_usable_gib(machine) -> float:
    """Returns the RAM trials may use on this machine: LOCAL_MEMORY_FRACTION of its total."""
    return machine.total_ram_gib * LOCAL_MEMORY_FRACTION


def local_accel(machine, precisions: Sequence[str]) -> pl.DataFrame:
    """Returns the accelerator table of `CPU`: peak = one core's measured matmul rate, MFU = the
    CPU training efficiency of gpuledger/estimate/compute.py; memory expressed so that the scoring
    step's usable = memory × safety − reserve equals `local_usable_gib`."""
    from gpuledger.estimate import CPU_TRAINING_EFFICIENCY

    mem_for_table = (local_usable_gib(machine) + MEMORY_RESERVE_GIB) / MEMORY_SAFETY_FRACTION
    src = (f"one core's measured float32 matmul {machine.matmul_gflops_one_core:.1f} GFLOP/s ({machine.measured_on}) "
           f"× CPU_TRAINING_EFFICIENCY {CPU_TRAINING_EFFICIENCY} (gpuledger/estimate/compute.py)")
    return pl.DataFrame(
        [{"accelerator": "CPU", "precision": p, "memory_gib": mem_for_table,
          "peak_tflops": machine.matmul_gflops_one_core / 1000.0, "mfu": CPU_TRAINING_EFFICIENCY, "mfu_source": src}
         for p in dict.fromkeys(precisions)],
        schema=ACCEL_SCHEMA,
    )
