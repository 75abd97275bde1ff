"""Mixed fleets: the cheapest mix of GPU types that carries a day's (or week's) traffic at the SLO,
beside the best single type, with the saving. Pure arithmetic on a capacity plan's options.

Each feasible, priced option is a replica type i: it serves R_i output tokens/s at its operating point
(the rate the plan sized it on, at slo.confidence) for c_i $/hour (GPUs per replica × the on-demand
price per GPU). In hour h the fleet must carry D_h = qps_h × output_tokens × (1 + headroom). The mix of
hour h is the integer covering problem: minimise Σ n_i c_i subject to Σ n_i R_i ≥ D_h, n_i ≥ 0, over
every type alone and every pair of types (the exact optimum of each pair: the type with the lower
$/token fills all but a remainder, which the other tops up; every split within one replica of the
first type's granularity is tried). The month is the hours' sum × 730 / hours.

Why a mix can be cheaper (Mélange, Griggs et al. 2024: up to 77% at the same SLO): a large replica
is the cheapest per token at high load, but in the quiet hours (and for the remainder above whole
large replicas) a small GPU rounds up far less. A replica of either type meets the SLO for the
spec's whole length mix at its own operating point; requests are routed in proportion to each
replica's rate (weighted round-robin), so every replica runs at or below its operating point.

Spot across regions (SkyServe, Mao et al. 2024: 43% cheaper): the replicas above what carries the
hour without headroom may run on spot; spread over the regions that offer the type's spot, one
region's preemption takes only 1 / regions of them.

Not modelled: routing by request length (each type serves the whole mix), scale-down delay and cold
starts (the single types here use the same hour-by-hour rule, so the comparison is like for like).
"""

from __future__ import annotations

import math
from typing import Any

from gpuledger.capacity import elastic

#: at most this many candidate counts of the cheaper type are tried per hour and pair (bounded time)
MAX_SPLITS = 64


def _types(options: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for o in options:
        if not o.get("feasible") or o.get("price_per_gpu_hour_on_demand") is None or not o.get("tokens_per_s_per_gpu"):
            continue
        tp = int(o.get("gpus_per_replica") or 1)
        rate = float((o.get("bands") or {}).get("sizing_tokens_per_s_per_gpu") or o["tokens_per_s_per_gpu"]) * tp
        spot = o.get("usd_per_hour_spot")
        spot_per_replica = spot / o["gpus"] * tp if spot and o.get("gpus") else None
        out.append({"accelerator": o["accelerator"], "gpus_per_replica": tp, "rate": rate,
                    "usd_per_hour": float(o["price_per_gpu_hour_on_demand"]) * tp,
                    "usd_per_hour_spot": spot_per_replica})
    return out


def _cover_one(demand: float, t: dict[str, Any]) -> tuple[int, float]:
    n = max(1, math.ceil(demand / t["rate"] - 1e-9)) if demand > 0 else 0
    return n, n * t["usd_per_hour"]


def _cover_pair(demand: float, a: dict[str, Any], b: dict[str, Any]) -> tuple[int, int, float]:
    """Returns (n_a, n_b, $/hour) of the cheapest cover of `demand` with types a and b."""
    if demand <= 0:
        return 0, 0, 0.0
    # a: the lower $ per token/s fills most; b tops up the remainder
    full = math.ceil(demand / a["rate"] - 1e-9)
    span = min(full, max(1, math.ceil(b["rate"] / a["rate"])) + 1, MAX_SPLITS)
    best = (full, 0, full * a["usd_per_hour"])
    for k in range(0, span + 1):
        na = max(0, full - k)
        rest = demand - na * a["rate"]
        nb = max(0, math.ceil(rest / b["rate"] - 1e-9)) if rest > 1e-9 else 0
        cost = na * a["usd_per_hour"] + nb * b["usd_per_hour"]
        if cost < best[2] - 1e-9:
            best = (na, nb, cost)
    return best


def mixed_fleet(options: list[dict[str, Any]], spec, spot_regions: dict[str, int] | None = None) -> dict[str, Any] | None:
    """Returns the cheapest mix of two GPU types for the spec's hourly profile beside the best single
    type (see the module docstring), or None with fewer than two feasible priced types."""
    types = _types(options)
    if len(types) < 2:
        return None
    t = spec.traffic
    hourly = elastic.profile(t)
    per_month = elastic.HOURS_PER_MONTH / len(hourly)
    demand = [q * t.output_tokens * (1.0 + spec.headroom) for q in hourly]
    base = [q * t.output_tokens for q in hourly]  # without headroom: what spot may not carry

    singles = []
    for ty in types:
        reps = [_cover_one(d, ty)[0] for d in demand]
        singles.append({"accelerator": ty["accelerator"], "replicas_by_hour": reps,
                        "usd_per_month": round(sum(reps) * ty["usd_per_hour"] * per_month, 2)})
    single = min(singles, key=lambda s: (s["usd_per_month"], s["accelerator"]))

    best_pair = None
    for i, a0 in enumerate(types):
        for b0 in types[i + 1:]:
            a, b = sorted((a0, b0), key=lambda x: (x["usd_per_hour"] / x["rate"], x["accelerator"]))
            hours = [_cover_pair(d, a, b) for d in demand]
            usd = sum(h[2] for h in hours) * per_month
            if best_pair is None or usd < best_pair[0] - 1e-6:
                best_pair = (usd, a, b, hours)
    usd, a, b, hours = best_pair
    mix_reps = {a["accelerator"]: [h[0] for h in hours], b["accelerator"]: [h[1] for h in hours]}
    used = [k for k, v in mix_reps.items() if any(v)]
    saving = single["usd_per_month"] - usd
    out: dict[str, Any] = {
        "types": used,
        "replicas_by_hour": {k: mix_reps[k] for k in used},
        "usd_per_month": round(usd, 2),
        "best_single": single,
        "singles": {s["accelerator"]: s["usd_per_month"] for s in singles},
        "saving_usd_per_month": round(max(saving, 0.0), 2),
        "saving_pct": round(100 * max(saving, 0.0) / single["usd_per_month"], 1) if single["usd_per_month"] else 0.0,
        "routing": "weighted round-robin: each replica gets requests in proportion to its rate at its operating point",
    }
    out["spot"] = _spot(mix_reps, {a["accelerator"]: a, b["accelerator"]: b}, base, per_month, spot_regions or {})
    if len(used) < 2 or saving <= 0.005:
        out["why"] = (f"no mix of two types beats {single['accelerator']} alone (${single['usd_per_month']:,.2f}/month "
                      "hour by hour): one type is cheapest per token at every hour's load")
        out["saving_usd_per_month"], out["saving_pct"] = 0.0, 0.0
    else:
        out["why"] = (f"{' + '.join(used)}: ${usd:,.2f}/month against {single['accelerator']} alone "
                      f"${single['usd_per_month']:,.2f} (−{out['saving_pct']:g}%): {a['accelerator']} carries the load "
                      f"({a['rate']:,.0f} tokens/s for ${a['usd_per_hour']:,.2f}/h a replica) and "
                      f"{b['accelerator']} the remainder above whole replicas ({b['rate']:,.0f} tokens/s for "
                      f"${b['usd_per_hour']:,.2f}/h), so less capacity is rounded up in each hour")
    return out


def _spot(reps: dict[str, list[int]], types: dict[str, dict], base: list[float], per_month: float,
          spot_regions: dict[str, int]) -> dict[str, Any] | None:
    """The mix with the replicas above each hour's no-headroom load on spot, where the type has a
    trusted spot price, spread across the regions offering it."""
    if not any(types[k]["usd_per_hour_spot"] for k in reps):
        return None
    usd = 0.0
    spot_h = 0.0
    for h, need in enumerate(base):
        # the replicas that must stay on demand: the cheapest cover of the hour without headroom
        left = need
        for k in sorted(reps, key=lambda k: -types[k]["rate"]):
            n = reps[k][h]
            keep = min(n, math.ceil(left / types[k]["rate"] - 1e-9)) if left > 0 else 0
            left -= keep * types[k]["rate"]
            spot_n = n - keep if types[k]["usd_per_hour_spot"] else 0
            usd += (n - spot_n) * types[k]["usd_per_hour"] + spot_n * (types[k]["usd_per_hour_spot"] or 0.0)
            spot_h += spot_n
    regions = {k: spot_regions.get(k, 0) for k in reps}
    return {"usd_per_month_with_spot": round(usd * per_month, 2), "spot_replica_hours_per_month": round(spot_h * per_month, 1),
            "spot_regions": regions,
            "why": "replicas above each hour's load without headroom run on spot; spread over the regions that offer it, "
                   "one region's preemption takes 1 / regions of them (the on-demand base still carries the load)"}



def spot_regions(rows: list[dict[str, Any]]) -> dict[str, int]:
    """Returns, per accelerator, how many regions offer a trusted spot price (catalog rows)."""
    out: dict[str, set] = {}
    for r in rows:
        if r.get("usd_per_hour_spot") is not None and not r.get("spot_suspicious"):
            out.setdefault(r.get("accelerator"), set()).add((r.get("cloud"), r.get("region")))
    return {k: len(v) for k, v in out.items()}
