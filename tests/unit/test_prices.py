"""Prices that track the bill (issue 29), as a user with SkyPilot set up meets them: a SkyPilot catalog
cache newer than the bundled snapshot (H100 at twice its price), a 20% AWS discount in gpuledger.toml,
and a FOCUS bill whose attributed lines show a rate above the catalog. Nothing is downloaded (every
non-loopback connection raises). The cache is a real SkyPilot v8 `aws/vms.csv` (shared/skypilot-catalog),
rewritten with H100 prices doubled, in a temporary HOME; the project is a temporary folder."""

from __future__ import annotations

import csv
import json
import os
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest
from helpers.record_fixtures import example_record, ingest_known
from helpers.sky_offline import SHARED_CATALOG, no_network  # noqa: F401 - fixture by name

from gpuledger.catalog.offers import bundled_offers
from gpuledger.cli import main


def _shared_catalog() -> Path:
    """`../shared/skypilot-catalog/v8` beside the checkout, or beside the main checkout of a git worktree."""
    if SHARED_CATALOG.is_dir():
        return SHARED_CATALOG
    git = Path(__file__).resolve().parents[2] / ".git"
    if git.is_file():  # a worktree: "gitdir: <main>/.git/worktrees/<name>"
        main_git = Path(git.read_text().split(":", 1)[1].strip()).parents[1]
        return main_git.parent.parent / "shared" / "skypilot-catalog" / "v8"
    return SHARED_CATALOG


CATALOG = _shared_catalog()
pytestmark = pytest.mark.skipif(not (CATALOG / "aws" / "vms.csv").is_file(), reason=f"{CATALOG} is absent")

TODAY = datetime.now(UTC).date().isoformat()
SPEC = """\
kind: sweep
name: price-check
project: p
owner: o
model: Qwen/Qwen2.5-0.5B
method: lora
precision: bf16
train: {seq_len: 512, tokens_per_trial: 20_000_000}
search: {strategy: grid, params: {lora_r: [8]}, objective: {metric: eval_loss, goal: minimize}}
resources: {accelerators: [H100], gpus_per_trial: 1, clouds: [aws], spot: never, max_parallel: 1}
budget: {max_usd: 1000}
launcher: skypilot
task: {run: python train.py}
"""


def _doubled_cache(home: Path) -> Path:
    """Writes `home/.sky/catalogs/v8/aws/vms.csv`: the shared AWS catalog with H100 prices doubled."""
    dest = home / ".sky" / "catalogs" / "v8" / "aws" / "vms.csv"
    dest.parent.mkdir(parents=True)
    with (CATALOG / "aws" / "vms.csv").open(newline="") as fh:
        reader = csv.DictReader(fh)
        rows = list(reader)
        fields = reader.fieldnames
    for r in rows:
        if r["AcceleratorName"] == "H100":
            for col in ("Price", "SpotPrice"):
                if r[col]:
                    r[col] = repr(float(r[col]) * 2)
    with dest.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    return dest


@pytest.fixture
def project(tmp_path, monkeypatch, no_network):  # noqa: F811 - the fixture imported above
    """A temporary project and an empty temporary HOME; returns (project folder, HOME)."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("SKY_RUNTIME_DIR", raising=False)
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.delenv("GPULEDGER_PRICES", raising=False)
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "gpuledger.toml").write_text("[paths]\n")
    (proj / "spec.yaml").write_text(SPEC)
    monkeypatch.chdir(proj)
    yield proj, home
    assert no_network == [], f"network was reached: {no_network}"


def _json(capsys, *argv) -> object:
    capsys.readouterr()
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def _bundled(region: str, itype: str) -> tuple[float, float | None]:
    row = bundled_offers().filter((pl.col("cloud") == "aws") & (pl.col("region") == region)
                                  & (pl.col("instance_type") == itype)).row(0, named=True)
    return row["usd_per_hour_on_demand"], row["usd_per_hour_spot"]


def _plan(capsys) -> tuple[dict, dict]:
    plan = _json(capsys, "plan", "spec.yaml", "--json")
    (trial,) = plan["trials"]
    return plan, trial


def test_bundled_prices_say_their_basis_and_the_plan_warns_they_are_old(project, capsys):
    rows = _json(capsys, "prices", "--gpu", "H100", "--cloud", "aws", "--json")
    assert rows and {r["basis"] for r in rows} == {"catalog"} and {r["as_of"] for r in rows} == {"2026-05-20"}
    assert all("bundled with gpuledger" in r["source"] for r in rows)
    plan, trial = _plan(capsys)
    assert trial["price_basis"] == "catalog"
    stale = [a for a in plan["assumptions"] if a.startswith("WARNING") and "older than 30 days" in a]
    assert stale and "AWS list price" in stale[0] and "2026-05-20" in stale[0]
    assert not any("gpu_prices.csv" in a for a in plan["assumptions"])


def test_newer_skypilot_cache_is_used_per_cloud_and_the_plan_costs_accordingly(project, capsys):
    _, home = project
    _, before = _plan(capsys)
    _doubled_cache(home)
    rows = _json(capsys, "prices", "--gpu", "H100", "--json")
    aws = [r for r in rows if r["cloud"] == "aws"]
    assert aws and {r["basis"] for r in aws} == {"skypilot"}
    assert {r["as_of"] for r in aws} == {TODAY}
    assert {r["source"] for r in aws} == {"AWS list price from SkyPilot's catalog cache"}
    for r in aws:
        od, _ = _bundled(r["region"], r["instance_type"]) if r["region"] in ("us-east-1", "us-west-2") else (None, None)
        if od is not None:
            assert r["usd_per_hour"]["on_demand"] == pytest.approx(2 * od, rel=1e-4)
    assert {r["basis"] for r in rows if r["cloud"] == "gcp"} == {"catalog"}  # no gcp file in the cache

    plan, after = _plan(capsys)
    assert (after["region"], after["instance_type"]) == (before["region"], before["instance_type"])
    assert after["usd_per_hour"] == pytest.approx(2 * before["usd_per_hour"], rel=1e-4)
    assert after["est_cost_usd"] == pytest.approx(2 * before["est_cost_usd"], rel=1e-3)
    assert after["price_basis"] == "skypilot" and after["price_as_of"] == TODAY
    assert f"prices (skypilot): AWS list price from SkyPilot's catalog cache, as of {TODAY}" in plan["assumptions"]
    assert not any(a.startswith("WARNING") and "older than 30" in a for a in plan["assumptions"])


def test_an_older_cache_than_the_snapshot_is_not_used(project, capsys):
    _, home = project
    path = _doubled_cache(home)
    old = datetime(2026, 1, 1, tzinfo=UTC).timestamp()
    os.utime(path, (old, old))
    rows = _json(capsys, "prices", "--gpu", "H100", "--cloud", "aws", "--json")
    assert {r["basis"] for r in rows} == {"catalog"}


def test_aws_discount_in_the_project_file_is_an_override(project, capsys):
    proj, _ = project
    _, before = _plan(capsys)
    (proj / "gpuledger.toml").write_text("[prices]\ndiscount_pct = {aws = 20}\n")
    rows = _json(capsys, "prices", "--gpu", "H100", "--cloud", "aws", "--json")
    assert {r["basis"] for r in rows} == {"override"}
    for r in rows:
        od, spot = _bundled(r["region"], r["instance_type"])
        assert r["usd_per_hour"]["on_demand"] == pytest.approx(0.8 * od, rel=1e-5)
        if spot is not None:
            assert r["usd_per_hour"]["spot"] == pytest.approx(0.8 * spot, rel=1e-5)
        assert "less your 20% discount" in r["source"]
    assert {r["basis"] for r in _json(capsys, "prices", "--gpu", "H100", "--cloud", "gcp", "--json")} == {"catalog"}
    _, after = _plan(capsys)
    assert after["usd_per_hour"] == pytest.approx(0.8 * before["usd_per_hour"], rel=1e-5)
    assert after["price_basis"] == "override"


def _focus_file(path: Path, lines: list[dict]) -> Path:
    header = (Path(__file__).parent.parent / "data" / "focus" / "gpu_cloud_2026-02.csv").read_text().splitlines()[0].split(",")
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=header)
        w.writeheader()
        for line in lines:
            w.writerow({c: line.get(c, "") for c in header})
    return path


def _bill_runs(trial: dict, usd_per_hour: float, hours_each: float, runs: int = 2) -> None:
    """Stores `runs` runs of `trial`'s placement and a FOCUS file whose usage lines, tagged with their
    launch labels, bill `hours_each` instance-hours each at `usd_per_hour`."""
    from gpuledger.billing import read_focus
    from gpuledger.settings import resolve_path
    from gpuledger.warehouse import Warehouse

    sweep = "price-check-00000000"
    recs, lines = [], []
    for i in range(runs):
        start = datetime(2026, 11, 2 + i, 8, 0)
        tid = f"{i:012x}"
        recs.append(example_record(f"run-{i}", tid, sweep_id=sweep, started_at=start.isoformat(), wall_s=hours_each * 3600,
                                   launcher="skypilot", cloud="aws", accelerator="H100", gpus=trial["gpus"],
                                   usd_per_hour=trial["usd_per_hour"], region=trial["region"],
                                   instance_type=trial["instance_type"]))
        end = start.replace(hour=8 + int(hours_each))
        lines.append({
            "BillingPeriodStart": "2026-11-01T00:00:00Z", "BillingPeriodEnd": "2026-12-01T00:00:00Z",
            "ChargePeriodStart": start.isoformat() + "Z", "ChargePeriodEnd": end.isoformat() + "Z",
            "ChargeCategory": "Usage", "ChargeDescription": f"{trial['instance_type']} on-demand",
            "ChargeFrequency": "Usage-Based", "BillingAccountId": "ACCT-1", "ProviderName": "Amazon Web Services",
            "PublisherName": "Amazon Web Services", "InvoiceIssuerName": "Amazon Web Services",
            "ServiceName": "Amazon Elastic Compute Cloud", "ServiceCategory": "Compute", "RegionId": trial["region"],
            "BilledCost": f"{usd_per_hour * hours_each:.4f}", "EffectiveCost": f"{usd_per_hour * hours_each:.4f}",
            "ListCost": f"{trial['usd_per_hour'] * hours_each:.4f}", "BillingCurrency": "USD",
            "PricingCategory": "Standard", "PricingQuantity": str(hours_each), "PricingUnit": "Hours",
            "ResourceId": f"arn:aws:ec2:{trial['region']}:ACCT-1:instance/i-{i}", "ResourceType": "AWS::EC2::Instance",
            "ConsumedQuantity": str(hours_each), "ConsumedUnit": "Hours",
            "Tags": json.dumps({"gpuledger-sweep": sweep, "gpuledger-trial": tid}),
        })
    focus = _focus_file(Path("bill.csv").resolve(), lines)
    with Warehouse.open(resolve_path()) as wh:
        ingest_known(wh, recs)
        wh.ingest_billing_file(read_focus(focus))


@pytest.mark.slow  # over ~1 s (a whole report, replay, plan or warehouse): make test runs it, make test-fast does not
def test_a_bill_above_the_catalog_changes_the_next_plan(project, capsys):
    _, before = _plan(capsys)
    billed = round(before["usd_per_hour"] * 1.5, 4)
    _bill_runs(before, billed, hours_each=6)  # 2 runs x 6 h x 1 GPU = 12 billed GPU-hours >= 10
    plan, after = _plan(capsys)
    assert (after["region"], after["instance_type"]) == (before["region"], before["instance_type"])
    assert after["usd_per_hour"] == pytest.approx(billed, rel=1e-6)
    assert after["price_basis"] == "billed" and after["price_as_of"] == "2026-11-03"
    assert after["est_cost_usd"] == pytest.approx(1.5 * before["est_cost_usd"], rel=1e-3)
    assert f"{before['usd_per_hour']:g} $/h before the bill" in after["price_source"]
    rows = _json(capsys, "prices", "--gpu", "H100", "--cloud", "aws", "--json")
    row = next(r for r in rows if (r["region"], r["instance_type"]) == (before["region"], before["instance_type"]))
    assert row["basis"] == "billed" and row["usd_per_hour"]["on_demand"] == pytest.approx(billed)
    assert row["before_bill_usd_per_hour"]["on_demand"] == pytest.approx(before["usd_per_hour"])
    # another region of the same instance type: the billed/list ratio, still basis billed
    other = next(r for r in rows if r["instance_type"] == before["instance_type"] and r["region"] != before["region"])
    od, _ = _bundled(other["region"], other["instance_type"])
    assert other["basis"] == "billed" and other["usd_per_hour"]["on_demand"] == pytest.approx(1.5 * od, rel=1e-3)


@pytest.mark.slow  # over ~1 s (a whole report, replay, plan or warehouse): make test runs it, make test-fast does not
def test_too_few_billed_gpu_hours_keep_the_catalog_price(project, capsys):
    _, before = _plan(capsys)
    _bill_runs(before, before["usd_per_hour"] * 3, hours_each=4)  # 8 GPU-hours < 10
    _, after = _plan(capsys)
    assert after["usd_per_hour"] == pytest.approx(before["usd_per_hour"]) and after["price_basis"] == "catalog"


def test_prices_update_copies_the_cache_into_the_project_and_the_planner_prefers_it(project, capsys, monkeypatch):
    proj, home = project
    _doubled_cache(home)
    assert main(["prices", "update"]) == 0
    copy = proj / "prices" / "catalog.csv"
    assert copy.is_file()
    (home / ".sky" / "catalogs" / "v8" / "aws" / "vms.csv").unlink()  # a teammate without SkyPilot's cache
    rows = _json(capsys, "prices", "--gpu", "H100", "--cloud", "aws", "--json")
    assert {r["basis"] for r in rows} == {"skypilot"} and {r["as_of"] for r in rows} == {TODAY}
    assert all("the project's copy" in r["source"] for r in rows)
    r = next(r for r in rows if (r["region"], r["instance_type"]) == ("us-east-1", "p5.48xlarge"))
    assert r["usd_per_hour"]["on_demand"] == pytest.approx(2 * _bundled("us-east-1", "p5.48xlarge")[0], rel=1e-4)


def test_custom_instance_prices_and_committed_rates(project, capsys):
    proj, _ = project
    (proj / "gpuledger.toml").write_text(
        "[prices]\n"
        "[[prices.instance]]\ncloud = \"kubernetes\"\nregion = \"lab\"\ninstance_type = \"dgx-h100\"\n"
        "accelerator = \"H100\"\naccelerator_count = 8\nusd_per_hour = 12.5\nnote = \"on-prem, amortised\"\n"
        "[[prices.committed]]\ncloud = \"aws\"\ninstance_type = \"p5.48xlarge\"\nregion = \"us-east-1\"\n"
        "usd_per_hour = 30.0\nterm = \"1y\"\ncount = 2\nstart = \"2026-06-01\"\n")
    rows = _json(capsys, "prices", "--gpu", "H100", "--cloud", "kubernetes", "--json")
    assert [(r["instance_type"], r["usd_per_hour"]["on_demand"], r["basis"]) for r in rows] == [("dgx-h100", 12.5, "override")]
    assert "on-prem, amortised" in rows[0]["source"]
    from gpuledger.catalog.pricing import committed_rates

    (c,) = committed_rates("aws")
    assert (c.usd_per_hour, c.term_months, c.count, c.end, c.accelerator, c.accelerator_count) == (
        30.0, 12, 2, "2027-06-01", "H100", 8)


@pytest.mark.parametrize("toml, message", [
    ("[prices]\ndiscount_pct = {aws = 120}\n", "discount_pct.aws: expected a number from 0 to 99.99"),
    ("[prices]\ndiscount = 5\n", "unknown key(s) discount"),
    ("[prices]\n[[prices.instance]]\ncloud = \"k8s\"\ninstance_type = \"x\"\nusd_per_hour = 1\n", "`accelerator` is required"),
])
def test_bad_prices_section_is_one_line(project, capsys, toml, message):
    proj, _ = project
    (proj / "gpuledger.toml").write_text(toml)
    capsys.readouterr()
    assert main(["prices"]) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and err.count("\n") == 1


@pytest.mark.slow  # over ~1 s (a whole report, replay, plan or warehouse): make test runs it, make test-fast does not
def test_weekly_report_shows_catalog_vs_bill(project, capsys, tmp_path):
    _, before = _plan(capsys)
    billed = round(before["usd_per_hour"] * 1.5, 4)
    _bill_runs(before, billed, hours_each=6)
    out = tmp_path / "weekly"
    assert main(["report", "weekly", "--week", "2026-W45", "--out", str(out)]) == 0
    md = (out / "2026-W45.md").read_text()
    section = md[md.index("Catalog vs bill"):]
    row = next(line for line in section.splitlines() if before["instance_type"] in line)
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1:6] == ["on-demand", "12.0", f"{before['usd_per_hour']:,.4g}", f"{billed:,.4g}", "+50.0%"]
    made = 12 * (billed - before["usd_per_hour"])
    assert cells[6] == f"${made:,.2f}"
    assert "catalog prices (catalog): AWS list price from the SkyPilot catalog snapshot bundled with gpuledger" in section
    drift = pl.read_csv(out / "2026-W45-csv" / "catalog-vs-bill.csv")
    assert drift["drift_usd"][0] == pytest.approx(made, rel=1e-6)


def test_prices_takes_accelerator_as_estimate_does(capsys):
    # `gpuledger prices --accelerator H100` (estimate's spelling of the GPU kind) was refused as unrecognized
    assert main(["prices", "--gpu", "H100", "--json"]) == 0
    by_gpu = capsys.readouterr().out
    assert main(["prices", "--accelerator", "H100", "--json"]) == 0
    assert capsys.readouterr().out == by_gpu and "H100" in by_gpu and "A100" not in by_gpu
