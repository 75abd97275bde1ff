"""Keeping the warehouse small and fast: compaction, expired snapshots, downsampled old metric points.

`maintain(wh, ...)` runs, in order, each as its own step (a step that fails is reported, the others
still run):
1. downsample: metric points of runs that ended more than `metrics_older_than_days` ago are replaced,
   per run and metric, by one point per `every` consecutive points (mean in `value`, extremes in
   `value_min`/`value_max`, how many in `points`; migration 044). Final metrics, runs and costs are
   untouched, so no report number changes; a curve keeps its shape at 1/`every` of the rows.
   Idempotent: points already downsampled are left as they are.
2. DuckLake only: `ducklake_flush_inlined_data` (rows small commits kept in the catalog go to
   Parquet), `ducklake_merge_adjacent_files` (one Parquet file per small commit is the "small-file
   explosion" DuckLake users report; merged files keep every row), `ducklake_expire_snapshots`
   older than `expire_older_than_days` and `ducklake_cleanup_old_files` (the files only expired
   snapshots referred to). https://ducklake.select/docs/stable/duckdb/maintenance/recommended_maintenance
3. A DuckDB file: CHECKPOINT (the write-ahead log folded into the file).
The result counts data files and metric rows before and after, so its effect is reported.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import Any

import duckdb

from gpuledger.errors import UserError
from gpuledger.warehouse import lake, sqlfiles
from gpuledger.warehouse.connect import now, one_line

#: metric points of runs older than this are downsampled (days)
DEFAULT_METRICS_OLDER_THAN_DAYS = 30.0
#: one kept point per this many raw points
DEFAULT_EVERY = 10
#: DuckLake snapshots older than this are expired (days): time travel reaches back this far
DEFAULT_EXPIRE_OLDER_THAN_DAYS = 7.0


@dataclass
class MaintenanceResult:
    backend: str
    files_before: int | None
    files_after: int | None
    metric_rows_before: int
    metric_rows_after: int
    runs_downsampled: int
    steps: dict[str, str] = field(default_factory=dict)  # step -> "ok (N s)" or why it failed
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return all(v.startswith("ok") or v.startswith("skipped") for v in self.steps.values())

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}

    def summary(self) -> str:
        files = (f"data files {self.files_before} -> {self.files_after}"
                 if self.files_before is not None else "one DuckDB file")
        steps = "; ".join(f"{k} {v}" for k, v in self.steps.items())
        return (f"maintained the {self.backend} warehouse in {self.seconds:.1f} s: {files}, metric rows "
                f"{self.metric_rows_before} -> {self.metric_rows_after} ({self.runs_downsampled} runs downsampled); "
                f"{steps}")


def _check(name: str, value: float, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise UserError(f"warehouse maintain: {name} must be a number from {low:g} to {high:g}, not {value!r}")
    return float(value)


def data_files(con: duckdb.DuckDBPyConnection) -> int:
    """The live Parquet data files of the attached DuckLake (files of the current snapshot)."""
    return int(sqlfiles.run(con, "lake_data_files_count").fetchone()[0])


def maintain(wh: Any, *, metrics_older_than_days: float = DEFAULT_METRICS_OLDER_THAN_DAYS,
             every: int = DEFAULT_EVERY,
             expire_older_than_days: float = DEFAULT_EXPIRE_OLDER_THAN_DAYS) -> MaintenanceResult:
    """Runs the maintenance steps on an open, writable `Warehouse` and returns what they changed."""
    _check("metrics_older_than_days", metrics_older_than_days, 0, 36500)
    _check("every", every, 2, 1_000_000)
    _check("expire_older_than_days", expire_older_than_days, 0, 36500)
    con = wh._con
    is_lake = wh.backend == "ducklake"
    started = time.monotonic()
    def count() -> int:
        return int(sqlfiles.run(con, "metrics_rows_count").fetchone()[0])

    result = MaintenanceResult(backend=wh.backend, files_before=data_files(con) if is_lake else None,
                               files_after=None, metric_rows_before=count(),
                               metric_rows_after=0, runs_downsampled=0)
    cutoff = now() - timedelta(days=metrics_older_than_days)

    lock = wh._writer_lock if is_lake else None

    def step(name: str, body) -> None:
        t0 = time.monotonic()
        try:
            if lock is not None and name != "downsample":  # downsample holds it through with_retries
                lock.acquire()
                try:
                    body()
                finally:
                    lock.release()
            else:
                body()
            result.steps[name] = f"ok ({time.monotonic() - t0:.1f} s)"
        except duckdb.Error as err:
            with contextlib.suppress(duckdb.Error):
                con.rollback()
            result.steps[name] = f"failed: {one_line(err)}"

    def downsample() -> None:
        params = {"cutoff": cutoff, "every": int(every)}

        def body() -> int:
            sqlfiles.run(con, "metrics_downsample_stage", params)
            runs = int(sqlfiles.run(con, "metrics_downsample_runs").fetchone()[0])
            if runs:
                sqlfiles.run(con, "metrics_downsample_delete")
                sqlfiles.run(con, "metrics_downsample_insert")
            sqlfiles.run(con, "metrics_downsample_unstage")
            return runs

        if is_lake:
            result.runs_downsampled = lake.with_retries(con, body, what="downsample metric points", lock=lock)
        else:
            with wh.transaction():
                result.runs_downsampled = body()

    step("downsample", downsample)
    if is_lake:
        expire_before = now() - timedelta(days=expire_older_than_days)
        step("flush_inlined", lambda: sqlfiles.run(con, "lake_flush_inlined", {"alias": lake.ALIAS}))
        step("merge_files", lambda: sqlfiles.run(con, "lake_merge_files", {"alias": lake.ALIAS}))
        step("expire_snapshots", lambda: sqlfiles.run(con, "lake_expire_snapshots",
                                                      {"alias": lake.ALIAS, "before": expire_before}))
        step("cleanup_files", lambda: sqlfiles.run(con, "lake_cleanup_files",
                                                   {"alias": lake.ALIAS, "before": expire_before}))
        result.files_after = data_files(con)
    else:
        step("checkpoint", lambda: sqlfiles.run(con, "warehouse_checkpoint"))
    result.metric_rows_after = count()
    result.seconds = time.monotonic() - started
    return result
