"""Prices with a floor: a price far below its peers is refused or flagged, never planned on (issue 43
item 3, issue 38's spot outliers). Pure polars over a `load_offers`-shaped frame; no settings.

Rules (each row's problem is a sentence naming the row, its price, its source and its peers):

- **On-demand**: not a number, infinite, or <= 0; or per GPU-hour below `FLOOR_FRACTION` of the
  median per-GPU on-demand price of the same accelerator on the same cloud (at least
  `FLOOR_MIN_PEERS` offers: regions and instance sizes), or below `CROSS_CLOUD_FLOOR_FRACTION` of its
  median over every cloud: refused (`price_problem`); the offer is not planned. 8% is the floor gpuledger
  already holds spot prices to (`IMPLAUSIBLE_SPOT_FRACTION`): nothing credible sells a GPU-hour at
  less than that share of what its peers ask.
- **Spot**: not a number, infinite or <= 0: flagged (`spot_problem`), never used (below 8% of its own
  on-demand price is `offers.spot_suspicious_expr`'s rule already). And an **outlier**: below `SPOT_OUTLIER_FRACTION` of the median spot price of the same cloud
  and instance type in at least `SPOT_OUTLIER_MIN_PEERS` other regions, with no other region within
  `SPOT_COMPANY` of it (alone): flagged, not chosen (the plan says which). A real market low shows in
  more than one region; one region at a third of 15 others is a catalog glitch or a capacity trap.
- **Billed rates** (`billed_problem`): a learned rate (EffectiveCost / hours) not finite, <= 0, or
  below `FLOOR_FRACTION` of the price before the bill: a credit or refund, never the learned rate.
"""

from __future__ import annotations

import math
from typing import Any

import polars as pl

from gpuledger.catalog.offers import IMPLAUSIBLE_SPOT_FRACTION

#: a price per GPU-hour below this share of its accelerator's median peer price is refused
FLOOR_FRACTION = IMPLAUSIBLE_SPOT_FRACTION
#: offers of the same cloud and accelerator that make a median to compare with, at least
FLOOR_MIN_PEERS = 3
#: below this share of the accelerator's median over every cloud a price is refused even without
#: same-cloud peers: marketplaces sell far below the hyperscalers (vast.ai V100 at $0.18 per GPU-hour is
#: 5% of the $3.37 median of 139 V100 offers in the bundled catalog), nothing real sells at 1%
CROSS_CLOUD_FLOOR_FRACTION = 0.01
#: a spot price below this share of its instance type's median spot price in other regions is an outlier
#: (GCP a3-highgpu-1g spot spans 0.85-1.2x its median over 13 regions in the bundled catalog; AWS p5
#: 0.7-1.3x; half the median is outside every regional spread but the glitches)
SPOT_OUTLIER_FRACTION = 0.5
#: other regions of the same cloud and instance type a spot price is compared with, at least
SPOT_OUTLIER_MIN_PEERS = 3
#: another region within this share of an outlier's price keeps it company (it is not alone)
SPOT_COMPANY = 0.25
#: the rules in words (plans and `gpuledger prices` cite them)
FLOOR_RULES = (
    f"a price that is not a number, infinite or <= 0, or per GPU-hour below {FLOOR_FRACTION:.0%} of the median "
    "of its accelerator's offers, is refused",
    f"a spot price below {SPOT_OUTLIER_FRACTION:.0%} of the median spot price of the same instance type in "
    f"{SPOT_OUTLIER_MIN_PEERS}+ other regions, alone (no other region within {SPOT_COMPANY:.0%}), is an outlier, "
    "not chosen",
)


def _bad(x: Any) -> bool:
    return x is None or not isinstance(x, (int, float)) or not math.isfinite(x) or x <= 0


def _median(values: list[float]) -> float | None:
    vals = sorted(v for v in values if not _bad(v))
    if not vals:
        return None
    n = len(vals)
    return vals[n // 2] if n % 2 else (vals[n // 2 - 1] + vals[n // 2]) / 2


def _where(r: dict[str, Any]) -> str:
    return f"{r['cloud']}/{r['region']} {r['instance_type']}"


def _said(source: Any, as_of: Any) -> str:
    return f"{source or 'unknown source'}{', as of ' + str(as_of) if as_of else ''}"


#: the last frames marked, by their content (`load_offers` marks the same catalog at every plan: 15 ms each)
_MARKED: dict[tuple, pl.DataFrame] = {}
_MARKED_KEEP = 4


def mark(offers: pl.DataFrame) -> pl.DataFrame:
    """Returns `offers` with `price_problem` (why its on-demand price is refused) and `spot_problem`
    (why its spot price is not used), each null when fine; the peers are the rows of `offers`.
    The same frame (its columns, types and every row, in order) is marked once per process."""
    key = (tuple(offers.schema.items()), offers.hash_rows().to_numpy().tobytes()) if offers.width else None
    if key is not None and (hit := _MARKED.get(key)) is not None:
        return hit
    out = _mark(offers)
    if key is not None:
        if len(_MARKED) >= _MARKED_KEEP:
            _MARKED.pop(next(iter(_MARKED)))
        _MARKED[key] = out
    return out


def _mark(offers: pl.DataFrame) -> pl.DataFrame:
    if offers.is_empty():
        return offers.with_columns(price_problem=pl.lit(None, dtype=pl.String), spot_problem=pl.lit(None, dtype=pl.String))
    rows = offers.select("cloud", "region", "instance_type", "accelerator", "accelerator_count",
                         "usd_per_hour_on_demand", "usd_per_hour_spot",
                         pl.col("source") if "source" in offers.columns else pl.lit(None, dtype=pl.String).alias("source"),
                         pl.col("as_of") if "as_of" in offers.columns else pl.lit(None, dtype=pl.String).alias("as_of"),
                         ).to_dicts()
    per_gpu: dict[str, list[float]] = {}
    per_gpu_cloud: dict[tuple[str, str], list[float]] = {}
    spot_by_type: dict[tuple[str, str], list[tuple[str, float]]] = {}
    for r in rows:
        n = max(1, int(r["accelerator_count"] or 1))
        if not _bad(r["usd_per_hour_on_demand"]):
            per_gpu.setdefault(r["accelerator"], []).append(r["usd_per_hour_on_demand"] / n)
            per_gpu_cloud.setdefault((r["cloud"], r["accelerator"]), []).append(r["usd_per_hour_on_demand"] / n)
        if not _bad(r["usd_per_hour_spot"]):
            spot_by_type.setdefault((r["cloud"], r["instance_type"]), []).append((r["region"], r["usd_per_hour_spot"]))
    medians = {a: _median(v) for a, v in per_gpu.items()}
    cloud_medians = {k: _median(v) for k, v in per_gpu_cloud.items() if len(v) >= FLOOR_MIN_PEERS}
    price_problems: list[str | None] = []
    spot_problems: list[str | None] = []
    for r in rows:
        n = max(1, int(r["accelerator_count"] or 1))
        od, spot, med = r["usd_per_hour_on_demand"], r["usd_per_hour_spot"], medians.get(r["accelerator"])
        said = _said(r["source"], r["as_of"])
        problem = None
        if _bad(od):
            problem = f"on-demand price {od!r} $/h of {_where(r)} ({said}) is not a positive number: refused"
        elif (cm := cloud_medians.get((r["cloud"], r["accelerator"]))) is not None and od / n < FLOOR_FRACTION * cm:
            problem = (f"on-demand price ${od:g}/h of {_where(r)} ({said}) is ${od / n:.4g} per GPU-hour, below "
                       f"{FLOOR_FRACTION:.0%} of the median ${cm:.2f} of {len(per_gpu_cloud[(r['cloud'], r['accelerator'])])} "
                       f"{r['cloud']} {r['accelerator']} offers: refused")
        elif med is not None and od / n < CROSS_CLOUD_FLOOR_FRACTION * med:
            problem = (f"on-demand price ${od:g}/h of {_where(r)} ({said}) is ${od / n:.4g} per GPU-hour, below "
                       f"{CROSS_CLOUD_FLOOR_FRACTION:.0%} of the median ${med:.2f} of {len(per_gpu[r['accelerator']])} "
                       f"{r['accelerator']} offers of every cloud: refused")
        price_problems.append(problem)
        sp = None
        if problem is not None:
            pass  # the offer is refused whole: its spot price is not looked at
        elif spot is not None and _bad(spot):
            sp = f"spot price {spot!r} $/h of {_where(r)} ({said}) is not a positive number: not used"
        elif spot is not None:
            others = [p for reg, p in spot_by_type.get((r["cloud"], r["instance_type"]), []) if reg != r["region"]]
            m = _median(others)
            if (len(others) >= SPOT_OUTLIER_MIN_PEERS and m is not None and spot < SPOT_OUTLIER_FRACTION * m
                    and not any(abs(p - spot) <= SPOT_COMPANY * spot for p in others)):
                sp = (f"spot price ${spot:g}/h of {_where(r)} ({said}) is an outlier: {spot / m:.2f}x the median "
                      f"${m:.2f}/h of {len(others)} other regions (${min(others):.2f}-{max(others):.2f}/h) and "
                      "alone at that price: skipped, not chosen")
        spot_problems.append(sp)
    return offers.with_columns(price_problem=pl.Series(price_problems, dtype=pl.String),
                               spot_problem=pl.Series(spot_problems, dtype=pl.String))


def billed_problem_expr(rate: str = "_rate", before: str = "usd_per_hour") -> pl.Expr:
    """A boolean expression: the billed rate column `rate` may not replace the price `before` (not finite,
    <= 0, or below `FLOOR_FRACTION` of it: a credit or a refund, not a rate)."""
    r = pl.col(rate)
    return r.is_not_null() & (~r.is_finite() | (r <= 0) | (r < FLOOR_FRACTION * pl.col(before))).fill_null(True)


def billed_notes(offers: pl.DataFrame, billed: Any) -> list[str]:
    """Returns one line per billed rate of `billed` (`BilledRates`) refused by the floor for an offer of
    `offers` (a `load_offers` frame): the offer, the rate, its GPU-hours, the price kept."""
    rows = billed.backed() if billed is not None and hasattr(billed, "backed") else billed
    if rows is None or rows.is_empty() or offers.is_empty():
        return []
    base = offers.select("cloud", "region", "instance_type", "usd_per_hour_on_demand", "usd_per_hour_spot",
                         pl.col("source").alias("price_source"))
    prices = pl.concat([
        base.select("cloud", "region", "instance_type", "price_source", spot=pl.lit(False),
                    usd_per_hour=pl.col("usd_per_hour_on_demand")),
        base.filter(pl.col("usd_per_hour_spot").is_not_null()).select(
            "cloud", "region", "instance_type", "price_source", spot=pl.lit(True), usd_per_hour=pl.col("usd_per_hour_spot")),
    ])
    key = ["cloud", "region", "instance_type", "spot"]
    ev = rows.select(*key, pl.col("usd_per_hour").alias("_rate"), pl.col("billed_gpu_hours").alias("_gh"),
                     pl.col("effective_usd").alias("_usd"))
    hit = prices.join(ev, on=key, how="inner").filter(billed_problem_expr())
    out = []
    for r in hit.unique(subset=key).sort(key).iter_rows(named=True):
        opt = "spot" if r["spot"] else "on-demand"
        out.append(f"price floor: billed rate refused: {r['cloud']}/{r['region']} {r['instance_type']} {opt}, "
                   f"${r['_usd']:.4g} for {r['_gh']:.1f} GPU-hours on your FOCUS bill (${r['_rate']:.4g}/h), is not "
                   f"a positive rate of at least {FLOOR_FRACTION:.0%} of its price ${r['usd_per_hour']:g}/h "
                   f"({r['price_source']}): a credit or refund, not a rate; planned at that price instead")
    return out


def offer_notes(offers: pl.DataFrame, limit: int = 6) -> list[str]:
    """Returns the plan's lines for refused and flagged prices of `offers` (a `mark`ed frame): each row
    and its source, at most `limit` of each kind, then how many more."""
    out: list[str] = []
    for col, more in (("price_problem", "on-demand prices refused"), ("spot_problem", "spot prices not used")):
        if col not in offers.columns:
            continue
        said = offers.filter(pl.col(col).is_not_null())[col].unique(maintain_order=True).to_list()
        out += [f"price floor: {p}" for p in said[:limit]]
        if len(said) > limit:
            out.append(f"price floor: ... and {len(said) - limit} more {more} (`gpuledger prices` lists them)")
    return out
