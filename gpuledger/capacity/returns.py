"""The return on serving: what a million output tokens and a request cost at the planned load, the
hosted API's bill for the same traffic, the traffic above which self-hosting is cheaper, and the
months a fine-tune takes to pay back. Pure arithmetic on a plan's option and the spec.

- requests a month = mean qps of the profile × 3,600 × 730; output tokens = requests × output_tokens;
- the API's month = requests × (prompt_tokens × input price + output_tokens × output price) / 1e6;
- break-even: the profile scaled by k (same shape) until the self-hosted month (autoscaled, whole
  replicas, min_replicas) is no dearer than the API's and stays so for every larger k; reported as the
  mean and peak qps there. None when a fully used replica still costs more per request than the API;
- payback months = the fine-tune's cost / the month's gain, the gain being the API's month (or
  revenue × requests) minus the self-hosted month; None when the gain is not positive.

The self-hosted month is always production (autoscaled) + the spec's staging and canary replicas:
a team that self-hosts pays for them; the API needs neither (issue 38: the example's payback of
0.49 months left them out; with them self-hosting costs more than the API).
"""

from __future__ import annotations

from typing import Any

from gpuledger.capacity import elastic

SECONDS_PER_MONTH = 3600 * elastic.HOURS_PER_MONTH


def traffic_month(hourly: list[float], prompt_tokens: float, output_tokens: float) -> dict[str, float]:
    """Returns requests, prompt and output tokens a month for a profile (mean qps × 730 h)."""
    mean = sum(hourly) / len(hourly)
    req = mean * SECONDS_PER_MONTH
    return {"mean_qps": mean, "requests": req, "prompt_tokens": req * prompt_tokens, "output_tokens": req * output_tokens}


def unit_costs(usd_per_month: float | None, month: dict[str, float]) -> dict[str, float | None]:
    """Returns $ per 1M output tokens and $ per request of a month's bill at the month's traffic."""
    if usd_per_month is None or not month["requests"]:
        return {"usd_per_1m_output_tokens": None, "usd_per_request": None}
    return {"usd_per_1m_output_tokens": round(usd_per_month / month["output_tokens"] * 1e6, 4),
            "usd_per_request": round(usd_per_month / month["requests"], 6)}


def api_usd_per_month(api, month: dict[str, float]) -> float:
    """Returns the API's bill for a month of this traffic."""
    return (month["prompt_tokens"] * api.usd_per_1m_input_tokens + month["output_tokens"] * api.usd_per_1m_output_tokens) / 1e6


def break_even(hourly: list[float], prompt_tokens: float, output_tokens: float, headroom: float,
               tokens_per_s_per_replica: float, gpus_per_replica: int, usd_per_gpu_hour: float, api,
               autoscale=None, environments=None) -> dict[str, Any]:
    """Returns the traffic above which self-hosting this option costs less than the API (see the
    module docstring): {mean_qps, peak_qps, scale, self_usd_per_month, api_usd_per_month} or
    {mean_qps: None, why}. `environments` (the spec's staging and canary) are paid at every scale:
    staging's replicas all month, the canary's whole replicas for its share of the scaled peak."""
    def costs(k: float) -> tuple[float, float]:
        scaled = [q * k for q in hourly]
        own = elastic.autoscaled(scaled, output_tokens, headroom, tokens_per_s_per_replica, gpus_per_replica,
                                 usd_per_gpu_hour, autoscale)["usd_per_month_autoscaled"]
        own += environments_usd_per_month(environments, max(scaled) * output_tokens * (1 + headroom),
                                          tokens_per_s_per_replica, gpus_per_replica, usd_per_gpu_hour)
        return own, api_usd_per_month(api, traffic_month(scaled, prompt_tokens, output_tokens))

    # at full use a replica serves tokens_per_s_per_replica / (1 + headroom) output tokens a second
    req_per_replica_hour = tokens_per_s_per_replica / (1 + headroom) / output_tokens * 3600
    own_per_request = gpus_per_replica * usd_per_gpu_hour / req_per_replica_hour
    canary = getattr(getattr(environments, "canary", None), "traffic_share", None)
    if canary:  # the canary's replicas grow with the traffic: production's cost × (1 + its share)
        own_per_request *= 1 + canary
    api_per_request = (prompt_tokens * api.usd_per_1m_input_tokens + output_tokens * api.usd_per_1m_output_tokens) / 1e6
    if own_per_request >= api_per_request:
        return {"mean_qps": None, "peak_qps": None,
                "why": f"a fully used replica costs ${own_per_request:.6f} a request, the API ${api_per_request:.6f}: "
                       "self-hosting this option never costs less"}
    # from a scale where self-hosting is surely cheaper (rounding up one replica per hour is negligible)
    hi = 1.0
    while True:
        own, paid = costs(hi)
        if own <= paid and hi * max(hourly) * output_tokens * (1 + headroom) > 50 * tokens_per_s_per_replica:
            break
        hi *= 2.0
        if hi > 1e12:  # unreachable given the per-request test above; a guard, not a result
            return {"mean_qps": None, "peak_qps": None, "why": "no break-even found"}
    # walk down a geometric grid to the last scale at which self-hosting stays cheaper, then bisect
    lo = hi
    while lo > 1e-9:
        own, paid = costs(lo / 1.25)
        if own > paid:
            break
        lo /= 1.25
    a, b = lo / 1.25, lo  # self-hosting dearer at a, cheaper at b
    for _ in range(30):
        m = (a + b) / 2
        own, paid = costs(m)
        a, b = (a, m) if own <= paid else (m, b)
    own, paid = costs(b)
    mean = sum(hourly) / len(hourly) * b
    return {"mean_qps": round(mean, 4), "peak_qps": round(max(hourly) * b, 4), "scale": round(b, 4),
            "self_usd_per_month": round(own, 2), "api_usd_per_month": round(paid, 2),
            "why": f"self-hosting costs less than the API from {mean:,.3g} req/s on average ({b:,.3g} × this profile)"}


def environments_usd_per_month(environments, demand_tokens_per_s: float, tokens_per_s_per_replica: float,
                               gpus_per_replica: int, usd_per_gpu_hour: float) -> float:
    """Returns the month of the spec's staging and canary replicas (0 when it names none)."""
    if environments is None:
        return 0.0
    envs = elastic.environments_cost(environments, demand_tokens_per_s, tokens_per_s_per_replica, gpus_per_replica,
                                     usd_per_gpu_hour)
    return sum(e["usd_per_month"] for e in envs.values())


def payback(fine_tune_usd: float | None, self_usd_per_month: float | None, month: dict[str, float],
            api_month_usd: float | None, revenue_usd_per_request: float | None) -> dict[str, Any]:
    """Returns {payback_months, gain_usd_per_month, basis, why}: the fine-tune's cost over the month's
    gain (API replaced, else revenue), or None with the reason."""
    if fine_tune_usd is None:
        return {"payback_months": None, "gain_usd_per_month": None, "basis": None, "why": "no fine_tune in the spec"}
    if self_usd_per_month is None:
        return {"payback_months": None, "gain_usd_per_month": None, "basis": None, "why": "no priced feasible option"}
    if api_month_usd is not None:
        basis, worth = "api", api_month_usd
    elif revenue_usd_per_request is not None:
        basis, worth = "revenue", revenue_usd_per_request * month["requests"]
    else:
        return {"payback_months": None, "gain_usd_per_month": None, "basis": None,
                "why": "give compare.api or compare.revenue_usd_per_request to weigh the fine-tune against"}
    gain = worth - self_usd_per_month
    if gain <= 0:
        return {"payback_months": None, "gain_usd_per_month": round(gain, 2), "basis": basis,
                "why": f"serving costs ${self_usd_per_month:,.0f}/month, more than the ${worth:,.0f} it "
                       f"{'saves on the API' if basis == 'api' else 'earns'}: the fine-tune never pays back"}
    months = fine_tune_usd / gain
    return {"payback_months": float(f"{months:.3g}"), "gain_usd_per_month": round(gain, 2), "basis": basis,
            "why": f"${fine_tune_usd:,.2f} fine-tune / ${gain:,.2f} a month gained "
                   f"({'API bill avoided' if basis == 'api' else 'revenue'} − serving) = {months:,.3g} months"}
