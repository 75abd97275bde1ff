"""The local launcher's one offer: this machine, from its stored measured speed (pure)."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from gpuledger.plan.estimates import ACCEL_SCHEMA, TIMES_SCHEMA
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
    # the local rate is the spec's own or the reference rate, not a market price: no floor to hold it to
    return offers.with_columns(spot_suspicious=pl.lit(False), price_snapshot=pl.lit(price_snapshot_id(offers)),
                               price_problem=pl.lit(None, dtype=pl.String), spot_problem=pl.lit(None, dtype=pl.String))


def local_usable_gib(machine) -> float:
    """Returns the RAM trials may use on this machine: LOCAL_MEMORY_FRACTION of its total."""
    return machine.total_ram_gib * LOCAL_MEMORY_FRACTION


def local_accel(machine, precisions: Sequence[str]) -> pl.DataFrame:
    """Returns the accelerator table of `CPU` (time factor 1: `local_times` is the model); memory
    expressed so that the scoring step's usable = memory × safety − reserve equals `local_usable_gib`."""
    mem_for_table = (local_usable_gib(machine) + MEMORY_RESERVE_GIB) / MEMORY_SAFETY_FRACTION
    src = local_time_source(machine)
    return pl.DataFrame(
        [{"accelerator": "CPU", "precision": p, "memory_gib": mem_for_table, "time_factor": 1.0, "time_source": src}
         for p in dict.fromkeys(precisions)],
        schema=ACCEL_SCHEMA,
    )


def local_time_source(machine) -> str:
    """Returns where the local CPU's compute time comes from, in words."""
    from gpuledger.estimate import CPU_TRAINING_EFFICIENCY

    return (f"FLOPs / (one core's measured float32 matmul {machine.matmul_gflops_one_core:.1f} GFLOP/s "
            f"({machine.measured_on}) × CPU_TRAINING_EFFICIENCY {CPU_TRAINING_EFFICIENCY}) (gpuledger/estimate/compute.py)")


def local_cpu_share(machine, parallel: int) -> float:
    """Returns the share of a core each of `parallel` trials can expect on this machine now (its measured
    load, `MachineSpeed.load`; 1 when not measured)."""
    load = getattr(machine, "load", None)
    return load.cpu_share(parallel) if load is not None else 1.0


def local_times(estimates: pl.DataFrame, machine, cpu_share: float = 1.0) -> pl.DataFrame:
    """Returns workload, accelerator ('CPU'), compute_s of every workload of `estimates` on this
    machine's one core (`gpuledger.estimate.cpu_compute_s`), divided by the share of that core a trial
    gets beside the machine's other load (`local_cpu_share`)."""
    from gpuledger.estimate import cpu_compute_s

    w = estimates.filter(pl.col("workload").is_not_null() & pl.col("flops_total").is_not_null()).unique("workload", keep="first")
    share = min(1.0, max(cpu_share, 0.02))
    return pl.DataFrame({
        "workload": w["workload"], "accelerator": ["CPU"] * w.height,
        "compute_s": [cpu_compute_s(f, machine.matmul_gflops_one_core) / share for f in w["flops_total"].to_list()],
    }, schema=TIMES_SCHEMA)
