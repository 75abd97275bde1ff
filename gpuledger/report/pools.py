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


def packing_section(runs: Any) -> Section | None:
    """Returns the packed-slots section (None when no run shared a slot): per slot (one job, k agents on
    one GPU/slot; `resources.trials_per_gpu`), its trials, the job's wall-clock, its cost (the runs' shares)
    and each trial's share, wall-clock and cost; from `report_sweep_runs` (v_runs.pack_*)."""
    if runs is None or not runs.height or "pack_slot" not in runs.columns:
        return None
    packed = [r for r in runs.to_dicts() if r.get("pack_slot")]
    if not packed:
        return None
    slots: dict[str, list[dict[str, Any]]] = {}
    for r in packed:
        slots.setdefault(r["pack_slot"], []).append(r)
    rows = []
    for slot, rs in slots.items():
        for i, r in enumerate(rs):
            rows.append([slot if i == 0 else "", r["trial_id"], f"{float(r['pack_share']):.3f}",
                         duration(r["wall_s"]), usd(r["cost_usd"]),
                         duration(r.get("pack_wall_s")) if i == 0 else "",
                         usd(sum(float(x["cost_usd"] or 0.0) for x in rs)) if i == 0 else ""])
    table = Table(["slot (one job)", "trial", "share", "trial wall-clock", "trial cost", "job wall-clock",
                   "slot cost"], rows, numeric=[2, 3, 4, 5, 6])
    return Section("Packed trials", [Note(
        f"{len(packed)} trial(s) ran packed in {len(slots)} slot(s): k agents side by side in one job on one "
        "GPU/slot, each measured on its own and billed its share of the job (its planned compute seconds over the "
        "slot's, or equal): cost = the slot's price × the job's wall-clock × share, so a slot's trials sum to its "
        "cost.", "small"), table])
