"""The prices the planner pays: list prices in layers, the team's own prices, and rates learned
from the bill. Every price row names its `basis`, `source` (words a user understands) and `as_of`.

Layers, each replacing the rows of the one before with the same (cloud, region, instance type):

1. `catalog`: the SkyPilot catalog snapshot bundled with gpuledger (`offers.csv`, 2026-05-20).
2. `skypilot`: the project's copy (`prices/catalog.csv` beside gpuledger.toml, written by
   `gpuledger prices update`, committed so a team shares it), then SkyPilot's own catalog cache
   (`~/.sky/catalogs/v8/<cloud>/vms.csv`, refreshed by SkyPilot whenever it runs online) for a cloud
   whose cached file is newer than the newest price of that cloud so far (a tie keeps the project's
   copy). The cache is read as CSV: nothing is downloaded.
3. `override`: the team's prices in gpuledger.toml `[prices]`: `discount_pct = {aws = 20}` (list
   prices of that cloud less the discount, on-demand and spot), `[[prices.instance]]` rows (on-prem
   or Kubernetes GPUs, negotiated prices of an instance type), then the `$GPULEDGER_PRICES` file.
4. `billed` (in the planner, `apply_billed`): the effective rate of FOCUS line items attributed to
   runs (view `v_billed_rates`), where at least `prices.billed_min_gpu_hours` GPU-hours back it.

Committed-use or reserved rates (`[[prices.committed]]`, with their term) are not what a sweep pays
per hour (the commitment is paid whether used or not); `committed_rates()` returns them for
capacity plans. Nothing here imports SkyPilot or DuckDB.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from gpuledger.catalog import UnknownAccelerator, normalize_accelerator
from gpuledger.catalog.offers import price_snapshot_id, spot_suspicious_expr
from gpuledger.errors import UserError

#: Where each price comes from, in the order the layers apply.
BASES = ("catalog", "skypilot", "override", "billed")
#: A plan warns about a price older than this many days.
STALE_AFTER_DAYS = 30
#: The project's copy of a catalog inside the `prices.dir` folder.
PROJECT_CATALOG_FILE = "catalog.csv"
KEY = ["cloud", "region", "instance_type"]
_PRICES_KEYS = ("dir", "file", "billed_min_gpu_hours", "discount_pct", "instance", "committed")
_WHERE = "gpuledger.toml [prices]"


def price_words(source: str | None, as_of: str | None) -> str:
    """Returns a price's origin for people: "AWS list price from SkyPilot's catalog cache, as of 2026-11-20"."""
    if not source:
        return "unknown source"
    return f"{source}, as of {as_of}" if as_of else source


def age_days(as_of: str | None, today: dt.date | None = None) -> int | None:
    """Returns how many days old a price of date `as_of` (YYYY-MM-DD...) is; None when undated."""
    try:
        day = dt.date.fromisoformat(str(as_of)[:10])
    except (TypeError, ValueError):
        return None
    return ((today or dt.date.today()) - day).days


# --------------------------------------------------------------------------------------------
# The [prices] section


def prices_section() -> dict[str, Any]:
    """Returns gpuledger.toml's `[prices]` table, its keys checked (UserError naming an unknown one)."""
    from gpuledger.settings import current

    section = current().section("prices")
    unknown = sorted(set(section) - set(_PRICES_KEYS))
    if unknown:
        raise UserError(f"{_WHERE}: unknown key(s) {', '.join(unknown)} (known: {', '.join(_PRICES_KEYS)})")
    return section


def _number(value: Any, where: str, *, low: float = 0.0, high: float = math.inf, integer: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise UserError(f"{where}: expected a number, got {value!r}")
    if not low <= value <= high or (integer and value != int(value)):
        kind = "a whole number" if integer else "a number"
        raise UserError(f"{where}: expected {kind} from {low:g} to {high:g}, got {value!r}")
    return float(value)


def _text(row: dict, name: str, where: str, *, required: bool = True, default: str | None = None) -> str | None:
    value = row.get(name, default)
    if value is None:
        if required:
            raise UserError(f"{where}: `{name}` is required")
        return None
    if not isinstance(value, str | dt.date) or not str(value).strip() or len(str(value)) > 200:
        raise UserError(f"{where}: `{name}` must be text of 1 to 200 characters, got {value!r}")
    return str(value).strip()


def _rows(section: dict, name: str) -> list[dict]:
    rows = section.get(name, [])
    if isinstance(rows, dict):
        rows = [rows]
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise UserError(f"{_WHERE}: `{name}` must be a list of tables ([[prices.{name}]])")
    return rows


def discounts(section: dict) -> dict[str, float]:
    """Returns {cloud: discount percent} of `discount_pct = {aws = 20}`."""
    raw = section.get("discount_pct", {})
    if not isinstance(raw, dict):
        raise UserError(f"{_WHERE}: discount_pct must be a table of cloud = percent, e.g. {{aws = 20}}; got {raw!r}")
    return {str(c).lower(): _number(v, f"{_WHERE} discount_pct.{c}", high=99.99) for c, v in raw.items()}


def _project_file_date() -> str:
    from gpuledger.settings import PROJECT_FILE, current

    root = current().project_root
    path = root / PROJECT_FILE if root else None
    if path and path.exists():
        return dt.datetime.fromtimestamp(path.stat().st_mtime, dt.UTC).date().isoformat()
    return dt.date.today().isoformat()


def _accelerator(name: str, where: str) -> str:
    from gpuledger.catalog import UnknownAccelerator, normalize_accelerator

    try:
        return normalize_accelerator(name)
    except UnknownAccelerator as err:
        raise UserError(f"{where}: {err}") from None


def instance_rows(section: dict, listed: pl.DataFrame) -> pl.DataFrame:
    """Returns the `[[prices.instance]]` rows as offers (basis `override`). A row without `region`
    prices every listed region of its instance type (a negotiated price), or else is one new offer
    in region "default" (on-prem or Kubernetes GPUs: then `accelerator` is required)."""
    from gpuledger.catalog.offers import OFFER_SCHEMA

    out = []
    as_of_default = _project_file_date()
    for i, row in enumerate(_rows(section, "instance"), start=1):
        where = f"{_WHERE} instance #{i}"
        unknown = sorted(set(row) - {"cloud", "region", "instance_type", "accelerator", "accelerator_count",
                                     "usd_per_hour", "usd_per_hour_spot", "vcpus", "memory_gib", "as_of", "note"})
        if unknown:
            raise UserError(f"{where}: unknown key(s) {', '.join(unknown)}")
        cloud = _text(row, "cloud", where).lower()
        itype = _text(row, "instance_type", where)
        region = _text(row, "region", where, required=False)
        od = _number(row.get("usd_per_hour"), f"{where} usd_per_hour")
        spot = row.get("usd_per_hour_spot")
        spot = None if spot is None else _number(spot, f"{where} usd_per_hour_spot")
        note = _text(row, "note", where, required=False)
        source = f"your price for {itype} in {_WHERE}" + (f" ({note})" if note else "")
        as_of = _text(row, "as_of", where, required=False) or as_of_default
        base = listed.filter((pl.col("cloud") == cloud) & (pl.col("instance_type") == itype))
        if region is not None:
            base = base.filter(pl.col("region") == region)
        if base.is_empty():
            acc = _text(row, "accelerator", where + " (an instance no catalog lists)")
            count = row.get("accelerator_count", 1)
            base = pl.DataFrame([{
                "cloud": cloud, "region": region or "default", "instance_type": itype,
                "accelerator": acc if acc.upper() == "CPU" else _accelerator(acc, where),
                "accelerator_count": int(_number(count, f"{where} accelerator_count", low=1, high=1024, integer=True)),
                "vcpus": row.get("vcpus"), "memory_gib": row.get("memory_gib"),
            }])
        out.append(base.select(
            "cloud", "region", "instance_type", "accelerator", "accelerator_count",
            pl.lit(od).alias("usd_per_hour_on_demand"), pl.lit(spot, dtype=pl.Float64).alias("usd_per_hour_spot"),
            pl.col("vcpus").cast(pl.Float64), pl.col("memory_gib").cast(pl.Float64),
            pl.lit(source).alias("source"), pl.lit(str(as_of)[:10]).alias("as_of"),
        ).cast(OFFER_SCHEMA))
    return pl.concat(out) if out else pl.DataFrame(schema=OFFER_SCHEMA)


def declared_gpu_offers() -> pl.DataFrame:
    """Returns offers for the GPU kinds gpuledger.toml `[[gpus]]` declares with a price: one per
    `gpus_per_instance` count (default 1, 2, 4, 8) at count x `usd_per_gpu_hour` (and the spot price when
    given), cloud `cloud` (default "kubernetes": your own GPUs; a spec lists it in resources.clouds),
    region `region` (default "default"), instance type
    "<name>-x<count>" (basis override; `[[prices.instance]]` rows still replace them)."""
    from gpuledger.catalog import project_gpus
    from gpuledger.catalog.offers import OFFER_SCHEMA

    out = []
    as_of_default = _project_file_date()
    for items in project_gpus():
        row = dict(items)
        price = row.get("usd_per_gpu_hour")
        if price is None:
            continue
        spot = row.get("usd_per_gpu_hour_spot")
        for count in row["gpus_per_instance"]:
            out.append({"cloud": (row.get("cloud") or "kubernetes").lower(), "region": row.get("region") or "default",
                        "instance_type": f"{row['name']}-x{count}", "accelerator": row["name"],
                        "accelerator_count": count, "usd_per_hour_on_demand": round(price * count, 6),
                        "usd_per_hour_spot": None if spot is None else round(spot * count, 6), "vcpus": None,
                        "memory_gib": None, "source": f"your price for {row['name']} in {row['where']}",
                        "as_of": str(row.get("as_of") or as_of_default)[:10]})
    return pl.DataFrame(out, schema=OFFER_SCHEMA) if out else pl.DataFrame(schema=OFFER_SCHEMA)


@dataclass(frozen=True)
class CommittedRate:
    """A committed-use or reserved rate: `count` instances at `usd_per_hour` each for `term_months`
    from `start`, paid whether used or not."""

    cloud: str
    region: str | None
    instance_type: str
    accelerator: str | None
    accelerator_count: int | None
    usd_per_hour: float
    term_months: int
    count: int
    start: str | None
    end: str | None
    source: str

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _term_months(value: Any, where: str) -> int:
    if isinstance(value, str):
        text = value.strip().lower()
        for suffix, months in (("y", 12), ("yr", 12), ("year", 12), ("years", 12), ("m", 1), ("mo", 1), ("months", 1)):
            number = text.removesuffix(suffix).strip()
            if text.endswith(suffix) and number.replace(".", "", 1).isdigit():
                value = float(number) * months
                break
        else:
            raise UserError(f"{where}: term must be like \"1y\", \"3y\" or \"6m\", got {value!r}")
    return int(_number(value, where, low=1, high=120, integer=True))


def committed_rates(cloud: str | None = None) -> list[CommittedRate]:
    """Returns the team's committed-use / reserved rates of gpuledger.toml `[[prices.committed]]`
    (cloud, instance_type, usd_per_hour, term "1y"/"3y"/"6m", optional region, count, start, note),
    for capacity plans; filtered by `cloud` when given. UserError naming the row for bad input."""
    section = prices_section()
    listed = list_prices()
    out = []
    for i, row in enumerate(_rows(section, "committed"), start=1):
        where = f"{_WHERE} committed #{i}"
        unknown = sorted(set(row) - {"cloud", "region", "instance_type", "usd_per_hour", "term", "count", "start", "note"})
        if unknown:
            raise UserError(f"{where}: unknown key(s) {', '.join(unknown)}")
        c = _text(row, "cloud", where).lower()
        itype = _text(row, "instance_type", where)
        months = _term_months(row.get("term"), f"{where} term")
        start = _text(row, "start", where, required=False)
        end = None
        if start:
            try:
                day = dt.date.fromisoformat(start[:10])
            except ValueError:
                raise UserError(f"{where}: start must be a date YYYY-MM-DD, got {start!r}") from None
            y, m = divmod(day.month - 1 + months, 12)
            end = day.replace(year=day.year + y, month=m + 1, day=min(day.day, 28)).isoformat()
        match = listed.filter((pl.col("cloud") == c) & (pl.col("instance_type") == itype)).head(1)
        note = _text(row, "note", where, required=False)
        out.append(CommittedRate(
            cloud=c, region=_text(row, "region", where, required=False), instance_type=itype,
            accelerator=match["accelerator"][0] if match.height else None,
            accelerator_count=int(match["accelerator_count"][0]) if match.height else None,
            usd_per_hour=_number(row.get("usd_per_hour"), f"{where} usd_per_hour"), term_months=months,
            count=int(_number(row.get("count", 1), f"{where} count", low=1, high=100000, integer=True)),
            start=start[:10] if start else None, end=end,
            source=f"your {months}-month commitment in {_WHERE}" + (f" ({note})" if note else "")))
    return [r for r in out if cloud is None or r.cloud == cloud.lower()]


# --------------------------------------------------------------------------------------------
# The layers


def project_catalog_path() -> Path | None:
    """Returns the project's shared catalog copy (`prices/catalog.csv`), None outside a project."""
    from gpuledger.settings import current

    s = current()
    folder = Path(s.get("prices.dir")).expanduser()
    if not folder.is_absolute():
        if s.project_root is None:
            return None
        folder = s.project_root / folder
    return folder / PROJECT_CATALOG_FILE


def _overlay(base: pl.DataFrame, top: pl.DataFrame) -> pl.DataFrame:
    if top.is_empty():
        return base
    return pl.concat([base.join(top, on=KEY, how="anti"), top], how="vertical_relaxed")


def list_prices() -> pl.DataFrame:
    """Returns the list prices (`OFFER_COLUMNS` + `basis`): the bundled snapshot, the project's
    copy, and SkyPilot's cache per cloud where newer (see the module's layers 1-2)."""
    from gpuledger.catalog.offers import bundled_offers, read_price_file
    from gpuledger.catalog.skypilot import cache_offers

    df = bundled_offers().with_columns(basis=pl.lit("catalog"))
    path = project_catalog_path()
    if path is not None and path.is_file():
        df = _overlay(df, read_price_file(path).with_columns(basis=pl.lit("skypilot")))
    for cloud, rows in cache_offers().items():
        newest = df.filter(pl.col("cloud") == cloud)["as_of"].max()
        if rows.height and (newest is None or str(rows["as_of"][0]) > str(newest)[:10]):
            df = _overlay(df, rows.with_columns(basis=pl.lit("skypilot")))
    return df


def team_prices(listed: pl.DataFrame, section: dict) -> pl.DataFrame:
    """Returns `listed` with the team's prices applied (layer 3): the clouds' discounts on list
    prices, then `[[prices.instance]]` rows, then the `$GPULEDGER_PRICES` file."""
    from gpuledger.catalog.offers import PRICES_ENV, read_price_file

    df = listed
    for cloud, pct in discounts(section).items():
        hit = (pl.col("cloud") == cloud) & pl.col("basis").is_in(["catalog", "skypilot"])
        factor = 1 - pct / 100
        df = df.with_columns(
            usd_per_hour_on_demand=pl.when(hit).then((pl.col("usd_per_hour_on_demand") * factor).round(6))
            .otherwise(pl.col("usd_per_hour_on_demand")),
            usd_per_hour_spot=pl.when(hit).then((pl.col("usd_per_hour_spot") * factor).round(6))
            .otherwise(pl.col("usd_per_hour_spot")),
            source=pl.when(hit).then(pl.col("source") + pl.lit(f", less your {pct:g}% discount ({_WHERE} discount_pct)"))
            .otherwise(pl.col("source")),
            basis=pl.when(hit).then(pl.lit("override")).otherwise(pl.col("basis")),
        )
    df = _overlay(df, declared_gpu_offers().with_columns(basis=pl.lit("override")))
    df = _overlay(df, instance_rows(section, listed).with_columns(basis=pl.lit("override")))
    from gpuledger import settings

    user = settings.current().path("prices.file")  # $GPULEDGER_PRICES, or [prices] file
    if user is not None and str(user).strip():
        settings.check_trusted(user, f"the price file named by ${PRICES_ENV}")  # prices nobody else may have planted
        df = _overlay(df, read_price_file(str(user)).with_columns(basis=pl.lit("override")))
    return df


def priced_offers() -> pl.DataFrame:
    """Returns every offer at the price a plan pays before the bill (layers 1-3), with `basis`."""
    return team_prices(list_prices(), prices_section())


# --------------------------------------------------------------------------------------------
# Layer 4: rates learned from the bill

#: The columns of the view `v_billed_rates` the planner reads (one row per cloud, region, instance type, spot).
BILLED_SCHEMA: dict[str, pl.DataType] = {
    "cloud": pl.String, "region": pl.String, "instance_type": pl.String, "spot": pl.Boolean,
    "runs": pl.Int64, "line_items": pl.Int64, "billed_hours": pl.Float64, "billed_gpu_hours": pl.Float64,
    "effective_usd": pl.Float64, "usd_per_hour": pl.Float64, "usd_per_gpu_hour": pl.Float64,
    "first_charge_at": pl.Datetime, "last_charge_at": pl.Datetime,
}


@dataclass(frozen=True)
class BilledRates:
    """What the bill says per (cloud, region, instance type, spot): the rows of `v_billed_rates`,
    and the billed GPU-hours a rate needs before it replaces the price (`prices.billed_min_gpu_hours`)."""

    rows: pl.DataFrame
    min_gpu_hours: float = 10.0

    def backed(self) -> pl.DataFrame:
        """Returns the rows with at least `min_gpu_hours` billed GPU-hours."""
        return self.rows.filter(pl.col("billed_gpu_hours") >= self.min_gpu_hours)


def apply_billed(prices: pl.DataFrame, billed: BilledRates | None) -> pl.DataFrame:
    """Returns `prices` (one row per offer and purchase option: cloud, region, instance_type, spot,
    usd_per_hour, on_demand_usd_per_hour, price_source, price_as_of, price_basis) with the rates
    learned from the bill, and `before_bill_usd_per_hour` (the price the layers before gave; null
    where the bill did not change it).

    Where an (offer, spot) has at least `min_gpu_hours` billed GPU-hours, its price is the billed
    effective rate. Elsewhere, the same cloud, instance type and purchase option billed in other
    regions gives the ratio billed / price-before-the-bill over those hours, applied to this
    region's price (what an account-wide discount, surcharge or tax does). `on_demand_usd_per_hour`
    follows the on-demand row. Basis `billed`, dated by the last billed charge."""
    out = prices.with_columns(before_bill_usd_per_hour=pl.lit(None, dtype=pl.Float64))
    if billed is None:
        return out
    rows = billed.backed()
    if rows.is_empty():
        return out
    from gpuledger.catalog.floors import billed_problem_expr

    k = [*KEY, "spot"]
    ev = rows.select(*k, pl.col("usd_per_hour").alias("_rate"), pl.col("billed_hours").alias("_h"),
                     pl.col("billed_gpu_hours").alias("_gh"), pl.col("runs").alias("_runs"),
                     pl.col("last_charge_at").cast(pl.Date).cast(pl.String).alias("_last"))
    out = out.join(ev, on=k, how="left")
    # a rate below the floor (a credit, a refund: $0.0002 for 16 H100-hours) is never learned
    # (gpuledger/catalog/floors.py; the plan names it: floors.billed_notes)
    refused = billed_problem_expr()
    out = out.with_columns(*(pl.when(refused).then(None).otherwise(pl.col(c)).alias(c)
                             for c in ("_rate", "_h", "_gh", "_runs", "_last")))
    group = ["cloud", "instance_type", "spot"]
    ratio = (out.filter(pl.col("_rate").is_not_null()).group_by(group).agg(
        (pl.col("_rate") * pl.col("_h")).sum().truediv((pl.col("usd_per_hour") * pl.col("_h")).sum()).alias("_ratio"),
        pl.col("region").sort().str.join(", ").alias("_regions"), pl.col("_gh").sum().alias("_rgh"),
        pl.col("_last").max().alias("_rlast")))
    out = out.join(ratio, on=group, how="left")
    opt = pl.when(pl.col("spot")).then(pl.lit("spot")).otherwise(pl.lit("on-demand"))
    before = pl.format("{} $/h before the bill ({}, as of {})", pl.col("usd_per_hour").round(4),
                       pl.col("price_source"), pl.col("price_as_of"))
    exact = pl.col("_rate").is_not_null()
    ratio_hit = ~exact & pl.col("_ratio").is_not_null() & pl.col("_ratio").is_finite()
    out = out.with_columns(
        before_bill_usd_per_hour=pl.when(exact | ratio_hit).then(pl.col("usd_per_hour")),
        usd_per_hour=pl.when(exact).then(pl.col("_rate").round(6))
        .when(ratio_hit).then((pl.col("usd_per_hour") * pl.col("_ratio")).round(6)).otherwise(pl.col("usd_per_hour")),
        price_source=pl.when(exact).then(pl.format(
            "your FOCUS bill: {} {} billed at this effective rate over {} GPU-hours of {} run(s); {}",
            pl.col("instance_type"), opt, pl.col("_gh").round(1), pl.col("_runs"), before))
        .when(ratio_hit).then(pl.format(
            "your FOCUS bill: {} {} billed at {}x its price in {} ({} GPU-hours), applied to this region; {}",
            pl.col("instance_type"), opt, pl.col("_ratio").round(3), pl.col("_regions"), pl.col("_rgh").round(1), before))
        .otherwise(pl.col("price_source")),
        price_as_of=pl.when(exact).then(pl.col("_last")).when(ratio_hit).then(pl.col("_rlast")).otherwise(pl.col("price_as_of")),
        price_basis=pl.when(exact | ratio_hit).then(pl.lit("billed")).otherwise(pl.col("price_basis")),
    ).drop("_rate", "_h", "_gh", "_runs", "_last", "_ratio", "_regions", "_rgh", "_rlast")
    od = out.filter(~pl.col("spot")).select(*KEY, pl.col("usd_per_hour").alias("_od"))
    return out.join(od, on=KEY, how="left").with_columns(
        on_demand_usd_per_hour=pl.coalesce("_od", "on_demand_usd_per_hour")).drop("_od")


def offer_price_rows(offers: pl.DataFrame, billed: BilledRates | None = None) -> list[dict[str, Any]]:
    """Returns what the planner would pay per offer of `offers` (a `load_offers` frame), billed
    rates applied: cloud, region, instance_type, accelerator, accelerator_count, `usd_per_hour`
    {on_demand, spot}, `basis`, `source`, `as_of` (of the on-demand price), the same three for the
    spot price, `before_bill_usd_per_hour` {on_demand, spot} (null unless billed) and
    `spot_suspicious` (a spot price the planner never uses)."""
    base = offers.select(
        *KEY, pl.col("usd_per_hour_on_demand").alias("on_demand_usd_per_hour"), "usd_per_hour_spot",
        pl.col("source").alias("price_source"), pl.col("as_of").alias("price_as_of"),
        pl.col("basis").alias("price_basis"))
    od = base.with_columns(spot=pl.lit(False), usd_per_hour=pl.col("on_demand_usd_per_hour"))
    sp = base.filter(pl.col("usd_per_hour_spot").is_not_null()).with_columns(
        spot=pl.lit(True), usd_per_hour=pl.col("usd_per_hour_spot"))
    priced = apply_billed(pl.concat([od, sp]).drop("usd_per_hour_spot"), billed)
    by_key = {(r["cloud"], r["region"], r["instance_type"], r["spot"]): r for r in priced.iter_rows(named=True)}
    out = []
    for o in offers.sort("accelerator", "accelerator_count", "cloud", "region", "instance_type").iter_rows(named=True):
        key = (o["cloud"], o["region"], o["instance_type"])
        d, s = by_key[(*key, False)], by_key.get((*key, True))
        out.append({
            "cloud": o["cloud"], "region": o["region"], "instance_type": o["instance_type"],
            "accelerator": o["accelerator"], "accelerator_count": o["accelerator_count"],
            "usd_per_hour": {"on_demand": d["usd_per_hour"], "spot": s["usd_per_hour"] if s else None},
            "basis": d["price_basis"], "source": d["price_source"], "as_of": d["price_as_of"],
            "spot_basis": s["price_basis"] if s else None, "spot_source": s["price_source"] if s else None,
            "spot_as_of": s["price_as_of"] if s else None,
            "before_bill_usd_per_hour": {"on_demand": d["before_bill_usd_per_hour"],
                                         "spot": s["before_bill_usd_per_hour"] if s else None},
            "spot_suspicious": bool(o.get("spot_suspicious")),
            "price_problem": o.get("price_problem"), "spot_problem": o.get("spot_problem"),
        })
    return out


def load_offers(
    clouds: list[str] | None = None,
    accelerators: list[str] | None = None,
    regions: list[str] | None = None,
    *,
    usable_only: bool = True,
) -> pl.DataFrame:
    """Returns the offers at the prices a plan pays before the bill, filtered: the bundled snapshot,
    newer SkyPilot catalogs (the project's copy, SkyPilot's cache), the team's prices of
    gpuledger.toml `[prices]` and `$GPULEDGER_PRICES` (gpuledger/catalog/pricing.py).

    Columns: those of `offers.csv` (`OFFER_COLUMNS`) plus `basis` (catalog | skypilot | override),
    `spot_suspicious` (bool; see `SPOT_SUSPICION_RULES`) and `price_snapshot` (one id for the rows
    returned), `price_problem` / `spot_problem` (why a price is refused / a spot price not used: the
    floors of gpuledger/catalog/floors.py, peers from every offer; a spot problem also sets
    `spot_suspicious`). `usable_only` (default): rows whose on-demand price is refused are left out
    (the planner passes False, to name them). Filters are case-insensitive for clouds; accelerators are normalised
    (`a100-80gb` -> `A100-80GB`).
    """
    from gpuledger.catalog.floors import mark

    df = mark(priced_offers())  # peers: every offer, before the filters
    if clouds:
        df = df.filter(pl.col("cloud").is_in([c.lower() for c in clouds]))
    if accelerators:
        names = []
        for a in accelerators:
            try:
                names.append(normalize_accelerator(a))
            except UnknownAccelerator:
                names.append(a)
        df = df.filter(pl.col("accelerator").is_in(names))
    if regions:
        df = df.filter(pl.col("region").is_in(list(regions)))
    if usable_only:
        df = df.filter(pl.col("price_problem").is_null())
    df = df.with_columns(spot_suspicious=spot_suspicious_expr() | pl.col("spot_problem").is_not_null())
    return df.with_columns(price_snapshot=pl.lit(price_snapshot_id(df)))


# --------------------------------------------------------------------------------------------
# Preemption
