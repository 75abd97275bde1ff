"""Billed vs estimated in the weekly and sweep ROI reports (issue 19): a real warehouse, real FOCUS
files (tests/data/focus), every figure checked against hand arithmetic or the file's own column sums."""

from __future__ import annotations

import csv
from datetime import date
from decimal import Decimal
from pathlib import Path

import polars as pl
import pytest
from helpers.billing_fixtures import DATA, billed_runs, column_sum, ingest
from helpers.record_fixtures import example_record, ingest_known
from helpers.warehouse_template import fresh_warehouse

from gpuledger.report import load_week, weekly_markdown, write_weekly_report
from gpuledger.report.billed import load_week_billed, week_billed_summary
from gpuledger.report.sweep import load_sweep, sweep_markdown, write_sweep_report
from gpuledger.warehouse import Warehouse

BILL = DATA / "gpu_cloud_2026-02.csv"
EUR_BILL = DATA / "gpu_cloud_eur_2026-02.csv"
SWEEP = "lora-grid-12345678"
# run-a: 8 × A100 at $32.77/h for 3000 s; run-b: 1 × A10G spot at $0.45/h for 3600 s (tests/integration/test_billing.py)
ESTIMATED_W06 = 32.77 * 3000 / 3600 + 0.45


@pytest.fixture
def billed_wh(tmp_path):
    with Warehouse.open(fresh_warehouse(tmp_path / "w.duckdb")) as wh:
        billed_runs(wh)
        ingest(wh, BILL)
        ingest(wh, EUR_BILL)
        yield wh


def _section(md: str, heading: str = "## Billed vs estimated") -> str:
    start = md.index(heading)
    end = md.find("\n## ", start + len(heading))
    return md[start:end if end > 0 else None]


def test_week_billed_vs_estimated_matches_hand_arithmetic(billed_wh):
    s = week_billed_summary(load_week_billed(billed_wh, "2026-W06"))
    # charged 2 Feb to 4 Feb: the labelled run (0.00 billed / 1.00 effective), the resource-named run
    # (0.40 / 0.40) and the forgotten instance in us-west-2 that matches no run (24.24 / 24.24)
    assert s["billed_usd"] == pytest.approx(0.00 + 0.40 + 24.24)
    assert s["effective_usd"] == pytest.approx(1.00 + 0.40 + 24.24)
    assert s["billed_line_items"] == 3
    assert s["attributed_effective_usd"] == pytest.approx(1.40)
    assert (s["unattributed_effective_usd"], s["unattributed_line_items"]) == (pytest.approx(24.24), 1)
    assert s["estimated_usd"] == pytest.approx(ESTIMATED_W06)
    assert (s["runs"], s["runs_billed"]) == (2, 2)
    assert s["effective_usd_of_billed_runs"] == pytest.approx(1.40)
    assert s["other_currencies"] == "EUR"  # the EUR line item of 5 Feb: listed, not in the USD sums


def test_the_weekly_page_labels_each_figure_with_its_source_and_never_adds_eur(billed_wh):
    sec = _section(weekly_markdown(load_week(billed_wh, "2026-W06")))
    assert "| billed (FOCUS export) | $24.64 | Σ BilledCost of 3 USD line items" in sec
    assert "| effective (FOCUS export) | $25.64 |" in sec
    assert "| of which unattributed (matching no run) | $24.24 |" in sec
    assert f"| estimated (catalog) | ${ESTIMATED_W06:,.2f} | 2 runs started in 2026-W06" in sec
    assert "| of which runs the bill covers (2 of 2) |" in sec
    others = _section(sec, "### Other currencies (never added to USD)")
    assert "| EUR | 1 | 2.50 | 2.50 | 2.50 |" in others
    assert "$27.14" not in sec  # 24.64 + 2.50: EUR is never summed with USD
    unattributed = _section(sec, "### Unattributed line items")
    assert "instance/i-0ccc" in unattributed and "instance/i-0aaa" not in unattributed


def test_every_usd_line_item_counts_in_exactly_one_week(billed_wh):
    """The week of a line item is that of its charge period start: summed over the weeks, the bill's own total."""
    rows = list(csv.DictReader(BILL.open(newline="", encoding="utf-8")))
    weeks = sorted({billed_wh.query("select strftime($t::TIMESTAMP, '%G-W%V') as w",
                                    {"t": r["ChargePeriodStart"].rstrip("Z")})["w"][0] for r in rows})
    assert weeks == ["2026-W03", "2026-W05", "2026-W06"]  # the correction of 15 Jan, 1 Feb, 2-4 Feb
    sums = [week_billed_summary(load_week_billed(billed_wh, w)) for w in weeks]
    assert round(sum(s["billed_usd"] for s in sums), 2) == float(column_sum(BILL, "BilledCost"))
    assert round(sum(s["effective_usd"] for s in sums), 2) == float(column_sum(BILL, "EffectiveCost"))
    assert sums[0]["billed_usd"] == pytest.approx(-5.00)  # ChargeClass Correction, charged in January
    w05 = _section(weekly_markdown(load_week(billed_wh, "2026-W05")))
    assert "| billed (FOCUS export) | $8,772.34 |" in w05  # the savings plan purchase and the month's tax
    assert "| effective (FOCUS export) | $12.34 |" in w05  # the purchase amortises to 0 effective here
    assert "2 line items have a charge period that runs past 2026-W05" in w05


@pytest.mark.slow  # over ~1 s (a whole report, replay, plan or warehouse): make test runs it, make test-fast does not
def test_without_a_bill_one_note_says_how_to_ingest_one(tmp_path):
    with Warehouse.open(fresh_warehouse(tmp_path / "w.duckdb")) as wh:
        billed_runs(wh)
        md = weekly_markdown(load_week(wh, "2026-W06"))
        sweep_md = sweep_markdown(load_sweep(wh, "lora-grid"))
    sec = _section(md)
    assert md.count("No bill ingested") == 1 and "'gpuledger billing ingest PATH...'" in sec
    assert "FOCUS export" not in sec.replace("FOCUS billing export", "")  # no billed figure at all
    assert "The bill covers 0 of this sweep's 2 runs (no bill is ingested)" in sweep_md
    assert "| billed (FOCUS export) |" not in sweep_md


def test_a_week_the_ingested_bill_does_not_reach_says_so(billed_wh):
    sec = _section(weekly_markdown(load_week(billed_wh, "2026-W10")))
    assert "The 2 ingested exports (billing period starting 2026-02-01) have no line item charged in 2026-W10" in sec
    assert "| estimated (catalog) | $0.00 | 0 runs started in 2026-W10" in sec


def test_a_restated_delivery_is_not_counted_as_another_export(billed_wh, tmp_path):
    # after a re-delivery of the same export replaced every line item of the first, the page said
    # "The 3 ingested exports" (it counted the replaced delivery's file too)
    again = tmp_path / "again"
    again.mkdir()
    (again / BILL.name).write_text(BILL.read_text().replace("24.24,24.24,24.24", "20.00,20.00,20.00"))
    assert ingest(billed_wh, again / BILL.name).replaced_line_items == 6
    sec = _section(weekly_markdown(load_week(billed_wh, "2026-W10")))
    assert "The 2 ingested exports (billing period starting 2026-02-01)" in sec
    assert load_week_billed(billed_wh, "2026-W06").loaded.exports == 2


def test_the_sweep_report_shows_billed_and_effective_beside_the_estimate(billed_wh):
    md = sweep_markdown(load_sweep(billed_wh, "lora-grid"))
    assert f"| total spend | ${ESTIMATED_W06:,.2f} |" in md
    assert ("| billed (FOCUS export) | $0.40 | Σ BilledCost of 2 line items matched to 2 of 2 runs "
            f"(by resource, tags); estimated for them: ${ESTIMATED_W06:,.2f} |") in md
    assert "| effective (FOCUS export) | $1.40 |" in md
    assert "The bill covers" not in md  # it covers every run: nothing more to say


@pytest.mark.slow  # over ~0.5 s alone (a report, warehouse, plan or subprocess): make test runs it, make test-fast does not
def test_a_sweep_the_bill_covers_in_part_says_how_many_runs(billed_wh):
    ingest_known(billed_wh, [example_record("run-c", "bbbbbbbbbbbb", sweep_id=SWEEP, attempt=2,
                                            started_at="2026-02-20T12:00:00", wall_s=1800, launcher="skypilot",
                                            cloud="aws", accelerator="A10G", gpus=1, usd_per_hour=0.45,
                                            region="us-east-1")])
    b = load_sweep(billed_wh, "lora-grid").billed
    assert (b["runs"], b["runs_billed"]) == (3, 2)
    assert b["estimated_usd"] == pytest.approx(ESTIMATED_W06 + 0.45 / 2)
    assert b["estimated_usd_of_billed_runs"] == pytest.approx(ESTIMATED_W06)
    md = sweep_markdown(load_sweep(billed_wh, "lora-grid"))
    assert "matched to 2 of 3 runs" in md
    assert (f"The bill covers 2 of this sweep's 3 runs: billed (FOCUS export) and effective (FOCUS export) are "
            f"for those runs only (estimated for them: ${ESTIMATED_W06:,.2f}; for all runs: "
            f"${ESTIMATED_W06 + 0.225:,.2f}).") in md


@pytest.mark.slow  # over ~1 s (a whole report, replay, plan or warehouse): make test runs it, make test-fast does not
def test_the_csv_files_carry_the_billed_tables(billed_wh, tmp_path):
    weekly = write_weekly_report(billed_wh, "2026-W06", tmp_path / "weekly")
    sweep = write_sweep_report(billed_wh, "lora-grid", out_dir=tmp_path / "sweep")
    billed = pl.read_csv(weekly.csv_dir / "billed.csv")
    assert sorted(billed["billing_currency"].to_list()) == ["EUR", "USD"]
    usd_row = billed.filter(pl.col("billing_currency") == "USD").row(0, named=True)
    assert Decimal(str(usd_row["billed_cost"])).quantize(Decimal("0.01")) == Decimal("24.64")
    assert pl.read_csv(weekly.csv_dir / "unattributed.csv").height == 2  # the idle instance and the EUR line
    s = pl.read_csv(sweep.csv_dir / "billed.csv").row(0, named=True)
    assert (s["runs"], s["runs_billed"]) == (2, 2) and s["effective_usd"] == pytest.approx(1.40)
    assert Path(weekly.html).read_text().count("billed (FOCUS export)") >= 1


def test_a_bill_without_effective_cost_counts_its_billed_cost_as_effective(tmp_path):
    # a FOCUS file without the EffectiveCost column (mandatory since FOCUS 1.0) showed "of which unattributed
    # (matching no run) $0.00 ... (billed $7.00)" and v_billed_spend.unattributed_usd 0: Σ of nulls coalesced to 0
    bill = tmp_path / "no-effective.csv"
    bill.write_text("BillingPeriodStart,BillingPeriodEnd,ChargePeriodStart,ChargePeriodEnd,BilledCost,BillingCurrency,"
                    "ChargeCategory\n2026-12-01,2027-01-01,2026-12-08T00:00:00Z,2026-12-08T01:00:00Z,7.00,USD,Usage\n")
    with Warehouse.open(fresh_warehouse(tmp_path / "w.duckdb")) as wh:
        result = ingest(wh, bill)
        spend = wh.query("select effective_cost_usd, unattributed_usd from v_billed_spend").row(0)
        assert spend == (pytest.approx(7.00), pytest.approx(7.00))
        assert wh.query("select effective_cost_assumed_rows from v_billed_spend").item() == 1
        assert "1 rows have no EffectiveCost and count at their BilledCost" in result.summary()
        s = week_billed_summary(load_week_billed(wh, "2026-W50"))
        md = weekly_markdown(load_week(wh, "2026-W50"))
    assert (s["effective_usd"], s["unattributed_effective_usd"]) == (pytest.approx(7.00), pytest.approx(7.00))
    sec = _section(md)
    assert "| of which unattributed (matching no run) | $7.00 |" in sec
    assert "| effective (FOCUS export) | $7.00 |" in sec
    assert "1 line items have no EffectiveCost" in sec
    assert "7.00 | 7.00 |" in _section(sec, "### Unattributed line items")  # billed and effective, row by row


def test_a_week_with_only_bill_data_is_a_week_with_data_and_its_page_shows_the_bill(tmp_path):
    # the bill alone (no run): 'weeks with data' came from runs only, so 2026-W06 was not listed nor chosen by
    # default, and its page led with "No spend recorded ... no run started that week" above $24.64 billed
    with Warehouse.open(fresh_warehouse(tmp_path / "w.duckdb")) as wh:
        ingest(wh, BILL)
        weeks = wh.query_named("report_weeks_with_data")
        files = write_weekly_report(wh, out_dir=tmp_path / "out", now=date(2026, 2, 11))
    assert weeks["week"].to_list() == ["2026-W06", "2026-W05", "2026-W03"]  # the weeks the bill charges
    w06 = weeks.row(0, named=True)
    assert (w06["runs"], w06["cost_usd"], w06["billed_line_items"]) == (0, 0, 3)
    assert w06["billed_usd"] == pytest.approx(24.64)
    assert files.html.name == "2026-W06.html"  # the last complete week with data, on Wednesday of W07
    assert files.notes[-1] == "Weeks with data: 2026-W06, 2026-W05, 2026-W03."
    md = files.markdown.read_text()
    assert "No spend recorded" not in md and "no spend either week" not in md
    assert ("No run started in 2026-W06 (2026-02-02 – 2026-02-08), so nothing is estimated for it, but the bill "
            "has 3 line items charged that week (billed $24.64): see Billed vs estimated.") in md
    assert "| billed (FOCUS export) | $24.64 |" in _section(md)
    assert "| 2026-W06 (this report) | 0 | $0.00 | 3 | $24.64 |" in md


def test_credits_are_their_own_line_never_netted_into_unattributed(tmp_path):
    # a $30 credit matching no run was netted into unattributed: $24.24 of a forgotten instance read
    # "of which unattributed (matching no run) -$5.76" and v_billed_spend.unattributed_usd -5.76
    tags = '"{""gpuledger-sweep"": ""lora-grid-12345678"", ""gpuledger-trial"": ""aaaaaaaaaaaa""}"'
    period = "2026-02-01T00:00:00Z,2026-03-01T00:00:00Z"
    bill = tmp_path / "credits.csv"
    bill.write_text(
        "BillingPeriodStart,BillingPeriodEnd,ChargePeriodStart,ChargePeriodEnd,ChargeCategory,BilledCost,"
        "EffectiveCost,BillingCurrency,ProviderName,ServiceName,ResourceId,Tags\n"
        f"{period},2026-02-03T00:00:00Z,2026-02-04T00:00:00Z,Usage,24.24,24.24,USD,AWS,EC2,i-idle,{{}}\n"
        f"{period},2026-02-03T00:00:00Z,2026-02-04T00:00:00Z,Credit,-30.00,-30.00,USD,AWS,Credits,,{{}}\n"
        f"{period},2026-02-02T10:00:00Z,2026-02-02T11:00:00Z,Usage,10.00,10.00,USD,AWS,EC2,i-a,{tags}\n"
        f"{period},2026-02-02T10:00:00Z,2026-02-02T11:00:00Z,Credit,-2.00,-2.00,USD,AWS,EC2,i-a,{tags}\n")
    with Warehouse.open(fresh_warehouse(tmp_path / "w.duckdb")) as wh:
        billed_runs(wh)
        ingest(wh, bill)
        spend = wh.query("select effective_cost_usd, attributed_usd, unattributed_usd, unattributed_credits_usd, "
                         "credits_usd, credit_line_items from v_billed_spend").row(0)
        s = week_billed_summary(load_week_billed(wh, "2026-W06"))
        md = weekly_markdown(load_week(wh, "2026-W06"))
        sweep_md = sweep_markdown(load_sweep(wh, "lora-grid"))
    assert spend == (pytest.approx(2.24), pytest.approx(8.00), pytest.approx(24.24), pytest.approx(-30.00),
                     pytest.approx(-32.00), 2)
    assert (s["unattributed_effective_usd"], s["unattributed_line_items"]) == (pytest.approx(24.24), 1)
    assert (s["unattributed_credit_effective_usd"], s["unattributed_credit_line_items"]) == (pytest.approx(-30.0), 1)
    assert s["attributed_effective_usd"] + s["unattributed_effective_usd"] + s["unattributed_credit_effective_usd"] \
        == pytest.approx(s["effective_usd"])
    sec = _section(md)
    assert "| of which unattributed (matching no run) | $24.24 | EffectiveCost of 1 line items (billed $24.24)" in sec
    assert ("| of which credits matching no run | -$30.00 | EffectiveCost of 1 line items of ChargeCategory Credit "
            "(billed -$30.00)") in sec
    assert ("| of which matching a run | $8.00 | EffectiveCost of 2 line items labelled with, or named after, a run "
            "(v_billing_attribution); 1 of them credits (-$2.00)") in sec
    assert "-$5.76" not in sec
    assert "matched to 1 of 2 runs (by tags); 1 of them credits (-$2.00); estimated for them" in sweep_md


def test_the_sweep_report_says_how_many_of_its_line_items_lack_effective_cost(tmp_path):
    # the sweep ROI card showed "effective (FOCUS export) $10.00" for a line item billed $10.00 without
    # EffectiveCost and said nothing, where the weekly section said "1 line items have no EffectiveCost"
    bill = tmp_path / "no-effective.csv"
    bill.write_text("BillingPeriodStart,BillingPeriodEnd,ChargePeriodStart,ChargePeriodEnd,ChargeCategory,BilledCost,"
                    "BillingCurrency,ProviderName,ResourceId,Tags\n2026-02-01T00:00:00Z,2026-03-01T00:00:00Z,"
                    "2026-02-02T10:00:00Z,2026-02-02T11:00:00Z,Usage,10.00,USD,AWS,i-a,"
                    '"{""gpuledger-sweep"": ""lora-grid-12345678"", ""gpuledger-trial"": ""aaaaaaaaaaaa""}"\n')
    with Warehouse.open(fresh_warehouse(tmp_path / "w.duckdb")) as wh:
        billed_runs(wh)
        ingest(wh, bill)
        b = load_sweep(wh, "lora-grid").billed
        md = sweep_markdown(load_sweep(wh, "lora-grid"))
    assert (b["effective_usd"], b["effective_cost_assumed_line_items"]) == (pytest.approx(10.00), 1)
    assert ("| effective (FOCUS export) | $10.00 | Σ EffectiveCost (commitments amortised, discounts applied) of "
            "the same 1 of 2 runs; 1 line items without EffectiveCost at their BilledCost |") in md
    assert "1 of its USD line items have no EffectiveCost (a column FOCUS 1.0+ makes mandatory)" in md
