"""The SkyPilot catalog adapter agrees with the bundled offers on the rows they share; no cache ->
a clear error and no download attempt."""

from __future__ import annotations

import polars as pl
import pytest
from helpers.sky_offline import no_network, sky_home, sky_offline  # noqa: F401 - fixtures used by name

from gpuledger.catalog.pricing import load_offers
from gpuledger.catalog.skypilot import SOURCE, cached_clouds, skypilot_offers
from gpuledger.errors import UserError

KEY = ["cloud", "region", "instance_type"]


@pytest.mark.usefixtures("sky_offline")
@pytest.mark.parametrize("clouds, accelerators", [
    (["aws"], None),
    (["nebius", "lambda"], None),
    (["gcp"], ["H100", "L4"]),
])
def test_adapter_agrees_with_bundled_offers(clouds, accelerators):
    ours = skypilot_offers(clouds=clouds, accelerators=accelerators)
    assert ours.height > 0 and set(ours["source"]) == {SOURCE}
    bundled = load_offers(clouds=clouds, accelerators=accelerators)
    both = ours.join(bundled, on=KEY, suffix="_b")
    assert both.height >= 5, both
    same_acc = both.filter((pl.col("accelerator") != pl.col("accelerator_b"))
                           | (pl.col("accelerator_count") != pl.col("accelerator_count_b")))
    assert same_acc.is_empty(), same_acc
    for row in both.iter_rows(named=True):
        assert row["usd_per_hour_on_demand"] == pytest.approx(row["usd_per_hour_on_demand_b"], rel=1e-4, abs=1e-4), row
        if "gcp" in clouds:
            continue  # GCP spot is GPU + host of SkyPilot's cheapest on-demand zone; bundled: cheapest spot zone
        if row["spot_suspicious"] or row["spot_suspicious_b"] or row["usd_per_hour_spot_b"] is None:
            continue
        assert row["usd_per_hour_spot"] == pytest.approx(row["usd_per_hour_spot_b"], rel=1e-4, abs=1e-4), row


@pytest.mark.usefixtures("sky_home")
def test_no_cache_is_a_clear_error_without_download():
    assert cached_clouds() == {}
    with pytest.raises(UserError, match="no SkyPilot catalog cache"):
        skypilot_offers(clouds=["aws"])
