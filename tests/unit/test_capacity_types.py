"""The capacity plan's TypedDicts name the keys `plan_capacity` returns, no more, no fewer."""

from __future__ import annotations

import typing

import pytest

from gpuledger.capacity import OPTION_KEYS
from gpuledger.capacity.plan_types import CapacityOption, CapacityPlan, CapacitySpecEcho


def test_an_option_is_the_option_keys_in_order():
    assert tuple(typing.get_type_hints(CapacityOption)) == OPTION_KEYS


@pytest.mark.slow  # over ~1 s (a whole report, replay, plan or warehouse): make test runs it, make test-fast does not
def test_the_plan_names_each_key_plan_capacity_returns(tmp_path):
    from gpuledger.capacity import plan_capacity
    from gpuledger.spec import load_spec

    spec_path = tmp_path / "cap.yaml"
    spec_path.write_text(
        "kind: capacity\nname: cap\nproject: tests\nowner: ci\nmodel: meta-llama/Llama-3.1-8B\n"
        "traffic: {qps: 1, prompt_tokens: 200, output_tokens: 50}\nslo: {p95_ttft_ms: 2000, p95_tpot_ms: 100}\n"
        "resources: {accelerators: [H100], clouds: [aws]}\n", encoding="utf-8")
    plan = plan_capacity(load_spec(spec_path))
    assert set(plan) == CapacityPlan.__required_keys__
    assert tuple(plan["spec"]) == tuple(typing.get_type_hints(CapacitySpecEcho))
    assert [tuple(o) for o in plan["options"]] == [OPTION_KEYS]
