"""Sweeps, their spec and price snapshot, and their planned trials: what the flow writes around the runs."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from gpuledger.errors import UserError
from gpuledger.warehouse.connect import now, utc_naive
from gpuledger.warehouse.lazy import polars as pl
from gpuledger.warehouse.records import frames_module, json_text


class SweepsMixin:
    """`Warehouse` methods for sweeps and trials (see `gpuledger.warehouse.core.WarehouseBase`)."""

    _con: Any
    _require_writer: Any
    _run: Any
    _upsert: Any
    transaction: Any

    def register_sweep(
        self,
        *,
        sweep_id: str,
        name: str,
        project: str | None = None,
        owner: str | None = None,
        kind: str = "sweep",
        method: str | None = None,
        model: str | None = None,
        launcher: str | None = None,
        objective_metric: str | None = None,
        objective_goal: str | None = "minimize",
        objective_target: float | None = None,
        budget_usd: float | None = None,
        deadline_s: float | None = None,
        max_parallel: int | None = None,
        forced: bool = False,
        started_at: datetime | str | None = None,
        status: str = "running",
        spec_path: str | os.PathLike[str] | None = None,
        spec_yaml: str | None = None,
        spec_json: dict[str, Any] | str | None = None,
        plan_json: dict[str, Any] | str | None = None,
        prices: pl.DataFrame | Sequence[dict[str, Any]] | None = None,
    ) -> str:
        """Inserts or updates a sweep (and its spec and price snapshot) in one transaction; returns its spec_id.

        A second call with the same `sweep_id` (a re-run/resume) updates every field, keeps the
        EARLIEST `started_at` (unless it was only `planned`: its probes ran, no trial yet), clears
        `ended_at` and sets `status` (default 'running'). `prices`:
        the offers the plan used, rows with any of cloud, region, instance_type, accelerator,
        accelerator_count (or count/gpus), spot, usd_per_hour, on_demand_usd_per_hour, source,
        as_of; other keys go to the JSON column `extra`. They replace the sweep's earlier snapshot.
        `spec_json`/`plan_json` take a dict (stored as JSON) or JSON text.
        """
        self._require_writer("register_sweep")
        at = now()
        spec_json_text = json_text(spec_json)
        basis = spec_json_text or spec_yaml or sweep_id
        spec_id = hashlib.sha256(basis.encode()).hexdigest()
        spec_df = pl.DataFrame([{
            "spec_id": spec_id, "name": name, "kind": kind,
            "path": str(spec_path) if spec_path is not None else None,
            "yaml_text": spec_yaml, "spec_json": spec_json_text, "first_seen_at": at,
        }], schema=frames_module().empty_frame("specs").schema)
        sweep_row = {
            "sweep_id": sweep_id, "name": name, "project": project, "owner": owner, "spec_id": spec_id,
            "spec_path": str(spec_path) if spec_path is not None else None, "kind": kind,
            "method": method, "model": model, "launcher": launcher, "objective_metric": objective_metric,
            "objective_goal": objective_goal, "objective_target": objective_target,
            "budget_usd": budget_usd, "deadline_s": deadline_s, "max_parallel": max_parallel,
            "forced": bool(forced), "started_at": utc_naive(started_at) or at, "ended_at": None,
            "status": status, "plan_json": json_text(plan_json), "updated_at": at,
        }
        sweep_df = pl.DataFrame([sweep_row], schema=frames_module().empty_frame("sweeps").schema)
        try:
            spec_df = frames_module().validate_frame("specs", spec_df)
            sweep_df = frames_module().validate_frame("sweeps", sweep_df)
            price_df = frames_module().validate_frame("prices", _price_frame(sweep_id, prices)) if prices is not None else None
        except frames_module().FrameError as err:
            raise UserError(f"cannot register sweep {sweep_id}: {err}") from None
        with self.transaction():
            self._upsert("specs", spec_df, keep=["first_seen_at"])
            # a sweep only registered so far (status 'planned': its probes ran, no trial yet) starts its
            # clock when it first runs, so the time between probing and launching is not time to recipe
            self._upsert("sweeps", sweep_df, update={
                "started_at": "CASE WHEN sweeps.status = 'planned' THEN excluded.started_at "
                              "ELSE least(sweeps.started_at, excluded.started_at) END"})
            if price_df is not None:
                self._run("prices_delete_sweep", {"sweep_id": sweep_id})
                self._upsert("prices", price_df)
        return spec_id

    def upsert_trials(self, sweep_id: str, trials: pl.DataFrame | Iterable[dict[str, Any]]) -> int:
        """Inserts or updates the planned trials of a sweep in one transaction; returns how many.

        Each trial: `trial_id` (required), `index` (or `trial_index`), `params` (dict or JSON
        text), `accelerator`, `gpus`, `cloud`, `region`, `instance_type`, `spot`,
        `est_memory_gib`, `est_wall_s`, `est_cost_usd`, `feasible`, `reason`, `status`
        (pending|running|succeeded|failed|oom|preempted|cancelled|skipped-budget; default pending).
        On conflict (sweep_id, trial_id) every given field is replaced, except that 'pending'
        never overwrites a status the trial already has (re-planning a resumed sweep keeps
        'succeeded'). Raises `UserError` naming the bad field.
        """
        self._require_writer("upsert_trials")
        df = trials if isinstance(trials, pl.DataFrame) else pl.DataFrame(
            [_trial_row(t) for t in trials], schema_overrides=_trial_input_schema(), strict=False)
        if df.height == 0:
            return 0
        if "index" in df.columns:
            df = df.rename({"index": "trial_index"})
        if "params" in df.columns and df.schema["params"] != pl.String:
            df = df.with_columns(pl.col("params").map_elements(json_text, return_dtype=pl.String))
        floats = [c for c, t in df.schema.items() if t in (pl.Float32, pl.Float64)]
        if floats:  # an estimate the planner could not make (NaN) is stored as unknown (NULL)
            df = df.with_columns(pl.col(floats).fill_nan(None))
        df = df.with_columns(sweep_id=pl.lit(sweep_id), updated_at=pl.lit(now()))
        if "status" not in df.columns:
            df = df.with_columns(status=pl.lit("pending"))
        else:
            df = df.with_columns(pl.col("status").fill_null("pending"))
        try:
            df = frames_module().validate_frame("trials", df)
        except frames_module().FrameError as err:
            raise UserError(f"cannot write trials of {sweep_id}: {err}") from None
        with self.transaction():
            self._upsert("trials", df, update={
                "status": "CASE WHEN excluded.status = 'pending' THEN trials.status ELSE excluded.status END"})
        return df.height

    def mark_trials(self, sweep_id: str, trial_ids: Iterable[str], status: str, reason: str | None = None,
                    stop_rule: str | None = None) -> int:
        """Sets the status (and reason, and for a stopped trial the rule that stopped it, `rung` or
        `curve`, when given) of the listed trials; returns how many rows changed.

        Trials not registered yet are created with just that status (e.g. 'skipped-budget').
        """
        self._require_writer("mark_trials")
        if status not in frames_module().TRIAL_STATUSES:
            raise UserError(f"unknown trial status {status!r}; one of {', '.join(frames_module().TRIAL_STATUSES)}")
        ids = list(dict.fromkeys(trial_ids))
        if not ids:
            return 0
        df = pl.DataFrame({"sweep_id": [sweep_id] * len(ids), "trial_id": ids,
                           "status": [status] * len(ids), "updated_at": [now()] * len(ids)})
        if reason is not None:
            df = df.with_columns(reason=pl.lit(reason))
        if stop_rule is not None:
            df = df.with_columns(stop_rule=pl.lit(stop_rule))
        df = frames_module().validate_frame("trials", df)
        # only the given columns change on conflict
        given = ({"status", "updated_at"} | ({"reason"} if reason is not None else set())
                 | ({"stop_rule"} if stop_rule is not None else set()))
        with self.transaction():
            self._upsert("trials", df, keep=[c for c in df.columns if c not in given])
        return len(ids)

    def finish_sweep(self, sweep_id: str, status: str = "succeeded", ended_at: datetime | str | None = None) -> None:
        """Records the end of a sweep: `ended_at` (default now, UTC) and `status`."""
        self._require_writer("finish_sweep")
        with self.transaction():
            self._run("sweeps_finish", {"ended_at": utc_naive(ended_at) or now(), "status": status,
                                        "now": now(), "sweep_id": sweep_id})

    def succeeded_trial_ids(self, sweep_id: str) -> set[str]:
        """Returns the trial ids of `sweep_id` that already succeeded (a run or the trial's status)."""
        return {r[0] for r in self._run("trials_succeeded", {"sweep_id": sweep_id})}

    def latest_sweep_id(self, name: str) -> str | None:
        """Returns the sweep id of the most recently started sweep called `name` (None when none)."""
        rows = self._run("sweeps_latest_by_name", {"name": name})
        return rows[0][0] if rows else None


def _trial_input_schema() -> dict[str, Any]:
    """The polars types of the trial rows' columns (a function: polars is imported on first use)."""
    return {
        "trial_index": pl.Int32, "gpus": pl.Int32, "spot": pl.Boolean, "feasible": pl.Boolean,
        "est_memory_gib": pl.Float64, "est_wall_s": pl.Float64, "est_cost_usd": pl.Float64,
        "params": pl.String, "est_flops": pl.Float64, "est_basis": pl.String, "cloud_equiv_accelerator": pl.String,
        "cloud_equiv_gpus": pl.Int32, "cloud_equiv_instance_type": pl.String, "cloud_equiv_cloud": pl.String,
        "cloud_equiv_spot": pl.Boolean, "cloud_equiv_wall_s": pl.Float64, "cloud_equiv_usd": pl.Float64,
        "est_pruned_cost_usd": pl.Float64, "stop_rule": pl.String,
    }


def _trial_row(t: dict[str, Any]) -> dict[str, Any]:
    known = set(frames_module().columns("trials")) - {"sweep_id", "updated_at"}
    row = dict(t)
    if "index" in row:
        row["trial_index"] = row.pop("index")
    if "params" in row:
        row["params"] = json_text(row["params"])
    unknown = set(row) - known - {"sweep_id"}
    if unknown:
        raise UserError(f"unknown trial fields {sorted(unknown)}; known: {sorted(known)}")
    row.pop("sweep_id", None)
    return row


_PRICE_FIELDS = ("cloud", "region", "instance_type", "accelerator", "accelerator_count", "spot",
                 "usd_per_hour", "on_demand_usd_per_hour", "source", "as_of")
_PRICE_ALIASES = {"count": "accelerator_count", "gpus": "accelerator_count", "price_usd_per_hour": "usd_per_hour"}


def _price_frame(sweep_id: str, prices: pl.DataFrame | Sequence[dict[str, Any]]) -> pl.DataFrame:
    rows = prices.to_dicts() if isinstance(prices, pl.DataFrame) else [dict(r) for r in prices]
    out = []
    for i, r in enumerate(rows):
        r = {_PRICE_ALIASES.get(k, k): v for k, v in r.items()}
        r.pop("sweep_id", None)
        row: dict[str, Any] = {"sweep_id": sweep_id, "seq": i}
        for k in _PRICE_FIELDS:
            v = r.pop(k, None)
            row[k] = str(v) if k == "as_of" and v is not None else v
        row["extra"] = json.dumps(r, sort_keys=True, default=str) if r else None
        out.append(row)
    return pl.DataFrame(out, schema=frames_module().empty_frame("prices").schema, strict=False)


