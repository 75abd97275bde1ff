"""`gpuledger import FILE... [--format wandb|mlflow|table|record] [--project NAME] [--json]`: a team's past
runs (a W&B export, an MLflow export, a Parquet or CSV table, gpuledger's own record files) into the
ledger, so they feed the calibration and the reports (`gpuledger.inputs.history`, docs/import.md).

Prints one line per file read, one per row not imported (what it lacks), and the counts. Exit 0 when
every row was imported (or was already); 1 when some row was not.
"""

from __future__ import annotations

import json


def run(args) -> int:
    from gpuledger.api import Ledger

    report = Ledger().import_history(args.files, fmt=args.format, project=args.project)
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        for source, fmt in zip(report.sources, report.formats, strict=True):
            print(f"{source}: read as {fmt}")
        for line in report.skipped:
            print(f"  {line}")
        print(f"{report.stored} run(s) imported ({report.new} new, {report.stored - report.new} already stored) "
              f"of {report.rows} row(s); {len(report.skipped)} not imported; {report.calibrated} with the estimator's "
              f"numbers for calibration; sweeps: {', '.join(report.sweeps) or '-'}")
    return 1 if report.skipped else 0
