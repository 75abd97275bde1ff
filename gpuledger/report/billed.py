"""Billed vs estimated, for the weekly and the sweep ROI reports: what the cloud's FOCUS
billing export says beside what gpuledger estimated (hours × the catalog or local $/h recorded per run).

Every figure names its source: "billed (FOCUS export)" is Σ BilledCost, "effective (FOCUS export)"
Σ EffectiveCost (commitments amortised, discounts applied; a line item without one counts at its
BilledCost, as v_billing_attribution defines it, and the section says how many), "estimated (catalog)"
the runs' own cost.
USD only is summed; other currencies are listed as they are, never added to USD. Reads are the named
queries `report_billing_loaded`, `report_week_billed`, `report_week_unattributed`,
`report_week_runs_billed`, `report_week_price_drift` and `report_sweep_billed` over the views
v_billing_attribution, v_billed_usage, v_run_billed and v_sweep_billed. "Catalog vs bill" compares
the billed rate per offer with what a plan pays before the bill (gpuledger/catalog/pricing.py).

A line item counts in the ISO week its charge period STARTS (UTC), as a run counts in the week it
started (the half-open range of `gpuledger.report.weeks.week_bounds`); one whose charge period runs past
that week (monthly tax, a commitment purchase) counts whole there, and the section says how many do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from gpuledger.report.common import usd
from gpuledger.report.document import Card, Note, Section, Table
from gpuledger.report.weeks import week_bounds

BILLED = "billed (FOCUS export)"
EFFECTIVE = "effective (FOCUS export)"
ESTIMATED = "estimated (catalog)"
HOW_TO_INGEST = "'gpuledger billing ingest PATH...' (the cloud's FOCUS billing export)"
#: unattributed line items listed in the weekly report (the CSV has them all)
UNATTRIBUTED_LISTED = 10


@dataclass
class Loaded:
    """The bills the warehouse holds."""

    exports: int
    line_items: int
    first_period_start: Any = None
    last_period_start: Any = None


def load_loaded(wh) -> Loaded:
    row = wh.query_named("report_billing_loaded").to_dicts()[0]
    return Loaded(int(row["exports"] or 0), int(row["line_items"] or 0), row["first_period_start"],
                  row["last_period_start"])


def _period(loaded: Loaded) -> str:
    first, last = (str(d)[:10] for d in (loaded.first_period_start, loaded.last_period_start))
    return f"billing period starting {first}" if first == last else f"billing periods starting {first} to {last}"


# ------------------------------------------------------------------------------------------ weekly


@dataclass
class WeekBilled:
    """The bill of one ISO week beside the estimate of the runs that started in it."""

    week: str
    loaded: Loaded
    by_currency: pl.DataFrame  # report_week_billed: one row per currency
    unattributed: pl.DataFrame  # report_week_unattributed: the line items matching no run
    runs: dict[str, Any]  # report_week_runs_billed: the week's runs, estimated vs billed
    drift: pl.DataFrame | None = None  # catalog vs bill per offer (`price_drift`), None when nothing billed

    def usd_row(self) -> dict[str, Any] | None:
        rows = self.by_currency.filter(pl.col("billing_currency") == "USD").to_dicts()
        return rows[0] if rows else None

    def other_currencies(self) -> list[dict[str, Any]]:
        return self.by_currency.filter(pl.col("billing_currency").ne_missing("USD")).to_dicts()


def load_week_billed(wh, week: str) -> WeekBilled:
    """Returns the bill of ISO week `week` (line items charged in it) and its runs' estimate."""
    p = week_bounds(week)
    return WeekBilled(week, load_loaded(wh), wh.query_named("report_week_billed", p),
                      wh.query_named("report_week_unattributed", p),
                      wh.query_named("report_week_runs_billed", p).to_dicts()[0],
                      price_drift(wh.query_named("report_week_price_drift", p)))


DRIFT_SCHEMA = {"cloud": pl.String, "region": pl.String, "instance_type": pl.String, "spot": pl.Boolean,
                "runs": pl.Int64, "billed_hours": pl.Float64, "billed_gpu_hours": pl.Float64,
                "effective_usd": pl.Float64, "billed_usd_per_hour": pl.Float64, "catalog_usd_per_hour": pl.Float64,
                "catalog_basis": pl.String, "catalog_source": pl.String, "catalog_as_of": pl.String,
                "drift_pct": pl.Float64, "drift_usd": pl.Float64}


def price_drift(billed: pl.DataFrame) -> pl.DataFrame | None:
    """Returns catalog vs bill per (cloud, region, instance type, spot) of `report_week_price_drift`:
    the billed rate (effective USD / billed instance-hours), the price a plan pays before the bill
    (`load_offers`: catalog, SkyPilot or your override, with its basis, source and date), the drift
    (billed / catalog − 1) and the dollars it made (effective USD − catalog rate × the same hours).
    None when nothing was billed; catalog columns null for an offer no catalog lists."""
    if billed.is_empty():
        return None
    from gpuledger.catalog.pricing import load_offers

    offers = load_offers(clouds=billed["cloud"].unique().to_list())
    prices = pl.concat([
        offers.select("cloud", "region", "instance_type", pl.lit(False).alias("spot"),
                      pl.col("usd_per_hour_on_demand").alias("catalog_usd_per_hour"), "basis", "source", "as_of"),
        offers.select("cloud", "region", "instance_type", pl.lit(True).alias("spot"),
                      pl.col("usd_per_hour_spot").alias("catalog_usd_per_hour"), "basis", "source", "as_of"),
    ]).rename({"basis": "catalog_basis", "source": "catalog_source", "as_of": "catalog_as_of"})
    out = billed.join(prices, on=["cloud", "region", "instance_type", "spot"], how="left").with_columns(
        billed_usd_per_hour=pl.col("effective_usd") / pl.col("billed_hours"))
    out = out.with_columns(
        drift_pct=(pl.col("billed_usd_per_hour") / pl.col("catalog_usd_per_hour") - 1) * 100,
        drift_usd=pl.col("effective_usd") - pl.col("catalog_usd_per_hour") * pl.col("billed_hours"))
    return out.select(list(DRIFT_SCHEMA)).cast(DRIFT_SCHEMA)


def drift_section(b: WeekBilled) -> Section | None:
    """Returns "Catalog vs bill": per instance type the catalog rate, the billed rate, the drift and
    the dollars it made this week; None when no usage line item of the week is attributed to a run."""
    if b.drift is None or b.drift.is_empty():
        return None
    from gpuledger.catalog.pricing import price_words

    rows, sources = [], {}
    for r in b.drift.to_dicts():
        cat = r["catalog_usd_per_hour"]
        if cat is not None:
            sources[price_words(r["catalog_source"], r["catalog_as_of"])] = r["catalog_basis"]
        rows.append([f"{r['cloud']} {r['region']} {r['instance_type']}", "spot" if r["spot"] else "on-demand",
                     f"{r['billed_hours']:,.1f}", "—" if cat is None else f"{cat:,.4g}",
                     f"{r['billed_usd_per_hour']:,.4g}",
                     "—" if r["drift_pct"] is None else f"{r['drift_pct']:+.1f}%",
                     "—" if r["drift_usd"] is None else usd(r["drift_usd"])])
    total = sum(r["drift_usd"] or 0.0 for r in b.drift.to_dicts())
    blocks: list = [
        Table(["instance", "purchase", "billed hours", "catalog $/h", "billed $/h", "drift", "dollars it made"],
              rows, numeric=[2, 3, 4, 5, 6]),
        Note(f"Billed $/h = EffectiveCost / instance-hours of the usage line items attributed to runs and charged in "
             f"{b.week} (v_billed_usage); catalog $/h = what a plan pays before the bill; dollars it made = billed − "
             f"catalog × the same hours: {usd(total)} this week. The planner prices an offer at its billed rate once "
             f"enough GPU-hours back it (v_billed_rates, docs/prices.md).", "small")]
    blocks += [Note(f"catalog prices ({basis}): {words}", "small") for words, basis in sorted(sources.items())]
    return Section("Catalog vs bill", blocks, level=3)


def week_billed_summary(b: WeekBilled) -> dict[str, Any]:
    """Returns the week's billed vs estimated numbers (USD; None where the bill has no USD line item)."""
    u = b.usd_row() or {}
    r = b.runs
    return {
        "bills_ingested": b.loaded.exports,
        "billed_usd": u.get("billed_cost"),
        "effective_usd": u.get("effective_cost"),
        "list_usd": u.get("list_cost"),
        "billed_line_items": int(u.get("line_items") or 0),
        "attributed_effective_usd": u.get("attributed_effective_cost"),
        "unattributed_billed_usd": u.get("unattributed_billed_cost"),
        "unattributed_effective_usd": u.get("unattributed_effective_cost"),
        "unattributed_line_items": int(u.get("unattributed_line_items") or 0),
        "unattributed_credit_effective_usd": u.get("unattributed_credit_effective_cost"),
        "unattributed_credit_line_items": int(u.get("unattributed_credit_line_items") or 0),
        "attributed_credit_effective_usd": u.get("attributed_credit_effective_cost"),
        "estimated_usd": float(r["estimated_usd"] or 0.0),
        "runs": int(r["runs"] or 0),
        "runs_billed": int(r["runs_billed"] or 0),
        "estimated_usd_of_billed_runs": float(r["estimated_usd_of_billed_runs"] or 0.0),
        "billed_usd_of_billed_runs": r["billed_usd"],
        "effective_usd_of_billed_runs": r["effective_usd"],
        "other_currencies": ", ".join(str(o["billing_currency"]) for o in b.other_currencies()) or None,
    }


def _week_notes(b: WeekBilled) -> list[Note]:
    notes = []
    u = b.usd_row() or {}
    spanning = int(b.by_currency["spanning_past_week"].sum()) if b.by_currency.height else 0
    if spanning:
        notes.append(Note(f"{spanning} line items have a charge period that runs past {b.week} (monthly charges, "
                          f"tax, commitment purchases): each counts whole in the week its charge period starts.",
                          "small"))
    if u.get("attributed_by_time"):
        notes.append(Note(f"{u['attributed_by_time']} line items match a run only by time overlap (same cloud and "
                          f"region, no label or resource id): a guess, flagged as such in v_billing_attribution.",
                          "warn"))
    assumed = int(b.by_currency["currency_assumed_line_items"].sum()) if b.by_currency.height else 0
    if assumed:
        notes.append(Note(f"{assumed} line items had no BillingCurrency; the export's currency was assumed.", "small"))
    no_effective = int(b.by_currency["effective_cost_assumed_line_items"].sum()) if b.by_currency.height else 0
    if no_effective:
        notes.append(Note(f"{no_effective} line items have no EffectiveCost (a column FOCUS 1.0+ makes mandatory): "
                          f"their BilledCost is counted as their effective cost, here and in every view "
                          f"(v_billing_attribution.effective_cost_assumed).", "warn"))
    return notes


def _credits_inside(u: dict[str, Any]) -> str:
    n = u["attributed_credit_line_items"]
    return f"; {n} of them credits ({usd(u['attributed_credit_effective_cost'])}), the run's own" if n else ""


def week_billed_section(b: WeekBilled) -> Section:
    """Returns the "Billed vs estimated" section of the weekly report."""
    s = week_billed_summary(b)
    est = (ESTIMATED, usd(s["estimated_usd"]),
           f"{s['runs']} runs started in {b.week}: hours × the $/h recorded per run (catalog, local rate)")
    if b.loaded.exports == 0:
        return Section("Billed vs estimated", [Note(
            f"No bill ingested: every dollar in this report is an estimate, not the bill. To compare with the bill, "
            f"run {HOW_TO_INGEST}.", "info")])
    if b.by_currency.height == 0:
        return Section("Billed vs estimated", [
            Note(f"The {b.loaded.exports} ingested exports ({_period(b.loaded)}) have no line item charged in "
                 f"{b.week}; ingest that period with {HOW_TO_INGEST}.", "info"),
            Table(["", "USD", "source"], [list(est)], numeric=[1])])
    rows: list[list[Any]] = []
    u = b.usd_row()
    if u is not None:
        items = (f"{u['line_items']} USD line items charged in {b.week}, from {u['exports']} "
                 f"export{'s' if u['exports'] != 1 else ''}")
        rows += [
            [BILLED, usd(u["billed_cost"]), f"Σ BilledCost of {items}"],
            [EFFECTIVE, usd(u["effective_cost"]), "Σ EffectiveCost of the same: commitments amortised, "
                                                  "discounts applied"],
            ["of which matching a run", usd(u["attributed_effective_cost"]),
             f"EffectiveCost of {u['attributed_line_items']} line items labelled with, or named after, a run "
             f"(v_billing_attribution){_credits_inside(u)}"],
            ["of which unattributed (matching no run)", usd(u["unattributed_effective_cost"]),
             f"EffectiveCost of {u['unattributed_line_items']} line items (billed "
             f"{usd(u['unattributed_billed_cost'])}): idle clusters, forgotten instances, storage, tax"
             f"{'; credits apart, below' if u['unattributed_credit_line_items'] else ''}"],
        ]
        if u["unattributed_credit_line_items"]:
            rows.append(["of which credits matching no run", usd(u["unattributed_credit_effective_cost"]),
                         f"EffectiveCost of {u['unattributed_credit_line_items']} line items of ChargeCategory "
                         f"Credit (billed {usd(u['unattributed_credit_billed_cost'])}): stated apart, never netted "
                         f"into unattributed"])
    rows.append(list(est))
    if s["runs_billed"]:
        rows.append([f"of which runs the bill covers ({s['runs_billed']} of {s['runs']})",
                     usd(s["estimated_usd_of_billed_runs"]),
                     f"estimated; the bill says {usd(s['billed_usd_of_billed_runs'])} billed, "
                     f"{usd(s['effective_usd_of_billed_runs'])} effective for them (any charge period)"])
    else:
        rows.append(["runs the bill covers", f"0 of {s['runs']}", "no line item matches a run of this week"])
    blocks: list = [Table(["", "USD", "source"], rows, numeric=[1])]
    blocks += _week_notes(b)
    drift = drift_section(b)
    if drift is not None:
        blocks.append(drift)
    others = b.other_currencies()
    if others:
        blocks.append(Section("Other currencies (never added to USD)", [Table(
            ["currency", "line items", "billed", "effective", "unattributed (effective)",
             "credits matching no run (effective)"],
            [[o["billing_currency"] or "—", o["line_items"], _money(o["billed_cost"]), _money(o["effective_cost"]),
              _money(o["unattributed_effective_cost"]), _money(o["unattributed_credit_effective_cost"])]
             for o in others], numeric=[1, 2, 3, 4, 5])], level=3))
    un = b.unattributed
    blocks.append(Section("Unattributed line items", [Table(
        ["charge", "service", "resource", "charge period", "currency", "billed", "effective", "export row"],
        [[f"{r['charge_category']}{' (' + r['charge_class'] + ')' if r['charge_class'] else ''}",
          r["service_name"] or r["provider_name"] or "—", r["resource_id"] or "—",
          f"{_ts(r['charge_period_start'])} – {_ts(r['charge_period_end'])}", r["billing_currency"] or "—",
          _money(r["billed_cost"]), _money(r["effective_cost"]), f"{r['export_name']}:{r['source_row']}"]
         for r in un.to_dicts()],
        numeric=[5, 6], max_rows=UNATTRIBUTED_LISTED, markdown_columns=7,
        empty="Every line item of the week matches a run.")], level=3))
    return Section("Billed vs estimated", blocks)


def week_billed_tables(b: WeekBilled) -> dict[str, pl.DataFrame]:
    """Returns the section's tables for CSV export."""
    out = {"billed": b.by_currency, "unattributed": b.unattributed}
    if b.drift is not None:
        out["catalog-vs-bill"] = b.drift
    return out


# ------------------------------------------------------------------------------------------ sweep


def load_sweep_billed(wh, sweep_id: str) -> dict[str, Any]:
    """Returns the sweep's estimated / billed / effective USD (report_sweep_billed) and `bills_ingested`."""
    rows = wh.query_named("report_sweep_billed", {"sweep_id": sweep_id}).to_dicts()
    out = rows[0] if rows else {"sweep_id": sweep_id, "runs": 0, "runs_billed": 0}
    out["bills_ingested"] = load_loaded(wh).exports
    return out


def sweep_billed_cards(b: dict[str, Any] | None) -> list[Card]:
    """Returns the billed and effective cards shown beside the estimate, when the bill covers a run."""
    if not b or not b.get("runs_billed"):
        return []
    covers = f"{b['runs_billed']} of {b['runs']} runs"
    credits = b.get("credit_line_items") or 0
    billed_credits = f"; {credits} of them credits ({usd(b['credit_billed_usd'])})" if credits else ""
    effective_credits = f", credits included ({usd(b['credit_effective_usd'])})" if credits else ""
    assumed = b.get("effective_cost_assumed_line_items") or 0
    effective_credits += f"; {assumed} line items without EffectiveCost at their BilledCost" if assumed else ""
    return [
        Card(BILLED, usd(b["billed_usd"]),
             f"Σ BilledCost of {b['line_items']} line items matched to {covers} (by {b['attribution_methods']})"
             f"{billed_credits}; estimated for them: {usd(b['estimated_usd_of_billed_runs'])}"),
        Card(EFFECTIVE, usd(b["effective_usd"]),
             f"Σ EffectiveCost (commitments amortised, discounts applied) of the same {covers}{effective_credits}"),
    ]


def sweep_billed_notes(b: dict[str, Any] | None) -> list[Note]:
    """Returns what the sweep report says about the bill: how many runs it covers, or why none."""
    if not b:
        return []
    runs, billed = int(b.get("runs") or 0), int(b.get("runs_billed") or 0)
    out = []
    if billed == 0:
        why = ("no bill is ingested" if not b["bills_ingested"]
               else f"no line item of the {b['bills_ingested']} ingested exports matches them")
        out.append(Note(f"The bill covers 0 of this sweep's {runs} runs ({why}): every dollar here is {ESTIMATED} "
                        f"or a local rate. To compare with the bill, run {HOW_TO_INGEST}.", "small"))
    elif billed < runs:
        out.append(Note(f"The bill covers {billed} of this sweep's {runs} runs: {BILLED} and {EFFECTIVE} are for "
                        f"those runs only (estimated for them: {usd(b['estimated_usd_of_billed_runs'])}; for all "
                        f"runs: {usd(b['estimated_usd'])}).", "small"))
    if b.get("other_currency_line_items"):
        out.append(Note(f"{b['other_currency_line_items']} of its line items are in another currency than USD: "
                        f"listed in v_billing_attribution, never added to the USD figures.", "small"))
    if billed and b.get("effective_cost_assumed_line_items"):
        out.append(Note(f"{b['effective_cost_assumed_line_items']} of its USD line items have no EffectiveCost (a "
                        f"column FOCUS 1.0+ makes mandatory): their BilledCost is counted as their effective cost in "
                        f"{EFFECTIVE}, as in every view (v_billing_attribution.effective_cost_assumed).", "warn"))
    if b.get("attribution_methods") and "time" in str(b["attribution_methods"]).split(", "):
        out.append(Note("Some line items match its runs only by time overlap: a guess (v_billing_attribution).",
                        "warn"))
    return out


def sweep_billed_table(b: dict[str, Any] | None) -> pl.DataFrame:
    """Returns the sweep's billed row for CSV export."""
    keys = ("estimated_usd", "billed_usd", "effective_usd", "runs", "runs_billed", "estimated_usd_of_billed_runs")
    return pl.DataFrame([{k: (b or {}).get(k) for k in keys}],
                        schema={k: (pl.Int64 if k.startswith("runs") else pl.Float64) for k in keys})


def _money(x: float | None) -> str:
    return "—" if x is None else f"{x:,.2f}"


def _ts(value: Any) -> str:
    return "—" if value is None else str(value)[:16].replace("T", " ")
