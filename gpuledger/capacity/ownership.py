"""Rent vs buy vs API: what the spec's traffic costs a month on each path, and the monthly volume at
which each becomes the cheapest. Pure arithmetic on the plan's best option and the spec.

Every self-hosted path pays for every replica the spec asks for: production, staging (up all month)
and the canary (whole replicas for its share of the peak); the API needs neither.

- rent, on demand: the autoscaled month (replicas follow `traffic.hourly_qps`) + staging + canary;
- rent, spot: the same with the replicas above each hour's load without headroom on spot;
- rent, committed (1y / 3y): the replicas up at least the break-even share of hours committed, the
  rest on demand (`gpuledger.capacity.elastic.committed_use`) + staging + canary at the committed rate;
- buy: GPUs for the fixed fleet at peak (an owned fleet cannot scale down to save money) + staging +
  canary, bought at `own.usd_per_gpu` and written off straight-line over `own.depreciation_years`;
  power = GPUs × `own.kw_per_gpu` × `own.pue` (cooling) × 730 h × (idle share + (1 − idle share) ×
  utilisation) at `own.usd_per_kwh`; `own.usd_per_gpu_month` for hosting and support;
  utilisation default = the month's mean load / the owned fleet's capacity;
- API: prompt and output tokens at its prices (`compare.api`).

`cheapest`: the traffic scaled (the profile's shape kept) over a geometric grid from 1/100 to 100 ×
the spec's; for each path the range of monthly requests (and output tokens) where it costs least.
`payback_months` of buying: the purchase / (the cheapest rented month − owning's running cost).
"""

from __future__ import annotations

import math
from typing import Any

from gpuledger.capacity import elastic, returns

#: share of a GPU's power drawn while idle (an H100 idles near 70-100 W of 700 W; the host and
#: network draw regardless): judgement, 0.3
IDLE_POWER_SHARE = 0.3
#: typical board power per GPU incl. its share of the host (kW) when `own.kw_per_gpu` is not given:
#: the datasheets' TDP + ~30% host (judgement); unknown kinds 0.5 kW
KW_PER_GPU = {"H100": 0.9, "H200": 0.9, "B200": 1.3, "A100": 0.5, "A100-80GB": 0.5, "L40S": 0.45, "L40": 0.4,
              "L4": 0.1, "A10G": 0.2, "A10": 0.2, "A6000": 0.4, "RTX4090": 0.55, "T4": 0.1, "V100": 0.4,
              # datasheet TDPs (sources in gpus.csv): H800 700 W, A800 400 W, H20 400 W, A40 / RTX 6000 Ada 300 W, GH200 superchip
              # up to 900 W (CPU included), GB200 GPU 1.2 kW, MI300X 750 W
              "H800": 0.9, "A800": 0.5, "H20": 0.5, "A40": 0.4, "RTX6000-Ada": 0.4, "GH200": 1.0, "GB200": 1.6,
              "MI300X": 1.0}
#: scales of the spec's traffic tried for `cheapest` (1/100 .. 100 ×, 49 points)
SCALES = tuple(10 ** (k / 12) for k in range(-24, 25))


def _fleet_month(hourly: list[float], spec, per_replica: float, tp: int, price: float) -> float:
    t = spec.traffic
    prod = elastic.autoscaled(hourly, t.output_tokens, spec.headroom, per_replica, tp, price,
                              spec.autoscale)["usd_per_month_autoscaled"]
    return prod + returns.environments_usd_per_month(spec.environments, max(hourly) * t.output_tokens * (1 + spec.headroom),
                                                     per_replica, tp, price)


def _env_replicas(spec, peak_demand: float, per_replica: float) -> int:
    envs = elastic.environments_cost(spec.environments, peak_demand, per_replica, 1, 0.0)
    return sum(e["replicas"] for e in envs.values())


def _paths(best: dict[str, Any], spec, k: float) -> dict[str, float | None]:
    """Returns $/month of each path at `k` × the spec's traffic."""
    t = spec.traffic
    hourly = [q * k for q in elastic.profile(t)]
    tp = int(best["gpus_per_replica"] or 1)
    per_replica = float((best.get("bands") or {}).get("sizing_tokens_per_s_per_gpu") or best["tokens_per_s_per_gpu"]) * tp
    od = float(best["price_per_gpu_hour_on_demand"])
    out: dict[str, float | None] = {"rent_on_demand": _fleet_month(hourly, spec, per_replica, tp, od)}
    spot_gpu = best["usd_per_hour_spot"] / best["gpus"] if best.get("usd_per_hour_spot") and best.get("gpus") else None
    if spot_gpu is not None:
        reps = elastic.autoscaled(hourly, t.output_tokens, spec.headroom, per_replica, tp, od,
                                  spec.autoscale)["replicas_by_hour"]
        sp = elastic.spot_share(hourly, reps, t.output_tokens, per_replica, tp, od, spot_gpu, None, 0.0)
        env = returns.environments_usd_per_month(spec.environments, max(hourly) * t.output_tokens * (1 + spec.headroom),
                                                 per_replica, tp, od)
        out["rent_spot"] = sp["usd_per_month_with_spot"] + env
    for term, c in (best.get("committed") or {}).items():
        reps = elastic.autoscaled(hourly, t.output_tokens, spec.headroom, per_replica, tp, od,
                                  spec.autoscale)["replicas_by_hour"]
        cu = elastic.committed_use(reps, tp, od, {term: c["discount_pct"]})[term]
        env = returns.environments_usd_per_month(spec.environments, max(hourly) * t.output_tokens * (1 + spec.headroom),
                                                 per_replica, tp, od * (1 - c["discount_pct"] / 100))
        out[f"rent_committed_{term}"] = cu["usd_per_month"] + env
    own = getattr(spec, "own", None)
    if own is not None and own.price_for(best["accelerator"]) is not None:
        out["buy"] = _own_month(best, spec, hourly, per_replica, tp)["usd_per_month"]
    if spec.compare.api is not None:
        out["api"] = returns.api_usd_per_month(spec.compare.api, returns.traffic_month(hourly, t.prompt_tokens, t.output_tokens))
    return out


def _own_month(best: dict[str, Any], spec, hourly: list[float], per_replica: float, tp: int) -> dict[str, Any]:
    t, own = spec.traffic, spec.own
    peak = max(hourly) * t.output_tokens * (1 + spec.headroom)
    prod = max(1, math.ceil(peak / per_replica - 1e-9))
    env = _env_replicas(spec, peak, per_replica)
    gpus = (prod + env) * tp
    capex = gpus * own.price_for(best["accelerator"])
    depreciation = capex / (own.depreciation_years * 12)
    mean_load = sum(hourly) / len(hourly) * t.output_tokens
    util = own.utilisation if own.utilisation is not None else min(1.0, mean_load / (prod * per_replica))
    kw = own.kw_per_gpu if own.kw_per_gpu is not None else KW_PER_GPU.get(best["accelerator"], 0.5)
    energy_kwh = gpus * kw * own.pue * elastic.HOURS_PER_MONTH * (IDLE_POWER_SHARE + (1 - IDLE_POWER_SHARE) * util)
    power = energy_kwh * own.usd_per_kwh
    hosting = gpus * own.usd_per_gpu_month
    return {"gpus": gpus, "production_replicas": prod, "environment_replicas": env, "capex_usd": round(capex, 2),
            "depreciation_usd_per_month": round(depreciation, 2), "power_usd_per_month": round(power, 2),
            "energy_kwh_per_month": round(energy_kwh, 1), "utilisation": round(util, 3), "kw_per_gpu": kw,
            "hosting_usd_per_month": round(hosting, 2),
            "usd_per_month": round(depreciation + power + hosting, 2),
            "running_usd_per_month": round(power + hosting, 2)}


def rent_buy_api(best: dict[str, Any] | None, spec, compare: dict[str, Any] | None) -> dict[str, Any] | None:
    """Returns the rent / buy / API comparison for the plan's best option (None when the spec gives
    neither `own` nor `compare.api`, or no option is feasible and priced)."""
    if best is None or (getattr(spec, "own", None) is None and spec.compare.api is None):
        return None
    t = spec.traffic
    month = returns.traffic_month(elastic.profile(t), t.prompt_tokens, t.output_tokens)
    now = {k: (None if v is None else round(v, 2)) for k, v in _paths(best, spec, 1.0).items()}
    out: dict[str, Any] = {
        "accelerator": best["accelerator"],
        "requests_per_month": round(month["requests"]),
        "output_tokens_per_month": round(month["output_tokens"]),
        "usd_per_month": now,
        "cheapest_now": min(now, key=lambda k: now[k]),
        "includes": "every self-hosted path: production + " + (", ".join(
            k for k in ("staging", "canary") if getattr(spec.environments, k, None) is not None) or "no other")
        + " replicas; the API: none",
    }
    if getattr(spec, "own", None) is not None and spec.own.price_for(best["accelerator"]) is None:
        out["buy"] = {"why": f"own.usd_per_gpu gives no price for {best['accelerator']} (the best option): not compared"}
    elif getattr(spec, "own", None) is not None:
        tp = int(best["gpus_per_replica"] or 1)
        per_replica = float((best.get("bands") or {}).get("sizing_tokens_per_s_per_gpu") or best["tokens_per_s_per_gpu"]) * tp
        own = _own_month(best, spec, elastic.profile(t), per_replica, tp)
        rented = min(v for k, v in now.items() if k.startswith("rent_") and v is not None)
        gain = rented - own["running_usd_per_month"]
        own["payback_months"] = round(own["capex_usd"] / gain, 2) if gain > 0 else None
        own["payback"] = (f"${own['capex_usd']:,.0f} of GPUs ({own['gpus']}: {own['production_replicas']} production + "
                          f"{own['environment_replicas']} staging/canary replica(s) × {tp}) / (${rented:,.0f} cheapest "
                          f"rented month − ${own['running_usd_per_month']:,.0f} power and hosting) = "
                          f"{own['payback_months']:g} months" if gain > 0 else
                          "owning costs more to run than renting: the purchase never pays back")
        out["buy"] = own
    out["cheapest"] = _cheapest_ranges(best, spec, month)
    return out


def _cheapest_ranges(best: dict[str, Any], spec, month: dict[str, float]) -> list[dict[str, Any]]:
    """Returns, over the scaled traffic, the ranges of monthly volume where each path is the cheapest."""
    ranges: list[dict[str, Any]] = []
    for k in SCALES:
        costs = {p: v for p, v in _paths(best, spec, k).items() if v is not None}
        win = min(costs, key=lambda p: costs[p])
        req = month["requests"] * k
        if ranges and ranges[-1]["path"] == win:
            ranges[-1]["to_requests_per_month"] = round(req)
            ranges[-1]["to_output_tokens_per_month"] = round(month["output_tokens"] * k)
        else:
            ranges.append({"path": win, "from_requests_per_month": round(req),
                           "from_output_tokens_per_month": round(month["output_tokens"] * k),
                           "to_requests_per_month": round(req), "to_output_tokens_per_month": round(month["output_tokens"] * k)})
    return ranges
