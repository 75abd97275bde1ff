"""The local machine's reference rate: what one local trial would cost on a comparable cloud CPU
instance (bundled row of `local_reference.csv`, with its source and date).

The demo runs on this machine, which has no invoice; so that its reports show money, a local trial
is priced, unless the spec sets `local.usd_per_hour`, at the on-demand price of the cloud CPU
instance with the resources one trial uses (one physical core: the trainers pin BLAS to one
thread). The launcher bills local runs at the same rate, labelled as a reference rate.
"""

from __future__ import annotations

import csv
import functools
from dataclasses import dataclass

from gpuledger.catalog import DATA_DIR

LOCAL_REFERENCE_CSV = DATA_DIR / "local_reference.csv"


@dataclass(frozen=True)
class LocalRate:
    """The hourly rate a local trial is priced at, and where it comes from."""

    usd_per_hour: float
    source: str  # short: what the number is
    as_of: str  # the date of the price
    label: str  # one sentence for plans and billing lines
    reference: bool  # True: the catalog reference rate; False: set in the spec


@functools.cache
def local_reference() -> LocalRate:
    """Returns the bundled reference rate (the first row of local_reference.csv)."""
    with LOCAL_REFERENCE_CSV.open(newline="") as f:
        row = next(csv.DictReader(f))
    usd = float(row["usd_per_hour_on_demand"])
    what = f"{row['cloud']} {row['instance_type']} {row['region']}"
    return LocalRate(
        usd_per_hour=usd,
        source=f"reference rate: {what} on-demand (gpuledger/catalog/local_reference.csv)",
        as_of=row["as_of"],
        label=(f"reference rate, not a bill: the on-demand price of {what} ({row['vcpus']} vCPU = "
               f"{row['physical_cores']} physical core, {row['memory_gib']} GiB), ${usd:g}/h as of {row['as_of']} "
               f"({row['source'].split(',')[0]}); set local.usd_per_hour in the spec to use your own"),
        reference=True,
    )


def local_rate_for(usd_per_hour: float | None) -> LocalRate:
    """Returns the rate to plan and bill local trials at: `usd_per_hour` when the spec sets it
    (None: not set), else the reference rate."""
    if usd_per_hour is None:
        return local_reference()
    return LocalRate(usd_per_hour=float(usd_per_hour), source="local.usd_per_hour (spec)", as_of="",
                     label=f"local.usd_per_hour = {usd_per_hour:g} set in the spec", reference=False)
