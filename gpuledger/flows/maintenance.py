"""Flow `warehouse-maintenance`: compaction, expired snapshots, downsampled old metric points
(deployment `warehouse-maintenance/weekly`, Sundays 03:00 UTC).

    warehouse_maintenance(metrics_older_than_days=30, every=10, expire_older_than_days=7)

Runs `gpuledger.warehouse.maintenance.maintain` on the project's warehouse (the team DuckLake or the
file) and publishes what it changed (data files and metric rows before and after) as the markdown
artifact `warehouse-maintenance`. A step that failed fails the flow run (its state says which).
"""

from __future__ import annotations

from typing import Any

import gpuledger.flows  # noqa: F401  (telemetry off before Prefect is imported)

# isort: split
from prefect import flow, get_run_logger

from gpuledger.errors import UserError
from gpuledger.flows.refusals import flow_refuses


@flow(name="warehouse-maintenance", persist_result=False, log_prints=True)
@flow_refuses  # a user's error: one log line and a Failed state (gpuledger/flows/refusals.py)
def warehouse_maintenance(metrics_older_than_days: float = 30.0, every: int = 10,
                          expire_older_than_days: float = 7.0) -> dict[str, Any]:
    """Maintains the warehouse; returns what changed (MaintenanceResult.to_dict())."""
    from prefect.artifacts import create_markdown_artifact

    from gpuledger.api import Ledger

    log = get_run_logger()
    result = Ledger().maintain_warehouse(metrics_older_than_days=metrics_older_than_days, every=every,
                                         expire_older_than_days=expire_older_than_days)
    log.info(result.summary())
    rows = "\n".join(f"| {k} | {v} |" for k, v in result.steps.items())
    create_markdown_artifact(key="warehouse-maintenance", description="What the warehouse maintenance changed",
                             markdown=f"# Warehouse maintenance\n\n{result.summary()}\n\n| step | result |\n|---|---|\n{rows}\n")
    if not result.ok:
        raise UserError("warehouse maintenance: " + "; ".join(f"{k} {v}" for k, v in result.steps.items()
                                                              if not v.startswith("ok")))
    return result.to_dict()
