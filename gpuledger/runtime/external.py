"""Runs gpuledger did not launch, into the ledger: ad-hoc runs (`gpuledger.track.init`, the Trainer
and Lightning integrations, in a notebook or a team's own job: `gpuledger.runtime.adhoc`) and
imported history (`gpuledger import`: W&B, MLflow, Parquet; `gpuledger.inputs.history`).

Each run is a result record (`launcher: external`, `gpuledger.vocabulary.LAUNCHER_EXTERNAL`) of a
trial of a grouping sweep (`sweeps.kind` 'adhoc' or 'import': the project's ad-hoc runs, or what
one source brought in), registered here before the record is ingested, so the warehouse's own
checks hold (a registered sweep, a planned trial) and the weekly report, the views and the
calibration see them like any run. Idempotent: a run stored again (same run_id) replaces itself.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuledger.record import ResultRecord


def slug(text: str, most: int = 60) -> str:
    """Returns `text` as a sweep-id fragment: lowercase letters, digits and dashes."""
    out = re.sub(r"[^a-z0-9]+", "-", str(text).lower()).strip("-")
    return (out or "runs")[:most].strip("-") or "runs"


def external_trial_id(source: str, key: str) -> str:
    """Returns a stable 12-hex trial id of a run known to `source` by `key` (as spec trial ids are)."""
    return hashlib.sha256(f"{source}|{key}".encode()).hexdigest()[:12]


@dataclass(frozen=True)
class ExternalRun:
    """One run to store: its record (sweep_id and trial_id set) and what its grouping sweep says."""

    record: ResultRecord
    sweep_name: str
    kind: str  # 'adhoc' | 'import' (`gpuledger.vocabulary.SWEEP_KINDS`)
    project: str | None = None
    owner: str | None = None
    model: str | None = None
    method: str | None = None
    objective_metric: str | None = None
    objective_goal: str = "minimize"
    source: str = ""  # where it came from, in words (the sweep's spec_path column: "wandb export runs.csv")
    #: the trial row beside the record's fields (est_memory_gib, est_wall_s, est_cost_usd when known)
    trial_extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class StoredRuns:
    """What `store_external_runs` did: run ids stored (new among them), records refused and why."""

    stored: list[str] = field(default_factory=list)
    new: int = 0
    rejected: list[tuple[str, str]] = field(default_factory=list)  # (source, reason)
    sweeps: list[str] = field(default_factory=list)


def store_external_runs(runs: Sequence[ExternalRun], *, path: Any = None, sources: Sequence[str] | None = None,
                        lock_timeout_s: float | None = None) -> StoredRuns:
    """Registers each run's grouping sweep and trial, then ingests the records in one transaction
    (`Warehouse.ingest_records`: validated, idempotent by run_id); returns what was stored."""
    from gpuledger.warehouse import Warehouse

    out = StoredRuns()
    if not runs:
        return out
    by_sweep: dict[str, list[ExternalRun]] = {}
    for run in runs:
        by_sweep.setdefault(str(run.record.sweep_id), []).append(run)
    with Warehouse.open(path, lock_timeout_s=lock_timeout_s) as wh:
        for sweep_id, group in by_sweep.items():
            first = group[0]
            started = min(r.record.started_at for r in group)
            wh.register_sweep(sweep_id=sweep_id, name=first.sweep_name, project=first.project, owner=first.owner,
                              kind=first.kind, method=first.method, model=first.model, launcher=first.record.launcher,
                              objective_metric=first.objective_metric, objective_goal=first.objective_goal,
                              started_at=started, status="running", spec_path=first.source or None)
            wh.upsert_trials(sweep_id, [{
                "trial_id": r.record.trial_id, "params": r.record.params, "accelerator": r.record.accelerator,
                "gpus": r.record.gpus, "cloud": r.record.cloud, "region": r.record.region,
                "instance_type": r.record.instance_type, "spot": r.record.spot, "feasible": True,
                "status": r.record.status, **r.trial_extra} for r in group])
        result = wh.ingest_records([r.record for r in runs], sources=sources)
        for sweep_id, group in by_sweep.items():
            ended = max(r.record.ended_at for r in group)
            wh.finish_sweep(sweep_id, status="succeeded", ended_at=ended)
    out.stored = list(result.run_ids)
    out.new = result.new
    out.rejected = [(r.source, r.reason) for r in result.rejected]
    out.sweeps = sorted(by_sweep)
    return out
