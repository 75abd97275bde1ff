"""Flow `cost-report`: the weekly cost report (deployment `cost-report/weekly`, Mondays 08:00 UTC).

    cost_report(week=None)   # week "YYYY-Www"; default: the last complete ISO week (UTC), even when
                             # empty (the Monday deployment reports last week; `gpuledger report weekly`
                             # without --week picks the last week with data instead)

Writes the report with `gpuledger.report.write_weekly_report` (HTML, markdown, CSV under
`reports/`) and publishes its markdown as the artifact `cost-report-weekly` with a link to the HTML.
Reads the warehouse only (read-only connection).
"""

from __future__ import annotations

from typing import Any

import gpuledger.flows  # noqa: F401  (telemetry off before Prefect is imported)

# isort: split
from prefect import flow, get_run_logger

from gpuledger.flows.refusals import flow_refuses
from gpuledger.report.weeks import check_week, last_complete_week


@flow(name="cost-report", persist_result=False, log_prints=True)
@flow_refuses  # a user's error: one log line and a Failed state (gpuledger/flows/refusals.py)
def cost_report(week: str | None = None) -> dict[str, Any]:
    """Writes the weekly cost report of `week` (default: last complete ISO week); returns its files."""
    from gpuledger.flows.artifacts import publish_report
    from gpuledger.report import write_weekly_report
    from gpuledger.warehouse import Warehouse

    log = get_run_logger()
    week = check_week(week) if week else last_complete_week()
    with Warehouse.open(read_only=True) as wh:
        files = write_weekly_report(wh, week=week)
    publish_report(files, "cost-report-weekly", f"Weekly cost report {week}")
    log.info("Weekly cost report %s: %s", week, files.html)
    return {"week": week, "html": str(files.html), "markdown": str(files.markdown),
            "csv": [str(p) for p in files.csv]}

if __name__ == "__main__":
    import sys

    print(cost_report(sys.argv[1] if len(sys.argv) > 1 else None))
