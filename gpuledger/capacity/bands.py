"""Bands of a capacity plan: P10 / P50 / P90 of throughput, TTFT and TPOT from the serving model's
measured error on public benchmarks, per engine × GPU family.

A row is one public measurement scored against the simulation of the same benchmark (same engine,
endpoint, GPU, model, precision, lengths, load): `log(measured / model)`. The rows ship precomputed in
`gpuledger/capacity/data/serving_bands.json` (written by `python benchmarks/capacity_accuracy.py --write`,
which prints every row with its source; tests/data/serving_*.csv hold the measurements).

A figure's cell is (engine, GPU family, quantity). Its band: the rows' P10 / P50 / P90 of the log
error, each source weighted equally, shrunk toward the parent level's (engine, then every engine) by
n / (n + `SHRINK_SOURCES`) with n the cell's sources, the spread around the P50 widened by `WIDEN`
(rows the model was calibrated on sit closer to it than a new deployment will) and never narrower than
`MIN_HALF_WIDTH` on either side. A multiplier, applied to the model's figure: P50 = model × exp(q50).

Pure apart from reading that package file.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from importlib import resources

BANDS_FILE = "serving_bands.json"
QUANTITIES = ("throughput", "ttft", "tpot")
#: prior strength, in sources, of a level's parent (a cell of one source keeps a third of its own)
SHRINK_SOURCES = 2.0
#: the spread around the P50 is widened by this: chosen with benchmarks/capacity_accuracy.py section 5,
#: leave-one-source-out (2026-12-01): throughput bands hold 27/32 rows at 0.8, 29/32 (91%) at 1.0,
#: 30/32 at 1.2-1.5; TPOT 8/8 at any; 1.0 keeps the public rows at the top of 70-90%, leaving room for
#: deployments further from the calibration than these rows
WIDEN = 1.0
#: no band is narrower than ±this in log space on either side (±8%): run-to-run noise of one serving
#: benchmark on one machine (docs/inference.md: ±5-20% between runs)
MIN_HALF_WIDTH = math.log(1.08)
#: where no row exists at all (an engine without measurements): ±35% (judgement)
DEFAULT_HALF_WIDTH = math.log(1.35)


@dataclass(frozen=True)
class Band:
    """Multipliers of a model figure: measured ≈ figure × p50; P10..P90 the likely range."""

    p10: float
    p50: float
    p90: float
    rows: int
    sources: int
    level: str  # which level gave it: "engine × family", "engine", "all engines", "judgement"

    def apply(self, value: float | None, digits: int = 1) -> dict[str, float] | None:
        """Returns {p10, p50, p90} of a figure (None stays None)."""
        if value is None:
            return None
        return {k: round(value * getattr(self, k), digits) for k in ("p10", "p50", "p90")}


@functools.lru_cache(maxsize=1)
def band_rows() -> tuple[dict, ...]:
    """Returns the shipped rows: {engine, family, quantity, log_error, source} (empty when none)."""
    try:
        text = resources.files("gpuledger.capacity").joinpath("data", BANDS_FILE).read_text(encoding="utf-8")
    except (FileNotFoundError, OSError):
        return ()
    return tuple(json.loads(text).get("rows", ()))


def _quantiles(rows: list[dict]) -> tuple[float, float, float, int]:
    """Returns (q10, q50, q90, sources) of the log errors, every source weighted equally."""
    by_source: dict[str, list[float]] = {}
    for r in rows:
        by_source.setdefault(r["source"], []).append(float(r["log_error"]))
    pts: list[tuple[float, float]] = []
    for errs in by_source.values():
        pts.extend((e, 1.0 / len(errs)) for e in errs)
    pts.sort()
    total = sum(w for _, w in pts)

    def q(p: float) -> float:
        acc = 0.0
        for e, w in pts:
            acc += w
            if acc >= p * total - 1e-12:
                return e
        return pts[-1][0]

    return q(0.10), q(0.50), q(0.90), len(by_source)


def _level(rows: list[dict], parent: tuple[float, float, float] | None) -> tuple[float, float, float, int]:
    q10, q50, q90, n = _quantiles(rows)
    if parent is not None:
        w = n / (n + SHRINK_SOURCES)
        q10, q50, q90 = (w * a + (1 - w) * b for a, b in zip((q10, q50, q90), parent, strict=True))
    return q10, q50, q90, n


@functools.lru_cache(maxsize=256)
def band_for(engine: str, family: str, quantity: str) -> Band:
    """Returns the band of one figure: the engine × GPU family cell's, shrunk toward the engine's and
    every engine's (see the module docstring)."""
    if quantity not in QUANTITIES:
        raise ValueError(f"unknown band quantity {quantity!r} (known: {', '.join(QUANTITIES)})")
    rows = [r for r in band_rows() if r["quantity"] == quantity]
    if not rows:
        h = DEFAULT_HALF_WIDTH
        return Band(math.exp(-h), 1.0, math.exp(h), 0, 0, "judgement (no measurement)")
    root = _level(rows, None)
    level, q, n_rows, n_src = "all engines", root[:3], len(rows), root[3]
    mine = [r for r in rows if r["engine"] == engine]
    if mine:
        eng = _level(mine, root[:3])
        level, q, n_rows, n_src = f"{engine}", eng[:3], len(mine), eng[3]
        cell = [r for r in mine if r["family"] == family]
        if cell:
            c = _level(cell, eng[:3])
            level, q, n_rows, n_src = f"{engine} × {family}", c[:3], len(cell), c[3]
    q10, q50, q90 = q
    lo = max((q50 - q10) * WIDEN, MIN_HALF_WIDTH)
    hi = max((q90 - q50) * WIDEN, MIN_HALF_WIDTH)
    return Band(math.exp(q50 - lo), math.exp(q50), math.exp(q50 + hi), n_rows, n_src, level)


def family(accelerator: str) -> str:
    """Returns the GPU family of a catalog accelerator (hopper, ampere, ada, ...)."""
    from gpuledger.estimate.inference import GENERATION_OF

    return GENERATION_OF.get(accelerator, "ampere")


def describe(b: Band, quantity: str) -> str:
    """Returns one line saying what a band rests on."""
    what = {"throughput": "throughput", "ttft": "TTFT", "tpot": "TPOT"}[quantity]
    return (f"{what} band ×{b.p10:.2f}..×{b.p90:.2f} (P50 ×{b.p50:.2f}) from {b.rows} public row(s) of "
            f"{b.sources} source(s), level {b.level}")
