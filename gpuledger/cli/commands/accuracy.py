"""`gpuledger accuracy [--json] [--html DIR] [--warehouse FILE]`: the estimator's error per method,
framework and GPU for memory and time, from the public measurements shipped as package data and
from the user's own runs (gpuledger/estimate/accuracy.py; the page: gpuledger/report/accuracy.py)."""

from __future__ import annotations

import argparse
import json


def run(args: argparse.Namespace) -> int:
    from gpuledger.estimate.accuracy import accuracy
    from gpuledger.estimate.calibration import load_runs
    from gpuledger.report.accuracy import accuracy_text, write_accuracy_report

    acc = accuracy(load_runs(args.warehouse))
    files = write_accuracy_report(acc, args.html) if args.html else None
    if args.json:
        out = {**acc, **({"html": str(files.html)} if files else {})}
        print(json.dumps(out, indent=2))
        return 0
    print(accuracy_text(acc))
    if files:
        print(f"wrote {files.html} (and {files.markdown.name}, CSV in {files.csv_dir})")
    return 0
