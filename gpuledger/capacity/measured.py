"""Measured serving operating points: what the spec's `measured:` says, or what a caller passes
(e.g. points a serving benchmark sweep measured), normalised to one dict shape.

A point carries the output tokens/s one GPU sustained and, when known, where it was measured:
concurrency (closed loop) or request rate (open loop), the p95 TTFT and TPOT reached there, the
engine, and the tensor-parallel GPUs of the replica. The planner (`gpuledger.capacity.plan`) uses a
point only when its latencies meet the SLO, and never below the physical floors.
"""

from __future__ import annotations

import math
from typing import Any

from gpuledger.errors import UserError
from gpuledger.estimate import inference

MEASURED_FIELDS = ("tokens_per_s_per_gpu", "concurrency", "request_rate", "ttft_ms", "tpot_ms", "engine",
                   "gpus_per_replica")


def _as_point(value: Any, key: str, origin: str) -> dict[str, Any]:
    """Returns one measured operating point as a dict of `MEASURED_FIELDS` + origin; a bare number
    is a rate without latencies."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        raw: dict[str, Any] = {"tokens_per_s_per_gpu": value}
    elif isinstance(value, dict):
        raw = dict(value)
    else:
        raw = {f: getattr(value, f, None) for f in MEASURED_FIELDS}
    unknown = sorted(set(raw) - set(MEASURED_FIELDS) - {"origin", "spread"})
    if unknown:
        raise UserError(f"measured point for {key}: unknown field(s) {', '.join(unknown)} "
                        f"(known: {', '.join(MEASURED_FIELDS)})")
    out: dict[str, Any] = {"origin": raw.get("origin") or origin}
    for f in ("tokens_per_s_per_gpu", "request_rate", "ttft_ms", "tpot_ms"):
        v = raw.get(f)
        if v is None:
            out[f] = None
            continue
        try:
            v = float(v)
        except (TypeError, ValueError):
            raise UserError(f"measured point for {key}: {f} must be a number (got {v!r})") from None
        if not (v > 0 and math.isfinite(v)):
            raise UserError(f"measured point for {key}: {f} must be positive and finite (got {v})")
        out[f] = v
    if out["tokens_per_s_per_gpu"] is None:
        raise UserError(f"measured point for {key}: tokens_per_s_per_gpu is required")
    for f, default in (("concurrency", None), ("gpus_per_replica", 1)):
        v = raw.get(f, default)
        v = default if v is None else v
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise UserError(f"measured point for {key}: {f} must be a whole number >= 1 (got {v!r})")
        out[f] = v
    if out["gpus_per_replica"] not in inference.TP_DEGREES:
        raise UserError(f"measured point for {key}: gpus_per_replica must be one of {inference.TP_DEGREES}")
    eng = raw.get("engine")
    if eng is not None and str(eng).lower() not in inference.ENGINES:
        raise UserError(f"measured point for {key}: engine must be one of {', '.join(inference.ENGINES)} (got {eng!r})")
    out["engine"] = None if eng is None else str(eng).lower()
    spread = raw.get("spread")  # {low, high, runs}: repeated runs of this point, as ratios to their mean
    if isinstance(spread, dict) and all(isinstance(spread.get(k), int | float) for k in ("low", "high", "runs")):
        lo, hi = float(spread["low"]), float(spread["high"])
        if 0 < lo <= 1 <= hi and math.isfinite(hi):
            out["spread"] = {"low": lo, "high": hi, "runs": int(spread["runs"])}
    return out


def measured_points(spec, measured: dict | None) -> dict[str, list[dict[str, Any]]]:
    """Returns {accelerator: [operating point dicts]}: the spec's `measured` entries, replaced per
    accelerator by the caller's (e.g. points a serving sweep measured). A caller's value may be a
    number (a rate), a dict/object with `MEASURED_FIELDS`, or a list of those."""
    from gpuledger.catalog import UnknownAccelerator, normalize_accelerator

    out: dict[str, list[dict[str, Any]]] = {}
    in_spec = getattr(spec, "measured", None)  # {from_sweep: NAME} arrives as `measured` (serving/capacity_from_sweep.py)
    for name, m in (in_spec if isinstance(in_spec, dict) else {}).items():
        key = normalize_accelerator(name)
        out[key] = [_as_point(m, key, "spec `measured`")]
    for name, m in (measured or {}).items():
        try:
            key = normalize_accelerator(name)
        except UnknownAccelerator as err:
            raise UserError(f"measured point for an unknown accelerator: {err}") from None
        values = m if isinstance(m, list | tuple) else [m]
        out[key] = [_as_point(v, key, "measured (caller/warehouse)") for v in values]
    return out
