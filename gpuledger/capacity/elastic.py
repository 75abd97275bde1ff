"""Elastic sizing of one capacity option: replicas per hour of the traffic profile, what the
autoscaled fleet costs beside the fixed fleet at peak, the spot share and its preemption risk,
staging and canary priced apart, and committed-use prices with the utilisation above which they pay.

Every function is pure; the inputs are the option's operating point (requests/s one replica
sustains there) and its prices. The rules, each stated in `ELASTIC_ASSUMPTIONS`:

- replicas in hour h = clamp(ceil(qps_h × output_tokens × (1 + headroom) / (tokens/s per GPU ×
  GPUs per replica)), min_replicas, max_replicas) — the fixed fleet's formula at that hour's rate, so
  a flat profile costs exactly the fixed fleet;
- scale-up: a new replica is billed from the hour it is launched and serves `cold_start_s` later;
  while it boots, the replicas already up carry the new hour's traffic on their headroom. When they
  cannot (the hour's demand exceeds their capacity without headroom), the cold start counts as
  SLO-missing minutes, scaled by the share of the traffic above that capacity;
- scale-down: a replica no longer needed stays up `scale_down_delay_s` more (billed);
- a month is 730 h: a day's profile repeats 730/24 times, a week's 730/168.
"""

from __future__ import annotations

import math
from typing import Any

#: 730 h = 8,760 h a year / 12: the month cloud providers bill by (AWS, GCP pricing pages); every
#: monthly figure of a capacity plan uses it (gpuledger.capacity.prices too)
HOURS_PER_MONTH = 730

ELASTIC_ASSUMPTIONS = [
    "autoscaling: replicas in each hour = the fixed fleet's formula at that hour's qps (ceil(qps × output_tokens "
    "× (1 + headroom) / tokens/s per replica)), within autoscale.min_replicas..max_replicas; a day's profile "
    "repeats 730/24 times a month, a week's 730/168",
    "scale-up: a new replica is billed from its launch at the hour's start and serves cold_start_s later; the "
    "replicas already up carry the rise on their headroom, and where their capacity without headroom is short, "
    "the cold start counts as SLO-missing minutes (× the share of traffic above that capacity); scale-down: a "
    "replica stays up scale_down_delay_s after it is no longer needed (billed)",
    "spot share: the replicas above what carries the hour's traffic without headroom may run on spot (losing "
    "every spot replica at once leaves a fleet that still carries the load, at the engine's limit); preemptions "
    "expected = spot replica-hours × the catalog's preemption rate, each a cold start of one replica down",
    "staging: its replicas up all month; canary: whole replicas for traffic_share of the peak (at least one), "
    "besides production, which stays sized for all traffic (a rollback sends the canary's share back)",
    "committed use: a replica that is up more than (1 − discount) of the month's hours is cheaper committed "
    "(break-even utilisation = 1 − discount); the base replicas up that often are committed, the rest on demand",
]


def profile(traffic) -> list[float]:
    """Returns the traffic's requests/s per hour: `hourly_qps`, or 24 hours at the peak `qps`."""
    hourly = getattr(traffic, "hourly_qps", None)
    return [float(q) for q in hourly] if hourly else [float(traffic.qps)] * 24


def replicas_for(qps: float, output_tokens: float, headroom: float, tokens_per_s_per_replica: float) -> int:
    """Returns the whole replicas that carry `qps` with headroom (0 for no traffic)."""
    if qps <= 0:
        return 0
    return max(1, math.ceil(qps * output_tokens * (1.0 + headroom) / tokens_per_s_per_replica - 1e-9))


def replicas_by_hour(hourly: list[float], output_tokens: float, headroom: float, tokens_per_s_per_replica: float,
                     *, min_replicas: int = 1, max_replicas: int | None = None) -> list[int]:
    """Returns the replicas the autoscaler keeps in each hour of the profile."""
    out = []
    for q in hourly:
        n = max(min_replicas, replicas_for(q, output_tokens, headroom, tokens_per_s_per_replica))
        out.append(min(n, max_replicas) if max_replicas else n)
    return out


def autoscaled(hourly: list[float], output_tokens: float, headroom: float, tokens_per_s_per_replica: float,
               gpus_per_replica: int, usd_per_gpu_hour: float, autoscale=None) -> dict[str, Any]:
    """Returns the autoscaled fleet of one option: `replicas_by_hour`, `replica_hours_per_month`,
    `usd_per_month_autoscaled`, `slo_missing_minutes_per_month`, `scale_ups_per_month`,
    `capped_hours` (hours whose demand exceeds max_replicas), `cold_start_covered_by` and `why`."""
    lo = getattr(autoscale, "min_replicas", 1)
    hi = getattr(autoscale, "max_replicas", None)
    cold = float(getattr(autoscale, "cold_start_s", 300.0))
    delay = float(getattr(autoscale, "scale_down_delay_s", 600.0))
    need = [replicas_for(q, output_tokens, headroom, tokens_per_s_per_replica) for q in hourly]
    reps = replicas_by_hour(hourly, output_tokens, headroom, tokens_per_s_per_replica, min_replicas=lo, max_replicas=hi)
    n = len(hourly)
    per_month = HOURS_PER_MONTH / n
    extra_hours = 0.0  # replica-hours kept up by the scale-down delay
    missing_min = 0.0
    ups = 0
    capped = 0
    for h in range(n):
        prev = reps[h - 1]  # the profile wraps: hour 0 follows the last
        if reps[h] < prev:
            extra_hours += (prev - reps[h]) * min(delay, 3600.0) / 3600.0
        if reps[h] > prev:
            ups += 1
            # while the new replicas boot, the `prev` replicas carry hour h without headroom at most
            carry = prev * tokens_per_s_per_replica
            demand = hourly[h] * output_tokens
            if demand > carry:
                missing_min += min(cold, 3600.0) / 60.0 * (1.0 - carry / demand)
        if need[h] > reps[h]:
            capped += 1
            missing_min += 60.0 * (1.0 - reps[h] / need[h])
    replica_hours = (sum(reps) + extra_hours) * per_month
    covered = "headroom" if missing_min == 0 else "SLO-missing minutes"
    period = "day" if n == 24 else "week"
    why = (f"{min(reps)}-{max(reps)} replicas over the {period} (min {lo}{f', max {hi}' if hi else ''}); {ups} "
           f"scale-up(s) a {period}; the {cold:g} s cold start is "
           + ("covered by the headroom of the replicas already up" if missing_min == 0 else
              f"not covered by headroom everywhere: {missing_min * per_month:,.1f} SLO-missing minutes a month"))
    if capped:
        why += f"; {capped} hour(s) need more than max_replicas {hi}: the shortfall counts as SLO-missing minutes"
    return {
        "replicas_by_hour": reps,
        "replica_hours_per_month": round(replica_hours, 1),
        "usd_per_month_autoscaled": round(replica_hours * gpus_per_replica * usd_per_gpu_hour, 2),
        "slo_missing_minutes_per_month": round(missing_min * per_month, 1),
        "scale_ups_per_month": round(ups * per_month, 1),
        "capped_hours": capped,
        "cold_start_covered_by": covered,
        "why": why,
    }


def spot_share(hourly: list[float], reps: list[int], output_tokens: float, tokens_per_s_per_replica: float,
               gpus_per_replica: int, usd_od: float, usd_spot: float | None, preemptions_per_hour: float | None,
               cold_start_s: float) -> dict[str, Any] | None:
    """Returns the share of replica-hours that may run on spot, what the fleet then costs a month, and
    the preemption risk (None without a trusted spot price)."""
    if usd_spot is None:
        return None
    spot_h = 0.0
    for q, r in zip(hourly, reps, strict=True):
        base = replicas_for(q, output_tokens, 0.0, tokens_per_s_per_replica) if q > 0 else min(r, 1)
        spot_h += max(0, r - base)
    per_month = HOURS_PER_MONTH / len(hourly)
    total_h = sum(reps) * per_month
    spot_h *= per_month
    usd = ((total_h - spot_h) * usd_od + spot_h * usd_spot) * gpus_per_replica
    rate = preemptions_per_hour or 0.0
    pre = spot_h * rate
    return {
        "spot_share": round(spot_h / total_h, 3) if total_h else 0.0,
        "spot_replica_hours_per_month": round(spot_h, 1),
        "usd_per_month_with_spot": round(usd, 2),
        "preemptions_per_month": round(pre, 1),
        "replica_minutes_down_per_month": round(pre * cold_start_s / 60.0, 1),
        "preemptions_per_hour": rate,
    }


def environments_cost(envs, demand_tokens_per_s: float, tokens_per_s_per_replica: float, gpus_per_replica: int,
                      usd_per_gpu_hour: float) -> dict[str, Any]:
    """Returns {staging: {...}, canary: {...}} (those the spec names): replicas, GPUs, $/month."""
    out: dict[str, Any] = {}

    def priced(replicas: int) -> dict[str, Any]:
        gpus = replicas * gpus_per_replica
        return {"replicas": replicas, "gpus": gpus,
                "usd_per_month": round(gpus * usd_per_gpu_hour * HOURS_PER_MONTH, 2)}

    staging = getattr(envs, "staging", None)
    if staging is not None:
        out["staging"] = priced(staging.replicas)
    canary = getattr(envs, "canary", None)
    if canary is not None:
        reps = max(1, math.ceil(canary.traffic_share * demand_tokens_per_s / tokens_per_s_per_replica - 1e-9))
        out["canary"] = {**priced(reps), "traffic_share": canary.traffic_share}
    return out


def committed_use(reps: list[int], gpus_per_replica: int, usd_per_gpu_hour: float,
                  discounts_pct: dict[str, float]) -> dict[str, Any]:
    """Returns, per term ('1y', '3y'), the break-even utilisation (1 − discount), the replicas worth
    committing (up at least that share of the hours), and the month's cost with them committed and
    the rest on demand."""
    n = len(reps)
    out: dict[str, Any] = {}
    for term, pct in sorted(discounts_pct.items()):
        d = pct / 100.0
        breakeven = 1.0 - d
        # the k-th replica is up in the hours with >= k replicas; commit the most k up >= breakeven of the
        # hours: with the hours sorted by replicas (most first) and m the fewest hours that reach the
        # break-even share, that is the m-th busiest hour's replicas (one pass over the hours, not one
        # per replica: a fleet of 10^6 replicas answers as fast as one of 2)
        busiest = sorted(reps, reverse=True)
        m = next((i for i in range(n + 1) if i / n >= breakeven), None) if n else None
        committed = 0 if m is None or not busiest else (busiest[0] if m == 0 else busiest[m - 1])
        od_hours = sum(max(0, r - committed) for r in reps) * HOURS_PER_MONTH / n
        usd = (committed * HOURS_PER_MONTH * (1 - d) + od_hours) * gpus_per_replica * usd_per_gpu_hour
        out[term] = {"discount_pct": pct, "break_even_utilisation": round(breakeven, 3),
                     "committed_replicas": committed, "usd_per_month": round(usd, 2)}
    return out
