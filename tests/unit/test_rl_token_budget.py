"""Token-budget packing of an RL trainer's micro-batches (train.micro_batch_tokens: verl's use_dynamic_bsz with
ppo_max_token_len_per_gpu; docs/rl.md): sequences packed without padding up to a token budget per GPU, so a
micro-step may hold less than one prompt's group; timed and sized as the tokens it holds, refused where verl
would refuse it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from gpuledger.estimate import Workload, estimate
from gpuledger.estimate.rl import RLSetup, rl_step

ROOT = Path(__file__).resolve().parents[2]
SPEC_PATH = ROOT / "specs" / "grpo-qwen-7b.yaml"
SEQ = 512 + 1024  # the mean sequence: prompt + mean response
BASE = RLSetup(model="Qwen/Qwen2.5-7B", trainer_accelerator="H100", trainer_gpus=8, prompts_per_step=64, group_size=8,
               prompt_len=512, response_len=1024, response_len_max=1024, packing=True)


def step(**kw):
    return rl_step(dataclasses.replace(BASE, **kw))


def test_a_token_budget_times_the_sequences_it_holds_packed():
    # a budget of k mean sequences trains as k packed sequences a micro-step
    for k in (1, 2, 8):
        assert step(micro_batch_tokens=k * SEQ).phases_s["train"] == pytest.approx(
            step(micro_batch=k).phases_s["train"], rel=1e-9)
    # less than one group (8 responses) a micro-step: more micro-steps, more fixed cost per token than 8
    one, group = step(micro_batch_tokens=SEQ), step(micro_batch_tokens=8 * SEQ)
    assert one.phases_s["train"] > group.phases_s["train"] and one.phases_s["reference"] > group.phases_s["reference"]
    # a budget between two whole sequences holds the whole ones only
    assert step(micro_batch_tokens=2 * SEQ + SEQ // 2).phases_s["train"] == step(micro_batch=2).phases_s["train"]
    assert any("micro-steps of a 3,072-token budget per GPU packed (~2 sequences" in a
               for a in step(micro_batch_tokens=2 * SEQ).assumptions)


def test_the_memory_of_a_budget_is_the_tokens_it_holds():
    base = dict(model="Qwen/Qwen2.5-7B", method="grpo", micro_batch=1, seq_len=1536, prompt_len=512, completion_len=768,
                group_size=8, gpus=8, sharding="fsdp", generation="vllm_colocate")
    four = estimate(Workload(**base, micro_batch_sequences=4)).memory_gib
    budget4 = estimate(Workload(**base, micro_batch_tokens=4 * 1280)).memory_gib
    budget8 = estimate(Workload(**base, micro_batch_tokens=8 * 1280)).memory_gib
    for key in ("activations", "logits", "device"):
        assert budget4[key] == pytest.approx(four[key])
    assert budget8["activations"] == pytest.approx(2 * budget4["activations"], rel=0.01)
    assert budget8["logits"] == pytest.approx(2 * budget4["logits"], rel=0.01)


@pytest.mark.parametrize("fields, words", [
    (dict(micro_batch_tokens=1000), "micro_batch_tokens (1000) is below seq_len (1536), the longest sequence"),
    (dict(micro_batch_tokens=4096, micro_batch_sequences=4), "give one"),
])
def test_a_budget_verl_would_refuse_is_refused(fields, words):
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
        Workload(model="Qwen/Qwen2.5-7B", method="grpo", seq_len=1536, prompt_len=512, completion_len=768, **fields)
    with pytest.raises(ValueError, match="token budget; method lora"):
        Workload(model="Qwen/Qwen2.5-7B", method="lora", seq_len=1536, micro_batch_tokens=4096)


@pytest.mark.parametrize("train, words", [
    (dict(micro_batch_tokens=1000, micro_batch_sequences=None),
     "train.micro_batch_tokens: micro_batch_tokens (1000) is below train.seq_len (1536)"),
    (dict(micro_batch_tokens=4096), "train.micro_batch_tokens: micro_batch_tokens (a token budget per micro-step) and "
                                    "micro_batch_sequences"),  # the example states micro_batch_sequences: 8
    (dict(micro_batch_tokens=4096, micro_batch_sequences=None, method="lora"),
     "train.micro_batch_tokens: micro_batch_tokens is a GRPO/PPO trainer's token budget; method lora"),
])
def test_the_spec_says_where(tmp_path, train, words):
    from gpuledger.plan.requirements import check_spec

    data = yaml.safe_load(SPEC_PATH.read_text())
    if "method" in train:
        data["method"] = train.pop("method")
    data["train"].update(train)
    data["train"] = {k: v for k, v in data["train"].items() if v is not None}
    path = tmp_path / "grpo.yaml"
    path.write_text(yaml.safe_dump(data))
    out = check_spec(path)
    assert not out["ok"] and len(out["problems"]) == 1
    assert out["problems"][0].startswith(f"{path}:") and words in out["problems"][0]


def test_a_plan_times_the_budget(tmp_path):
    from gpuledger.plan import plan_sweep
    from gpuledger.spec import expand_trials, load_spec

    def plan(**train):
        data = yaml.safe_load(SPEC_PATH.read_text())
        data["train"].pop("micro_batch_sequences")
        data["train"].update(train)
        data["search"]["params"] = {"learning_rate": [1.0e-6]}
        data["resources"].update(accelerators=["H100"], gpus_per_trial=8)
        path = tmp_path / "grpo.yaml"
        path.write_text(yaml.safe_dump(data))
        spec = load_spec(path)
        return next(t for t in plan_sweep(spec, expand_trials(spec)).to_json()["trials"] if t["feasible"])

    small, large = plan(micro_batch_tokens=1536), plan(micro_batch_tokens=8 * 1536)
    assert small["roles"]["phases_s"]["train"] > large["roles"]["phases_s"]["train"]
    assert small["roles"]["phases_s"]["rollout"] == large["roles"]["phases_s"]["rollout"]
