"""Offers catalog: bundled data, suspicious spot flags, user price file, preemption rates."""

from __future__ import annotations

import polars as pl
import pytest

from gpuledger.catalog.offers import (
    MEASURED_MIN_SPOT_HOURS,
    OFFER_COLUMNS,
    preemption_rates,
    spot_suspicious_expr,
)
from gpuledger.catalog.pricing import load_offers
from gpuledger.errors import UserError


def test_bundled_offers_have_columns_source_and_date():
    df = load_offers()
    assert df.columns == [*OFFER_COLUMNS, "basis", "price_problem", "spot_problem", "spot_suspicious", "price_snapshot"]
    assert df.height > 500
    assert df["source"].str.contains(r"list price( \(GPU \+ host VM\))? from the SkyPilot catalog snapshot bundled with gpuledger").all()
    assert set(df["basis"]) == {"catalog"} and set(df["as_of"]) == {"2026-05-20"}
    assert df["as_of"].str.contains(r"^\d{4}-\d{2}-\d{2}$").all()
    assert df["price_snapshot"].n_unique() == 1
    assert (df["usd_per_hour_on_demand"] > 0).all()
    assert set(df["accelerator_count"].unique().to_list()) <= {1, 2, 4, 8}


def test_bundled_prices_agree_with_reference_facts():
    # rows of shared/reference/gpu_prices.csv (on-demand, same region and instance type)
    df = load_offers()
    for cloud, region, inst, od in [
        ("aws", "us-east-1", "p5.48xlarge", 55.04),
        ("aws", "us-east-2", "g6.xlarge", 0.8048),
        ("gcp", "europe-west4", "a2-highgpu-1g", 2.4277),
        ("gcp", "us-central1", "a3-highgpu-8g", 43.0662),
        ("azure", "eastus", "Standard_NC24ads_A100_v4", 3.673),
        ("lambda", "asia-northeast-1", "gpu_8x_h100_sxm5", 31.92),
        ("nebius", "eu-north1", "gpu-h200-sxm_8gpu-128vcpu-1600gb", 28.0),
    ]:
        row = df.filter((pl.col("cloud") == cloud) & (pl.col("region") == region) & (pl.col("instance_type") == inst))
        assert row.height == 1, (cloud, region, inst)
        assert row["usd_per_hour_on_demand"][0] == pytest.approx(od, abs=1e-3)


def test_filters_normalise_accelerators():
    df = load_offers(clouds=["AWS"], accelerators=["h100"], regions=["us-east-1"])
    assert set(df["instance_type"]) == {"p5.4xlarge", "p5.48xlarge"}
    assert set(df["accelerator"]) == {"H100"}


def test_suspicious_spot_flagged():
    df = load_offers(clouds=["aws"], accelerators=["H100"])
    flagged = df.filter(pl.col("spot_suspicious"))
    # ap-southeast-3 lists p5 spot at exactly 10% of on-demand (aws-minima-notes.txt)
    assert "ap-southeast-3" in flagged["region"].to_list()
    assert not df.filter(pl.col("region") == "us-east-1", pl.col("instance_type") == "p5.48xlarge")["spot_suspicious"][0]
    frame = pl.DataFrame({
        "usd_per_hour_on_demand": [10.0, 10.0, 10.0, 10.0, 10.0],
        "usd_per_hour_spot": [1.0, 10.0, 0.5, 3.0, None],
    })
    assert frame.select(spot_suspicious_expr())["usd_per_hour_spot"].to_list() == [True, True, True, False, False]


def _write(tmp_path, text, name="prices.csv"):
    p = tmp_path / name
    p.write_text(text)
    return p


HEADER = ",".join(OFFER_COLUMNS)


def test_user_price_file_overrides_and_adds(tmp_path, monkeypatch):
    p = _write(tmp_path, HEADER + "\n"
               "aws,us-east-1,p5.48xlarge,H100,8,40.0,12.0,192,2048,negotiated,2026-06-01\n"
               "local,lab,rack-1,A100-80GB,4,0.5,,64,512,,\n")
    monkeypatch.setenv("GPULEDGER_PRICES", str(p))
    df = load_offers()
    row = df.filter(pl.col("cloud") == "aws", pl.col("region") == "us-east-1", pl.col("instance_type") == "p5.48xlarge")
    assert row.height == 1
    assert row["usd_per_hour_on_demand"][0] == 40.0 and row["source"][0] == "negotiated"
    lab = df.filter(pl.col("cloud") == "local")
    assert lab.height == 1 and lab["accelerator"][0] == "A100-80GB" and lab["usd_per_hour_spot"][0] is None
    assert lab["source"][0] == "user price file prices.csv"
    monkeypatch.delenv("GPULEDGER_PRICES")
    assert load_offers()["price_snapshot"][0] != df["price_snapshot"][0]


def test_malformed_user_price_file_names_line_and_column(tmp_path, monkeypatch):
    p = _write(tmp_path, HEADER + "\n"
               "aws,us-east-1,x1,H100,8,abc,,,,,\n"
               "aws,us-east-1,x2,H1000,0,1.0,,,,,\n")
    monkeypatch.setenv("GPULEDGER_PRICES", str(p))
    with pytest.raises(UserError) as err:
        load_offers()
    msg = str(err.value)
    assert f"{p}:2: column usd_per_hour_on_demand: expected a number" in msg
    assert f"{p}:3: column accelerator: unknown accelerator 'H1000'" in msg
    assert f"{p}:3: column accelerator_count: must be a whole number" in msg


def test_user_price_file_bad_header_and_missing(tmp_path, monkeypatch):
    p = _write(tmp_path, "cloud,region,price\naws,x,1\n")
    monkeypatch.setenv("GPULEDGER_PRICES", str(p))
    with pytest.raises(UserError, match=r"prices.csv:1: missing column\(s\) instance_type"):
        load_offers()
    monkeypatch.setenv("GPULEDGER_PRICES", str(tmp_path / "nope.csv"))
    with pytest.raises(UserError, match="price file not found"):
        load_offers()


def test_preemption_rates_precedence():
    pairs = pl.DataFrame({"cloud": ["aws", "aws", "gcp", "oci"], "accelerator": ["L4", "H100", "L4", "A100"]})
    r = preemption_rates(pairs)
    rates = dict(zip(zip(r["cloud"], r["accelerator"], strict=True), r["preemptions_per_hour"], strict=True))
    assert rates[("aws", "H100")] > rates[("aws", "L4")] > 0
    assert rates[("oci", "A100")] == 0.05  # the `*,*` row
    assert r["preemption_source"].str.starts_with("default: ").all()
    # measured replaces the default only with enough spot hours
    m = preemption_rates(pairs, measured={("gcp", "L4"): (MEASURED_MIN_SPOT_HOURS, 5.0), ("aws", "L4"): (10.0, 9.0)})
    mr = dict(zip(zip(m["cloud"], m["accelerator"], strict=True), m["preemptions_per_hour"], strict=True))
    assert mr[("gcp", "L4")] == pytest.approx(5.0 / MEASURED_MIN_SPOT_HOURS)
    assert mr[("aws", "L4")] == rates[("aws", "L4")]
    o = preemption_rates(pairs, override_per_hour=0.5, measured={("gcp", "L4"): (100.0, 1.0)})
    assert (o["preemptions_per_hour"] == 0.5).all()
    assert (o["preemption_source"] == "spec resources.preemption_per_hour").all()
