"""What ingest checks beyond the record's schema: a record must be believable before it is stored.

A record (after the pydantic model of `gpuledger.record`) is refused, with the reason, when:
- its landing file is over `MAX_RECORD_FILE_BYTES` (checked from the file's size and while reading,
  so a huge file costs no memory), or it has more than `MAX_METRIC_POINTS` metric points (the agent's
  own cap, `gpuledger.agent.measure`) or `MAX_FINAL_METRICS` final metrics;
- it names no sweep, a sweep the warehouse does not know (`sweeps`), or a trial that sweep did
  not plan (`trials`): the flow registers both before it launches anything;
- a number is not finite (NaN, inf) among wall_s, peaks, metric values and times, final metrics,
  and billing;
- a billing line's `cost_usd` disagrees with `usd_per_hour x hours` by more than
  `COST_REL_TOL` of it, or `COST_ABS_TOL_USD`, whichever is larger (rounding of a cent is fine);
- a billing line's price exceeds `MAX_USD_PER_HOUR` or its hours `MAX_LINE_HOURS` (no offer in the
  catalog costs more than a few hundred dollars an hour; no attempt bills more than a year);
- it would break the write (so that one record never wedges a landing folder): a metric name the
  agent would not keep (`gpuledger.agent.measure.metric_name_problem`: over 200 characters, control
  characters), an id over `MAX_ID_CHARS` (ids are index keys, and DuckDB's keys are bounded), a text
  over `MAX_TEXT_CHARS`, a step outside a BIGINT (text that is not valid Unicode, such as a lone
  surrogate, the record model itself refuses).
"""

from __future__ import annotations

import math
from typing import Any

# the agent's caps (`gpuledger.agent.measure`) are imported where a record is checked, not here: importing
# `gpuledger.agent.measure` runs the agent package's __init__ (psutil, subprocess, threading: 60-80 ms), which
# every warehouse command (`gpuledger sql`) would pay at start-up for an ingest it does not do (issue 38)

#: largest landing file read (bytes); a record at the agent's metric cap is a few MB
MAX_RECORD_FILE_BYTES = 8 * 1024 * 1024
#: most final metrics of one record
MAX_FINAL_METRICS = 1_000
#: relative and absolute tolerance of cost_usd against usd_per_hour x hours
COST_REL_TOL = 0.01
COST_ABS_TOL_USD = 0.01
#: the most a billing line may charge per hour (USD), and the most hours it may bill
MAX_USD_PER_HOUR = 10_000.0
MAX_LINE_HOURS = 24.0 * 366
#: the longest id (run, trial, sweep) and free text (reason, command, stderr tail, billing
#: description) a record may carry, in characters
MAX_ID_CHARS = 200
MAX_TEXT_CHARS = 64 * 1024

__all__ = ["COST_ABS_TOL_USD", "COST_REL_TOL", "MAX_FINAL_METRICS", "MAX_LINE_HOURS",
           "MAX_RECORD_FILE_BYTES", "MAX_USD_PER_HOUR", "MAX_ID_CHARS", "MAX_TEXT_CHARS", "precheck", "record_problem"]


def precheck(data: Any) -> str | None:
    """Returns why a decoded record is refused before it is even parsed (too many points), or None."""
    from gpuledger.agent.measure import MAX_METRIC_POINTS

    if isinstance(data, dict):
        metrics = data.get("metrics")
        if isinstance(metrics, list) and len(metrics) > MAX_METRIC_POINTS:
            return (f"{len(metrics)} metric points; a record holds at most {MAX_METRIC_POINTS} "
                    "(the agent's cap, gpuledger/agent/measure.py)")
        final = data.get("final_metrics")
        if isinstance(final, dict) and len(final) > MAX_FINAL_METRICS:
            return f"{len(final)} final metrics; a record holds at most {MAX_FINAL_METRICS}"
    return None


def _finite(name: str, value: float | None) -> str | None:
    if value is not None and not math.isfinite(value):
        return f"{name} is {value!r}, not a finite number"
    return None


def _unwritable(rec: Any) -> str | None:
    """Returns why `rec` would break the warehouse's write (sizes, names, encodings), or None."""
    from gpuledger.agent.measure import MAX_STEP, metric_name_problem

    for name in ("run_id", "trial_id", "sweep_id"):
        value = getattr(rec, name)
        if value is not None and len(value) > MAX_ID_CHARS:
            return f"{name} of {len(value)} characters; at most {MAX_ID_CHARS}"
    for name in ("reason", "command", "stderr_tail", "log_path", "hostname", "cloud", "region", "instance_type", "accelerator"):
        value = getattr(rec, name)
        if value is not None and len(value) > MAX_TEXT_CHARS:
            return f"{name} of {len(value)} characters; at most {MAX_TEXT_CHARS}"
    for i, line in enumerate(rec.billing):
        if len(line.description) > MAX_TEXT_CHARS:
            return f"billing[{i}].description of {len(line.description)} characters; at most {MAX_TEXT_CHARS}"
    for key in rec.final_metrics:
        if (problem := metric_name_problem(key)) is not None:
            return f"final_metrics: {problem}"
    for i, p in enumerate(rec.metrics):
        if (problem := metric_name_problem(p.name)) is not None:
            return f"metrics[{i}]: {problem}"
        if p.step is not None and abs(p.step) > MAX_STEP:
            return f"metrics[{i}].step is {str(p.step)[:30]}, beyond {MAX_STEP}"
    return None


def record_problem(rec: Any, known_trials: set[tuple[str, str]], known_sweeps: set[str]) -> str | None:
    """Returns why the parsed `ResultRecord` `rec` is refused, or None when it may be stored."""
    if (problem := _unwritable(rec)) is not None:
        return problem
    if rec.sweep_id is None:
        return "record has no sweep_id; ingest only stores runs of a registered sweep"
    if rec.sweep_id not in known_sweeps:
        return f"unknown sweep {rec.sweep_id!r:.80}: no sweep with that id is registered in the warehouse"
    if (rec.sweep_id, rec.trial_id) not in known_trials:
        return f"unknown trial {rec.trial_id!r:.80} of sweep {rec.sweep_id!r:.80}: the sweep did not plan it"
    for name, value in (("wall_s", rec.wall_s), ("peak_gpu_mem_gib", rec.peak_gpu_mem_gib),
                        ("peak_gpu_util_pct", rec.peak_gpu_util_pct), ("peak_rss_gib", rec.peak_rss_gib)):
        if (problem := _finite(name, value)) is not None:
            return problem
    for key, value in rec.final_metrics.items():
        if (problem := _finite(f"final_metrics.{key:.60}", value)) is not None:
            return problem
    for i, p in enumerate(rec.metrics):
        if (problem := _finite(f"metrics[{i}].value ({p.name:.60})", p.value)) is not None:
            return problem
        if (problem := _finite(f"metrics[{i}].t_s", p.t_s)) is not None:
            return problem
    for i, line in enumerate(rec.billing):
        where = f"billing[{i}]"
        for name in ("usd_per_hour", "hours", "cost_usd", "on_demand_usd_per_hour"):
            if (problem := _finite(f"{where}.{name}", getattr(line, name))) is not None:
                return problem
        if line.usd_per_hour > MAX_USD_PER_HOUR:
            return f"{where}.usd_per_hour is {line.usd_per_hour:g}, above the {MAX_USD_PER_HOUR:g} USD/h any offer costs"
        if line.hours > MAX_LINE_HOURS:
            return f"{where}.hours is {line.hours:g}, more than a year ({MAX_LINE_HOURS:g} h)"
        expected = line.usd_per_hour * line.hours
        tolerance = max(COST_ABS_TOL_USD, COST_REL_TOL * expected)
        if abs(line.cost_usd - expected) > tolerance:
            return (f"{where}.cost_usd is {line.cost_usd:g} but usd_per_hour x hours = {line.usd_per_hour:g} x "
                    f"{line.hours:g} = {expected:.6g} USD (tolerance {tolerance:.6g} USD: "
                    f"{COST_REL_TOL:.0%} or {COST_ABS_TOL_USD} USD)")
    return None
