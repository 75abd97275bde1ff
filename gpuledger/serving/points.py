"""Measured serving operating points of an inference sweep, and the choices made from them."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from gpuledger.errors import UserError
from gpuledger.serving.workload import LOAD_FIELDS


@dataclass(frozen=True)
class OperatingPoint:
    """One succeeded benchmark run: where it ran, its settings, and what it measured (ms, tokens/s)."""

    run_id: str
    trial_id: str
    accelerator: str
    gpus: int  # GPUs of the server (tensor parallel); 0 on a CPU
    params: dict[str, Any]
    output_tokens_per_s: float
    requests_per_s: float
    ttft_ms_p50: float
    ttft_ms_p95: float
    ttft_ms_p99: float
    tpot_ms_p50: float
    tpot_ms_p95: float
    tpot_ms_p99: float
    usd_per_hour: float | None  # what the run was billed per hour; None: no billing recorded
    ended_at: Any = None

    @property
    def config(self) -> str:
        """The serving configuration apart from the load: accelerator × GPUs and the non-load params."""
        where = f"{self.accelerator}×{self.gpus}" if self.gpus else self.accelerator
        rest = ", ".join(f"{k}={v}" for k, v in sorted(self.params.items()) if k not in LOAD_FIELDS)
        return f"{where} {rest}".strip()

    @property
    def load(self) -> str:
        """The load the point was measured at (`concurrency=16`, `request_rate=2.5`, or '')."""
        return ", ".join(f"{k}={self.params[k]}" for k in LOAD_FIELDS if k in self.params)

    @property
    def usd_per_million_output_tokens(self) -> float | None:
        """Hourly price / output tokens per hour × 1e6; None when the price is unknown."""
        if self.usd_per_hour is None or self.output_tokens_per_s <= 0:
            return None
        return self.usd_per_hour / (self.output_tokens_per_s * 3600.0) * 1e6

    def meets(self, p95_ttft_ms: float, p95_tpot_ms: float) -> bool:
        return self.ttft_ms_p95 <= p95_ttft_ms and self.tpot_ms_p95 <= p95_tpot_ms

    def slo_excess(self, p95_ttft_ms: float, p95_tpot_ms: float) -> float:
        """Returns how far the point is from the SLO: max of measured/target over p95 TTFT and TPOT
        (<= 1 meets it). The closest point minimises it."""
        return max(self.ttft_ms_p95 / p95_ttft_ms, self.tpot_ms_p95 / p95_tpot_ms)


@dataclass(frozen=True)
class SweepPoints:
    """The operating points of one sweep, where they come from, and the sweep's SLO (if it set one)."""

    sweep_id: str
    name: str
    measured_on: str  # YYYY-MM-DD of the last run
    points: list[OperatingPoint] = field(default_factory=list)
    slo: tuple[float, float] | None = None  # (p95 TTFT ms, p95 TPOT ms) of the spec's serve.slo
    engine: str | None = None  # the spec's serve.engine

    @property
    def label(self) -> str:
        return f"measured in sweep {self.name} on {self.measured_on}"


@dataclass(frozen=True)
class PlacementChoice:
    """Per accelerator and GPU count: the chosen point and whether it meets the SLO."""

    accelerator: str
    gpus: int
    point: OperatingPoint
    meets_slo: bool
    why: str


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def points_from_frame(rows: list[dict[str, Any]]) -> list[OperatingPoint]:
    """Returns the operating points of `serving_points` rows (dicts), skipping rows whose metrics
    are not positive finite numbers (a run never reports what did not happen)."""
    out = []
    for row in rows:
        metrics = {k: _number(row.get(k)) for k in ("output_tokens_per_s", "requests_per_s", "ttft_ms_p50",
                                                    "ttft_ms_p95", "ttft_ms_p99", "tpot_ms_p50", "tpot_ms_p95",
                                                    "tpot_ms_p99")}
        if any(v is None or v <= 0 for v in metrics.values()):
            continue
        params = row.get("params")
        if isinstance(params, str):
            try:
                params = json.loads(params)
            except json.JSONDecodeError:
                params = {}
        out.append(OperatingPoint(run_id=str(row["run_id"]), trial_id=str(row["trial_id"]),
                                  accelerator=str(row.get("accelerator") or "unknown"), gpus=int(row.get("gpus") or 0),
                                  params=params if isinstance(params, dict) else {},
                                  usd_per_hour=_number(row.get("usd_per_hour")), ended_at=row.get("ended_at"),
                                  **metrics))
    return out


def load_points(wh, sweep_name: str) -> SweepPoints:
    """Returns the operating points of the latest sweep named `sweep_name` in warehouse `wh`.

    Raises UserError when there is no such sweep or it holds no measured serving points.
    """
    latest = wh.query_named("sweeps_latest_by_name", {"name": sweep_name})
    if latest.is_empty():
        raise UserError(f"no sweep named {sweep_name!r} in the warehouse; run `gpuledger sweep` on its spec first")
    sp = sweep_points(wh, latest["sweep_id"][0])
    if sp is None or not sp.points:
        raise UserError(f"sweep {sweep_name!r} ({latest['sweep_id'][0]}) has no succeeded run reporting serving "
                        "metrics (output_tokens_per_s, ttft_ms_p95, tpot_ms_p95, ...): is it a method: inference sweep?")
    return sp


def sweep_points(wh, sweep_id: str) -> SweepPoints | None:
    """Returns the operating points (possibly none yet) and SLO of sweep `sweep_id`, or None when it
    is not a `method: inference` sweep."""
    info = wh.query_named("serving_sweep_spec", {"sweep_id": sweep_id}).to_dicts()
    if not info or info[0].get("method") != "inference":
        return None
    spec = info[0].get("spec_json")
    try:
        spec = json.loads(spec) if isinstance(spec, str) else (spec or {})
    except json.JSONDecodeError:
        spec = {}
    slo_cfg = ((spec.get("serve") or {}).get("slo") or {}) if isinstance(spec, dict) else {}
    slo = None
    ttft, tpot = _number(slo_cfg.get("p95_ttft_ms")), _number(slo_cfg.get("p95_tpot_ms"))
    if ttft and tpot and ttft > 0 and tpot > 0:
        slo = (ttft, tpot)
    points = points_from_frame(wh.query_named("serving_points", {"sweep_id": sweep_id}).to_dicts())
    last = max((p.ended_at for p in points if p.ended_at is not None), default=None)
    measured_on = last.strftime("%Y-%m-%d") if hasattr(last, "strftime") else "an unknown date"
    engine = (spec.get("serve") or {}).get("engine") if isinstance(spec, dict) else None
    return SweepPoints(sweep_id=sweep_id, name=str(info[0].get("name") or sweep_id), measured_on=measured_on,
                       points=points, slo=slo, engine=engine if isinstance(engine, str) else None)


def best_by_placement(points: list[OperatingPoint], p95_ttft_ms: float, p95_tpot_ms: float) -> list[PlacementChoice]:
    """Returns, per (accelerator, GPUs), the point with the highest output tokens/s whose p95 TTFT
    and p95 TPOT meet the SLO; where none does, the closest point (smallest `slo_excess`), marked."""
    groups: dict[tuple[str, int], list[OperatingPoint]] = {}
    for p in points:
        groups.setdefault((p.accelerator, p.gpus), []).append(p)
    out = []
    for (acc, gpus), group in sorted(groups.items()):
        ok = [p for p in group if p.meets(p95_ttft_ms, p95_tpot_ms)]
        if ok:
            best = max(ok, key=lambda p: (p.output_tokens_per_s, p.run_id))
            why = (f"highest throughput of {len(ok)} of {len(group)} points meeting p95 TTFT ≤ {p95_ttft_ms:g} ms "
                   f"and TPOT ≤ {p95_tpot_ms:g} ms")
            out.append(PlacementChoice(acc, gpus, best, True, why))
        else:
            near = min(group, key=lambda p: (p.slo_excess(p95_ttft_ms, p95_tpot_ms), p.run_id))
            why = (f"none of {len(group)} points meets p95 TTFT ≤ {p95_ttft_ms:g} ms and TPOT ≤ {p95_tpot_ms:g} ms; "
                   f"closest: {near.load or near.config} at TTFT {near.ttft_ms_p95:.1f} ms, TPOT {near.tpot_ms_p95:.1f} ms")
            out.append(PlacementChoice(acc, gpus, near, False, why))
    return out


def cheapest_meeting(points: list[OperatingPoint], p95_ttft_ms: float, p95_tpot_ms: float) -> OperatingPoint | None:
    """Returns the point with the lowest cost per million output tokens that meets the SLO (ties:
    higher throughput), or None when no priced point meets it."""
    ok = [p for p in points if p.meets(p95_ttft_ms, p95_tpot_ms) and p.usd_per_million_output_tokens is not None]
    return min(ok, key=lambda p: (p.usd_per_million_output_tokens, -p.output_tokens_per_s, p.run_id), default=None)
