"""The DuckDB warehouse: the only package of gpuledger that imports `duckdb`.

Modules (each small, one job):

- `connect`: open the file with a bounded wait while another process holds it (`WarehouseBusy`
  names the holder: reader or writer, pid, command), time helpers;
- `sqlfiles`: the SQL text under `warehouse/` (migrations, views, views.yml, named queries);
- `migrate`: migrations (checksums verified), views, views.yml applied as `COMMENT ON`;
- `core`: `WarehouseBase` (open/close, transactions, queries, validated upserts);
- `records`: result records -> frames; JSON values encoded once (`json_text`);
- `ingest`, `sweeps`, `lease`: the writing methods, mixed into `Warehouse` (`lease`: one run of a
  sweep at a time, `SweepBusy`);
- `readonly`: which statements of ad-hoc SQL write;
- `column_checks`: the column tests views.yml declares (unique, not_null, accepted_values, relationships),
  run from the templates in `sql/column_checks/`.

Usage (a writer; writers migrate on open)::

    with Warehouse.open() as wh:                       # the project's .gpuledger/ledger.duckdb (gpuledger.settings)
        wh.register_sweep(sweep_id="lora-grid-1a2b3c4d", name="lora-grid", project="p", owner="o",
                          objective_metric="eval_loss", objective_goal="minimize", started_at=now)
        wh.upsert_trials("lora-grid-1a2b3c4d", [{"trial_id": "ab12", "index": 0, "params": {...}}])
        wh.ingest_records(records)                     # result records (dicts) of the launchers
        wh.finish_sweep("lora-grid-1a2b3c4d", status="succeeded")

    with Warehouse.open(read_only=True) as wh:         # a reader
        df = wh.query_named("sweep_spent", {"sweep_id": "lora-grid-1a2b3c4d"})

DuckDB allows ONE writing process and no reader while it writes (and no writer while anyone
reads): hold a writer only for the duration of a batch (open, write, close) so `gpuledger sql` and
reports can read in between. Timestamps are stored as naive UTC (`TIMESTAMP`).
"""

from __future__ import annotations

from pathlib import Path

from gpuledger.errors import UserError
from gpuledger.settings import ENV_PATH, resolve_path, warehouse_if_any
from gpuledger.warehouse.agent_launches import AgentLaunch, AgentLaunchesMixin
from gpuledger.warehouse.billing import BillingIngestResult, BillingMixin
from gpuledger.warehouse.budget_ledger import BudgetLedgerMixin, reserve_lock
from gpuledger.warehouse.connect import (
    DEFAULT_LOCK_TIMEOUT_S,
    ENV_LOCK_TIMEOUT,
    WarehouseBusy,
    utc_naive,
)
from gpuledger.warehouse.core import WarehouseBase
from gpuledger.warehouse.ingest import IngestMixin, IngestResult, Rejection
from gpuledger.warehouse.lease import LeaseMixin, SweepBusy
from gpuledger.warehouse.migrate import MigrationChanged
from gpuledger.warehouse.pools import PoolsMixin
from gpuledger.warehouse.readonly import (
    READ_ONLY_CONFIG,
    READ_ONLY_STATEMENTS,
    read_only_problems,
    writing_statements,
)
from gpuledger.warehouse.records import json_text, records_to_frames
from gpuledger.warehouse.sqlfiles import (
    MIGRATIONS_DIR,
    QUERIES_DIR,
    SQL_ROOT,
    VIEWS_DIR,
    VIEWS_DOC,
    named_sql,
)
from gpuledger.warehouse.sweeps import SweepsMixin

#: base tables, in the order `export_parquet` writes them
TABLES = ("schema_migrations", "schema_views", "specs", "sweeps", "trials", "runs", "final_metrics", "metrics",
          "billing", "prices", "sweep_leases", "billing_files", "billing_line_items", "agent_launches",
          "sweep_pools", "budget_envelopes", "budget_ledger", "budget_approvals", "trial_accruals", "alerts_sent")


class Warehouse(IngestMixin, SweepsMixin, LeaseMixin, BillingMixin, AgentLaunchesMixin, PoolsMixin, BudgetLedgerMixin,
                WarehouseBase):
    """A connection to the DuckDB warehouse file. Use as a context manager; see the package doc."""


def measured_preemption_if_any(path: str | Path | None = None) -> dict[tuple[str, str], tuple[float, int]]:
    """Returns the warehouse's measured spot preemptions for the planner, or {} when there is no
    warehouse yet (never creates one) or it is busy (a running sweep holds it: plan with defaults)."""
    target = warehouse_if_any(path)
    if target is None:
        return {}
    try:
        with Warehouse.open(target, read_only=True, lock_timeout_s=0.5) as wh:
            return wh.measured_preemption()
    except UserError:
        return {}


__all__ = [
    "AgentLaunch",
    "DEFAULT_LOCK_TIMEOUT_S", "ENV_LOCK_TIMEOUT", "ENV_PATH", "MIGRATIONS_DIR", "QUERIES_DIR",
    "READ_ONLY_CONFIG", "READ_ONLY_STATEMENTS", "read_only_problems", "SQL_ROOT", "TABLES", "VIEWS_DIR", "VIEWS_DOC", "IngestResult",
    "BillingIngestResult", "MigrationChanged", "Rejection", "SweepBusy", "Warehouse", "WarehouseBusy", "json_text", "measured_preemption_if_any",
    "named_sql", "records_to_frames", "reserve_lock", "resolve_path", "utc_naive", "writing_statements",
]
