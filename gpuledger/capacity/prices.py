"""Prices of a capacity option: the cheapest offer of an accelerator in the spec's clouds (per GPU,
spot only where the catalog trusts it), what a fleet of GPUs costs per hour, day and month at it,
and where each price comes from. Pure: reads the rows it is given."""

from __future__ import annotations

from typing import Any

from gpuledger.capacity.elastic import HOURS_PER_MONTH

HOURS_PER_DAY = 24


def fleet_cost(gpus: int, usd_per_gpu_hour: float) -> dict[str, float]:
    """Returns `usd_per_hour`, `usd_per_day` (24 h) and `usd_per_month` (730 h) of `gpus` GPUs at a
    per-GPU hourly price, rounded to cents. 10 GPUs at $1.99/h → 19.90, 477.60, 14,527.00."""
    hourly = gpus * usd_per_gpu_hour
    return {
        "usd_per_hour": round(hourly, 2),
        "usd_per_day": round(hourly * HOURS_PER_DAY, 2),
        "usd_per_month": round(hourly * HOURS_PER_MONTH, 2),
    }


# --------------------------------------------------------------------------------------------
# Prices


def offer_rows(offers: Any) -> list[dict[str, Any]]:
    if offers is None:
        return []
    if hasattr(offers, "to_dicts"):  # polars
        return offers.to_dicts()
    return [dict(r) for r in offers]


def cheapest_offer(rows: list[dict[str, Any]], accelerator: str, min_count: int = 1) -> dict[str, Any] | None:
    """Returns on-demand and spot per-GPU prices of an accelerator from its cheapest offers, or None.

    A replica of `min_count` GPUs must sit in one instance (tensor parallelism needs the GPUs of one
    host), so only instances with at least that many GPUs count. Price per GPU = instance price /
    accelerator_count. Spot comes from the cheapest offer whose spot price is present and not
    flagged `spot_suspicious` (the catalog's artefacts: exactly 10% of on-demand, ≥ on-demand,
    below 8%); suspicious ones are skipped and counted.
    """
    mine = [r for r in rows if r.get("accelerator") == accelerator and int(r.get("accelerator_count") or 0) >= min_count
            and r.get("usd_per_hour_on_demand") is not None]
    if not mine:
        return None

    def per_gpu(r: dict[str, Any], col: str) -> float:
        return float(r[col]) / int(r["accelerator_count"])

    def key(r: dict[str, Any], col: str) -> tuple:
        # round so that $21.5332/4 and $5.3833/1 tie, and the smaller instance wins the tie
        return (round(per_gpu(r, col), 4), int(r["accelerator_count"]), r["cloud"], r["region"], r["instance_type"])

    od = min(mine, key=lambda r: key(r, "usd_per_hour_on_demand"))
    with_spot = [r for r in mine if r.get("usd_per_hour_spot") is not None]
    trusted = [r for r in with_spot if not r.get("spot_suspicious")]
    spot = min(trusted, key=lambda r: key(r, "usd_per_hour_spot")) if trusted else None
    return {
        "on_demand": od,
        "price_per_gpu_hour_on_demand": per_gpu(od, "usd_per_hour_on_demand"),
        "spot": spot,
        "price_per_gpu_hour_spot": per_gpu(spot, "usd_per_hour_spot") if spot else None,
        "spot_skipped": len(with_spot) - len(trusted),
    }


def _describe_offer(r: dict[str, Any], col: str) -> str:
    n = int(r["accelerator_count"])
    return (f"{r['cloud']} {r['instance_type']} ({r['region']}) ${float(r[col]):,.4g}/h for {n} GPU"
            f"{'s' if n > 1 else ''}")


def price_source(price: dict[str, Any]) -> str:
    od = price["on_demand"]
    text = f"on-demand: {_describe_offer(od, 'usd_per_hour_on_demand')}"
    if price["spot"] is not None:
        text += f"; spot: {_describe_offer(price['spot'], 'usd_per_hour_spot')}"
    else:
        text += "; spot: none trusted"
    if price["spot_skipped"]:
        text += f" ({price['spot_skipped']} spot price(s) flagged suspicious, skipped)"
    src = od.get("source") or "catalog"
    as_of = od.get("as_of") or "?"
    return f"{text}; source: {src}, as of {as_of}"


def fill_prices(opt: dict[str, Any], price: dict[str, Any] | None) -> None:
    """Fills an option's price columns (per GPU-hour, per hour/day/month of its GPUs, on demand and spot,
    the instance and `price_source`) from `cheapest_offer`'s answer; nothing when there is none."""
    if price is None:
        return
    od, spot = price["on_demand"], price["spot"]
    opt["price_per_gpu_hour_on_demand"] = round(price["price_per_gpu_hour_on_demand"], 4)
    opt["cloud"] = od["cloud"]
    opt["instance_type"] = od["instance_type"]
    opt["price_source"] = price_source(price)
    gpus = opt["gpus"]
    if gpus:
        c = fleet_cost(gpus, price["price_per_gpu_hour_on_demand"])
        opt["usd_per_hour_on_demand"] = c["usd_per_hour"]
        opt["usd_per_day_on_demand"] = c["usd_per_day"]
        opt["usd_per_month_on_demand"] = c["usd_per_month"]
        if spot is not None:
            s = fleet_cost(gpus, price["price_per_gpu_hour_spot"])
            opt["usd_per_hour_spot"] = s["usd_per_hour"]
            opt["usd_per_month_spot"] = s["usd_per_month"]
