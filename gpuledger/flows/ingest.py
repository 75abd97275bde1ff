"""Flow `ingest`: the ingest service (deployment `ingest/team`, every 30 s).

    ingest_team(seconds=25, max_records=2000)

With `[warehouse] ingest = "service"` sweeps land their result records instead of writing them; this flow
stores them (`gpuledger.api.Ledger.ingest_service` -> `gpuledger.warehouse.ingest_service.run_service`):
batches of the oldest landed records, one commit each, idempotent by record hash, retried with backoff
and jitter on commit conflicts, landed files removed only after their commit. It polls for `seconds`
(25 of the schedule's 30, so the next scheduled run takes over; two runs that overlap anyway are safe:
their commits take the writer lock in turn and a record is stored once, by its hash) and publishes the batches (sizes, lag P50/P99) as the markdown artifact `ingest-team`.
"""

from __future__ import annotations

from typing import Any

import gpuledger.flows  # noqa: F401  (telemetry off before Prefect is imported)

# isort: split
from prefect import flow, get_run_logger

from gpuledger.flows.refusals import flow_refuses


@flow(name="ingest", persist_result=False, log_prints=True)
@flow_refuses  # a user's error (no landing, no keys): one log line and a Failed state
def ingest_team(seconds: float = 25.0, max_records: int = 2000) -> dict[str, Any]:
    """Stores the landed result records; returns ServiceResult.to_dict()."""
    from prefect.artifacts import create_markdown_artifact

    from gpuledger.api import Ledger

    log = get_run_logger()
    result = Ledger().ingest_service(seconds=seconds, poll_s=min(5.0, max(0.5, seconds / 5)),
                                     max_records=max_records)
    log.info(result.summary())
    if result.batches:
        rows = "\n".join(f"| {b.batch_id} | {b.landed} | {b.stored} | {b.duplicates} | {len(b.rejected)} | "
                         f"{b.attempts} | {b.commit_s:.2f} | {max(b.lag_s) if b.lag_s else 0:.1f} |"
                         for b in result.batches)
        create_markdown_artifact(
            key="ingest-team", description="What the ingest service stored",
            markdown=(f"# Ingest service\n\n{result.summary()}\n\n| batch | landed | stored | duplicates | refused | "
                      f"attempts | commit s | max lag s |\n|---|---|---|---|---|---|---|---|\n{rows}\n"))
    return result.to_dict()
