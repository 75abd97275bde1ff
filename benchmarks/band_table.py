"""The estimate bands' table and the accuracy gate's record, from the public rows scored out of source.

Writes (with `--write`; `make bands` runs it):
- `gpuledger/estimate/data/band_rows.json`: every public row's cell and log(measured / estimated),
  time rows held out (leave-one-source-out, `gpuledger.estimate.public.held_out_tokens_per_s`),
  memory rows as the estimator gives them (memory_public.csv fits no coefficient). `estimate` and
  `plan` read it (gpuledger/estimate/bands.py); tests/unit/test_band_table.py fails when it is not
  what the model gives now: after changing the time or memory model, run `make bands` and commit
  both files.
- `benchmarks/results/accuracy_cells.json`: dated; per cell (quantity × framework × method ×
  quantization × GPU-count regime × GPU family) rows, sources and median |error|, and the bands'
  out-of-source calibration (every source's rows banded by a table of the other sources: share
  within P10-P90, median P90 / P50). The accuracy gate (tests/unit/test_band_table.py) fails when a
  cell's median |error| rises more than 2 points above this file: a regression is a decision
  (regenerate and commit the file with the change), never an accident.

Run: `python benchmarks/band_table.py [--write] [--json]` (~8 s).
"""

from __future__ import annotations

import datetime as dt
import json
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpuledger.estimate.bands import (  # noqa: E402
    BAND_ROWS_FILE,
    FLOOR,
    SHRINK_SOURCES,
    WIDEN,
    band_rows,
    calibration,
    cell_summary,
)

TABLE_PATH = ROOT / "gpuledger" / "estimate" / "data" / BAND_ROWS_FILE
CELLS_PATH = ROOT / "benchmarks" / "results" / "accuracy_cells.json"


def _machine() -> str:
    import os

    return f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def table_document(rows) -> dict:
    """Returns the shipped table's JSON (no date: it must be the same text for the same model)."""
    return {"about": "out-of-source errors of the public rows: log(measured / estimated); "
                     "written by benchmarks/band_table.py --write (make bands)",
            "rows": [r.to_json() for r in rows]}


def cells_document(rows, seconds: float) -> dict:
    """Returns the accuracy gate's record: dated, per cell, with the bands' calibration."""
    return {"date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), "machine": _machine(),
            "seconds": round(seconds, 1), "written_by": "python benchmarks/band_table.py --write (make bands)",
            "shrink_sources": SHRINK_SOURCES, "widen": WIDEN, "floor": FLOOR, "calibration": calibration(rows),
            "cells": cell_summary(rows)}


def main(argv: list[str]) -> int:
    t0 = time.perf_counter()
    rows = band_rows()
    doc = cells_document(rows, time.perf_counter() - t0)
    if "--write" in argv:
        TABLE_PATH.write_text(json.dumps(table_document(rows), indent=1) + "\n")
        CELLS_PATH.parent.mkdir(parents=True, exist_ok=True)
        CELLS_PATH.write_text(json.dumps(doc, indent=1) + "\n")
        print(f"wrote {TABLE_PATH.relative_to(ROOT)} ({len(rows)} rows) and {CELLS_PATH.relative_to(ROOT)}")
    if "--json" in argv:
        print(json.dumps(doc, indent=1))
        return 0
    for q, c in doc["calibration"].items():
        print(f"{q:7} {c['rows']:4d} rows, {c['sources']:2d} sources: P10-P90 holds {c['coverage_p10_p90']:.0%} "
              f"(below {c['below_p10']:.0%}, above {c['above_p90']:.0%}), median P90/P50 {c['median_p90_over_p50']:.2f}")
    print(f"\n{'quantity':8} {'cell':44} {'rows':>4} {'src':>3} {'med|e|':>7}")
    for c in doc["cells"]:
        print(f"{c['quantity']:8} {c['cell']:44} {c['rows']:4d} {c['sources']:3d} {c['median_abs_error']:7.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
