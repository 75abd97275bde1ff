"""Every capacity option is held to the physical floors of its own tensor-parallel degree (issue 28)."""

from __future__ import annotations

import polars as pl
import pytest

from gpuledger.capacity import plan_capacity
from gpuledger.estimate import inference
from gpuledger.spec import CapacitySpec

# Llama-3.1-8B: parameters, layers, attention width, KV bytes/token (fp8 KV), embedding parameters
LLAMA31_8B_FP8 = inference.ServingModel("meta-llama/Llama-3.1-8B", 8_030_261_248, 32, 4096, 65_536, 1_050_673_152)

_COLS = ["cloud", "region", "instance_type", "accelerator", "accelerator_count", "usd_per_hour_on_demand",
         "usd_per_hour_spot", "spot_suspicious", "source", "as_of"]
OFFERS = pl.DataFrame([dict(zip(_COLS, r, strict=True)) for r in [
    ("aws", "us-east-1", "h100.1x", "H100", 1, 5.00, 1.50, False, "test", "2026-01-01"),
    ("aws", "us-east-1", "h100.8x", "H100", 8, 40.00, 12.0, False, "test", "2026-01-01"),
    ("aws", "us-east-1", "a100.8x", "A100-80GB", 8, 24.00, None, False, "test", "2026-01-01"),
    ("aws", "us-east-1", "l4.8x", "L4", 8, 8.00, 2.40, False, "test", "2026-01-01"),
]], orient="row")


def _spec(tpot_ms: float, measured=None, engine_args=None, traffic=None,
          accelerators=("H100", "A100-80GB", "L4")) -> CapacitySpec:
    data = {"kind": "capacity", "name": "t", "project": "p", "owner": "o", "model": "meta-llama/Llama-3.1-8B",
            "precision": "fp8", "traffic": traffic or {"qps": 50, "prompt_tokens": 512, "output_tokens": 256},
            "slo": {"p95_ttft_ms": 500, "p95_tpot_ms": tpot_ms},
            "resources": {"accelerators": list(accelerators), "clouds": ["aws"]}}
    if measured:
        data["measured"] = measured
    if engine_args:
        data["engine_args"] = engine_args
    return CapacitySpec.model_validate(data)


@pytest.mark.parametrize("measured", [
    {"H100": {"tokens_per_s_per_gpu": 3000}},  # the case: a rate without latencies
    {"H100": {"tokens_per_s_per_gpu": 9000, "concurrency": 8, "ttft_ms": 20, "tpot_ms": 0.9}},  # TP 1: below floor
    {"H100": {"tokens_per_s_per_gpu": 900, "gpus_per_replica": 8}},  # a TP 8 rate without latencies
])
def test_one_ms_tpot_is_infeasible_at_every_option_whatever_is_measured(measured):
    r = plan_capacity(_spec(1.0, measured), offers=OFFERS, model=LLAMA31_8B_FP8)
    for o in r["options"]:
        assert not o["feasible"], (o["accelerator"], o["reason"])
        assert o["gpus"] is None and o["usd_per_month_on_demand"] is None
    assert r["best"] is None


@pytest.mark.slow  # over ~0.5 s alone (a report, warehouse, plan or subprocess): make test runs it, make test-fast does not
def test_a_measured_rate_keeps_its_own_tp_floor_and_the_reason_names_it():
    spec = _spec(10.0, {"H100": {"tokens_per_s_per_gpu": 3000}},
                 traffic={"qps": 5, "prompt_tokens": 256, "output_tokens": 64}, accelerators=("H100", "A100-80GB"))
    r = plan_capacity(spec, offers=OFFERS, model=LLAMA31_8B_FP8)
    h = next(o for o in r["options"] if o["accelerator"] == "H100")
    assert h["feasible"] and h["throughput_source"] == "measured" and h["gpus_per_replica"] == 1
    # the floor of TP 1, not TP 8's: 9.08 GB of fp8 weights (embeddings 16 bit) / 3,350 GB/s
    floor_ms = inference.weights_bytes(LLAMA31_8B_FP8, "fp8") / 3350e9 * 1e3
    assert h["floor_tpot_ms"] == pytest.approx(floor_ms, abs=1e-3)
    assert h["tpot_ms"] >= h["floor_tpot_ms"] and h["ttft_ms"] >= h["floor_ttft_ms"]
    assert f"floors at TP 1: TPOT ≥ {floor_ms:.2f} ms" in h["reason"]
    assert "simulated operating point of the same shape (TP 1" in h["reason"]
    for o in r["options"]:
        if o["feasible"]:
            assert o["tpot_ms"] >= o["floor_tpot_ms"] and o["ttft_ms"] >= o["floor_ttft_ms"]
            assert f"floors at TP {o['gpus_per_replica']}:" in o["reason"]


def test_engine_args_tensor_parallel_pins_the_shape():
    spec = _spec(10.0, {"H100": {"tokens_per_s_per_gpu": 3000}}, engine_args={"tensor_parallel": 2},
                 traffic={"qps": 5, "prompt_tokens": 256, "output_tokens": 64})
    r = plan_capacity(spec, offers=OFFERS, model=LLAMA31_8B_FP8)
    assert r["spec"]["engine_args"] == {"tensor_parallel": 2}
    h = next(o for o in r["options"] if o["accelerator"] == "H100")
    assert h["feasible"] and h["gpus_per_replica"] == 2 and h["gpus"] % 2 == 0
    assert h["throughput_source"] == "estimated"
    assert "TP 1 is not among the shapes planned (TP 2)" in h["reason"]
    assert "floors at TP 2" in h["reason"]
