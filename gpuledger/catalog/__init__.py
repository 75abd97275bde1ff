"""GPU kinds and prices as versioned data.

`gpus.csv` holds one row per accelerator kind (SkyPilot's names), each with its source and the date
it was taken (`as_of`). Offers (cloud, region, instance, price) live in `offers.csv` and
`gpuledger.catalog.offers`. Nothing here imports SkyPilot; the adapter over SkyPilot's own catalog
(`gpuledger.catalog.skypilot`) imports it lazily.
"""

from __future__ import annotations

import csv
import difflib
import functools
from dataclasses import dataclass, field
from pathlib import Path

DATA_DIR = Path(__file__).parent

#: Precisions whose dense tensor rate the catalog records (TFLOP/s; int8 in TOP/s).
PRECISION_COLUMNS = ("bf16", "fp16", "fp8", "tf32", "fp32", "int8")


@dataclass(frozen=True)
class GpuKind:
    """One accelerator kind: memory as the driver reports it, bandwidth and dense peak rates."""

    name: str
    arch: str
    memory_gib: float  # total device memory as nvidia-smi reports it (GiB = 2**30 bytes)
    memory_gb_nominal: float  # the marketing number (GB = 1e9 bytes, rounded)
    bandwidth_gbps: float  # HBM/GDDR bandwidth, GB/s (1e9 bytes/s)
    tflops: dict[str, float] = field(default_factory=dict)  # dense peak per precision
    source: str = ""
    as_of: str = ""
    confidence: str = ""
    notes: str = ""
    aliases: tuple[str, ...] = ()

    def peak_tflops(self, precision: str) -> float:
        """Dense peak TFLOP/s for a compute precision, falling back the way the hardware does.

        Mixed/pure 16-bit map to the bf16 (or fp16) tensor rate; fp8 falls back to 16-bit on GPUs
        without fp8 units; quantised weights (int4/nf4/int8) compute in 16 bit (dequantise, then
        matmul), so they use the 16-bit rate.
        """
        p = precision.lower().replace("-mixed", "")
        order = {
            "fp32": ["fp32"],
            "tf32": ["tf32", "fp32"],
            "bf16": ["bf16", "fp16"],
            "fp16": ["fp16", "bf16"],
            "fp8": ["fp8", "bf16", "fp16"],
        }.get(p, ["bf16", "fp16"])
        for key in order:
            if self.tflops.get(key):
                return self.tflops[key]
        raise ValueError(f"no peak rate recorded for {self.name} at {precision}")


def _num(value: str) -> float | None:
    value = value.strip()
    return float(value) if value else None


@functools.cache
def gpu_kinds() -> dict[str, GpuKind]:
    """Returns every accelerator kind of `gpus.csv`, keyed by its canonical (SkyPilot) name."""
    kinds: dict[str, GpuKind] = {}
    with open(DATA_DIR / "gpus.csv", newline="") as fh:
        for row in csv.DictReader(fh):
            tflops = {p: v for p in PRECISION_COLUMNS if (v := _num(row[f"{p}_{'tops' if p == 'int8' else 'tflops'}"]))}
            kinds[row["accelerator"]] = GpuKind(
                name=row["accelerator"],
                arch=row["arch"],
                memory_gib=float(row["memory_gib"]),
                memory_gb_nominal=float(row["memory_gb_nominal"]),
                bandwidth_gbps=float(row["bandwidth_gbps"]),
                tflops=tflops,
                source=row["source"],
                as_of=row["as_of"],
                confidence=row["confidence"],
                notes=row["notes"],
                aliases=tuple(a for a in row["aliases"].split(";") if a),
            )
    return kinds


def _key(name: str) -> str:
    return name.strip().lower().replace("_", "-").replace(" ", "-")


@functools.cache
def _lookup() -> dict[str, str]:
    table: dict[str, str] = {}
    for kind in gpu_kinds().values():
        table[_key(kind.name)] = kind.name
        table[_key(kind.name).replace("-", "")] = kind.name
        for alias in kind.aliases:
            table[_key(alias)] = kind.name
            table[_key(alias).replace("-", "")] = kind.name
    return table


class UnknownAccelerator(ValueError):
    """An accelerator name the catalog does not know; the message lists the close ones."""


def normalize_accelerator(name: str) -> str:
    """Returns the canonical name of an accelerator (`a100-80gb` -> `A100-80GB`).

    Raises UnknownAccelerator, whose message names the closest known names.
    """
    table = _lookup()
    key = _key(str(name))
    if key in table:
        return table[key]
    if key.replace("-", "") in table:
        return table[key.replace("-", "")]
    close = difflib.get_close_matches(key, list(table), n=3, cutoff=0.5)
    names = sorted({table[c] for c in close})
    hint = f"; did you mean {', '.join(names)}?" if names else ""
    raise UnknownAccelerator(
        f"unknown accelerator {name!r} (known: {', '.join(known_accelerators())}){hint}"
    )


def known_accelerators() -> list[str]:
    """Returns the canonical accelerator names, in catalog order."""
    return list(gpu_kinds())
