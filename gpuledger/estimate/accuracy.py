"""The estimator's published accuracy (`gpuledger accuracy`): error per method, framework and GPU
for memory and time, from the public measurements shipped as package data (`public.py`) and from
the user's own warehouse (every succeeded run's planned memory and wall-clock against what it
measured: named query `estimate_runs`). Pure apart from reading those two.

Errors are signed fractions (estimate − measured) / measured. Memory: public peak rows at their
stated level (allocated, reserved or device), runs at the device level (peak NVML memory, or peak
RSS on the CPU). Time: public rows as the time to train the same tokens (held out: each source
predicted with the stack efficiencies fitted on the other sources), runs as the planned against
the measured wall-clock, whatever the plan's basis (`est_basis` says which).
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass

#: the share of rows within ±band that the summary counts (the issue's targets: memory ±20%, time ±25%)
BANDS = {"memory": 0.20, "time": 0.25}
GROUPS = ("method", "framework", "gpu")


@dataclass(frozen=True)
class ErrorRow:
    """One estimate against one measurement."""

    quantity: str  # memory | time
    origin: str  # public | warehouse
    id: str
    method: str
    framework: str
    gpu: str
    estimated: float  # GiB or seconds (public time: seconds per 1M tokens)
    measured: float
    detail: str = ""  # the level, the source, the plan's basis

    @property
    def error(self) -> float:
        return (self.estimated - self.measured) / self.measured

    def to_json(self) -> dict:
        return {**asdict(self), "estimated": round(self.estimated, 4), "measured": round(self.measured, 4),
                "error": round(self.error, 4)}


def public_memory_rows() -> list[ErrorRow]:
    """Returns the peak rows of memory_public.csv against the estimate at their level."""
    from gpuledger.estimate import estimate
    from gpuledger.estimate.public import MEMORY_CSV, MEMORY_FAMILY_GPU, memory_workload, read_csv

    out = []
    for row in read_csv(MEMORY_CSV):
        if row["kind"] != "peak":
            continue
        w = memory_workload(row)
        out.append(ErrorRow("memory", "public", row["id"], w.method, w.framework, MEMORY_FAMILY_GPU[row["family"]],
                            estimate(w).memory_gib[row["level"]], float(row["measured_gib"]),
                            f"{row['level']}; {row['family']}"))
    return out


def public_time_rows() -> list[ErrorRow]:
    """Returns the scored rows of training_throughput.csv: seconds per 1M tokens, held out."""
    from gpuledger.estimate.public import held_out_tokens_per_s, time_cases

    cases = time_cases()
    predicted = held_out_tokens_per_s(cases)
    return [ErrorRow("time", "public", c.id, c.setup.method, c.setup.framework, c.setup.accelerator,
                     1e6 / (predicted[c.id] * c.setup.gpus), 1e6 / (c.measured * c.setup.gpus),
                     f"{c.setup.gpus} GPU(s); {c.source}; held out") for c in cases]


def warehouse_rows(runs: list[dict]) -> list[ErrorRow]:
    """Returns memory and time rows of the warehouse's runs (`calibration.load_runs`)."""
    from gpuledger.estimate.calibration import RUN_FRAMEWORK

    out = []
    for r in runs:
        cpu = not r.get("gpus")
        gpu = "CPU" if cpu else (r.get("accelerator") or "unknown")
        framework = "local" if cpu else r.get("framework", RUN_FRAMEWORK)
        label = f"{r['sweep_id']}/{r['run_id']}"
        if (r.get("est_memory_gib") or 0) > 0 and (r.get("measured_memory_gib") or 0) > 0:
            out.append(ErrorRow("memory", "warehouse", label, r["method"], framework, gpu, r["est_memory_gib"],
                                r["measured_memory_gib"], "peak RSS" if cpu else "device (NVML peak)"))
        if (r.get("est_wall_s") or 0) > 0 and (r.get("wall_s") or 0) > 0:
            out.append(ErrorRow("time", "warehouse", label, r["method"], framework, gpu, r["est_wall_s"], r["wall_s"],
                                f"plan basis: {r.get('est_basis') or 'estimate'}"))
    return out


def summarize(rows: list[ErrorRow], band: float) -> dict:
    """Returns cases, median |error|, mean signed error and the share within ±band."""
    errs = [r.error for r in rows]
    if not errs:
        return {"cases": 0, "median_abs_error": None, "mean_error": None, "within_band": None}
    return {"cases": len(errs), "median_abs_error": round(statistics.median(abs(e) for e in errs), 4),
            "mean_error": round(statistics.fmean(errs), 4),
            "within_band": round(sum(abs(e) <= band for e in errs) / len(errs), 4)}


def accuracy(runs: list[dict]) -> dict:
    """Returns the accuracy document: `summary` {quantity: {origin: {overall, by_method, by_framework,
    by_gpu}}}, `bands` (the ±share each summary counts), `rows` (every comparison), `cells` (per cell of
    the estimate bands: rows, median |error|, its P10 / P50 / P90; `band_cells`)."""
    rows = public_memory_rows() + public_time_rows() + warehouse_rows(runs)
    summary: dict = {}
    for quantity, band in BANDS.items():
        for origin in ("public", "warehouse"):
            sel = [r for r in rows if r.quantity == quantity and r.origin == origin]
            part = {"overall": summarize(sel, band)}
            for g in GROUPS:
                part[f"by_{g}"] = {v: summarize([r for r in sel if getattr(r, g) == v], band)
                                   for v in sorted({getattr(r, g) for r in sel})}
            summary.setdefault(quantity, {})[origin] = part
    return {"bands": BANDS, "summary": summary, "runs_read": len(runs), "rows": [r.to_json() for r in rows],
            "cells": band_cells(runs)}


def band_cells(runs: list[dict]) -> list[dict]:
    """Returns per quantity and cell with rows (gpuledger/estimate/bands.py: the public rows out of source
    plus these runs): rows, sources, median |error| and the band the cell's figures get ({p10, p50, p90}
    multipliers of the model's figure)."""
    from gpuledger.estimate.bands import CELL_FIELDS, cell_summary, table_with_runs

    table = table_with_runs(runs)
    out = []
    for c in cell_summary(table.rows):
        b = table.band(c["quantity"], tuple(c[f] for f in CELL_FIELDS))
        out.append({**c, "band": {"p10": round(b.p10, 3), "p50": round(b.p50, 3), "p90": round(b.p90, 3)},
                    "runs": sum(1 for r in table.rows if r.quantity == c["quantity"] and r.source.startswith("warehouse")
                                and tuple(r.cell) == tuple(c[f] for f in CELL_FIELDS))})
    return out
