"""How far each sweep has got: its trials by state, its plan's total and an ETA (`gpuledger status`).

    progress(wh, sweep_ids) -> {sweep_id: {"trials": {state: n}, "planned_usd", "eta_s", "eta_basis"}}

`trials`: the warehouse's trial statuses (`pending`, `succeeded`, `failed`, `pruned`, `skipped-budget`, ...),
with the trials running now (`trial_accruals`, written at each launch) counted as `running` instead of
`pending`. `eta_s` (only while the sweep runs): the planned wall-clock of the trials still to run and of the
running ones' remainder, scaled by how the finished trials' measured wall-clock compared with their plan
(`eta_basis` says which), spread over the sweep's parallel slots; an estimate, not a promise (an adaptive
search that prunes ends sooner).
"""

from __future__ import annotations

from typing import Any

#: trial statuses that will still run (the ETA counts them)
_TO_RUN = ("pending",)


def progress(wh: Any, sweep_ids: list[str], running_states: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Returns the progress of each of `sweep_ids` (see the module docstring); `running_states`: each
    sweep's state (an ETA only for `running`)."""
    if not sweep_ids:
        return {}
    counts: dict[str, dict[str, int]] = {sid: {} for sid in sweep_ids}
    pending_s: dict[str, float] = {sid: 0.0 for sid in sweep_ids}
    for row in wh.query_named("status_trial_counts", {"ids": sweep_ids}).iter_rows(named=True):
        counts[row["sweep_id"]][row["status"]] = int(row["trials"])
        if row["status"] in _TO_RUN:
            pending_s[row["sweep_id"]] += float(row["est_wall_s"] or 0.0)
    out: dict[str, dict[str, Any]] = {}
    for row in wh.query_named("status_sweep_progress", {"ids": sweep_ids}).iter_rows(named=True):
        sid = row["sweep_id"]
        trials = counts.get(sid, {})
        running = int(row["running_trials"] or 0)
        if running:  # running trials are still `pending` in the trials table until their record arrives
            trials["pending"] = max(0, trials.get("pending", 0) - running)
            trials["running"] = running
        trials = {k: v for k, v in trials.items() if v}
        eta_s, basis = None, None
        if running_states.get(sid) == "running":
            eta_s, basis = _eta(row, pending_s.get(sid, 0.0))
        out[sid] = {"trials": trials, "planned_usd": row["planned_usd"], "eta_s": eta_s, "eta_basis": basis}
    return out


def _eta(row: dict[str, Any], pending_est_s: float) -> tuple[float, str]:
    """Returns (seconds left, what they rest on) of a running sweep's progress row."""
    n_done = int(row["finished_trials"] or 0)
    if n_done and row["finished_est_wall_s"]:
        ratio = float(row["finished_wall_s"]) / float(row["finished_est_wall_s"])
        basis = (f"the plan's wall-clock x {ratio:.2f} (the measured / planned wall-clock of {n_done} finished "
                 f"trial(s))")
    else:
        ratio, basis = 1.0, "the plan's wall-clock estimates (no trial finished yet)"
    running = int(row["running_trials"] or 0)
    left_running = max(0.0, float(row["running_est_wall_s"] or 0.0) * ratio - float(row["running_elapsed_s"] or 0.0))
    slots = max(1, int(row["max_parallel"] or 1))
    eta = (left_running + pending_est_s * ratio) / slots
    if running:
        eta = max(eta, left_running / running)
    return round(eta, 1), basis
