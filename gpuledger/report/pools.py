"""The sweep report's SkyPilot pool section: what the pool's workers cost beyond the trials' records
(named query `report_sweep_pools`, table `sweep_pools`) and the realised saving against per-trial jobs."""

from __future__ import annotations

from typing import Any

from gpuledger.report.common import duration, usd
from gpuledger.report.document import Note, Section, Table


def load_pools(wh, sweep_id: str) -> list[dict[str, Any]]:
    """Returns the sweep's pool rows (empty: its trials ran as per-trial managed jobs)."""
    return wh.sweep_pools(sweep_id)


def pools_section(pools: list[dict[str, Any]]) -> Section | None:
    """Returns the section (None without a pool): per pool and run, its workers' time, the trials' part,
    the start-up and idle tail (the sweep's), and the saving against per-trial jobs."""
    if not pools:
        return None
    rows = [[p["pool"], p["workers"], p["trials"], duration(p["worker_s"]), duration(p["busy_s"]),
             duration(p["idle_s"]), usd(p["idle_usd"]), usd(p["pool_usd"]), usd(p["per_trial_jobs_usd"]),
             usd(p["saving_usd"])] for p in pools]
    table = Table(["pool", "workers", "trials", "worker time", "trials' time", "start-up + idle tail",
                   "start-up + idle tail cost", "pool cost", "as per-trial jobs", "saved"], rows,
                  numeric=list(range(1, 10)))
    saved = [p["saving_usd"] for p in pools if p["saving_usd"] is not None]
    notes = [Note("Each trial's record bills its time on its worker; the workers' start-up and the idle tail until "
                  "the pool was torn down are the sweep's (this table, not any trial). 'As per-trial jobs' prices "
                  "the same trials plus, per trial, the workers' measured mean start-up: what separate managed "
                  "jobs would have paid.", "small")]
    if saved:
        notes.insert(0, Note(f"Realised saving of the pool against per-trial jobs: {usd(sum(saved))}."))
    return Section("SkyPilot pool", [*notes, table])
