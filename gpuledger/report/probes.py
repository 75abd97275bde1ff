"""The sweep report's probes (`gpuledger probe`, docs/probes.md): one line saying how many shapes were
probed before the trials and what that cost (already in the sweep's spend), and a table of what each
probe measured (view v_probes, named query `report_sweep_probes`)."""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from gpuledger.report.common import duration, gib, num, usd
from gpuledger.report.document import Note, Section, Table

HEADERS = ["probe", "trial", "shape", "status", "steps", "start-up", "tokens/s", "step", "peak memory", "wall-clock",
           "cost"]


def _shape_text(shape: Any) -> str:
    try:
        s = json.loads(shape) if isinstance(shape, str) else (shape or {})
    except ValueError:
        return ""
    return (f"{s.get('gpus')}x {s.get('accelerator')} {s.get('sharding')}, micro-batch {s.get('micro_batch')}, "
            f"seq {s.get('seq_len')}")


def probes_line(probes: pl.DataFrame | None) -> str | None:
    """Returns the report's one-line summary of the sweep's probes, or None when it had none."""
    if probes is None or probes.is_empty():
        return None
    usable = int(probes["usable"].fill_null(False).sum())
    cost = float(probes["cost_usd"].sum() or 0.0)
    return (f"Probes: {probes.height} probe run(s) measured {usable} shape(s) before the trials (start-up apart from "
            f"the steady rate; the plan extrapolated each trial of a probed shape from them), {usd(cost)}, included "
            "in the spend above and counted against the budget.")


def probes_section(probes: pl.DataFrame | None) -> Section | None:
    """Returns the section listing the sweep's probes, or None when it had none."""
    line = probes_line(probes)
    if line is None:
        return None
    rows = [[p["run_id"], p["trial_id"], _shape_text(p["probe_shape"]), p["status"], p["steps"],
             duration(p["startup_s"]), num(p["tokens_per_s"]), duration(p["step_s"]), gib(p["memory_gib"]),
             duration(p["wall_s"]), usd(p["cost_usd"])] for p in probes.to_dicts()]
    return Section("Probes (measured before the trials)", [
        Note(line), Table(HEADERS, rows, numeric=[4, 5, 6, 7, 8, 9, 10], max_rows=100, markdown_columns=8)])
