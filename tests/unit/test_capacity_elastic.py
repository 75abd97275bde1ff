"""Elastic sizing and the return on serving (gpuledger.capacity.elastic / returns): pure arithmetic."""

from __future__ import annotations

import pytest

from gpuledger.capacity import elastic, returns
from gpuledger.capacity.plan import gpus_needed
from gpuledger.spec.capacity_models import ApiPrices, Autoscale

DAY = [2, 1.5, 1, 1, 1, 1.5, 3, 6, 10, 14, 16, 18, 20, 19, 18, 17, 16, 15, 14, 12, 10, 8, 5, 3]
PER_REPLICA = 2_000.0  # output tokens/s one replica sustains at its operating point
OUT, HEAD, TP, PRICE = 256, 0.2, 2, 2.0


def _fixed_month(peak: float) -> float:
    gpus, _ = gpus_needed(peak, OUT, HEAD, PER_REPLICA / TP, TP)
    return gpus * PRICE * elastic.HOURS_PER_MONTH


def test_flat_profile_costs_the_fixed_fleet():
    fleet = elastic.autoscaled([20.0] * 24, OUT, HEAD, PER_REPLICA, TP, PRICE, Autoscale())
    assert fleet["usd_per_month_autoscaled"] == pytest.approx(_fixed_month(20.0), rel=1e-9)
    assert fleet["replicas_by_hour"] == [4] * 24  # 20 × 256 × 1.2 / 2,000 = 3.07 → 4
    assert fleet["slo_missing_minutes_per_month"] == 0 and fleet["cold_start_covered_by"] == "headroom"


def test_a_day_well_under_its_peak_costs_well_below_the_fixed_fleet():
    fleet = elastic.autoscaled(DAY, OUT, HEAD, PER_REPLICA, TP, PRICE, Autoscale(min_replicas=1, scale_down_delay_s=0))
    reps = fleet["replicas_by_hour"]
    assert reps[12] == 4 and reps[3] == 1 and min(reps) == 1
    # replica-hours = sum of the day's replicas × 730/24 with no scale-down delay
    assert fleet["usd_per_month_autoscaled"] == pytest.approx(sum(reps) * TP * PRICE * 730 / 24, abs=0.01)
    assert fleet["usd_per_month_autoscaled"] < 0.7 * _fixed_month(max(DAY))


def test_scale_down_delay_and_cold_start_are_counted():
    slow = elastic.autoscaled(DAY, OUT, HEAD, PER_REPLICA, TP, PRICE, Autoscale(scale_down_delay_s=1800))
    quick = elastic.autoscaled(DAY, OUT, HEAD, PER_REPLICA, TP, PRICE, Autoscale(scale_down_delay_s=0))
    assert slow["replica_hours_per_month"] > quick["replica_hours_per_month"]
    # 1 → 2 replicas at hour 8 (10 req/s = 2,560 tokens/s): the 1 replica up carries 2,000: short for the
    # 300 s cold start; 2 → 3 at hour 9 (3,584 vs 4,000) and 3 → 4 at 12 (5,120 vs 6,000) are covered
    assert quick["slo_missing_minutes_per_month"] == pytest.approx(5 * (1 - 2000 / 2560) * 730 / 24, abs=0.1)
    steep = [1.0] * 12 + [20.0] * 12  # one replica cannot carry 20 req/s while three more boot
    s = elastic.autoscaled(steep, OUT, HEAD, PER_REPLICA, TP, PRICE, Autoscale(cold_start_s=600))
    assert s["cold_start_covered_by"] == "SLO-missing minutes"
    # 10 min × (1 − 2,000 / (20 × 256)) once a day, 730/24 days a month
    assert s["slo_missing_minutes_per_month"] == pytest.approx(10 * (1 - 2000 / 5120) * 730 / 24, abs=0.1)


def test_max_replicas_caps_and_counts_the_shortfall():
    s = elastic.autoscaled(DAY, OUT, HEAD, PER_REPLICA, TP, PRICE, Autoscale(max_replicas=3))
    assert max(s["replicas_by_hour"]) == 3 and s["capped_hours"] >= 1 and s["slo_missing_minutes_per_month"] > 0


def test_spot_share_is_the_replicas_above_the_load_without_headroom():
    reps = [4] * 24  # 20 req/s: 3 replicas carry 20 × 256 = 5,120 tokens/s without headroom (2.56 → 3)
    spot = elastic.spot_share([20.0] * 24, reps, OUT, PER_REPLICA, TP, PRICE, 0.8, 0.1, 300)
    assert spot["spot_share"] == pytest.approx(0.25)
    assert spot["preemptions_per_month"] == pytest.approx(730 * 0.1)
    assert spot["usd_per_month_with_spot"] == pytest.approx((3 * PRICE + 0.8) * TP * 730)
    assert elastic.spot_share([20.0] * 24, reps, OUT, PER_REPLICA, TP, PRICE, None, 0.1, 300) is None


def test_committed_use_pays_above_its_break_even_utilisation():
    reps = [1] * 12 + [3] * 12  # replica 1 up 100% of hours, replicas 2-3 up 50%
    c = elastic.committed_use(reps, TP, PRICE, {"1y": 30, "3y": 60})
    assert c["1y"]["break_even_utilisation"] == 0.7 and c["1y"]["committed_replicas"] == 1
    assert c["3y"]["break_even_utilisation"] == 0.4 and c["3y"]["committed_replicas"] == 3
    assert c["1y"]["usd_per_month"] == pytest.approx((730 * 0.7 + 2 * 365) * TP * PRICE)


def test_api_comparison_and_break_even():
    api = ApiPrices(usd_per_1m_input_tokens=0.2, usd_per_1m_output_tokens=0.6)
    month = returns.traffic_month([10.0] * 24, 512, OUT)
    assert month["requests"] == pytest.approx(10 * 3600 * 730)
    assert returns.api_usd_per_month(api, month) == pytest.approx(month["requests"] * (512 * 0.2 + 256 * 0.6) / 1e6)
    be = returns.break_even(DAY, 512, OUT, HEAD, PER_REPLICA, TP, PRICE, api)
    k = be["scale"]
    own = elastic.autoscaled([q * k for q in DAY], OUT, HEAD, PER_REPLICA, TP, PRICE)["usd_per_month_autoscaled"]
    paid = returns.api_usd_per_month(api, returns.traffic_month([q * k for q in DAY], 512, OUT))
    assert own <= paid + 0.01
    below = [q * k * 0.9 for q in DAY]
    assert elastic.autoscaled(below, OUT, HEAD, PER_REPLICA, TP, PRICE)["usd_per_month_autoscaled"] > \
        returns.api_usd_per_month(api, returns.traffic_month(below, 512, OUT))
    cheap_api = ApiPrices(usd_per_1m_input_tokens=0.0, usd_per_1m_output_tokens=0.01)
    never = returns.break_even(DAY, 512, OUT, HEAD, PER_REPLICA, TP, PRICE, cheap_api)
    assert never["mean_qps"] is None and "never costs less" in never["why"]


def test_payback_months():
    month = returns.traffic_month([1.0] * 24, 100, 100)
    p = returns.payback(1000.0, 500.0, month, 1500.0, None)
    assert p["payback_months"] == 1.0 and p["basis"] == "api"
    p = returns.payback(1000.0, 500.0, month, None, 0.0001)  # 2.628M requests × $0.0001 = $262.8 < $500
    assert p["payback_months"] is None and "never pays back" in p["why"]
    assert returns.payback(1000.0, 500.0, month, None, None)["payback_months"] is None


def _plan(hourly, **extra):
    import polars as pl

    from gpuledger.capacity import plan_capacity
    from gpuledger.estimate import inference
    from gpuledger.spec import CapacitySpec

    model = inference.ServingModel("meta-llama/Llama-3.1-8B", 8_030_261_248, 32, 4096, 131_072, 1_050_673_152)
    cols = ["cloud", "region", "instance_type", "accelerator", "accelerator_count", "usd_per_hour_on_demand",
            "usd_per_hour_spot", "spot_suspicious", "source", "as_of"]
    offers = pl.DataFrame([dict(zip(cols, ("aws", "us-east-1", "l4.1x", "L4", 1, 0.80, 0.30, False, "test",
                                           "2026-01-01"), strict=True))], orient="row")
    spec = CapacitySpec.model_validate({
        "kind": "capacity", "name": "t", "project": "p", "owner": "o", "model": "meta-llama/Llama-3.1-8B",
        "precision": "fp8", "traffic": {"hourly_qps": hourly, "prompt_tokens": 256, "output_tokens": 64},
        "slo": {"p95_ttft_ms": 2000, "p95_tpot_ms": 60}, "headroom": 0.2,
        "resources": {"accelerators": ["L4"], "clouds": ["aws"], "max_gpus_per_replica": 1}, **extra})
    return plan_capacity(spec, offers=offers, model=model)


def test_plan_json_reports_the_elastic_fleet_and_the_api_comparison():
    extra = {"compare": {"api": {"usd_per_1m_input_tokens": 0.3, "usd_per_1m_output_tokens": 1.2}},
             "fine_tune": {"usd": 300}, "environments": {"staging": {"replicas": 1}, "canary": {"traffic_share": 0.1}},
             "committed": {"1y": 30, "3y": 50}}
    peaky = _plan([q * 4 for q in DAY], **extra)
    o = peaky["best"]
    assert o["feasible"] and len(o["replicas_by_hour"]) == 24 and max(o["replicas_by_hour"]) == o["replicas_sized"]
    assert o["usd_per_month_autoscaled"] < 0.7 * o["usd_per_month_on_demand"]
    assert o["usd_per_1m_output_tokens"] > 0 and o["environments"]["staging"]["replicas"] == 1
    assert set(o["committed"]) == {"1y", "3y"} and o["spot"]["spot_share"] > 0
    c = peaky["compare"]
    assert c["api_usd_per_month"] > 0 and c["break_even"]["mean_qps"] > 0 and c["payback_months"] is not None
    # issue 38: self-hosting pays for every replica the spec asks for, staging and canary included
    envs = sum(e["usd_per_month"] for e in o["environments"].values())
    assert envs > 0 and c["self_usd_per_month"] == pytest.approx(o["usd_per_month_autoscaled"] + envs, abs=0.02)
    assert c["payback_months"] == pytest.approx(300 / (c["api_usd_per_month"] - c["self_usd_per_month"]), rel=0.01)
    bare = _plan([q * 4 for q in DAY], compare=extra["compare"])["compare"]
    assert bare["break_even"]["mean_qps"] < c["break_even"]["mean_qps"]  # fixed staging/canary raise it
    flat = _plan([80.0] * 24)["best"]
    assert flat["usd_per_month_autoscaled"] == pytest.approx(flat["usd_per_month_on_demand"], rel=0.05)
    assert _plan([80.0] * 24)["compare"] is None  # nothing to compare with


def test_team_committed_rates_give_the_discount_where_the_spec_gives_none():
    from types import SimpleNamespace

    from gpuledger.capacity.economy import committed_terms
    from gpuledger.catalog.pricing import CommittedRate

    rate = CommittedRate(cloud="aws", region=None, instance_type="p5.48xlarge", accelerator="H100", accelerator_count=8,
                         usd_per_hour=24.0, term_months=36, count=1, start=None, end=None, source="your commitment")
    opt = {"accelerator": "H100", "price_per_gpu_hour_on_demand": 5.0}
    terms, sources = committed_terms(SimpleNamespace(committed={}), opt, [rate])
    assert terms == {"3y": 40.0} and "p5.48xlarge" in sources["3y"]  # $3/GPU-h against $5
    terms, sources = committed_terms(SimpleNamespace(committed={"3y": 50.0}), opt, [rate])
    assert terms == {"3y": 50.0} and sources["3y"] == "spec committed"
    assert committed_terms(SimpleNamespace(committed={}), {**opt, "accelerator": "L4"}, [rate])[0] == {}
