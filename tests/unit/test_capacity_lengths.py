"""Request-length mixes (gpuledger.capacity.lengths) in the spec and the simulation (issue 28)."""

from __future__ import annotations

import numpy as np
import pytest

from gpuledger.capacity.lengths import LengthMix, mix_from
from gpuledger.capacity.simulate import Scheduler, simulate
from gpuledger.errors import UserError
from gpuledger.estimate.inference import StepCost
from gpuledger.spec import parse_spec

SPEC = """kind: capacity
name: a
project: p
owner: o
model: meta-llama/Llama-3.1-8B
traffic: {qps: 3, prompt_tokens: PROMPT, output_tokens: {histogram: [[100, 1], [300, 3]]}}
slo: {p95_ttft_ms: 500, p95_tpot_ms: 50}
resources: {accelerators: [H100]}
"""


def test_spec_lengths_as_numbers_or_distributions():
    s = parse_spec(SPEC.replace("PROMPT", "{dataset: sharegpt}"), "x.yaml")
    assert s.traffic.prompt_tokens == 161 and s.traffic.prompt_tokens_dist.dataset == "sharegpt"
    assert s.traffic.output_tokens == 250  # (100 × 1 + 300 × 3) / 4
    s = parse_spec(SPEC.replace("PROMPT", "{mean: 800, cv: 0.5}"), "x.yaml")
    assert s.traffic.prompt_tokens == 800 and s.traffic.prompt_tokens_dist.cv == 0.5
    assert parse_spec(SPEC.replace("PROMPT", "512"), "x.yaml").traffic.prompt_tokens_dist is None
    with pytest.raises(UserError, match="x.yaml:6:.*give exactly one of mean"):
        parse_spec(SPEC.replace("PROMPT", "{mean: 800, dataset: sharegpt}"), "x.yaml")


def test_mixes_draw_their_mean_and_histogram():
    s = parse_spec(SPEC.replace("PROMPT", "{mean: 800, cv: 1.0}"), "x.yaml")
    pm = mix_from(s.traffic.prompt_tokens_dist, "prompt")
    draws = pm.sample(20_000, 7)
    assert draws.min() >= 1 and draws.max() <= pm.longest == 6400
    assert draws.mean() == pytest.approx(800, rel=0.05) and draws.std() / draws.mean() == pytest.approx(1.0, rel=0.15)
    om = mix_from(s.traffic.output_tokens_dist, "output")
    out = om.sample(20_000, 7)
    assert set(np.unique(out)) == {100, 300} and (out == 300).mean() == pytest.approx(0.75, abs=0.02)
    assert np.array_equal(pm.sample(50, 3), pm.sample(50, 3))  # seeded
    assert mix_from(None, "prompt") is None
    assert LengthMix(mean=512).sample(3, 0).tolist() == [512, 512, 512]


def test_long_prompts_in_a_mix_interrupt_the_others_decode():
    # a replica whose step costs 10 ms + 0.05 ms per token: prefill chunks lengthen decode steps
    cost = StepCost(weight_s=0.010, flop_s_per_token=0.00005, kv_s_per_token=0.0, attn_s_per_pair=0.0,
                    overhead_s=0.0, eager_extra_s=0.0, cuda_graph_max_batch=1024)
    sched = Scheduler(max_num_seqs=64, max_batched_tokens=2048, chunked_prefill=True, kv_capacity_tokens=10**6,
                      reserve_full_request=False, request_overhead_s=0.0)
    common = dict(prompt_tokens=1000, output_tokens=100, rate=3.0, n_requests=300, seed=1)
    fixed = simulate(cost, sched, **common)
    mixed = simulate(cost, sched, prompt_mix=LengthMix(mean=1000, cv=1.5), **common)
    # the same mean prompt; the mix's long prompts fill whole 2,048-token steps while others decode
    assert mixed.tpot_p95_s > fixed.tpot_p95_s * 1.1
    assert mixed.ttft_p95_s > fixed.ttft_p95_s


def test_distribution_spellings():
    from gpuledger.spec.capacity_models import LengthDist

    assert LengthDist.model_validate({"mean": 500, "std": 250}).cv == 0.5
    assert LengthDist.model_validate({"mean": 500, "spread": 0.3}).cv == 0.3
    assert LengthDist.model_validate({"dataset": "ShareGPT-like"}).dataset == "sharegpt"
    assert LengthDist.model_validate({"histogram": {"100": 1, "300": 3}}).histogram == [(100, 1.0), (300, 3.0)]
    with pytest.raises(ValueError, match="std needs a mean"):
        LengthDist.model_validate({"dataset": "sharegpt", "std": 40})
