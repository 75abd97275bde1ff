"""Capacity planning (gpuledger.capacity) and `gpuledger capacity`."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuledger.capacity import OPTION_KEYS, cheapest_offer, fleet_cost, gpus_needed, plan_capacity
from gpuledger.errors import UserError
from gpuledger.estimate import inference as inf
from gpuledger.spec import CapacitySpec, load_spec

LLAMA31_8B = inf.ServingModel("meta-llama/Llama-3.1-8B", 8_030_261_248, 32, 4096, 131_072)

EXPECTED_OPTION_KEYS = {
    "accelerator", "precision", "gpus", "gpus_per_replica", "replicas", "max_batch", "tokens_per_s_per_gpu",
    "throughput_source", "ttft_ms", "tpot_ms", "price_per_gpu_hour_on_demand", "usd_per_hour_on_demand",
    "usd_per_day_on_demand", "usd_per_month_on_demand", "usd_per_hour_spot", "usd_per_month_spot", "cloud",
    "instance_type", "price_source", "feasible", "reason",
}


def _offers(rows):
    cols = ["cloud", "region", "instance_type", "accelerator", "accelerator_count", "usd_per_hour_on_demand",
            "usd_per_hour_spot", "spot_suspicious", "source", "as_of"]
    return pl.DataFrame([dict(zip(cols, r, strict=True)) for r in rows], orient="row")


OFFERS = _offers([
    ("aws", "us-east-1", "h100.1x", "H100", 1, 5.00, 1.50, False, "test", "2026-01-01"),
    ("aws", "us-east-1", "h100.8x", "H100", 8, 36.00, 3.60, True, "test", "2026-01-01"),  # 10%: suspicious
    ("aws", "us-east-1", "a100.1x", "A100-80GB", 1, 3.00, None, False, "test", "2026-01-01"),
    ("aws", "us-east-1", "l4.8x", "L4", 8, 8.00, 2.40, False, "test", "2026-01-01"),
    ("gcp", "us-central1", "h100.cheap", "H100", 1, 1.00, 0.50, False, "test", "2026-01-01"),  # other cloud
])


def _spec(**over) -> CapacitySpec:
    data = {
        "kind": "capacity", "name": "t", "project": "p", "owner": "o", "model": "meta-llama/Llama-3.1-8B",
        "precision": "bf16",
        "traffic": {"qps": 20, "prompt_tokens": 1500, "output_tokens": 300},
        "slo": {"p95_ttft_ms": 800, "p95_tpot_ms": 50},
        "headroom": 0.3,
        "resources": {"accelerators": ["H100", "A100-80GB"], "clouds": ["aws"]},
    }
    for k, v in over.items():
        data[k] = {**data[k], **v} if isinstance(v, dict) and isinstance(data.get(k), dict) else v
    return CapacitySpec.model_validate(data)


def _opt(result, accel):
    return next(o for o in result["options"] if o["accelerator"] == accel)


# -------------------------------------------------------------------------------- money


def test_seed_cost_arithmetic():
    """Seed 000: 10 GPUs at $1.99/h → $19.90/h, $477.60/day, $14,527/month at 730 h."""
    assert fleet_cost(10, 1.99) == {"usd_per_hour": 19.90, "usd_per_day": 477.60, "usd_per_month": 14527.00}


def test_seed_sizing_does_not_add_up():
    """Seed 000 sizes 30 QPS × 300 output tokens at 60 tokens/s per GPU with 30% headroom as 10 GPUs;
    its own inputs need 30 × 300 × 1.3 / 60 = 195."""
    assert gpus_needed(30, 300, 0.3, 60) == (195, 195)
    assert gpus_needed(30, 300, 0.3, 60, gpus_per_replica=4) == (196, 49)


def test_gpus_needed_exact_multiple_is_not_rounded_up():
    assert gpus_needed(10, 100, 0.5, 150) == (10, 10)  # 1,500 / 150 = 10 exactly


# -------------------------------------------------------------------------------- offers


def test_cheapest_offer_picks_lowest_per_gpu_price():
    rows = OFFERS.filter(pl.col("cloud") == "aws").to_dicts()
    p = cheapest_offer(rows, "H100")
    assert p["on_demand"]["instance_type"] == "h100.8x"
    assert p["price_per_gpu_hour_on_demand"] == pytest.approx(36.00 / 8)
    # the 8x's spot ($3.60 = 10% of $36) is flagged suspicious: spot falls back to the 1x's
    assert p["spot"]["instance_type"] == "h100.1x"
    assert p["price_per_gpu_hour_spot"] == 1.50
    assert p["spot_skipped"] == 1
    # a replica of 2 GPUs needs an instance with at least 2
    assert cheapest_offer(rows, "A100-80GB", min_count=2) is None
    assert cheapest_offer(rows, "A100-80GB")["spot"] is None


# -------------------------------------------------------------------------------- planning


def test_plan_shape_and_best():
    r = plan_capacity(_spec(), offers=OFFERS, model=LLAMA31_8B)
    assert set(r) == {"spec", "options", "best", "best_reason", "assumptions"}
    for o in r["options"]:
        assert set(o) == EXPECTED_OPTION_KEYS == set(OPTION_KEYS)
    h = _opt(r, "H100")
    assert h["feasible"] and h["throughput_source"] == "estimated"
    assert h["cloud"] == "aws"  # the cheaper gcp offer is outside the spec's clouds
    assert h["gpus"] == math.ceil(20 * 300 * 1.3 / h["tokens_per_s_per_gpu"] - 1e-6)
    assert h["usd_per_month_on_demand"] == pytest.approx(h["gpus"] * 4.5 * 730, abs=0.01)
    assert h["usd_per_day_on_demand"] == pytest.approx(h["gpus"] * 4.5 * 24, abs=0.01)
    assert h["usd_per_month_spot"] == pytest.approx(h["gpus"] * 1.5 * 730, abs=0.01)
    a = _opt(r, "A100-80GB")
    assert a["usd_per_hour_spot"] is None and a["usd_per_month_spot"] is None
    feasible = [o for o in r["options"] if o["feasible"]]
    assert r["best"] == min(feasible, key=lambda o: o["usd_per_month_on_demand"])
    assert r["best_reason"] is None
    assert all(isinstance(a, str) and a for a in r["assumptions"])
    json.dumps(r)


@settings(max_examples=40, deadline=None)
@given(q1=st.floats(0.01, 200), q2=st.floats(0.01, 200))
def test_more_qps_never_needs_fewer_gpus(q1, q2):
    lo, hi = sorted([q1, q2])
    r_lo = plan_capacity(_spec(traffic={"qps": lo}), offers=OFFERS, model=LLAMA31_8B)
    r_hi = plan_capacity(_spec(traffic={"qps": hi}), offers=OFFERS, model=LLAMA31_8B)
    for a, b in zip(r_lo["options"], r_hi["options"], strict=True):
        assert a["feasible"] == b["feasible"]
        if a["feasible"]:
            assert a["gpus"] <= b["gpus"]
            assert a["usd_per_month_on_demand"] <= b["usd_per_month_on_demand"]


def test_impossible_latency_target_is_infeasible_with_numbers():
    r = plan_capacity(_spec(slo={"p95_tpot_ms": 1}), offers=OFFERS, model=LLAMA31_8B)
    assert r["best"] is None
    assert "1,000.0 tokens/s per stream" in r["best_reason"]
    h = _opt(r, "H100")
    assert not h["feasible"] and h["gpus"] is None and h["usd_per_month_on_demand"] is None
    assert "300 output tokens at p95 TPOT 1 ms needs 1,000.0 tokens/s per stream" in h["reason"]
    assert "best single stream on H100 bf16" in h["reason"]


def test_impossible_ttft_is_infeasible_with_numbers():
    r = plan_capacity(_spec(slo={"p95_ttft_ms": 5}), offers=OFFERS, model=LLAMA31_8B)
    h = _opt(r, "H100")
    assert not h["feasible"]
    assert "1,500-token prompt takes" in h["reason"] and "> target 5 ms" in h["reason"]


def test_weights_that_do_not_fit_are_explained():
    seventy_b = inf.ServingModel("70b", 70_553_706_496, 80, 8192, 2 * 80 * 8 * 128 * 2)
    spec = _spec(resources={"accelerators": ["L4"], "clouds": ["aws"], "max_gpus_per_replica": 4})
    o = _opt(plan_capacity(spec, offers=OFFERS, model=seventy_b), "L4")
    assert not o["feasible"]
    assert "weights need 131.4 GiB at bf16" in o["reason"]
    assert "more than 4 × L4 usable" in o["reason"]


def test_measured_rate_overrides_estimate_and_gpu_count():
    base = _opt(plan_capacity(_spec(), offers=OFFERS, model=LLAMA31_8B), "H100")
    r = plan_capacity(_spec(measured={"H100": {"tokens_per_s_per_gpu": 1200}}), offers=OFFERS, model=LLAMA31_8B)
    h = _opt(r, "H100")
    assert h["throughput_source"] == "measured"
    assert h["tokens_per_s_per_gpu"] == 1200
    # 20 req/s × 300 tokens × 1.3 = 7,800 tokens/s; / 1,200 = 6.5 → 7 GPUs
    assert h["gpus"] == 7 != base["gpus"]
    assert h["usd_per_hour_on_demand"] == pytest.approx(7 * 4.5)
    assert "measured 1,200.0" in h["reason"]
    assert _opt(r, "A100-80GB")["throughput_source"] == "estimated"
    # a caller's rate (e.g. from the warehouse) overrides the spec's: 7,800 / 600 = 13
    r2 = plan_capacity(_spec(measured={"H100": {"tokens_per_s_per_gpu": 1200}}), offers=OFFERS, model=LLAMA31_8B,
                       measured={"h100": 600})
    assert _opt(r2, "H100")["gpus"] == 13
    with pytest.raises(UserError):
        plan_capacity(_spec(), offers=OFFERS, model=LLAMA31_8B, measured={"H100": -1})


def test_no_offer_is_infeasible():
    spec = _spec(resources={"accelerators": ["L40S"], "clouds": ["aws"]})
    r = plan_capacity(spec, offers=OFFERS, model=LLAMA31_8B)
    o = _opt(r, "L40S")
    assert not o["feasible"] and "no offer of L40S" in o["reason"]
    assert r["best"] is None and r["best_reason"]


def test_shipped_chat_capacity_spec_has_a_feasible_best(repo_root):
    r = plan_capacity(load_spec(repo_root / "specs" / "chat-capacity.yaml"))
    best = r["best"]
    assert best is not None and best["feasible"]
    assert best["gpus"] >= 1 and best["usd_per_month_on_demand"] > 0
    assert best["ttft_ms"] <= 800 and best["tpot_ms"] <= 50
    assert r["spec"]["params_total"] == 8_030_261_248
    assert r["spec"]["kv_bytes_per_token"] == 131_072


# -------------------------------------------------------------------------------- CLI


def test_cli_json_has_exactly_the_keys(repo_root):
    out = subprocess.run([sys.executable, "-m", "gpuledger.cli", "capacity", "specs/chat-capacity.yaml", "--json"],
                         cwd=repo_root, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    assert set(r) == {"spec", "options", "best", "best_reason", "assumptions"}
    assert r["options"] and all(set(o) == EXPECTED_OPTION_KEYS for o in r["options"])
    assert set(r["best"]) == EXPECTED_OPTION_KEYS
    assert {o["throughput_source"] for o in r["options"]} <= {"estimated", "measured"}


def test_cli_human_form_and_errors(repo_root, capsys):
    from gpuledger.cli import main

    assert main(["capacity", str(repo_root / "specs" / "chat-capacity.yaml")]) == 0
    text = capsys.readouterr().out
    assert "best:" in text and "H100" in text and "$/month" in text
    assert main(["capacity", str(repo_root / "specs" / "lora-grid.yaml")]) == 1
    err = capsys.readouterr().err
    assert "needs `kind: capacity`" in err and "Traceback" not in err
    assert main(["capacity", "no/such/spec.yaml"]) == 1


def test_measured_rate_stands_even_where_the_estimate_says_infeasible():
    spec = _spec(slo={"p95_tpot_ms": 1}, measured={"H100": {"tokens_per_s_per_gpu": 780}})
    r = plan_capacity(spec, offers=OFFERS, model=LLAMA31_8B)
    h = _opt(r, "H100")
    assert h["feasible"] and h["throughput_source"] == "measured" and h["gpus"] == 10  # 7,800 / 780
    assert "the estimate alone would say infeasible" in h["reason"]
    assert r["best"]["accelerator"] == "H100"
