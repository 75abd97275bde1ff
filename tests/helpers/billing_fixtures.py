"""The FOCUS bill fixtures of the billing tests: the test data folder, a file's own column totals (read with
the csv module, not gpuledger's reader), the warehouse's totals, ingest as the CLI does, and the two cloud
runs tests/data/focus/gpu_cloud_2026-02.csv bills."""

from __future__ import annotations

import csv
from decimal import Decimal
from pathlib import Path

from gpuledger.billing import read_focus
from gpuledger.billing.schema import validate_line_items
from gpuledger.warehouse import Warehouse
from helpers.record_fixtures import example_record, ingest_known

DATA = Path(__file__).resolve().parents[1] / "data" / "focus"
NULLS = {"", "null", "(null)", "NULL"}


def column_sum(path: Path, column: str) -> Decimal:
    """The file's own total of a cost column, read with the csv module (not gpuledger's reader)."""
    with path.open(newline="", encoding="utf-8-sig") as fh:
        rows = [r for r in csv.DictReader(fh) if any(v.strip() for v in r.values() if v)]
    return sum((Decimal(r[column]) for r in rows if r.get(column) not in NULLS and r.get(column) is not None),
               Decimal(0))


def totals(wh: Warehouse) -> tuple[float, float, int]:
    row = wh.query("select coalesce(sum(billed_cost_usd), 0), coalesce(sum(effective_cost_usd), 0), "
                   "coalesce(sum(line_items), 0)::bigint from v_billed_spend").row(0)
    return round(row[0], 2), round(row[1], 2), int(row[2])


def ingest(wh: Warehouse, path: Path, export_name: str | None = None):
    ff = read_focus(path)
    validate_line_items(ff.frame, str(path))
    return wh.ingest_billing_file(ff, export_name=export_name)


def billed_runs(wh: Warehouse) -> None:
    """Sweep lora-grid-12345678: run-a (8x A100, labelled in the bill) and run-b (A10G spot, by resource)."""
    sweep = "lora-grid-12345678"
    wh.register_sweep(sweep_id=sweep, name="lora-grid", project="p", owner="o", started_at="2026-02-02T09:00:00")
    wh.upsert_trials(sweep, [{"trial_id": "aaaaaaaaaaaa", "index": 0, "params": {}},
                             {"trial_id": "bbbbbbbbbbbb", "index": 1, "params": {}}])
    recs = [example_record("run-a", "aaaaaaaaaaaa", sweep_id=sweep, started_at="2026-02-02T10:05:00",
                           wall_s=3000, launcher="skypilot", cloud="aws", accelerator="A100", gpus=8,
                           usd_per_hour=32.77, region="us-east-1"),
            example_record("run-b", "bbbbbbbbbbbb", sweep_id=sweep, started_at="2026-02-02T12:00:00",
                           wall_s=3600, launcher="skypilot", cloud="aws", accelerator="A10G", gpus=1,
                           usd_per_hour=0.45, spot=True, region="us-east-1")]
    ingest_known(wh, recs)
