"""Result-record fixtures for tests: `example_record(...)` builds a valid gpuledger.result/1 dict."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from gpuledger.warehouse import utc_naive


def example_record(
    run_id: str,
    trial_id: str,
    *,
    sweep_id: str | None = None,
    started_at: datetime | str = "2026-01-05T10:00:00",
    wall_s: float = 600.0,
    status: str = "succeeded",
    attempt: int = 1,
    launcher: str = "local",
    accelerator: str | None = None,
    gpus: int = 0,
    cloud: str | None = None,
    spot: bool = False,
    usd_per_hour: float = 0.0,
    on_demand_usd_per_hour: float | None = None,
    source: str | None = None,
    final_metrics: dict[str, float] | None = None,
    metrics: list[dict[str, Any]] | None = None,
    peak_gpu_mem_gib: float | None = None,
    peak_rss_gib: float | None = 1.0,
    preemptions: int = 0,
    params: dict[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """Returns a valid result-record dict (schema gpuledger.result/1) built from a few literals.

    For fixtures (tests of reports, flows): ended_at = started_at + wall_s; one billing line of
    `wall_s` hours at `usd_per_hour` (source 'local' for the local launcher, else 'catalog');
    `extra` sets any other record field (region, instance_type, reason, exit_code, ...).
    """
    start = utc_naive(started_at)
    if start is None:
        raise ValueError("started_at is required")
    hours = wall_s / 3600.0
    record: dict[str, Any] = {
        "schema": "gpuledger.result/1",
        "run_id": run_id,
        "sweep_id": sweep_id,
        "trial_id": trial_id,
        "attempt": attempt,
        "launcher": launcher,
        "cloud": cloud,
        "accelerator": accelerator,
        "gpus": gpus,
        "spot": spot,
        "started_at": start.isoformat() + "Z",
        "ended_at": (start + timedelta(seconds=wall_s)).isoformat() + "Z",
        "wall_s": wall_s,
        "exit_code": 0 if status == "succeeded" else 1,
        "status": status,
        "peak_gpu_mem_gib": peak_gpu_mem_gib,
        "peak_rss_gib": peak_rss_gib,
        "preemptions": preemptions,
        "params": params or {},
        "metrics": metrics or [],
        "final_metrics": final_metrics or {},
        "billing": [
            {
                "source": source or ("local" if launcher == "local" else "catalog"),
                "description": "fixture",
                "usd_per_hour": usd_per_hour,
                "hours": hours,
                "cost_usd": usd_per_hour * hours,
                "spot": spot,
                "on_demand_usd_per_hour": on_demand_usd_per_hour,
            }
        ],
    }
    record.update(extra)
    return record


def ingest_known(wh: Any, records: list[dict[str, Any]]) -> Any:
    """Registers the sweeps and trials `records` name (when not registered yet), then ingests them:
    ingest refuses records of sweeps or trials the warehouse does not know."""
    sweeps: dict[str, list[str]] = {}
    for r in records:
        if isinstance(r, dict) and isinstance(r.get("trial_id"), str) and isinstance(r.get("started_at"), str):
            sweeps.setdefault(r.get("sweep_id") or "", []).append(r["trial_id"])
    for sweep_id, trials in sweeps.items():
        if not sweep_id:
            continue
        if wh.scalar("select count(*) from sweeps where sweep_id = ?", [sweep_id]) == 0:
            wh.register_sweep(sweep_id=sweep_id, name=sweep_id.rsplit("-", 1)[0] or sweep_id,
                              started_at=min(r["started_at"] for r in records if isinstance(r, dict)
                                             and isinstance(r.get("started_at"), str)))
        known = set(wh.query("select trial_id from trials where sweep_id = ?", [sweep_id])["trial_id"].to_list())
        new = [t for t in dict.fromkeys(trials) if t not in known]
        if new:
            wh.upsert_trials(sweep_id, [{"trial_id": t} for t in new])
    return wh.ingest_records(records)
