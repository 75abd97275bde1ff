"""Result records (gpuledger.result/1) to the warehouse's frames (runs, final_metrics, metrics, billing).

JSON values (params, spec, plan) are encoded here, once, at the warehouse boundary (`json_text`):
callers pass dicts, the tables hold JSON text with sorted keys.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from gpuledger.warehouse.connect import now, utc_naive
from gpuledger.warehouse.lazy import polars as pl


def frames_module():
    """Returns `gpuledger.warehouse.frames`, imported on first use: pandera is slow to import, and readers
    (`gpuledger sql`, reports) never validate."""
    from gpuledger.warehouse import frames

    return frames


def json_text(value: Any) -> str | None:
    """Returns `value` as JSON text with sorted keys (a str is taken to be JSON already); None stays None."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, default=str)


def record_reason(data: Any) -> tuple[Any, str | None]:
    """Returns (ResultRecord, None) or (None, reason) for one decoded JSON value."""
    from pydantic import ValidationError

    from gpuledger.record import SCHEMA, ResultRecord, parse_record

    if isinstance(data, ResultRecord):
        return data, None
    if not isinstance(data, dict):
        return None, f"not a result record: expected a JSON object, got {type(data).__name__}"
    version = data.get("schema")
    if version != SCHEMA:
        return None, (f"unknown schema version {str(version)[:60]!r}: this gpuledger reads {SCHEMA!r}; "
                      "upgrade gpuledger or re-write the record")
    try:
        return parse_record(data), None
    except ValidationError as err:
        problems = []
        for e in err.errors()[:10]:
            loc = ".".join(str(p) for p in e["loc"]) or "(record)"
            got = "" if e["type"] == "missing" else f" (got {e.get('input')!r:.60})"
            problems.append(f"{loc}: {e['msg']}{got}")
        return None, "invalid result record: " + "; ".join(problems)


def records_to_frames(records: Sequence[Any], ingested_at: datetime | None = None) -> dict[str, pl.DataFrame]:
    """Returns the frames (runs, final_metrics, metrics, billing) of validated `ResultRecord`s."""
    frames = frames_module()
    ingested_at = ingested_at or now()
    runs: dict[str, list[Any]] = {c: [] for c in frames.columns("runs")}
    fm: dict[str, list[Any]] = {"run_id": [], "name": [], "value": []}
    mt: dict[str, list[Any]] = {"run_id": [], "name": [], "seq": [], "step": [], "t_s": [], "value": []}
    bl: dict[str, list[Any]] = {c: [] for c in frames.columns("billing")}
    for r in records:
        row = {
            "run_id": r.run_id, "sweep_id": r.sweep_id, "trial_id": r.trial_id, "attempt": r.attempt,
            "launcher": r.launcher, "cloud": r.cloud, "region": r.region, "instance_type": r.instance_type,
            "accelerator": r.accelerator, "gpus": r.gpus, "spot": r.spot,
            "started_at": utc_naive(r.started_at), "ended_at": utc_naive(r.ended_at), "wall_s": r.wall_s,
            "exit_code": r.exit_code, "status": r.status, "reason": r.reason,
            "peak_gpu_mem_gib": r.peak_gpu_mem_gib, "peak_gpu_util_pct": r.peak_gpu_util_pct,
            "peak_rss_gib": r.peak_rss_gib, "preemptions": r.preemptions, "recoveries": r.recoveries,
            "hostname": r.hostname, "command": r.command, "params": json_text(r.params),
            "stderr_tail": r.stderr_tail, "cost_usd": float(r.cost_usd), "ingested_at": ingested_at,
            "purpose": r.purpose, "probe_shape": json_text(r.probe_shape),
            "log_path": r.log_path,
            "pack_slot": r.pack_slot, "pack_share": r.pack_share, "pack_k": r.pack_k, "pack_wall_s": r.pack_wall_s,
        }
        for k, v in row.items():
            runs[k].append(v)
        for name, value in r.final_metrics.items():
            fm["run_id"].append(r.run_id)
            fm["name"].append(name)
            fm["value"].append(value)
        seq: dict[str, int] = {}
        for p in r.metrics:
            n = seq.get(p.name, 0)
            seq[p.name] = n + 1
            mt["run_id"].append(r.run_id)
            mt["name"].append(p.name)
            mt["seq"].append(n)
            mt["step"].append(p.step)
            mt["t_s"].append(p.t_s)
            mt["value"].append(p.value)
        for i, line in enumerate(r.billing):
            for k, v in (("run_id", r.run_id), ("line_no", i), ("source", line.source),
                         ("description", line.description), ("usd_per_hour", line.usd_per_hour),
                         ("hours", line.hours), ("cost_usd", line.cost_usd), ("spot", line.spot),
                         ("on_demand_usd_per_hour", line.on_demand_usd_per_hour), ("role", line.role),
                         ("instance_type", line.instance_type), ("accelerator", line.accelerator),
                         ("gpus", line.gpus)):
                bl[k].append(v)

    def frame(table: str, data: dict[str, list[Any]]) -> pl.DataFrame:
        # columns a record never fills (a downsampled point's value_min/value_max/points) become nulls
        schema = {k: t for k, t in frames.empty_frame(table).schema.items() if k in data}
        return frames.conform(table, pl.DataFrame(data, schema=schema, strict=False))

    return {"runs": frame("runs", runs), "final_metrics": frame("final_metrics", fm),
            "metrics": frame("metrics", mt), "billing": frame("billing", bl)}
