"""The RL step's trainer side and its rollout by kind of model (gpuledger/estimate/rl.py, rl_plan.py): PPO epochs and
mini-batches, verl-style offload, the trainer's tensor/expert parallel degrees, TRL < 0.17's generation rounds, no
weight sync when the trainer generates itself, MoE policies in rollout. Each number is checked against its formula."""

from __future__ import annotations

import dataclasses

import pytest

from gpuledger.estimate import Workload
from gpuledger.estimate import rl as rl_mod
from gpuledger.estimate.coefficients import PCIE_HOST_GBPS
from gpuledger.estimate.rl import RLSetup, rl_step
from gpuledger.estimate.rl_plan import generation_rounds, setup_from_workload, trl_before_whole_step
from gpuledger.models import count_params, load_config

QWEN = "Qwen/Qwen2.5-7B"
SMALL = "Qwen/Qwen2.5-0.5B"
MOE = "Qwen/Qwen3-30B-A3B"
BASE = RLSetup(model=QWEN, trainer_accelerator="H100", trainer_gpus=8, prompts_per_step=32, group_size=8,
               prompt_len=256, response_len=512)


def step(**kw):
    return rl_step(dataclasses.replace(BASE, **kw))


def test_mini_batches_pay_the_optimizer_step_each_and_epochs_multiply_the_update():
    # one GPU: no gradient communication, so a micro-step is its work + the optimizer step + the fixed cost
    s = dataclasses.replace(BASE, model=SMALL, trainer_gpus=1, micro_batch=8, engine="hf")
    st = rl_mod._step(SMALL, s, "full", "H100", 1)
    per_opt = st.parts_s["optimizer"] + st.parts_s["fixed"]
    assert per_opt > 0
    one, four = rl_step(s), rl_step(dataclasses.replace(s, ppo_mini_batches=4))
    micro_steps = one.tokens / st.tokens_per_step
    assert micro_steps > 4
    assert one.phases_s["train"] == pytest.approx(micro_steps * (st.step_s - per_opt) + per_opt)
    assert four.phases_s["train"] - one.phases_s["train"] == pytest.approx(3 * per_opt)
    # more mini-batches than micro-steps cannot be: at most one optimizer step per micro-step
    many = rl_step(dataclasses.replace(s, ppo_mini_batches=100_000))
    assert many.phases_s["train"] == pytest.approx(micro_steps * st.step_s)
    # epochs: the whole update again, and (hf generation) the old policy's log-probs now recomputed
    two = rl_step(dataclasses.replace(s, ppo_epochs=2))
    assert two.phases_s["train"] == pytest.approx(2 * one.phases_s["train"])
    assert one.phases_s["old_logprob"] == 0 and two.phases_s["old_logprob"] == pytest.approx(one.phases_s["reference"])


def test_verl_style_offload_moves_each_shard_over_pcie_around_the_phases_that_use_it():
    total = float(count_params(load_config(QWEN)).total)
    pcie, g = PCIE_HOST_GBPS * 1e9, BASE.trainer_gpus
    off = step()
    params = step(param_offload=True)
    trip = 2 * total * 4.0 / g / pcie  # the fp32 shard in and out
    assert params.phases_s["train"] - off.phases_s["train"] == pytest.approx(trip)
    assert params.phases_s["old_logprob"] - off.phases_s["old_logprob"] == pytest.approx(trip)  # vLLM: recomputed
    assert params.phases_s["sync"] - off.phases_s["sync"] == pytest.approx(trip)
    assert params.phases_s["reference"] - off.phases_s["reference"] == pytest.approx(2 * total * 2.0 / g / pcie)
    assert params.phases_s["rollout"] == off.phases_s["rollout"]
    opt = step(optimizer_offload=True)
    assert opt.phases_s["train"] - off.phases_s["train"] == pytest.approx(2 * total * 8.0 / g / pcie)
    assert opt.phases_s["sync"] == off.phases_s["sync"] and opt.phases_s["reference"] == off.phases_s["reference"]
    assert any("offload over PCIe" in a for a in opt.assumptions)
    # a LoRA policy: its 16-bit base moves (the reference is that base), Adam's states of the adapters alone
    lora = dict(policy_method="lora", lora_r=32, lora_targets="all-linear")
    base, both = step(**lora), step(**lora, param_offload=True, optimizer_offload=True)
    from gpuledger.estimate.breakdown import memory_breakdown

    s = dataclasses.replace(BASE, **lora)
    trained = float(memory_breakdown(rl_mod._workload(s, QWEN, "lora", g)).params_trainable)
    assert 0 < trained < 0.05 * total
    lora_trip = 2 * total * 2.0 / g / pcie
    assert both.phases_s["train"] - base.phases_s["train"] == pytest.approx(lora_trip + 2 * trained * 8.0 / g / pcie)
    assert both.phases_s["reference"] - base.phases_s["reference"] == pytest.approx(lora_trip)


def test_the_trainers_tensor_and_expert_parallel_degrees_time_its_step():
    from gpuledger.estimate.throughput import ModelShape, TrainSetup, step_time

    tp2 = step(trainer_tp=2)
    w = rl_mod._workload(tp2.setup, QWEN, "full", 8)
    assert (w.tensor_parallel, w.gpus) == (2, 8)
    direct = step_time(ModelShape.from_config(load_config(QWEN)), TrainSetup(
        accelerator="H100", method="full", framework=w.framework, gpus=8, precision=w.precision,
        micro_batch=w.micro_batch, seq_len=w.seq_len, checkpointing=w.checkpointing_mode, packing=w.packing,
        sample_tokens=w.sample_tokens, flash_attn=w.flash_attn, sharding=w.sharding, optimizer=w.optimizer,
        tensor_parallel=2))
    per_opt = direct.parts_s["optimizer"] + direct.parts_s["fixed"]
    assert tp2.phases_s["train"] == pytest.approx(tp2.tokens / direct.tokens_per_step * (direct.step_s - per_opt)
                                                 + per_opt)
    assert tp2.phases_s["train"] != pytest.approx(step().phases_s["train"])
    # MoE: experts split over the data-parallel GPUs (token all-to-alls) change the trainer's step
    moe = dict(model=MOE, gpu_memory_utilization=0.6, rollout_tp=2)
    assert step(**moe, trainer_ep=8).phases_s["train"] != pytest.approx(step(**moe).phases_s["train"])
    # from a spec's workload, and refused where the degrees do not divide the trainer's GPUs
    wl = Workload(model=QWEN, method="grpo", gpus=8, micro_batch=2, seq_len=1536, prompt_len=512, completion_len=1024,
                  generation="vllm_colocate", tensor_parallel=2, expert_parallel=2)
    s = setup_from_workload(wl, "H100")
    assert (s.trainer_tp, s.trainer_ep) == (2, 2)
    with pytest.raises(ValueError, match="tensor_parallel 3 does not divide its 8 GPU"):
        step(trainer_tp=3)
    with pytest.raises(ValueError, match="expert_parallel 3 does not divide its data-parallel GPUs"):
        step(trainer_ep=3)


def test_trl_before_0_17_generates_once_per_gradient_accumulation_micro_step():
    assert trl_before_whole_step("0.15.0.dev0") and trl_before_whole_step("0.16")
    assert not trl_before_whole_step("0.17.0") and not trl_before_whole_step("1.0") and not trl_before_whole_step(None)
    kw = dict(model=QWEN, method="grpo", gpus=8, micro_batch=2, seq_len=1536, prompt_len=512, completion_len=1024,
              group_size=7, generation="vllm_server", rollout_gpus=1, prompts_per_step=16, micro_batch_sequences=2)
    # open-r1's run on TRL 0.15: 16 prompts x 7 completions over 7 training ranks of 2 completions = 8 micro-steps
    assert setup_from_workload(Workload(**kw, trl_version="0.15.0.dev0"), "H100").generation_rounds == 8
    assert generation_rounds(Workload(**kw, trl_version="0.15", grad_accum=4), 112, 2, 7) == 4
    assert setup_from_workload(Workload(**kw, trl_version="0.17.1"), "H100").generation_rounds == 1
    assert setup_from_workload(Workload(**kw), "H100").generation_rounds == 1
    assert setup_from_workload(Workload(**kw, trl_version="0.15", generation_rounds=3), "H100").generation_rounds == 3
    # the trainer's own generate: each round its own calls of 1/rounds of the GPU's share, as if that were the batch
    n = BASE.prompts_per_step * BASE.group_size // BASE.trainer_gpus  # 32 sequences a GPU
    rounds = step(engine="hf", generation_rounds=4)
    same = step(engine="hf", generation_batch=n // 4)
    assert rounds.rollout_detail["generate_calls_per_gpu"] == 4 and rounds.rollout_detail["generation_rounds"] == 4
    assert rounds.phases_s["rollout"] == pytest.approx(same.phases_s["rollout"])
    assert rounds.phases_s["rollout"] > step(engine="hf").phases_s["rollout"]


def test_no_weight_sync_when_the_trainer_generates_itself():
    hf, vllm = step(engine="hf"), step()
    assert hf.phases_s["sync"] == 0 and vllm.phases_s["sync"] > rl_mod.SYNC_FIXED_S
    assert any("sync: none" in a for a in hf.assumptions)
    assert step(engine="hf", param_offload=True).phases_s["sync"] == 0  # the offload's trip is in the rollout then


def test_a_moe_policy_rolls_out_at_its_active_parameters_and_reads_all_of_its_weights():
    from gpuledger.estimate import inference

    s = dataclasses.replace(BASE, model=MOE, gpu_memory_utilization=0.6, rollout_tp=2)
    model, hw, precision = rl_mod._serving(s, "H100")
    cfg = load_config(MOE)
    total = int(count_params(cfg).total)
    from gpuledger.estimate.compute import active_params

    assert model.params_total == total
    assert model.active_params == int(active_params(cfg)) + cfg.vocab_size * cfg.hidden_size
    assert model.active_params < 0.15 * total  # 30B total, ~3B active
    engine = inference.engine_for("vllm")
    moe = inference.step_cost(model, hw, precision, engine, 2)
    dense = inference.step_cost(dataclasses.replace(model, active_params=None), hw, precision, engine, 2)
    assert moe.weight_s == pytest.approx(dense.weight_s)  # every expert's weights read each step
    e = model.embedding_params
    assert moe.flop_s_per_token / dense.flop_s_per_token == pytest.approx(
        (model.active_params - e / 2) / (total - e / 2))
    st = rl_step(s)
    d = st.rollout_detail
    assert (d["params_total"], d["params_active"]) == (total, model.active_params)
    assert d["weights_gib_per_gpu"] == pytest.approx(inference.weights_bytes(model, precision) / 2 / inference.GIB,
                                                     abs=0.01)
    # the same total size served dense would decode slower: the MoE's per-token compute is its active share
    assert st.phases_s["rollout"] < rl_step(dataclasses.replace(s, model="Qwen/Qwen3-32B")).phases_s["rollout"]


def test_a_trainer_over_several_nodes_gathers_and_trains_at_the_network_between_them():
    """train.nodes reaches the RL step: the trainer's step model crosses nodes at the inter-node bandwidth, and
    the colocated weight sync's all-gather does too (V100: NVLink 130 GB/s in a node, the network's 25 between)."""
    from gpuledger.estimate.coefficients import INTERCONNECT_GBPS

    small = dataclasses.replace(BASE, model=SMALL, trainer_accelerator="V100", precision="fp16", prompt_len=256,
                                response_len=256)
    one, two = rl_step(small), rl_step(dataclasses.replace(small, trainer_nodes=2))
    assert two.phases_s["train"] > one.phases_s["train"] and two.phases_s["reference"] > one.phases_s["reference"]
    weights = 2.0 * count_params(load_config(SMALL)).total
    gathered = weights * 7 / 8 / 1e9
    net, link = INTERCONNECT_GBPS["network"]["default"], INTERCONNECT_GBPS["nvlink"]["V100"]
    assert two.phases_s["sync"] - one.phases_s["sync"] == pytest.approx(gathered / net - gathered / link, rel=1e-6)
    assert "all-gathered over 25 GB/s" in two.assumptions[2] and "over 130 GB/s" in one.assumptions[2]
    # from a workload: the spec's nodes are the trainer's when it holds the trial's GPUs (colocated)
    w = Workload(model=SMALL, method="grpo", precision="fp16", seq_len=512, prompt_len=256, completion_len=256,
                 gpus=8, nodes=2, generation="vllm_colocate")
    assert setup_from_workload(w, "V100").trainer_nodes == 2
    split = w.model_copy(update={"generation": "vllm_server", "rollout_gpus": 2})
    assert setup_from_workload(split, "V100").trainer_nodes is None  # the trial's nodes hold both groups
