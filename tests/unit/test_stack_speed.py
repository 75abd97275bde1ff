"""A stack's own kernels (issue 36: a stack named in `train.framework` was timed as its engine, where Unsloth's
adapter runs measure faster): the kernel factor of coefficients.STACK_KERNEL_SPEEDUP is the fit of the published
ratios of gpuledger/estimate/data/stack_speed.csv, its spread widens the band of such a figure, and the estimate,
the plan and its bands all take it from the workload."""

from __future__ import annotations

import math

import pytest

from gpuledger.estimate import Workload, bands, estimate, public, training_step
from gpuledger.estimate.coefficients import STACK_KERNEL_SPEEDUP
from gpuledger.spec import parse_spec

KW = dict(model="meta-llama/Llama-3.1-8B", method="qlora", precision="nf4", micro_batch=2, seq_len=2048,
          lora_targets="all-linear")


def test_the_factor_is_the_fit_of_the_published_ratios_and_its_spread_is_theirs():
    rows = public.read_csv("stack_speed.csv")
    assert len({r["source"] for r in rows}) >= 2 and all(r["url"].startswith("https://") for r in rows)
    assert STACK_KERNEL_SPEEDUP["unsloth"] == pytest.approx(public.fit_stack_speedup("unsloth"), abs=0.01), \
        "stack_speed.csv or the step model moved: set STACK_KERNEL_SPEEDUP to the fit it gives now"
    means = [sum(v) / len(v) for v in public.stack_residuals().values()]
    assert abs(sum(means)) / len(means) < 0.01  # at the factor the sources' residuals balance
    spread = 1.2816 * math.sqrt(sum(x * x for x in means) / len(means))
    assert bands.STACK_SPREAD["unsloth"] == pytest.approx(spread, abs=0.01), \
        "set bands.STACK_SPREAD to the spread the published ratios give now"


def test_the_models_ratio_falls_with_length_as_attention_takes_the_step():
    """Attention runs FlashAttention-2 in both stacks: the factor is on the rest, so the modelled speed-up shrinks
    at long context, as LLaMA-Factory's 1-32k series does (1.16x at 4k, 1.11x at 32k)."""
    series = {int(i.rsplit("_", 1)[1][:-1]): model for i, _s, _st, _m, model in public.stack_ratio_rows()
              if i.startswith("lf_a100_40_qlora_bs1_")}
    assert series[32] < series[8] < series[2] < STACK_KERNEL_SPEEDUP["unsloth"]


def test_unsloth_adapter_steps_run_faster_than_their_engine_and_a_full_fine_tune_does_not():
    hf = training_step(estimate(Workload(**KW)), "A100-80GB")
    un = training_step(estimate(Workload(**KW, framework="unsloth")), "A100-80GB")
    assert 1.2 < hf.step_s / un.step_s < STACK_KERNEL_SPEEDUP["unsloth"]
    assert hf.parts_s["attention"] == pytest.approx(un.parts_s["attention"])
    assert any("stack_speed.csv" in a for a in un.assumptions)
    full = dict(KW, method="full", precision="bf16", model="meta-llama/Llama-3.2-1B")
    assert (training_step(estimate(Workload(**full, framework="unsloth")), "A100-80GB").step_s
            == pytest.approx(training_step(estimate(Workload(**full, fused_ce=True, activation_offload=True)),
                                           "A100-80GB").step_s))
    # another stack on the same engine has no kernels of its own
    assert training_step(estimate(Workload(**KW, framework="axolotl")), "A100-80GB").step_s == pytest.approx(hf.step_s)


def test_the_band_of_an_unsloth_adapter_time_carries_the_factors_spread_and_says_so():
    hf = bands.band_for("time", "hf", "qlora", "nf4", 1, "A100-80GB")
    un = bands.band_for("time", "hf", "qlora", "nf4", 1, "A100-80GB", "unsloth")
    extra = bands.STACK_SPREAD["unsloth"]
    assert un.p50 == hf.p50 and un.p10 < hf.p10 and un.p90 > hf.p90
    assert math.log(un.p90 / un.p50) == pytest.approx(math.hypot(math.log(hf.p90 / hf.p50), extra))
    assert "kernel factor's own spread" in un.describe() and "kernel factor" not in hf.describe()
    assert bands.band_for("time", "hf", "full", "bf16", 1, "A100-80GB", "unsloth") == bands.band_for(
        "time", "hf", "full", "bf16", 1, "A100-80GB")
    assert bands.band_for("memory", "hf", "qlora", "nf4", 1, None, "unsloth") == bands.band_for(
        "memory", "hf", "qlora", "nf4", 1, None)


SPEC = """\
kind: sweep
name: stack-speed
project: p
owner: o
model: meta-llama/Llama-3.1-8B
method: qlora
precision: nf4
train: {seq_len: 2048, micro_batch: 2, tokens_per_trial: 20000000, framework: FRAMEWORK}
search:
  params:
    learning_rate: [1e-4]
  objective: {metric: eval_loss}
budget: {max_usd: 100}
resources: {accelerators: [A100-80GB]}
launcher: skypilot
task:
  run: python train.py --lr {learning_rate}
"""


def test_the_plan_times_an_unsloth_spec_with_its_kernels_and_bands_it_wider():
    from gpuledger.plan import plan_sweep

    plans = {f: plan_sweep(parse_spec(SPEC.replace("FRAMEWORK", f), "stack.yaml")).to_json() for f in ("hf", "unsloth")}
    hf, un = (plans[f]["trials"][0] for f in ("hf", "unsloth"))
    assert (hf["accelerator"], hf["gpus"]) == (un["accelerator"], un["gpus"])
    assert un["compute_s"] < hf["compute_s"] / 1.2 and un["est_cost_usd"] < hf["est_cost_usd"]
    assert un["est_wall_s_p90"] / un["est_wall_s"] > hf["est_wall_s_p90"] / hf["est_wall_s"]
    assert "kernel factor" in un["est_band"] and "kernel factor" not in hf["est_band"]


@pytest.mark.parametrize("kw, words", [(dict(framework="megatron", stack="unsloth"), ["runs on hf, not megatron"]),
                                       (dict(stack="x" * 100), ["is not a stack built on an engine", "..."])])
def test_a_stack_the_workload_states_must_run_on_its_framework(kw, words):
    """The workload text carries its stack and a stack times the run: one that does not run on the workload's engine
    (a hand-written Python API call, an edited plan) is refused with a bounded message, not silently timed."""
    with pytest.raises(ValueError) as err:
        Workload(model="gpt2", **kw)
    assert all(w in str(err.value) for w in words) and "x" * 61 not in str(err.value)
