"""Capacity bands (gpuledger.capacity.bands) and the fleet sized at slo.confidence."""

from __future__ import annotations

import math

import pytest

from gpuledger.capacity import bands


def test_shipped_rows_give_ordered_bands_per_engine_and_family():
    rows = bands.band_rows()
    assert {r["quantity"] for r in rows} == set(bands.QUANTITIES)
    for engine in ("vllm", "sglang", "trtllm", "tgi"):
        for fam in ("hopper", "ampere", "ada"):
            for q in bands.QUANTITIES:
                b = bands.band_for(engine, fam, q)
                assert b.p10 < b.p50 < b.p90
                assert math.log(b.p90 / b.p50) >= bands.MIN_HALF_WIDTH - 1e-9  # never narrower than the noise
    assert bands.band_for("trtllm", "hopper", "throughput").level == "trtllm × hopper"
    assert bands.band_for("tgi", "hopper", "throughput").level == "all engines"  # no TGI row: the root's band
    with pytest.raises(ValueError, match="unknown band quantity"):
        bands.band_for("vllm", "hopper", "memory")


def test_a_cell_of_few_sources_is_shrunk_toward_its_parent():
    rows = [{"engine": "e", "family": "f", "quantity": "throughput", "log_error": 0.5, "source": "one"}]
    rows += [{"engine": "x", "family": "f", "quantity": "throughput", "log_error": 0.0, "source": f"s{i}"}
             for i in range(6)]
    q10, q50, q90, n = bands._level(rows[:1], (0.0, 0.0, 0.0))
    assert n == 1 and q50 == pytest.approx(0.5 / 3)  # one source keeps a third of its own


def _spec(confidence):
    from gpuledger.spec import CapacitySpec

    return CapacitySpec.model_validate({
        "kind": "capacity", "name": "b", "project": "p", "owner": "o", "model": "meta-llama/Llama-3.1-8B",
        "precision": "bf16", "traffic": {"qps": 30, "prompt_tokens": 512, "output_tokens": 128},
        "slo": {"p95_ttft_ms": 3000, "p95_tpot_ms": 60, "confidence": confidence}, "headroom": 0,
        "resources": {"accelerators": ["H100"], "clouds": ["aws", "gcp"], "max_gpus_per_replica": 1}})


@pytest.mark.slow  # over ~0.5 s alone (a report, warehouse, plan or subprocess): make test runs it, make test-fast does not
def test_capacity_json_has_bands_and_p90_sizes_on_the_pessimistic_end():
    from gpuledger.capacity import plan_capacity

    o90 = plan_capacity(_spec("p90"))["options"][0]
    o50 = plan_capacity(_spec("p50"))["options"][0]
    for o in (o90, o50):
        for k in ("max_tokens_per_s_per_replica", "ttft_ms_p95", "tpot_ms_p95", "replicas"):
            assert set(o[k]) == {"p10", "p50", "p90"}, k
            assert o[k]["p10"] <= o[k]["p50"] <= o[k]["p90"], k
        assert o["gpus"] == o["replicas_sized"] * o["gpus_per_replica"]
    assert o90["replicas_sized"] == o90["replicas"]["p90"]  # at p90: the fleet of the P10 throughput
    assert o50["replicas_sized"] == o50["replicas"]["p50"]
    assert o90["gpus"] >= o50["gpus"] and o90["replicas"]["p90"] > o90["replicas"]["p10"]
    assert "slo.confidence p90" in o90["bands"]["sized_on"]


def test_a_sweeps_repeated_runs_give_a_measured_point_its_band():
    from gpuledger.capacity import plan_capacity
    from gpuledger.serving.capacity_from_sweep import _add_spread

    pts = {"H100": [{"tokens_per_s_per_gpu": r, "concurrency": 64, "request_rate": None, "gpus_per_replica": 1}
                    for r in (2700.0, 3000.0, 3300.0)]}
    _add_spread(pts)
    assert pts["H100"][0]["spread"] == {"low": pytest.approx(0.9), "high": pytest.approx(1.1), "runs": 3}
    point = {"tokens_per_s_per_gpu": 3000.0, "concurrency": 64, "ttft_ms": 200.0, "tpot_ms": 20.0,
             "spread": {"low": 0.85, "high": 1.12, "runs": 3}}
    o = plan_capacity(_spec("p90"), measured={"H100": [point]})["options"][0]
    assert o["throughput_source"] == "measured"
    assert o["max_tokens_per_s_per_replica"] == {"p10": 2550.0, "p50": 3000.0, "p90": 3360.0}
    assert "spread of 3 runs" in o["bands"]["throughput"] and o["replicas"]["p50"] == o["replicas_sized"]


@pytest.mark.slow  # over ~0.5 s alone (a report, warehouse, plan or subprocess): make test runs it, make test-fast does not
def test_speculative_decoding_in_a_plan_cuts_tpot_at_concurrency_one_and_bad_drafts_are_one_line():
    from gpuledger.capacity import plan_capacity
    from gpuledger.errors import UserError
    from gpuledger.spec import CapacitySpec

    def spec(sp):
        return CapacitySpec.model_validate({
            "kind": "capacity", "name": "s", "project": "p", "owner": "o", "model": "meta-llama/Llama-3.1-8B",
            "precision": "bf16", "traffic": {"qps": 2, "prompt_tokens": 512, "output_tokens": 128},
            "slo": {"p95_ttft_ms": 3000, "p95_tpot_ms": 60}, "engine_args": {"speculative": sp} if sp else {},
            "resources": {"accelerators": ["H100"], "clouds": ["aws"], "max_gpus_per_replica": 1}})

    base = plan_capacity(spec(None))["options"][0]["curve"][0]
    fast = plan_capacity(spec({"method": "eagle3", "num_speculative_tokens": 3, "acceptance_rate": 0.7}))
    assert fast["spec"]["engine_args"]["speculative"]["method"] == "eagle3"
    assert fast["options"][0]["curve"][0]["tpot_ms_p50"] < 0.6 * base["tpot_ms_p50"]
    with pytest.raises(UserError, match="draft_model"):
        plan_capacity(spec({"method": "draft_model", "acceptance_rate": 0.6, "draft_model": "no/such-model-xyz"}))
