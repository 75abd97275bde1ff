"""Flow `capacity`: GPUs and $/month to serve a traffic level within an SLO (deployment
`capacity/chat-serving`).

    capacity(spec="specs/chat-capacity.yaml")

Runs `gpuledger.capacity.plan_capacity` on the spec, writes the report with
`gpuledger.report.write_capacity_report` and publishes its markdown as the artifact
`capacity-NAME` (with a link to the HTML). Writes nothing to the warehouse.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gpuledger.flows  # noqa: F401  (telemetry off before Prefect is imported)

# isort: split
from prefect import flow, get_run_logger

from gpuledger.errors import UserError
from gpuledger.flows.refusals import flow_refuses


@flow(name="capacity", persist_result=False, log_prints=True)
@flow_refuses  # a user's error: one log line and a Failed state (gpuledger/flows/refusals.py)
def capacity(spec: str) -> dict[str, Any]:
    """Plans serving capacity for a `kind: capacity` spec; returns the plan (a dict) and report files."""
    from gpuledger.flows.artifacts import publish_report
    from gpuledger.report import write_capacity_report
    from gpuledger.serving.capacity_from_sweep import plan_capacity_measured
    from gpuledger.spec import load_spec

    log = get_run_logger()
    sp = load_spec(Path(spec))
    if sp.kind != "capacity":
        raise UserError(f"{spec}: kind is {sp.kind!r}; the capacity flow runs `kind: capacity` specs")
    result = plan_capacity_measured(sp)
    files = write_capacity_report(result, None)
    publish_report(files, "capacity-" + sp.name, f"Capacity plan of {sp.name}")
    log.info("Capacity plan of %s: %s", sp.name, files.html)
    return {"plan": result, "html": str(files.html), "markdown": str(files.markdown)}

if __name__ == "__main__":
    import json
    import sys

    print(json.dumps(capacity(sys.argv[1] if len(sys.argv) > 1 else "specs/chat-capacity.yaml"), indent=2,
                     default=str))
