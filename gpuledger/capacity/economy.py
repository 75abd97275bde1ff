"""Adds the elastic fleet and the return on serving to a capacity plan (`gpuledger.capacity.plan`):
per priced option the autoscaled month beside the fixed fleet, replicas by hour, spot share,
staging/canary, committed use, $ per 1M output tokens and per request; for the plan, the API's bill
for the same traffic, the break-even traffic and the fine-tune's payback (`compare`)."""

from __future__ import annotations

from typing import Any

from gpuledger.capacity import elastic, returns

#: The keys this module adds to every option (None where the option is not priced and feasible).
ECONOMY_KEYS = ("usd_per_month_autoscaled", "replicas_by_hour", "usd_per_1m_output_tokens", "usd_per_request",
                "autoscale", "spot", "environments", "committed")


def _preemption_rate(cloud: str | None, accelerator: str) -> float | None:
    if not cloud:
        return None
    import polars as pl

    from gpuledger.catalog.offers import preemption_rates

    rates = preemption_rates(pl.DataFrame({"cloud": [cloud], "accelerator": [accelerator]}))
    return float(rates["preemptions_per_hour"][0])


def team_committed() -> list:
    """Returns the team's committed-use rates (gpuledger.toml `[[prices.committed]]`,
    `gpuledger.catalog.pricing.committed_rates`)."""
    from gpuledger.catalog.pricing import committed_rates

    return committed_rates()


def _term(months: int) -> str:
    return f"{months // 12}y" if months % 12 == 0 else f"{months}m"


def committed_terms(spec, opt: dict[str, Any], rates: list) -> tuple[dict[str, float], dict[str, str]]:
    """Returns ({term: % off on demand}, {term: source}) for one option: the spec's `committed`, else
    the discount of the team's committed rate for an instance of this accelerator (per-GPU committed
    price against the option's on-demand price per GPU)."""
    terms = {k: float(v) for k, v in dict(spec.committed).items()}
    sources = dict.fromkeys(terms, "spec committed")
    od = opt.get("price_per_gpu_hour_on_demand")
    for r in rates:
        if r.accelerator != opt["accelerator"] or not r.accelerator_count or not od:
            continue
        pct = 100.0 * (1.0 - r.usd_per_hour / r.accelerator_count / od)
        term = _term(r.term_months)
        if 0 < pct < 100 and term not in terms:
            terms[term] = round(pct, 2)
            sources[term] = f"{r.source}: {r.cloud} {r.instance_type} ${r.usd_per_hour:,.4g}/h"
    return terms, sources


def add_to_option(opt: dict[str, Any], spec, committed_rates: list | None = None) -> None:
    """Fills `ECONOMY_KEYS` of one option in place (all None unless feasible and priced).
    `committed_rates`: the team's (`team_committed()`), used where the spec gives no `committed`."""
    for k in ECONOMY_KEYS:
        opt.setdefault(k, None)
    price = opt.get("price_per_gpu_hour_on_demand")
    if not opt.get("feasible") or price is None or not opt.get("tokens_per_s_per_gpu"):
        return
    t = spec.traffic
    tp = int(opt["gpus_per_replica"] or 1)
    # the rate the fleet is sized on (slo.confidence: the throughput band's P10 at p90), so the hours'
    # replicas agree with the fixed fleet
    sized = (opt.get("bands") or {}).get("sizing_tokens_per_s_per_gpu") or opt["tokens_per_s_per_gpu"]
    per_replica = float(sized) * tp
    hourly = elastic.profile(t)
    auto = spec.autoscale
    fleet = elastic.autoscaled(hourly, t.output_tokens, spec.headroom, per_replica, tp, price, auto)
    opt["replicas_by_hour"] = fleet["replicas_by_hour"]
    opt["usd_per_month_autoscaled"] = fleet["usd_per_month_autoscaled"]
    opt["autoscale"] = {k: v for k, v in fleet.items() if k not in ("replicas_by_hour", "usd_per_month_autoscaled")}
    month = returns.traffic_month(hourly, t.prompt_tokens, t.output_tokens)
    opt.update(returns.unit_costs(fleet["usd_per_month_autoscaled"], month))
    spot_per_gpu = opt["usd_per_hour_spot"] / opt["gpus"] if opt.get("usd_per_hour_spot") and opt.get("gpus") else None
    cold = float(getattr(auto, "cold_start_s", 300.0))
    opt["spot"] = elastic.spot_share(hourly, fleet["replicas_by_hour"], t.output_tokens, per_replica, tp, price,
                                     spot_per_gpu, _preemption_rate(opt.get("cloud"), opt["accelerator"]), cold)
    demand = t.qps * t.output_tokens * (1.0 + spec.headroom)
    envs = elastic.environments_cost(spec.environments, demand, per_replica, tp, price)
    opt["environments"] = envs or None
    terms, sources = committed_terms(spec, opt, committed_rates or [])
    committed = elastic.committed_use(fleet["replicas_by_hour"], tp, price, terms) if terms else None
    for term, c in (committed or {}).items():
        c["source"] = sources[term]
    opt["committed"] = committed


def compare(best: dict[str, Any] | None, spec, fine_tune_usd: float | None,
            fine_tune_source: str | None) -> dict[str, Any] | None:
    """Returns the plan's `compare` section for its best option, or None when the spec asks for no
    comparison (no compare.api, no revenue, no fine_tune)."""
    c = spec.compare
    if c.api is None and c.revenue_usd_per_request is None and spec.fine_tune is None:
        return None
    t = spec.traffic
    hourly = elastic.profile(t)
    month = returns.traffic_month(hourly, t.prompt_tokens, t.output_tokens)
    production = best.get("usd_per_month_autoscaled") if best else None
    envs = (best.get("environments") or {}) if best else {}
    env_usd = round(sum(e["usd_per_month"] for e in envs.values()), 2)
    # every replica the spec asks for: production + staging + canary (issue 38)
    own = None if production is None else round(production + env_usd, 2)
    out: dict[str, Any] = {
        "requests_per_month": round(month["requests"]),
        "output_tokens_per_month": round(month["output_tokens"]),
        "self_usd_per_month": own,
        "self_usd_per_month_production": production,
        "self_usd_per_month_environments": env_usd if best else None,
        "self_includes": (["production (autoscaled)"] + [f"{k} ({v['replicas']} replica{'s' if v['replicas'] != 1 else ''})"
                                                          for k, v in envs.items()]) if best else None,
        "self_usd_per_1m_output_tokens": (round(own / month["output_tokens"] * 1e6, 4)
                                          if own is not None and month["output_tokens"] else None),
        "api_usd_per_month": None, "api_usd_per_1m_output_tokens": None, "break_even": None,
        "revenue_usd_per_month": None,
        "fine_tune_usd": None if fine_tune_usd is None else round(fine_tune_usd, 2),
        "fine_tune_source": fine_tune_source, "payback_months": None, "payback": None,
    }
    api_month = None
    if c.api is not None:
        api_month = returns.api_usd_per_month(c.api, month)
        out["api_usd_per_month"] = round(api_month, 2)
        out["api_usd_per_1m_output_tokens"] = round(api_month / month["output_tokens"] * 1e6, 4) if month["output_tokens"] else None
        if best is not None and own is not None:
            tp = int(best["gpus_per_replica"] or 1)
            out["break_even"] = returns.break_even(
                hourly, t.prompt_tokens, t.output_tokens, spec.headroom,
                float((best.get("bands") or {}).get("sizing_tokens_per_s_per_gpu") or best["tokens_per_s_per_gpu"]) * tp, tp,
                float(best["price_per_gpu_hour_on_demand"]), c.api, spec.autoscale, spec.environments)
    if c.revenue_usd_per_request is not None:
        out["revenue_usd_per_month"] = round(c.revenue_usd_per_request * month["requests"], 2)
    pay = returns.payback(fine_tune_usd, own, month, api_month, c.revenue_usd_per_request)
    out["payback_months"] = pay["payback_months"]
    out["payback"] = pay
    return out
