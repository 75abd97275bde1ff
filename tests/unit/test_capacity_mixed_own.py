"""Mixed fleets (gpuledger.capacity.mixed) and rent vs buy vs API (gpuledger.capacity.ownership): arithmetic
checked by hand."""

from __future__ import annotations

import pytest

from gpuledger.capacity import elastic, mixed, ownership
from gpuledger.spec import CapacitySpec


def _spec(**extra):
    data = {"kind": "capacity", "name": "m", "project": "p", "owner": "o", "model": "meta-llama/Llama-3.1-8B",
            "precision": "bf16", "traffic": {"hourly_qps": [1.0] * 12 + [10.0] * 12, "prompt_tokens": 100,
                                             "output_tokens": 100},
            "slo": {"p95_ttft_ms": 1000, "p95_tpot_ms": 50}, "headroom": 0,
            "resources": {"accelerators": ["H100", "L4"], "clouds": ["aws"]}}
    data.update(extra)
    return CapacitySpec.model_validate(data)


def _opt(accel, rate_per_gpu, price, tp=1, gpus=1, spot=None):
    return {"accelerator": accel, "feasible": True, "price_per_gpu_hour_on_demand": price, "tokens_per_s_per_gpu": rate_per_gpu,
            "gpus_per_replica": tp, "gpus": gpus, "usd_per_hour_spot": spot, "bands": None, "committed": None,
            "price_source": "test"}


def test_a_mix_of_two_types_beats_either_alone_when_one_rounds_up_less():
    # big: 800 tokens/s for $4/h ($0.005 per token/s); small: 120 tokens/s for $1/h ($0.0083)
    # quiet hours need 100 tokens/s: 1 big ($4) or 1 small ($1); busy hours 1,000: 2 big ($8) or
    # 1 big + 2 small ($6) or 9 small ($9)
    big, small = _opt("H100", 800, 4.0), _opt("L4", 120, 1.0)
    m = mixed.mixed_fleet([big, small], _spec())
    per_month = elastic.HOURS_PER_MONTH / 24
    assert m["singles"]["H100"] == pytest.approx((12 * 4 + 12 * 8) * per_month, abs=0.01)
    assert m["singles"]["L4"] == pytest.approx((12 * 1 + 12 * 9) * per_month, abs=0.01)
    assert m["usd_per_month"] == pytest.approx((12 * 1 + 12 * 6) * per_month, abs=0.01)
    assert m["replicas_by_hour"]["H100"] == [0] * 12 + [1] * 12 and m["replicas_by_hour"]["L4"] == [1] * 12 + [2] * 12
    assert m["best_single"]["accelerator"] == "L4" and set(m["types"]) == {"H100", "L4"}
    assert m["saving_usd_per_month"] == pytest.approx(m["best_single"]["usd_per_month"] - m["usd_per_month"], abs=0.01)
    assert m["usd_per_month"] < min(m["singles"].values())


def test_no_mix_when_one_type_is_cheapest_at_every_hour():
    m = mixed.mixed_fleet([_opt("H100", 800, 4.0), _opt("L4", 100, 4.0)], _spec())
    assert m["saving_usd_per_month"] == 0.0 and "no mix" in m["why"]
    assert mixed.mixed_fleet([_opt("H100", 800, 4.0)], _spec()) is None


def test_rent_buy_api_counts_staging_and_canary_on_every_self_hosted_path():
    spec = _spec(traffic={"qps": 4.0, "prompt_tokens": 100, "output_tokens": 100},
                 environments={"staging": {"replicas": 1}, "canary": {"traffic_share": 0.05}},
                 compare={"api": {"usd_per_1m_input_tokens": 1.0, "usd_per_1m_output_tokens": 2.0}},
                 own={"usd_per_gpu": 24_000, "depreciation_years": 4, "usd_per_kwh": 0.10, "pue": 1.5, "kw_per_gpu": 1.0,
                      "utilisation": 0.5})
    best = _opt("H100", 500, 3.0, gpus=1)
    r = ownership.rent_buy_api(best, spec, None)
    u = r["usd_per_month"]
    # demand 4 × 100 = 400 tokens/s: 1 production replica + 1 staging + 1 canary, all month at $3/h
    assert u["rent_on_demand"] == pytest.approx(3 * 3.0 * 730, abs=0.01)
    # buy: 3 GPUs × $24,000 / 48 months + 3 kW × 1.5 × 730 h × (0.3 + 0.7 × 0.5) × $0.10
    assert r["buy"]["gpus"] == 3 and r["buy"]["environment_replicas"] == 2
    assert u["buy"] == pytest.approx(3 * 24_000 / 48 + 3 * 1.0 * 1.5 * 730 * 0.65 * 0.10, abs=0.01)
    # API: 4 req/s × 3,600 × 730 × (100 × $1 + 100 × $2) / 1e6
    assert u["api"] == pytest.approx(4 * 3600 * 730 * 300 / 1e6, abs=0.01)
    assert r["cheapest_now"] == min(u, key=u.get)
    assert r["buy"]["payback_months"] == pytest.approx(72_000 / (u["rent_on_demand"] - r["buy"]["running_usd_per_month"]),
                                                       rel=1e-3)
    # over the scaled volumes: the API wins small, owning or renting large, ranges in order
    c = r["cheapest"]
    assert c[0]["path"] == "api" and c[-1]["path"] != "api"
    assert all(a["to_requests_per_month"] < b["from_requests_per_month"] for a, b in zip(c, c[1:], strict=False))


def test_buy_needs_a_price_for_the_best_accelerator():
    spec = _spec(traffic={"qps": 4.0, "prompt_tokens": 100, "output_tokens": 100}, own={"usd_per_gpu": {"A100": 10_000}})
    r = ownership.rent_buy_api(_opt("H100", 500, 3.0), spec, None)
    assert "no price for H100" in r["buy"]["why"] and "buy" not in r["usd_per_month"]
