"""Learn from use: per-(method, framework, accelerator family) corrections of memory and of time
fitted on the user's own measured runs (warehouse view `v_estimate_accuracy`, named query
`gpuledger/warehouse/sql/queries/estimate_runs.sql`).

A correction is the median of measured / estimated over the group's runs (the median ignores a
few odd runs, e.g. one that shared its GPU); it applies once `MIN_RUNS` runs exist and is stated in
every output ("calibrated on 12 of your runs: x0.93"). Memory: the run's peak device memory against
its trial's planned device level (GPU runs). Time: the run's wall-clock against its trial's planned
wall-clock, only where the plan's time was the model's own (est_basis 'estimate' or unrecorded,
not 'measured' or already calibrated); both include the trial's start-up, so the factor is a
whole-trial ratio applied to the model's time. Runs recorded by gpuledger's own trainers
use Transformers + PEFT, so their framework is `hf`. Pure functions here; the warehouse is read
only through `load_runs` (never created: no warehouse, no correction).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

#: runs of a group needed before its correction applies: below 5 one unusual run moves the median
#: by more than the estimator's own median error on public measurements (~10%).
MIN_RUNS = 5
#: GPU kind -> architecture family (NVIDIA architecture whitepapers); memory habits (allocator,
#: kernels, CUDA context) follow the architecture and software stack, not the SKU.
FAMILY = {"V100": "volta", "T4": "turing", "A100": "ampere", "A100-80GB": "ampere", "A10G": "ampere",
          "A10": "ampere", "RTXA6000": "ampere", "A6000": "ampere", "RTX3090": "ampere", "L4": "ada", "L40": "ada", "L40S": "ada",
          "RTX4090": "ada", "H100": "hopper", "H200": "hopper", "GH200": "hopper", "B200": "blackwell"}
#: framework of the runs the warehouse records (gpuledger's trainers: Transformers + PEFT)
RUN_FRAMEWORK = "hf"


def accelerator_family(accelerator: str) -> str:
    """Returns the architecture family of a GPU kind ('other' when unknown)."""
    key = accelerator.upper().replace(" ", "").replace("_", "")
    for kind, fam in FAMILY.items():
        if key == kind.upper() or key.startswith(kind.upper()):
            return fam
    return _catalog_family(accelerator)


def _catalog_family(accelerator: str) -> str:
    """The family of a catalog (or declared) kind FAMILY does not name, from its `arch` (GA102 is Ampere);
    'other' for a name the catalog does not know or an architecture outside NVIDIA's (AMD CDNA)."""
    from gpuledger.catalog import UnknownAccelerator, gpu_kinds, normalize_accelerator
    from gpuledger.estimate.coefficients import generation

    try:
        kind = gpu_kinds()[normalize_accelerator(accelerator)]
    except (UnknownAccelerator, KeyError, ValueError):
        return "other"
    gen = generation(kind)
    return "ampere" if gen == "ga102" else gen


#: what is corrected: (estimated key, measured key) of a run record
QUANTITIES = {"memory": ("est_memory_gib", "measured_memory_gib"), "time": ("est_wall_s", "wall_s")}


@dataclass(frozen=True)
class Correction:
    """A multiplicative correction of the device-level memory (or of the time), with what it rests on."""

    factor: float
    runs: int
    group: tuple[str, str, str]
    quantity: str = "memory"

    def describe(self) -> str:
        what = "" if self.quantity == "memory" else f"{self.quantity} "
        return f"{what}calibrated on {self.runs} of your runs: x{self.factor:.2f} ({'/'.join(self.group)})"


def _usable(r: dict, quantity: str) -> bool:
    est_key, measured_key = QUANTITIES[quantity]
    if not (r.get(est_key) or 0) > 0 or not (r.get(measured_key) or 0) > 0 or not r.get("accelerator"):
        return False
    if quantity == "memory":
        return (r.get("gpus") or 0) > 0 or "gpus" not in r  # GPU runs (CPU runs measure RSS)
    return r.get("est_basis") in (None, "estimate")  # the model's own time, not a measured/calibrated one


def fit(records: list[dict], method: str, framework: str, family: str, min_runs: int = MIN_RUNS,
        quantity: str = "memory") -> Correction | None:
    """Returns the correction of a group from records with keys method, framework, accelerator and
    the quantity's estimated/measured keys (QUANTITIES); None below `min_runs` runs."""
    est_key, measured_key = QUANTITIES[quantity]
    ratios = [r[measured_key] / r[est_key] for r in records
              if r["method"] == method and r.get("framework", RUN_FRAMEWORK) == framework
              and _usable(r, quantity) and accelerator_family(r["accelerator"]) == family]
    if len(ratios) < min_runs:
        return None
    return Correction(float(statistics.median(ratios)), len(ratios), (method, framework, family), quantity)


def matching_runs(records: list[dict], method: str, framework: str, family: str, quantity: str = "memory") -> int:
    """Returns how many records a correction of this group could use (for "3 of 5 needed")."""
    return sum(1 for r in records if r["method"] == method and r.get("framework", RUN_FRAMEWORK) == framework
               and _usable(r, quantity) and accelerator_family(r["accelerator"]) == family)


def leave_one_out(records: list[dict], min_runs: int = MIN_RUNS) -> list[tuple[float, float]]:
    """Returns (raw error, corrected error) for every record whose group, without it, still has
    `min_runs` runs: the correction fitted on the others applied to it. Errors are signed fractions
    (estimate - measured) / measured."""
    out = []
    for i, r in enumerate(records):
        rest = records[:i] + records[i + 1:]
        c = fit(rest, r["method"], r.get("framework", RUN_FRAMEWORK), accelerator_family(r["accelerator"]), min_runs)
        if c is None:
            continue
        m, e = r["measured_memory_gib"], r["est_memory_gib"]
        out.append(((e - m) / m, (e * c.factor - m) / m))
    return out


def load_runs(path: str | Path | None = None) -> list[dict]:
    """Returns the warehouse's succeeded runs with their estimates (named query estimate_runs), [] when
    there is no warehouse (never creates one) or a running sweep holds it."""
    from gpuledger.errors import UserError
    from gpuledger.settings import warehouse_if_any

    target = warehouse_if_any(path)
    if target is None:
        return []
    from gpuledger.warehouse import Warehouse

    try:
        with Warehouse.open(target, read_only=True, lock_timeout_s=0.5) as wh:
            df = wh.query_named("estimate_runs")
    except UserError:
        return []
    return [dict(r, framework=RUN_FRAMEWORK) for r in df.to_dicts()]


def time_corrections(workload, warehouse: str | Path | None = None) -> dict:
    """Returns {GPU family: Correction of time} learnt from the user's runs of the workload's method and
    framework (none on the CPU); what `estimate --tokens` multiplies each family's times by."""
    if workload.device != "gpu":
        return {}
    runs = load_runs(warehouse)
    out = {}
    for family in sorted({accelerator_family(r["accelerator"]) for r in runs if r.get("accelerator")}):
        c = fit(runs, workload.method, workload.framework, family, quantity="time")
        if c is not None:
            out[family] = c
    return out
