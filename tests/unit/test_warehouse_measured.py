"""Measured spot preemptions flow from the warehouse into the planner's rates."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from helpers.record_fixtures import example_record, ingest_known

from gpuledger.warehouse import Warehouse, measured_preemption_if_any


def _spot_run(i: int, hours: float, preemptions: int) -> dict:
    rec = example_record(
        f"r{i}", f"t{i}", sweep_id="s-1", started_at=datetime(2026, 3, 2, 10, tzinfo=UTC),
        wall_s=hours * 3600, status="preempted" if preemptions else "succeeded", usd_per_hour=2.0,
        spot=True, on_demand_usd_per_hour=6.0, gpus=1, accelerator="H100",
    )
    rec.update(launcher="skypilot", cloud="aws", region="us-east-1", preemptions=preemptions)
    return rec


@pytest.mark.slow  # over ~0.5 s alone (a report, warehouse, plan or subprocess): make test runs it, make test-fast does not
def test_measured_preemption_sums_spot_hours_per_cloud_and_accelerator(tmp_path):
    path = tmp_path / "w.duckdb"
    assert measured_preemption_if_any(path) == {} and not path.exists()  # never creates one
    with Warehouse.open(path) as wh:
        ingest_known(wh, [_spot_run(1, 30.0, 2), _spot_run(2, 30.0, 1), _spot_run(3, 15.0, 0)])
    assert measured_preemption_if_any(path) == {("aws", "H100"): (75.0, 3)}


def test_plan_uses_measured_rate_past_the_threshold():
    import polars as pl

    from gpuledger.catalog.offers import MEASURED_MIN_SPOT_HOURS, preemption_rates

    pairs = pl.DataFrame({"cloud": ["aws"], "accelerator": ["H100"]})
    hours = MEASURED_MIN_SPOT_HOURS + 50.0

    def rate(**kw) -> tuple[float, str]:
        row = preemption_rates(pairs, **kw).row(0, named=True)
        return row["preemptions_per_hour"], row["preemption_source"]

    default_rate, default_source = rate()
    assert default_source.startswith("default")
    assert rate(measured={("aws", "H100"): (hours, 30)}) == (30 / hours, f"measured: 30 preemptions in {hours:.0f} spot hours")
    # too few spot hours to trust: the documented default stays
    assert rate(measured={("aws", "H100"): (MEASURED_MIN_SPOT_HOURS / 10, 30)}) == (default_rate, default_source)
