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
import re
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
    #: declared in gpuledger.toml [[gpus]]: the GPU-to-GPU link ("nvlink", "pcie", ...) and its collective
    #: bus bandwidth per GPU (GB/s), and a sustained fraction of the peak to use instead of the generation's
    interconnect: str = ""
    interconnect_gbps: float | None = None
    sustained_factor: float | None = None

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


def gpu_kinds() -> dict[str, GpuKind]:
    """Returns every accelerator kind: `gpus.csv`'s, keyed by the canonical (SkyPilot) name, then the
    kinds a project declares in gpuledger.toml `[[gpus]]` (`project_gpus`)."""
    return _kinds_with(project_gpus())


#: the keys a gpuledger.toml [[gpus]] table may have (docs/guide.md "GPU kinds the catalog lacks")
PROJECT_GPU_KEYS = ("name", "aliases", "arch", "memory_gib", "bandwidth_gbps", "bf16_tflops", "fp16_tflops",
                    "fp8_tflops", "fp32_tflops", "interconnect", "interconnect_gbps", "sustained_factor",
                    "usd_per_gpu_hour", "usd_per_gpu_hour_spot", "gpus_per_instance", "cloud", "region", "source",
                    "as_of")


def _gpu_number(row: dict, key: str, where: str, *, required: bool = False, high: float = 1e7):
    from gpuledger.errors import UserError

    value = row.get(key)
    if value is None:
        if required:
            raise UserError(f"{where}: `{key}` is required")
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= high:
        raise UserError(f"{where}: `{key}` must be a number above 0 (at most {high:g}), got {value!r}")
    return float(value)


#: seconds a process reuses the [[gpus]] tables it read for the same working directory and variables
#: (reading the settings costs ~1 ms and the time model asks for the kinds on every step estimate)
_PROJECT_GPUS_TTL_S = 2.0
_project_gpus_memo: dict[tuple, tuple[float, tuple]] = {}


def project_gpus() -> tuple[tuple[tuple[str, object], ...], ...]:
    """Returns the project's `[[gpus]]` tables of gpuledger.toml (and the user file), checked, as
    hashable rows; () outside a project. UserError naming the table and key for a bad one."""
    import os
    import time

    key = (os.getcwd(), *(os.environ.get(k) for k in ("GPULEDGER_PROJECT", "GPULEDGER_CONFIG", "HOME",
                                                     "XDG_CONFIG_HOME")))
    now = time.monotonic()
    hit = _project_gpus_memo.get(key)
    if hit is not None and now - hit[0] < _PROJECT_GPUS_TTL_S:
        return hit[1]
    rows = _read_project_gpus()
    _project_gpus_memo.clear()
    _project_gpus_memo[key] = (now, rows)
    return rows


def _read_project_gpus() -> tuple:
    from gpuledger.errors import UserError
    from gpuledger.settings import current

    raw = current().sections.get("gpus")
    if raw is None:
        return ()
    if isinstance(raw, dict):
        raw = [raw]
    if not isinstance(raw, list) or not all(isinstance(r, dict) for r in raw):
        raise UserError("gpuledger.toml: `gpus` must be a list of tables ([[gpus]] with name, memory_gib, "
                        "bf16_tflops, bandwidth_gbps)")
    out = []
    for i, row in enumerate(raw, start=1):
        where = f"gpuledger.toml [[gpus]] #{i}"
        unknown = sorted(set(row) - set(PROJECT_GPU_KEYS))
        if unknown:
            raise UserError(f"{where}: unknown key(s) {', '.join(unknown)} (known: {', '.join(PROJECT_GPU_KEYS)})")
        name = row.get("name")
        if not isinstance(name, str) or not name.strip() or len(name) > 64 or "," in name:
            raise UserError(f"{where}: `name` must be text of 1 to 64 characters, got {name!r}")
        # a kind of the bundled catalog named with none of its figures: a price for it (figures from gpus.csv)
        catalog_name = _lookup_of(()).get(_key(name)) or _lookup_of(()).get(_key(name).replace("-", ""))
        price_only = catalog_name is not None and not set(row) & {"memory_gib", "bandwidth_gbps", "bf16_tflops"}
        checked = {"name": catalog_name if price_only else name.strip(), "where": where, "price_only": price_only}
        if price_only and row.get("usd_per_gpu_hour") is None:
            raise UserError(f"{where}: {name} is in the bundled catalog; a [[gpus]] table for it gives its price "
                            "(usd_per_gpu_hour) or all of its own figures (memory_gib, bf16_tflops, bandwidth_gbps)")
        need = not price_only
        for key, req, high in (("memory_gib", need, 4096), ("bandwidth_gbps", need, 1e5), ("bf16_tflops", need, 1e5),
                               ("fp16_tflops", False, 1e5), ("fp8_tflops", False, 1e5), ("fp32_tflops", False, 1e5),
                               ("interconnect_gbps", False, 1e5), ("sustained_factor", False, 2.0),
                               ("usd_per_gpu_hour", False, 1e4), ("usd_per_gpu_hour_spot", False, 1e4)):
            checked[key] = _gpu_number(row, key, where, required=req, high=high)
        for key in ("arch", "interconnect", "cloud", "region", "source", "as_of"):
            value = row.get(key)
            if value is not None and (not isinstance(value, str) or len(value) > 200):
                raise UserError(f"{where}: `{key}` must be text of at most 200 characters, got {value!r}")
            checked[key] = None if value is None else str(value)
        aliases = row.get("aliases", [])
        if isinstance(aliases, str):
            aliases = [aliases]
        if not isinstance(aliases, list) or not all(isinstance(a, str) and 0 < len(a) <= 64 for a in aliases):
            raise UserError(f"{where}: `aliases` must be a list of names, got {aliases!r}")
        counts = row.get("gpus_per_instance", [1, 2, 4, 8])
        if isinstance(counts, int) and not isinstance(counts, bool):
            counts = [counts]
        if not isinstance(counts, list) or not counts or not all(
                isinstance(c, int) and not isinstance(c, bool) and 1 <= c <= 1024 for c in counts):
            raise UserError(f"{where}: `gpus_per_instance` must be a list of whole numbers 1-1024, got {counts!r}")
        checked["aliases"] = tuple(aliases)
        checked["gpus_per_instance"] = tuple(sorted(set(counts)))
        out.append(tuple(checked.items()))
    return tuple(out)


@functools.cache
def _kinds_with(declared: tuple) -> dict[str, GpuKind]:
    kinds = dict(_catalog_kinds())
    for items in declared:
        row = dict(items)
        if row.get("price_only"):  # a price for a catalog kind: its figures stay gpus.csv's
            continue
        name = row["name"]
        bf16 = row["bf16_tflops"]
        tflops = {"bf16": bf16, "fp16": row.get("fp16_tflops") or bf16}
        for key in ("fp8", "fp32"):
            if row.get(f"{key}_tflops"):
                tflops[key] = row[f"{key}_tflops"]
        kinds[name] = GpuKind(
            name=name, arch=row.get("arch") or "other", memory_gib=row["memory_gib"],
            memory_gb_nominal=round(row["memory_gib"] * 2**30 / 1e9), bandwidth_gbps=row["bandwidth_gbps"],
            tflops=tflops, source=row.get("source") or f"declared in {row['where']}", as_of=row.get("as_of") or "",
            confidence="declared", notes="a GPU kind your project declares", aliases=row["aliases"],
            interconnect=(row.get("interconnect") or "").lower(), interconnect_gbps=row.get("interconnect_gbps"),
            sustained_factor=row.get("sustained_factor"))
    return kinds


@functools.cache
def _catalog_kinds() -> dict[str, GpuKind]:
    """Returns the accelerator kinds of the bundled `gpus.csv`."""
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


def _lookup() -> dict[str, str]:
    return _lookup_of(project_gpus())


@functools.cache
def _lookup_of(declared: tuple) -> dict[str, str]:
    table: dict[str, str] = {}
    for kind in _kinds_with(declared).values():
        table[_key(kind.name)] = kind.name
        table[_key(kind.name).replace("-", "")] = kind.name
        for alias in kind.aliases:
            table[_key(alias)] = kind.name
            table[_key(alias).replace("-", "")] = kind.name
    return table


#: words of a product name that do not tell the kind apart: the vendor's and product line's, the memory's type,
#: and the SXM form factor (every catalog kind with a PCIe sibling is its SXM part; the PCIe ones have their own
#: names: "H100 PCIe" is H100-PCIe, "A100 PCIe" is A100 by SkyPilot's name for both)
_NAME_NOISE = re.compile(r"nvidia|tesla|geforce|quadro|amd|instinct|radeon|hbm\w*|gddr\w*|sxm\d?")
_MEMORY_WORD = re.compile(r"(\d+)gb?")


def _find(table: dict[str, str], key: str) -> str | None:
    return table.get(key) or table.get(key.replace("-", ""))


def _find_in_words(table: dict[str, str], key: str) -> str | None:
    """The kind a product name as NVML, a datasheet or a cloud console writes it names ("NVIDIA A100-SXM4-80GB",
    "NVIDIA H100 80GB HBM3", "L40S 48GB"): the name without its noise words, and without its memory size
    where that size is the kind's own (`memory_gb_nominal`, within 1 GB); a size of another part ("V100 32GB")
    names no kind."""
    words = [w for w in key.split("-") if w and not _NAME_NOISE.fullmatch(w)]
    if not words:
        return None
    if found := _find(table, "-".join(words)):
        return found
    sizes = [int(m.group(1)) for w in words if (m := _MEMORY_WORD.fullmatch(w))]
    rest = [w for w in words if not _MEMORY_WORD.fullmatch(w)]
    found = _find(table, "-".join(rest)) if sizes and rest else None
    if found and all(abs(size - gpu_kinds()[found].memory_gb_nominal) <= 1 for size in sizes):
        return found
    return None


class UnknownAccelerator(ValueError):
    """An accelerator name the catalog does not know; the message lists the close ones."""


def normalize_accelerator(name: str) -> str:
    """Returns the canonical name of an accelerator (`a100-80gb` -> `A100-80GB`).

    Raises UnknownAccelerator, whose message names the closest known names.
    """
    table = _lookup()
    key = _key(str(name))[:100]
    found = _find(table, key) or _find_in_words(table, key)
    if found:
        return found
    close = difflib.get_close_matches(key, list(table), n=3, cutoff=0.5)
    names = sorted({table[c] for c in close})
    hint = f"; did you mean {', '.join(names)}?" if names else ""
    raise UnknownAccelerator(
        f"unknown accelerator {name!r} (known: {', '.join(known_accelerators())}){hint}"
    )


def known_accelerators() -> list[str]:
    """Returns the canonical accelerator names, in catalog order."""
    return list(gpu_kinds())
