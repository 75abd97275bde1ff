"""Memory of full training in the tuned pre-training stacks (fp32 masters under bf16/fp8 compute,
FSDP2's fp32 gradient reduce, the unchunked fp32 loss), and the optimizer step's temporaries on
their own line (the `optimizer` line holds the states only)."""

from __future__ import annotations

import pytest

from gpuledger.estimate import Workload, estimate
from gpuledger.estimate.memory import loss_bytes_per_token
from gpuledger.estimate.public import memory_workload, read_csv
from gpuledger.models import count_params, load_config

GIB = 2**30
L8 = "meta-llama/Llama-3.1-8B"
P8 = count_params(load_config(L8)).total


def test_optimizer_line_is_the_states_and_the_step_temporaries_their_own_line():
    # HF Trainer, autocast bf16 (fp32 params), foreach AdamW: at the optimizer step the states are
    # 8 B per parameter and the foreach sqrt(v) copy 4 B more
    e = estimate(Workload(model="Qwen/Qwen2.5-0.5B", method="full", precision="bf16-mixed", micro_batch=1, seq_len=256))
    p = e.params_total
    assert e.peak_phase == "optimizer_step"
    assert e.memory_gib["optimizer"] * GIB == pytest.approx(8 * p)
    assert e.memory_gib["optimizer_temporaries"] * GIB == pytest.approx(4 * p)
    assert e.states_gib["optimizer"] * GIB == pytest.approx(8 * p)
    assert "sqrt(v)" in e.notes["optimizer_temporaries"]
    # a fused optimizer (torchtune's habit) has none
    tt = estimate(Workload(model="Qwen/Qwen2.5-0.5B", method="full", precision="bf16", framework="torchtune",
                           micro_batch=1, seq_len=256))
    assert tt.memory_gib["optimizer_temporaries"] == 0.0


def test_torchtitan_fsdp_keeps_fp32_masters_and_an_unchunked_fp32_loss():
    common = dict(model=L8, method="full", precision="bf16", gpus=8, sharding="fsdp", micro_batch=1, seq_len=8192,
                  checkpointing="full")
    titan = estimate(Workload(**common, framework="torchtitan"))
    tune = estimate(Workload(**common, framework="torchtune"))
    # fp32 parameters, fp32 gradients and fp32 moments: 16 B per parameter, sharded 8 ways
    s = titan.states_gib
    assert (s["weights"] + s["gradients"] + s["optimizer"]) * GIB == pytest.approx(16 * P8 / 8)
    # torchtune's pure bf16: 2 + 2 + 4
    t = tune.states_gib
    assert (t["weights"] + t["gradients"] + t["optimizer"]) * GIB == pytest.approx(8 * P8 / 8)
    # torchtitan's loss is one fp32 cross-entropy over the whole vocabulary; its train step deletes the
    # 16-bit logits before backward: the fp32 log-softmax and its two gradients, 12 B per logit
    vocab = load_config(L8).vocab_size
    assert titan.memory_gib["logits"] * GIB == pytest.approx(8192 * vocab * 12)
    assert tune.memory_gib["logits"] < titan.memory_gib["logits"] * 0.6  # chunked: 6.75 B per logit
    assert "unchunked" in titan.notes["logits"]
    assert titan.memory_gib["device"] > tune.memory_gib["device"] * 1.15


def test_megatron_distributed_optimizer_is_6_plus_12_over_d_bytes_per_parameter():
    e = estimate(Workload(model=L8, method="full", precision="bf16", framework="megatron", gpus=8, micro_batch=1,
                          seq_len=4096, checkpointing="full"))
    s = e.states_gib
    assert (s["weights"] + s["gradients"] + s["optimizer"]) * GIB == pytest.approx((6 + 12 / 8) * P8)
    assert e.memory_gib["gradients"] == pytest.approx(s["gradients"])  # the main-gradient buffer is persistent
    # fp8 compute keeps the same storage
    f8 = estimate(Workload(model=L8, method="full", precision="fp8", framework="megatron", gpus=8, micro_batch=1,
                           seq_len=4096, checkpointing="full"))
    assert f8.states_gib == s


def test_tensor_and_pipeline_parallel_split_the_model_per_gpu():
    from gpuledger.estimate import Workload, estimate

    base = dict(model="meta-llama/Llama-3.1-70B", method="full", precision="bf16", framework="megatron",
                micro_batch=1, seq_len=4096)
    dp8 = estimate(Workload(**base, gpus=8)).memory_gib
    tp8 = estimate(Workload(**base, gpus=8, tensor_parallel=8)).memory_gib
    tp8pp4 = estimate(Workload(**base, gpus=64, tensor_parallel=8, pipeline_parallel=4)).memory_gib
    # the weights and main gradients are split over the tensor ranks (not replicated as in plain DP)
    assert tp8["weights"] == pytest.approx(dp8["weights"] / 8, rel=1e-6)
    # sequence parallel and vocab-parallel cross-entropy split activations and logits over the tensor ranks
    assert tp8["activations"] == pytest.approx(dp8["activations"] / 8, rel=1e-6)
    assert tp8["logits"] == pytest.approx(dp8["logits"] / 8, rel=1e-6)
    assert tp8pp4["device"] < 80 < tp8["device"]


def test_megatron_cross_entropy_keeps_one_fp32_copy():
    from gpuledger.estimate.memory import loss_bytes_per_token
    from gpuledger.models import load_config

    cfg = load_config("google/gemma-2b")
    assert loss_bytes_per_token(cfg, "bf16", "megatron") == (2 + 4) * cfg.vocab_size
    assert loss_bytes_per_token(cfg, "bf16", "hf") == (2 + 12) * cfg.vocab_size


def test_cpu_offload_moves_states_off_the_gpu_and_costs_host_time():
    from gpuledger.estimate import Workload, estimate, training_step

    base = dict(model="meta-llama/Llama-3.1-8B", method="full", precision="bf16-mixed", gpus=2, sharding="zero3")
    none, opt, params = (estimate(Workload(**base, offload=o)) for o in ("none", "optimizer", "params"))
    assert opt.memory_gib["optimizer"] == 0 < none.memory_gib["optimizer"]
    assert params.memory_gib["weights"] == 0 and params.memory_gib["device"] < opt.memory_gib["device"]
    # the optimizer step moves to the host: slower than on the GPU
    assert training_step(opt, "A100-80GB").parts_s["optimizer"] > 2 * training_step(none, "A100-80GB").parts_s["optimizer"]


def test_sequence_parallel_splits_activations_and_costs_all_to_alls():
    from gpuledger.estimate import Workload, estimate, training_step

    base = dict(model="meta-llama/Llama-3.1-8B", method="full", gpus=8, sharding="fsdp", seq_len=32768,
                framework="torchtitan")
    one, four = estimate(Workload(**base)), estimate(Workload(**base, sequence_parallel=4))
    assert four.memory_gib["activations"] == pytest.approx(one.memory_gib["activations"] / 4, rel=1e-6)
    t1, t4 = training_step(one, "H100"), training_step(four, "H100")
    assert t4.tokens_per_s_per_gpu < t1.tokens_per_s_per_gpu  # the all-to-alls are not free
    assert t4.tokens_per_step == pytest.approx(t1.tokens_per_step / 4)  # 2 replicas of 4 GPUs, not 8
    with pytest.raises(ValueError, match="sequence_parallel"):
        Workload(**{**base, "gpus": 6}, sequence_parallel=4)


def test_nemo_llama3_8b_with_context_parallel_fits_an_h100():
    # NeMo's Llama 3 8B recipe: 8 GPUs, TP1 PP1 CP2, 8,192 tokens, distributed optimizer; it runs on H100s,
    # so the planner must not refuse it (Megatron's fused SwiGLU activations, static buffers unfragmented)
    from gpuledger.catalog import gpu_kinds
    from gpuledger.estimate import Workload, estimate
    from gpuledger.plan.settings import MEMORY_RESERVE_GIB, MEMORY_SAFETY_FRACTION

    e = estimate(Workload(model="meta-llama/Llama-3.1-8B", method="full", precision="bf16", framework="nemo", gpus=8,
                          micro_batch=1, seq_len=8192, sequence_parallel=2))
    usable = gpu_kinds()["H100"].memory_gib * MEMORY_SAFETY_FRACTION - MEMORY_RESERVE_GIB
    assert e.memory_gib["device"] <= usable
    assert e.memory_gib["device"] > 0.85 * usable  # and it is close to full, as the recipe needs CP2 to fit


def test_expert_parallel_splits_the_routed_experts_and_costs_all_to_alls():
    from gpuledger.estimate import Workload, estimate, training_step

    base = dict(model="Qwen/Qwen3-30B-A3B", method="full", precision="bf16", framework="megatron", gpus=8,
                micro_batch=1, seq_len=4096)
    one, eight = estimate(Workload(**base)), estimate(Workload(**base, expert_parallel=8))
    assert eight.memory_gib["weights"] < 0.25 * one.memory_gib["weights"]  # ~97% of Qwen3-30B-A3B is experts
    assert training_step(eight, "H100").parts_s["communication"] > training_step(one, "H100").parts_s["communication"]
    with pytest.raises(ValueError, match="expert_parallel"):
        Workload(**base, expert_parallel=3)


def test_fused_linear_cross_entropy_never_holds_the_full_logits():
    """Liger's fused linear cross-entropy (use_liger_kernel, --fused-ce): a 256k vocabulary at 2 x 8,192
    tokens costs 14 B per logit unfused (55 GiB) and ~3 x hidden x 2 B per token fused."""
    common = dict(model="google/gemma-2-9b", method="full", precision="bf16", gpus=8, sharding="fsdp", micro_batch=2,
                  seq_len=8192)
    plain = estimate(Workload(**common))
    fused = estimate(Workload(**common, use_liger_kernel=True))
    cfg = load_config("google/gemma-2-9b")
    tokens = 2 * 8192
    assert plain.memory_gib["logits"] * GIB == pytest.approx(tokens * cfg.vocab_size * 14)
    assert loss_bytes_per_token(cfg, "bf16", "hf", fused=True) == 3 * 2 * cfg.hidden_size
    # fused, the loss's chunks are smaller than the block recomputed after them: that recompute is the peak
    assert fused.peak_phase == "backward_recompute" and fused.memory_gib["logits"] == 0.0
    assert "fused linear" in fused.notes["logits"]
    assert fused.memory_gib["device"] < plain.memory_gib["device"] - 45


def test_fsdp_and_zero3_on_several_gpus_take_the_sharded_fragmentation():
    from gpuledger.estimate.memory import (
        ALLOCATOR_OVERHEAD,
        FSDP1_ALLOCATOR_OVERHEAD,
        SHARDED_ALLOCATOR_OVERHEAD,
    )

    common = dict(model="meta-llama/Llama-2-7b-hf", method="full", precision="bf16", micro_batch=4, seq_len=2048)
    # Transformers / accelerate's FSDP is FSDP1 (record_stream), torchtune's FSDP2 and ZeRO-3 the sharded default
    for sharding, framework, overhead in (("fsdp", "hf", FSDP1_ALLOCATOR_OVERHEAD), ("fsdp", "torchtune", SHARDED_ALLOCATOR_OVERHEAD),
                                          ("zero3", "hf", SHARDED_ALLOCATOR_OVERHEAD)):
        e = estimate(Workload(**common, gpus=4, sharding=sharding, framework=framework))
        assert e.memory_gib["reserved"] == pytest.approx(e.memory_gib["allocated"] * (1 + overhead))
    one = estimate(Workload(**common))
    assert one.memory_gib["reserved"] == pytest.approx(one.memory_gib["allocated"] * (1 + ALLOCATOR_OVERHEAD))


def test_double_quantisation_shrinks_the_nf4_constants():
    """bitsandbytes' bnb_4bit_use_double_quant (the QLoRA recipe): 8-bit absmax per 64 weights plus an fp32
    factor per 256 of them, instead of an fp32 absmax per 64 (0.127 bit instead of 0.5 per weight)."""
    from gpuledger.estimate.memory import NF4_DQ_CONST_BYTES, QUANT_CONST_BYTES
    from gpuledger.models import layer_linears

    common = dict(model=L8, method="qlora", precision="nf4", micro_batch=1, seq_len=512, lora_targets="all-linear")
    plain, dq = estimate(Workload(**common)), estimate(Workload(**common, bnb_4bit_use_double_quant=True))
    cfg = load_config(L8)
    quantised = cfg.num_layers * sum(lin.weight_params for lin in layer_linears(cfg) if lin.targets or lin.count > 1)
    saved = quantised * (QUANT_CONST_BYTES["nf4"] - NF4_DQ_CONST_BYTES)
    assert (plain.memory_gib["allocated"] - dq.memory_gib["allocated"]) * GIB == pytest.approx(saved, rel=1e-6)
    # torchtune's NF4 (torchao) is double-quantised by habit
    tt = estimate(Workload(**{**common, "framework": "torchtune"}))
    assert tt.memory_gib["buffers"] * GIB == pytest.approx(quantised * NF4_DQ_CONST_BYTES, rel=1e-6)


def test_an_evaluation_between_steps_is_a_phase_of_its_own():
    """Trainer's per_device_eval_batch_size (8 by default) at seq 2048 on Llama-3.1-8B: the no-grad eval
    step's logits and loss, (2 + 8) B per logit, outgrow the training step of one sequence."""
    common = dict(model=L8, method="lora", micro_batch=1, seq_len=2048)
    train = estimate(Workload(**common))
    small = estimate(Workload(**common, eval_batch=1))
    big = estimate(Workload(**common, per_device_eval_batch_size=8))
    assert "eval" not in train.phases_gib and small.peak_phase == train.peak_phase
    assert small.memory_gib["device"] == pytest.approx(train.memory_gib["device"])
    assert big.peak_phase == "eval" and big.memory_gib["gradients"] == 0.0
    vocab = load_config(L8).vocab_size
    assert big.memory_gib["logits"] * GIB == pytest.approx(8 * 2048 * vocab * 10)
    assert big.memory_gib["device"] > train.memory_gib["device"] + 15
    assert "evaluation" in big.notes["logits"]


def test_deepspeed_keeps_fp32_masters_and_moments_whatever_the_model_dtype():
    """ZeRO with bf16 enabled: 16-bit parameters and gradients, fp32 master weights and Adam moments in the
    partition (2 + 2 + 12 B per parameter, Rajbhandari et al. 2020 §3), where FSDP over a bf16 model keeps
    bf16 moments (2 + 2 + 4)."""
    common = dict(model=L8, method="full", precision="bf16", micro_batch=1, seq_len=2048, gpus=8)
    z3, fsdp = estimate(Workload(**common, sharding="zero3")), estimate(Workload(**common, sharding="fsdp"))
    s, f = z3.states_gib, fsdp.states_gib
    assert (s["weights"] + s["gradients"] + s["optimizer"]) * GIB == pytest.approx(16 * P8 / 8)
    assert (f["weights"] + f["gradients"] + f["optimizer"]) * GIB == pytest.approx(8 * P8 / 8)
    assert "DeepSpeed" in z3.notes["optimizer"]


def test_a_run_that_evaluates_takes_its_frameworks_eval_batch():
    # eval_steps without eval_batch: Transformers' per_device_eval_batch_size (8); torchtune the micro-batch
    common = dict(model=L8, method="lora", micro_batch=2, seq_len=1024, eval_steps=100, eval_samples=200)
    hf = estimate(Workload(**common))
    assert hf.phases_gib["eval"] > 0 and any("per_device_eval_batch_size" in a for a in hf.assumptions)
    assert hf.phases_gib["eval"] == pytest.approx(estimate(Workload(**common, eval_batch=8)).phases_gib["eval"])
    tt = estimate(Workload(**common, framework="torchtune"))
    assert tt.phases_gib["eval"] == pytest.approx(estimate(Workload(**common, framework="torchtune",
                                                                    eval_batch=2)).phases_gib["eval"])


def test_checkpointed_loss_and_the_recomputed_block_do_not_coexist():
    """Under checkpointing the loss's backward (the fp32 log-softmax and its two gradients) runs and frees its
    tensors before the last block is recomputed, so the peak is the larger of the two, not their sum. LLaMA-Factory's
    wiki series (Llama-2-7B QLoRA, 1 x 16,384 -> 32,768 tokens on one A100-40GB) grows 0.79 MB per token measured;
    the sum grew 0.96 MB (the long-context rows +11% and +15%), the larger of the two 0.77 MB."""
    rows = {r["id"]: r for r in read_csv("memory_public.csv")}
    lo, hi = (rows[f"llamafactory_l2_7b_qlora_{n}"] for n in (16384, 32768))
    measured = (float(hi["measured_gib"]) - float(lo["measured_gib"])) * GIB / 16384
    est_lo, est_hi = (estimate(memory_workload(r)) for r in (lo, hi))
    growth = (est_hi.memory_gib["device"] - est_lo.memory_gib["device"]) * GIB / 16384
    assert growth == pytest.approx(measured, rel=0.06)
    assert est_hi.peak_phase == "forward_end" and "backward_recompute" in est_hi.phases_gib
    # without checkpointing every block's tensors are alive at the loss: no phase of its own
    assert "backward_recompute" not in estimate(Workload(**{**memory_workload(hi).__dict__, "grad_ckpt": False})).phases_gib


def test_an_fsdp_full_fine_tune_holds_the_root_units_gradient_at_the_end_of_backward():
    """The embeddings / lm_head unit is reduce-scattered last: its unsharded gradient (FSDP2 with an fp32
    reduce_dtype copy beside it) is alive next to every sharded gradient at the end of backward. A torchtitan
    log (pytorch/torchtitan PR #1884, 2025-10: Llama-3-8B, 4 GPUs as FSDP 2 x context parallel 2, full AC, 1 x
    8,192 tokens) reports 44.84 GiB reserved; without the term the estimate was 40.9 GiB."""
    row = next(r for r in read_csv("memory_public.csv") if r["id"] == "torchtitan_pr1884_l3_8b_cp2")
    e = estimate(memory_workload(row))
    assert e.workload.sequence_parallel == 2 and e.peak_phase == "backward_end"
    assert e.memory_gib["reserved"] == pytest.approx(float(row["measured_gib"]), rel=0.05)
    cfg = load_config("meta-llama/Llama-3.1-8B")
    sharded = count_params(cfg).total * 4 / 4 / GIB  # fp32 gradients over the 4 GPUs
    assert e.memory_gib["gradients"] == pytest.approx(sharded + cfg.vocab_size * cfg.hidden_size * 6 / GIB)
