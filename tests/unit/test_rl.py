"""RL steps by role (gpuledger/estimate/rl.py): the rollout through the serving simulator, the
trainer's phases through the training-step model, the weight sync and the async overlap."""

from __future__ import annotations

import dataclasses

import pytest

from gpuledger.estimate import Workload, estimate, time_basis, train_time_s
from gpuledger.estimate.rl import RLSetup, response_cv, rl_step
from gpuledger.estimate.rl_plan import role_costs, setup_from_workload

QWEN = "Qwen/Qwen2.5-7B"
BASE = RLSetup(model=QWEN, trainer_accelerator="H100", trainer_gpus=8, prompts_per_step=32, group_size=8,
               prompt_len=256, response_len=512)


def step(**kw):
    return rl_step(dataclasses.replace(BASE, **kw))


def test_group_size_and_response_length_change_the_rollout():
    base = step()
    assert step(group_size=16).phases_s["rollout"] > base.phases_s["rollout"]
    assert step(response_len=1024).phases_s["rollout"] > 1.5 * base.phases_s["rollout"]
    # the tail: the step waits for the longest response of the batch; unstated, RL responses get a default tail
    flat = step(response_len_p90=512)  # a P90 at the mean: every response the mean's length
    assert step(response_len_p90=1000).phases_s["rollout"] > 1.3 * flat.phases_s["rollout"]
    assert base.phases_s["rollout"] > 1.2 * flat.phases_s["rollout"]
    # cut at the trainer's max completion length: a shorter tail, the stated mean kept
    cut = step(response_len_max=600)
    assert flat.phases_s["rollout"] < cut.phases_s["rollout"] < base.phases_s["rollout"]
    assert cut.response_tokens == pytest.approx(base.response_tokens, rel=0.05)
    assert step(group_size=16).tokens == pytest.approx(2 * base.tokens, rel=0.02)


def test_engine_changes_the_rollout_and_hf_pays_padding():
    vllm, hf = step(), step(engine="hf")
    assert hf.phases_s["rollout"] > 1.5 * vllm.phases_s["rollout"]  # eager, static batches padded to the longest
    assert step(engine="hf", response_len_p90=1000).phases_s["rollout"] > hf.phases_s["rollout"]


def test_phases_by_algorithm():
    g, p = step(), step(algorithm="ppo")
    assert g.phases_s["critic"] == 0 and p.phases_s["critic"] > 0
    # old-policy log-probs: PPO always; GRPO with vLLM rollouts (verl recomputes them, TRL corrects vLLM's
    # sampling by importance weights); the trainer's own generate at one epoch needs none
    assert p.phases_s["old_logprob"] > 0 and g.phases_s["old_logprob"] > 0
    assert step(engine="hf").phases_s["old_logprob"] == 0 < step(engine="hf", ppo_epochs=2).phases_s["old_logprob"]
    assert step(old_logprob=False).phases_s["old_logprob"] == 0
    assert step(reference=False).phases_s["reference"] == 0 < g.phases_s["reference"] < g.phases_s["train"]
    assert step(reward_s_per_sample=0.5).phases_s["reward"] == pytest.approx(0.5 * 32 * 8 / 8)
    assert step(reward_model="Qwen/Qwen3-0.6B").phases_s["reward"] > 0
    assert g.step_s == pytest.approx(sum(g.phases_s.values()))


def test_async_overlaps_and_is_never_slower():
    sync = step(placement="split", trainer_gpus=4, rollout_gpus=4)
    asyn = step(placement="split", trainer_gpus=4, rollout_gpus=4, async_rollout=True)
    assert asyn.step_s <= sync.step_s
    learner = sum(v for k, v in asyn.phases_s.items() if k not in ("rollout", "sync"))
    assert asyn.step_s == pytest.approx(max(asyn.phases_s["rollout"], learner) + asyn.phases_s["sync"])
    with pytest.raises(ValueError, match="split"):
        step(async_rollout=True)


def test_split_sync_is_a_broadcast_and_cheaper_rollout_gpus_change_dollars():
    colo = step()
    far = step(placement="split", trainer_gpus=8, rollout_gpus=8, rollout_accelerator="L4")
    assert far.phases_s["sync"] > colo.phases_s["sync"]  # 15 GB over the network vs in place
    assert far.groups["rollout"] == {"accelerator": "L4", "gpus": 8}
    prices = {"H100": 3.0, "L4": 0.8}
    same = step(placement="split", trainer_gpus=8, rollout_gpus=8)
    c_far, c_same = role_costs(far, 100, prices), role_costs(same, 100, prices)
    assert c_far["rollout"]["usd"] != c_same["rollout"]["usd"]
    assert c_far["rollout"]["accelerator"] == "L4"
    # GPU-hours add up to every GPU held for every step
    total = sum(v["gpu_hours"] for v in c_far.values())
    assert total == pytest.approx(100 * far.step_s * 16 / 3600, rel=0.01)


def test_colocated_kv_cache_too_small_is_refused():
    with pytest.raises(ValueError, match="KV cache"):
        step(trainer_accelerator="L4", gpu_memory_utilization=0.3, response_len=4096)


def test_response_cv_from_p90():
    assert response_cv(1000, None) == 0 and response_cv(1000, 900) == 0
    assert 0 < response_cv(1000, 1500) < response_cv(1000, 2000)


def test_train_time_s_of_grpo_is_the_rl_step():
    w = Workload(model=QWEN, method="grpo", prompt_len=256, completion_len=512, group_size=8, micro_batch=2,
                 gpus=4, sharding="fsdp")
    e = estimate(w)
    t = train_time_s(e, 1e7, "H100")
    s = rl_step(setup_from_workload(w, "H100"))
    assert t == pytest.approx(s.step_s * 1e7 / s.tokens, rel=0.05)
    g16 = estimate(w.model_copy(update={"group_size": 16}))
    assert train_time_s(g16, 1e7, "H100") != pytest.approx(t, rel=0.01)  # group size changes the plan's time
    vllm = estimate(w.model_copy(update={"generation": "vllm_colocate"}))
    assert train_time_s(vllm, 1e7, "H100") < t  # vLLM's continuous batching beats eager generate
    assert "rl.py" in time_basis("grpo")


def test_a_groups_prompt_is_prefilled_once_by_the_prefix_cache():
    long_prompt = dict(prompt_len=4096, response_len=64)
    cached, uncached = step(**long_prompt), step(prefix_cache=False, **long_prompt)
    assert cached.rollout_detail["prefix_cache_hit"] == pytest.approx(7 / 8)
    assert cached.phases_s["rollout"] < 0.8 * uncached.phases_s["rollout"]


def test_a_split_trials_trainer_shards_over_its_own_gpus():
    kw = dict(model=QWEN, method="grpo", prompt_len=256, completion_len=512, group_size=8, micro_batch=2,
              gpus=8, sharding="fsdp")
    colo = estimate(Workload(**kw, generation="vllm_colocate", gpu_memory_gib=80))
    split2 = estimate(Workload(**kw, generation="vllm_server", rollout_gpus=2))
    split4 = estimate(Workload(**kw, generation="vllm_server", rollout_gpus=4))
    # the policy's sharded states over 6 (then 4) GPUs, not 8
    assert split4.states_gib["optimizer"] > split2.states_gib["optimizer"] > colo.states_gib["optimizer"]
    assert split4.states_gib["optimizer"] == pytest.approx(colo.states_gib["optimizer"] * 2, rel=0.01)


def test_a_lora_policy_under_grpo_trains_adapters_and_shares_the_base():
    kw = dict(model=QWEN, method="grpo", prompt_len=256, completion_len=512, group_size=8, micro_batch=2)
    full, lora = estimate(Workload(**kw)), estimate(Workload(**kw, policy="lora"))
    qlora = estimate(Workload(**kw, policy="qlora"))
    assert lora.params_trainable < full.params_trainable / 100
    assert lora.states_gib["optimizer"] < full.states_gib["optimizer"] / 50
    assert qlora.states_gib["weights"] < lora.states_gib["weights"] < full.states_gib["weights"]
    assert any("adapters disabled" in n for n in lora.notes.values())  # the reference is the base itself
    assert train_time_s(lora, 1e7, "H100") < train_time_s(full, 1e7, "H100")  # no weight gradients


def test_estimate_tokens_options_carry_the_rl_step():
    import polars as pl

    from gpuledger.catalog.pricing import load_offers
    from gpuledger.plan.gpu_table import gpu_options

    w = Workload(model=QWEN, method="grpo", prompt_len=256, completion_len=512, group_size=8, micro_batch=2,
                 generation="vllm_server")
    opts = gpu_options(w, 1e7, load_offers().filter(pl.col("accelerator") == "H100"), ["H100"], counts=(1, 8))
    one, eight = opts
    assert not one["fits"] or one.get("rl") is None  # one GPU cannot split trainer and vLLM
    small = w.model_copy(update={"model": "Qwen/Qwen3-0.6B"})
    lone = gpu_options(small, 1e7, load_offers().filter(pl.col("accelerator") == "H100"), ["H100"], counts=(1,))[0]
    assert not lone["fits"] and "leaves no GPU to train" in lone["reason"]
    assert eight["fits"] and eight["rl"]["placement"] == "split"
    assert sum(c["chosen"] for c in eight["rl"]["placements"]) == 1
    assert eight["rl"]["groups"]["rollout"]["gpus"] + eight["rl"]["groups"]["trainer"]["gpus"] == 8
    # by role: the roles add up to the option's P50 time on all its GPUs and to its on-demand dollars
    roles = eight["rl"]["roles"]
    assert {"rollout", "train", "trainer_idle"} <= set(roles)
    assert sum(v["gpu_hours"] for v in roles.values()) == pytest.approx(8 * eight["time_s"]["p50"] / 3600, rel=0.02)
    assert sum(v["usd"] for v in roles.values()) == pytest.approx(eight["usd_on_demand"], rel=0.02)
    from gpuledger.cli.commands.estimate import rl_answer

    line = rl_answer(eight)
    r, t = eight["rl"]["groups"]["rollout"], eight["rl"]["groups"]["trainer"]
    assert f"rollouts on {r['gpus']} x H100, training on {t['gpus']} x H100" in line and "by role: rollout" in line


def test_generation_rounds_cost_small_batches_and_prompts_per_step_overrides_the_micro_batch():
    # TRL before 0.17 generated once per micro-step: 8 rounds of 1/8 of the step's requests each wait for
    # their own longest response at a batch too small to use the GPU
    one, eight = step(), step(generation_rounds=8)
    assert eight.phases_s["rollout"] > 3 * one.phases_s["rollout"]
    assert eight.rollout_detail["generation_rounds"] == 8 and eight.tokens == pytest.approx(one.tokens)
    assert eight.phases_s["train"] == pytest.approx(one.phases_s["train"])
    w = Workload(model=QWEN, method="grpo", gpus=8, micro_batch=2, seq_len=1536, prompt_len=512, completion_len=1024,
                 group_size=7, generation="vllm_server", rollout_gpus=1, prompts_per_step=16, generation_rounds=8)
    s = setup_from_workload(w, "H100")
    assert (s.prompts_per_step, s.generation_rounds, s.trainer_gpus) == (16, 8, 7)  # not 2 x 7 GPUs
    assert setup_from_workload(w.model_copy(update={"prompts_per_step": None}), "H100").prompts_per_step == 14


def test_vllm_sleep_mode_releases_the_colocated_share_while_training():
    kw = dict(model=QWEN, method="grpo", gpus=8, micro_batch=4, seq_len=1124, prompt_len=100, completion_len=250,
              group_size=5, generation="vllm_colocate", vllm_gpu_memory_utilization=0.6, sharding="fsdp",
              gpu_memory_gib=80.0)
    held, slept = estimate(Workload(**kw)), estimate(Workload(**kw, vllm_sleep=True))
    # held: 0.6 x 80 GiB on top of every phase; slept: the larger of the trainer's phase and vLLM's
    assert held.memory_gib["device"] - slept.memory_gib["device"] > 5
    assert slept.memory_gib["kv_cache"] == pytest.approx(0.6 * 80, rel=0.01)  # the rollout phase holds it
    assert slept.memory_gib["device"] >= 0.6 * 80
    assert "sleep mode" in slept.notes["kv_cache"]
    s = setup_from_workload(Workload(**kw, vllm_sleep=True), "H100")
    assert s.sleep_mode and rl_step(s).phases_s["sync"] > rl_step(dataclasses.replace(s, sleep_mode=False)).phases_s["sync"]


def test_a_critic_of_its_own_size_is_sized_and_timed_as_such():
    # DeepSpeed-Chat pairs a large actor with a small critic: the value model's states and time are its own
    kw = dict(model=QWEN, method="ppo", gpus=8, micro_batch=2, seq_len=1024, prompt_len=256, completion_len=512,
              sharding="fsdp", generation="vllm_colocate")
    same, small = Workload(**kw), Workload(**kw, critic_model="Qwen/Qwen2.5-0.5B")
    assert estimate(small).memory_gib["device"] < estimate(same).memory_gib["device"] - 3
    assert estimate(small).params_trainable < 0.6 * estimate(same).params_trainable
    s_same, s_small = (rl_step(setup_from_workload(w, "H100")) for w in (same, small))
    assert s_small.phases_s["critic"] < s_same.phases_s["critic"]
    assert s_small.phases_s["train"] == pytest.approx(s_same.phases_s["train"])


def test_micro_batches_smaller_than_one_group_are_sized_and_timed_as_given():
    # TRL's per_device_train_batch_size counts completions: 2 sequences per micro-step of a group of 8
    kw = dict(model=QWEN, method="grpo", gpus=8, micro_batch=1, seq_len=1536, prompt_len=512, completion_len=1024,
              group_size=8, generation="vllm_colocate", sharding="fsdp")
    group, two = Workload(**kw), Workload(**kw, micro_batch_sequences=2)
    assert estimate(two).memory_gib["activations"] < 0.5 * estimate(group).memory_gib["activations"]
    assert setup_from_workload(group, "H100").micro_batch == 8 and setup_from_workload(two, "H100").micro_batch == 2
    assert any("2 sequence(s) per micro-step" in a for a in estimate(two).assumptions)


def test_eager_vllm_rollouts_pay_a_per_layer_cost_each_decode_step():
    """enforce_eager (verl <= 0.4's default): every decode step pays VLLM_EAGER_LAYER_S per decoder layer, so the
    eager rollout's extra time is about layers x decode steps x the coefficient, and a deeper model pays more."""
    from gpuledger.estimate.rl import VLLM_EAGER_LAYER_S

    flat = dict(response_len_p90=512, response_len_max=512)  # every response 512 tokens: 512 decode steps
    graphs, eager = step(**flat), step(eager=True, **flat)
    extra = eager.phases_s["rollout"] - graphs.phases_s["rollout"]
    layers = 28  # Qwen2.5-7B
    assert extra == pytest.approx(layers * 512 * VLLM_EAGER_LAYER_S, rel=0.35)
    deep = dataclasses.replace(BASE, model="Qwen/Qwen2.5-14B", trainer_gpus=8, rollout_tp=2, **flat)  # 48 layers
    deep_extra = (rl_step(dataclasses.replace(deep, eager=True)).phases_s["rollout"]
                  - rl_step(deep).phases_s["rollout"])
    assert deep_extra > 1.4 * extra
