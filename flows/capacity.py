"""Flow `capacity`: GPUs and $/month to serve a traffic level within an SLO (deployment
`capacity/chat-serving`).

    capacity(spec="specs/chat-capacity.yaml")

Runs `gpuledger.capacity.plan_capacity` on the spec, writes the report with
`gpuledger.report.write_capacity_report` and publishes its markdown as the artifact
`capacity-NAME` (with a link to the HTML). Writes nothing to the warehouse.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import flows  # noqa: F401  (telemetry off before Prefect is imported)

# isort: split
from prefect import flow, get_run_logger
from prefect.artifacts import create_link_artifact, create_markdown_artifact

from gpuledger.errors import UserError


@flow(name="capacity", persist_result=False, log_prints=True)
def capacity(spec: str) -> dict[str, Any]:
    """Plans serving capacity for a `kind: capacity` spec; returns the plan (a dict) and report files."""
    from gpuledger.capacity import plan_capacity
    from gpuledger.report import write_capacity_report
    from gpuledger.spec import load_spec

    log = get_run_logger()
    sp = load_spec(Path(spec))
    if getattr(sp, "kind", None) != "capacity":
        raise UserError(f"{spec}: kind is {getattr(sp, 'kind', '?')!r}; the capacity flow runs `kind: capacity` specs")
    result = plan_capacity(sp)
    files = write_capacity_report(result, None)
    html = getattr(files, "html", None)
    md = getattr(files, "markdown", None)
    markdown = Path(md).read_text(encoding="utf-8") if md and Path(md).exists() else f"# Capacity {sp.name}\n"
    key = "capacity-" + sp.name
    if html:
        uri = Path(html).resolve().as_uri()
        markdown += f"\n\n---\nFull report (HTML, charts): [{Path(html).resolve()}]({uri})\n"
        with contextlib.suppress(Exception):
            create_link_artifact(key=key + "-html", link=uri, link_text=f"Capacity plan {sp.name} (HTML)")
    create_markdown_artifact(key=key, markdown=markdown, description=f"Capacity plan of {sp.name}")
    log.info("Capacity plan of %s: %s", sp.name, html or md)
    return {"plan": result, "html": str(html) if html else None, "markdown": str(md) if md else None}


if __name__ == "__main__":
    import json
    import sys

    print(json.dumps(capacity(sys.argv[1] if len(sys.argv) > 1 else "specs/chat-capacity.yaml"), indent=2,
                     default=str))
