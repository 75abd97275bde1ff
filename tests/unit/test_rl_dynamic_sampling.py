"""DAPO's dynamic sampling in the RL step (gpuledger/estimate/dynamic_sampling.py, docs/rl.md "Dynamic sampling"):
the expected generation batches, what they scale (rollout, reward, the colocated sync) and what they do not (the
log-probs and the update, on the kept groups), the plan's sentence, and bad values refused where they are."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gpuledger.estimate.dynamic_sampling import (
    DynamicSampling,
    degenerate_fraction,
    generation_batches,
    kept_fraction,
)
from gpuledger.estimate.rl import RLSetup, rl_step

ROOT = Path(__file__).resolve().parents[2]
SPEC_PATH = ROOT / "specs" / "grpo-qwen-7b.yaml"
BASE = RLSetup(model="Qwen/Qwen2.5-7B", trainer_accelerator="H100", trainer_gpus=8, prompts_per_step=32, group_size=8,
               prompt_len=256, response_len=512, engine="vllm", reward_s_per_sample=0.01)


def step(**kw):
    return rl_step(dataclasses.replace(BASE, **kw))


def test_a_group_is_degenerate_when_all_its_rewards_are_equal():
    assert degenerate_fraction(0.7, 8) == pytest.approx(0.7**8 + 0.3**8)
    assert kept_fraction(DynamicSampling(pass_rate=0.5), 4) == pytest.approx(1 - 2 / 16)
    assert kept_fraction(DynamicSampling(kept_fraction=0.62), 8) == 0.62  # stated: G does not enter


def test_expected_generation_batches_follow_the_binomial_and_the_cap():
    # one prompt a batch, one needed: K is geometric, E[K] = 1/q; capped at c: E[min(K, c)] = (1 - (1-q)^c) / q
    assert generation_batches(0.4, 1, 1) == (pytest.approx(2.5, rel=1e-6), 0.0)
    mean, over = generation_batches(0.4, 1, 1, cap=3)
    assert mean == pytest.approx((1 - 0.6**3) / 0.4) and over == pytest.approx(0.6**3)
    # every group kept: the step's own batch, once; three times the prompts a batch at 62% kept: one batch
    assert generation_batches(1.0, 512, 512) == (1.0, 0.0)
    assert generation_batches(0.62, 512, 1536)[0] == pytest.approx(1.0, abs=1e-6)
    # the same batch size as the step at 62% kept: nearly always two (a batch keeps ~317 of 512), never three
    assert generation_batches(0.62, 512, 512)[0] == pytest.approx(2.0, abs=1e-6)
    with pytest.raises(ValueError, match="above 0"):
        generation_batches(0.0, 8, 8)


def test_the_rollout_and_reward_scale_by_the_batches_and_the_trainer_phases_do_not():
    off = step()
    ds = DynamicSampling(pass_rate=0.8)
    on = step(dynamic_sampling=ds)
    batches, _ = generation_batches(kept_fraction(ds, 8), 32, 32)
    assert 1.5 < batches < 2.5  # 0.8^8 = 17% degenerate: a second batch almost always
    # the same generation batch (the step's prompts) simulated once, times the expected batches
    assert on.phases_s["rollout"] == pytest.approx(off.phases_s["rollout"] * batches, rel=1e-4)
    assert on.phases_s["reward"] == pytest.approx(0.01 * -(-32 * 8 * batches // 8), rel=1e-3)  # every scored sample
    for phase in ("reference", "old_logprob", "train"):  # on the kept groups only (verl: after the filter)
        assert on.phases_s[phase] == off.phases_s[phase]
    assert on.phases_s["sync"] == pytest.approx(off.phases_s["sync"] * batches, rel=1e-4)  # resharded each call
    assert on.tokens == off.tokens and on.sequences == off.sequences
    d = on.rollout_detail["dynamic_sampling"]
    assert d["generation_batches"] == pytest.approx(batches, abs=1e-4) and d["rollout_factor"] == pytest.approx(
        batches, rel=1e-3)
    assert f"rollout x{batches:.2f} for dynamic sampling: {1 - kept_fraction(ds, 8):.1%} of groups expected " \
           "degenerate at pass rate 0.8, G=8" in d["note"] and d["note"] in on.assumptions
    # split on a vLLM server: the weights go once a step, whatever the batches
    split_off = step(placement="split", rollout_gpus=4, trainer_gpus=4)
    split_on = step(placement="split", rollout_gpus=4, trainer_gpus=4, dynamic_sampling=ds)
    assert split_on.phases_s["sync"] == split_off.phases_s["sync"]
    assert split_on.phases_s["rollout"] > 1.5 * split_off.phases_s["rollout"]


def test_a_larger_generation_batch_takes_fewer_calls_and_a_tight_cap_is_refused():
    wide = step(dynamic_sampling=DynamicSampling(pass_rate=0.8, gen_batch_size=96))
    d = wide.rollout_detail["dynamic_sampling"]
    assert d["generation_batches"] == pytest.approx(1.0, abs=1e-6) and d["generated_over_kept"] == pytest.approx(3.0)
    assert 1.0 < d["rollout_factor"] < 3.0  # three times the requests in one call: batched, not three calls
    assert wide.phases_s["reward"] == pytest.approx(0.01 * 96 * 8 / 8)
    with pytest.raises(ValueError, match="max_num_gen_batches 1 generation batches with probability 100%"):
        step(dynamic_sampling=DynamicSampling(pass_rate=0.8, max_num_gen_batches=1))


def _spec(tmp_path, load: bool = True, **train):
    from gpuledger.spec import load_spec

    data = yaml.safe_load(SPEC_PATH.read_text())
    data["train"].update(train)
    data["search"]["params"] = {"learning_rate": [1.0e-6]}
    data["resources"].update(accelerators=["H100"], gpus_per_trial=8)
    path = tmp_path / "grpo.yaml"
    path.write_text(yaml.safe_dump(data))
    return path, (load_spec(path) if load else None)


def test_the_plan_times_and_explains_it_and_is_unchanged_without_it(tmp_path):
    from gpuledger.plan import plan_sweep
    from gpuledger.plan.render import render_plan
    from gpuledger.spec import expand_trials

    def plan(spec):
        p = plan_sweep(spec, expand_trials(spec))
        return p, next(t for t in p.to_json()["trials"] if t["feasible"])

    base = _spec(tmp_path)[1]
    assert base.train.dynamic_sampling is None  # off unless asked
    p0, t0 = plan(base)
    assert "dynamic_sampling" not in t0["roles"]["rollout"] and "dynamic sampling" not in render_plan(p0)
    _, spec = _spec(tmp_path, dynamic_sampling={"pass_rate": 0.9, "max_num_gen_batches": 20})
    p1, t1 = plan(spec)
    d = t1["roles"]["rollout"]["dynamic_sampling"]
    assert d["kept_fraction"] == pytest.approx(1 - 0.9**8 - 0.1**8, abs=1e-4) and d["max_num_gen_batches"] == 20
    assert t1["roles"]["phases_s"]["rollout"] == pytest.approx(t0["roles"]["phases_s"]["rollout"] * d["rollout_factor"],
                                                               rel=1e-3)
    assert t1["roles"]["phases_s"]["train"] == t0["roles"]["phases_s"]["train"]
    assert t1["compute_s"] > t0["compute_s"]
    assert f"roles {t1['trial_id']}:" in render_plan(p1) and "for dynamic sampling: 43.0% of groups expected " \
        "degenerate at pass rate 0.9, G=8" in render_plan(p1)


@pytest.mark.parametrize("value, words", [
    ({"pass_rate": 1.0}, "train.dynamic_sampling.pass_rate: must be < 1"),
    ({"pass_rate": 0.7, "kept_fraction": 0.5}, "train.dynamic_sampling: give one of pass_rate"),
    ({}, "train.dynamic_sampling: give one of pass_rate"),
    ({"kept_fraction": 0.5, "gen_batch": 3}, "train.dynamic_sampling.gen_batch: unknown key; did you mean "
                                             "'gen_batch_size'?"),
    ({"kept_fraction": 0.5, "max_num_gen_batches": -1}, "train.dynamic_sampling.max_num_gen_batches: must be >= 0"),
])
def test_bad_values_are_one_located_problem(tmp_path, value, words):
    from gpuledger.plan.requirements import check_spec

    path, _ = _spec(tmp_path, load=False, dynamic_sampling=value)
    out = check_spec(path)
    assert not out["ok"] and len(out["problems"]) == 1
    assert out["problems"][0].startswith(f"{path}:") and words in out["problems"][0]


def test_ppo_has_no_groups_to_filter(tmp_path):
    from gpuledger.plan.requirements import check_spec

    data = yaml.safe_load(SPEC_PATH.read_text())
    data["method"] = "ppo"
    data["train"]["dynamic_sampling"] = {"pass_rate": 0.7}
    path = tmp_path / "ppo.yaml"
    path.write_text(yaml.safe_dump(data))
    out = check_spec(path)
    assert not out["ok"] and len(out["problems"]) == 1
    assert "train.dynamic_sampling: dynamic_sampling filters GRPO groups" in out["problems"][0]


def _estimate(*extra):
    return subprocess.run([sys.executable, "-m", "gpuledger.cli", "estimate", "Qwen/Qwen2.5-7B", "--method", "grpo",
                           "--generation", "vllm_colocate", "--prompt-len", "512", "--completion-len", "1024",
                           "--seq", "1536", "--group-size", "8", "--batch", "1", "--tokens", "20M",
                           "--accelerator", "H100", *extra], capture_output=True, text=True, cwd=ROOT, timeout=300)


@pytest.mark.slow  # over ~1 s (a whole report, replay, plan or warehouse): make test runs it, make test-fast does not
def test_estimate_asks_for_it_and_says_what_it_did():
    out = _estimate("--dynamic-sampling", "kept_fraction=0.5,max_num_gen_batches=6")
    assert out.returncode == 0, out.stderr
    assert "rollout x" in out.stdout and "for dynamic sampling: 50.0% of groups kept (stated), G=8" in out.stdout
    assert "cap 6 batches" in out.stdout
    bad = _estimate("--dynamic-sampling", "pass_rate=1.5")
    assert bad.returncode != 0 and "--dynamic-sampling pass_rate: Input should be less than 1" in bad.stderr
    assert "Traceback" not in bad.stderr
    bad = _estimate("--dynamic-sampling", "pass_rate")
    assert bad.returncode != 0 and "'pass_rate': expected KEY=VALUE" in bad.stderr and "Traceback" not in bad.stderr
