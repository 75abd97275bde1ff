"""The training-throughput model (gpuledger/estimate/throughput.py) and its public rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuledger.estimate.coefficients import MATMUL_EFFICIENCY
from gpuledger.estimate.public import THROUGHPUT_CSV, time_cases
from gpuledger.estimate.throughput import ModelShape, TrainSetup, fit_efficiency, step_time

ROOT = Path(__file__).resolve().parents[2]
SHAPE_8B = ModelShape(8.03e9, 7.5e9, 32, 4096, 4096, 128256)


def tps(**kw) -> float:
    return step_time(SHAPE_8B, TrainSetup(**{"accelerator": "H100", "method": "full", **kw})).tokens_per_s_per_gpu


def test_shipped_rows_are_the_test_rows():
    for name in (THROUGHPUT_CSV, "whole_runs.csv"):
        shipped = (ROOT / "gpuledger" / "estimate" / "data" / name).read_text()
        assert shipped == (ROOT / "tests" / "data" / name).read_text(), name


def test_shipped_efficiencies_are_the_fit_of_the_rows():
    fitted = fit_efficiency([(c.shape, c.setup, c.measured, c.source) for c in time_cases()])
    for cls, (value, _) in fitted.items():
        assert MATMUL_EFFICIENCY[cls] == pytest.approx(value, abs=0.002), cls


def test_checkpointing_costs_in_order():
    # GPU-bound (4 x 2048 packed tokens per micro-batch): at 1 x 1024 eager kernels are launch-bound either way
    def run(ck):
        return tps(checkpointing=ck, micro_batch=4, packing=True)

    assert run("none") > run("selective") > run("full")
    # selective recomputes the attention core only: a few percent, not a third
    assert run("selective") > 0.9 * run("none")


def test_padding_costs_and_packing_removes_it():
    packed = tps(micro_batch=4, packing=True, framework="hf")
    padded = tps(micro_batch=4, packing=False, framework="hf")
    assert padded < 0.75 * packed


def test_fp8_is_a_measured_speedup_not_twice():
    ratio = tps(precision="fp8", framework="torchtitan") / tps(precision="bf16", framework="torchtitan")
    assert 1.1 < ratio < 1.5


def test_small_micro_batches_pay_per_step_costs():
    # a full fine-tune at 1 x 512 tokens per step: the optimizer pass over 8B params dominates
    small = tps(micro_batch=1, seq_len=512, packing=True, framework="hf")
    large = tps(micro_batch=8, seq_len=2048, packing=True, framework="hf")
    assert small < 0.5 * large


def test_nodes_over_a_slow_network_cost_more_than_nvlink():
    one = tps(gpus=8, sharding="fsdp", framework="torchtitan")
    pcie = step_time(SHAPE_8B, TrainSetup("L40S", method="full", gpus=8, sharding="fsdp")).tokens_per_s_per_gpu
    assert pcie < one
    sixteen = tps(gpus=16, sharding="fsdp", framework="torchtitan")
    assert sixteen < 1.05 * one  # the fabric is near NVLink speed; sharding the optimizer wider helps a little


def test_tensor_and_pipeline_parallel_need_a_whole_split():
    with pytest.raises(ValueError, match="do not divide"):
        tps(gpus=6, tensor_parallel=4)
    assert tps(gpus=16, tensor_parallel=8, pipeline_parallel=2) > 0


def test_unknown_framework_is_refused():
    with pytest.raises(ValueError, match="unknown framework"):
        tps(framework="keras")


def test_small_eager_micro_batches_are_bound_by_the_host():
    """lit-gpt's resource tables: a LoRA iteration of phi-1.5 takes ~97-102 ms at micro-batch 1, 2 and 4
    (one A100): the host issuing eager kernels, not the GPU, sets the pace; the model says the same."""
    from gpuledger.estimate.coefficients import KERNEL_LAUNCH_S, KERNELS_PER_LAYER
    from gpuledger.estimate.public import model_tokens_per_s, time_cases, time_error

    cases = {c.id: c for c in time_cases() if c.source == "litgpt-resource-tables"}
    assert len(cases) == 9
    for c in cases.values():
        assert abs(time_error(model_tokens_per_s(c), c.measured)) <= 0.25, c.id
    phi = [cases[f"litgpt_rt_phi15_lora_mb{b}"] for b in (1, 2, 4)]
    per_iteration = []
    for c in phi:
        st = step_time(c.shape, c.setup)
        per_iteration.append((st.step_s - st.parts_s["optimizer"] - st.parts_s["fixed"]) / c.setup.grad_accum)
    floor = 24 * KERNELS_PER_LAYER["eager"] * 2.5 * KERNEL_LAUNCH_S["eager"]  # phi-1.5: 24 layers
    assert min(per_iteration) >= floor * (1 - 1e-9)
    assert max(per_iteration) / min(per_iteration) < 1.15  # measured 102 / 97 ms
    # compiled/fused code issues fewer kernels, at the launch cost alone: no such floor here
    fused = step_time(phi[0].shape, TrainSetup(**{**phi[0].setup.__dict__, "compile": True}))
    assert fused.parts_s["launch_floor"] == 0.0


def test_deepspeed_zero_step_costs_the_same_at_any_batch():
    """PaddleNLP's HF + DeepSpeed LLaMA-7B rows on 4 A100s: global batch 8 and 16 differ by far less than
    twice in step time; the model's ZeRO step cost is per step (per parameter of the partition), not per token."""
    from gpuledger.estimate.coefficients import ZERO_STEP_S_PER_PARAM
    from gpuledger.estimate.public import model_tokens_per_s, time_cases, time_error

    cases = {c.id: c for c in time_cases() if c.source == "paddlenlp-torch-benchmark"}
    for c in cases.values():
        assert abs(time_error(model_tokens_per_s(c), c.measured)) <= 0.25, c.id
    small, big = cases["paddlenlp_torch_llama7b_full_zero2_bs8"], cases["paddlenlp_torch_llama7b_full_zero2_bs16"]
    s_small, s_big = step_time(small.shape, small.setup), step_time(big.shape, big.setup)
    assert s_small.parts_s["optimizer"] == pytest.approx(s_big.parts_s["optimizer"])
    # plain DDP pays the AdamW pass over the whole model and no ZeRO step: the difference is exactly
    # the AdamW pass saved by sharding it 4 ways and the ZeRO step over the quarter
    ddp = step_time(small.shape, TrainSetup(**{**small.setup.__dict__, "sharding": "ddp"}))
    quarter = small.shape.params_total / 4
    adamw_quarter = ddp.parts_s["optimizer"] / 4
    assert s_small.parts_s["optimizer"] == pytest.approx(adamw_quarter + quarter * ZERO_STEP_S_PER_PARAM)


def test_rows_of_models_outside_the_registry_state_their_trainable_parameters():
    """Qwen's README rows (Qwen v1, not in the registry): sizes and LoRA r=64 on every linear given in the row."""
    qwen = [c for c in time_cases() if c.source == "qwen-readme-profiling"]
    assert len(qwen) == 18
    seven = next(c for c in qwen if c.id == "qwen_7b_lora_s2048")
    d, ff, layers = 4096, 11008, 32  # Qwen-7B config.json: hidden, intermediate_size / 2, layers
    assert seven.setup.params_trainable == 64 * ((d + 3 * d) + (d + d) + 2 * (d + ff) + (ff + d)) * layers
    assert seven.measured == pytest.approx(8 * 2048 / 5.2, rel=1e-3)  # 8 micro-batches of 2048 tokens in 5.2 s


def test_the_l40_runs_at_the_l40s_sustained_rate():
    """The L40 and the L40S are the same AD102 die; the L40's datasheet gives half the L40S's 16-bit rate
    (181 vs 362 TFLOP/s), so its factor is twice the L40S's: the same setup runs at the same speed on both."""
    def run(acc):
        return step_time(SHAPE_8B, TrainSetup(acc, method="lora", params_trainable=2e7, seq_len=4096,
                                              micro_batch=4, packing=True)).tokens_per_s_per_gpu

    assert run("L40") == pytest.approx(run("L40S"), rel=0.01)
    assert run("L40") < 0.85 * run("A100-80GB")  # 864 vs 2,039 GB/s and a lower sustained tensor rate


def test_the_rtx4090_factor_is_the_fit_of_its_sources():
    """KIND_FACTOR["RTX4090"] is fitted on the card's two sources (torchtune, fsdp_qlora): the median of the
    sources' median measured/predicted comes out at 1 (within the iteration's 3%)."""
    import statistics

    from gpuledger.estimate.public import model_tokens_per_s

    by_source: dict[str, list[float]] = {}
    for c in time_cases():
        if c.setup.accelerator == "RTX4090":
            by_source.setdefault(c.source, []).append(c.measured / model_tokens_per_s(c))
    assert len(by_source) == 2
    assert statistics.median(statistics.median(r) for r in by_source.values()) == pytest.approx(1.0, abs=0.03)


def test_llm_int8_base_is_several_times_slower_than_4bit():
    # bitsandbytes issue #490: 8-bit ~2.5x slower than 4-bit; the ratio comes from the model, not a constant
    kw = dict(accelerator="A100", method="qlora", micro_batch=4, seq_len=1024, params_trainable=4e6)
    nf4 = step_time(SHAPE_8B, TrainSetup(precision="nf4", **kw)).step_s
    int8 = step_time(SHAPE_8B, TrainSetup(precision="int8", **kw)).step_s
    bf16 = step_time(SHAPE_8B, TrainSetup(**{**kw, "method": "lora", "precision": "bf16"})).step_s
    assert 2.0 < int8 / nf4 < 3.5 and bf16 < nf4


def test_tuned_stacks_default_to_their_own_checkpointing():
    from gpuledger.estimate import Workload

    assert Workload(model="gpt2", framework="nemo").checkpointing_mode == "selective"
    assert Workload(model="gpt2", framework="torchtitan").checkpointing_mode == "selective"
    assert Workload(model="gpt2", framework="hf").checkpointing_mode == "full"
    # an explicit switch wins
    assert Workload(model="gpt2", framework="nemo", grad_ckpt=True).checkpointing_mode == "full"
    assert Workload(model="gpt2", framework="nemo", checkpointing="none").checkpointing_mode == "none"


def test_eager_attention_charges_its_scores_and_grows_with_length():
    # Transformers' eager attention: the scores go through memory; the cost grows with the square of the length
    def ratio(seq):
        kw = dict(method="lora", params_trainable=4e6, micro_batch=4, seq_len=seq, framework="hf", packing=True)
        return tps(flash_attn=False, **kw) / tps(flash_attn=True, **kw)

    assert ratio(4096) < ratio(1024) < 1.0
    assert ratio(4096) < 0.8  # not the few percent of the attention FLOPs alone


def test_tuned_stacks_without_flash_attention_keep_their_fused_softmax():
    kw = dict(micro_batch=4, seq_len=2048, framework="megatron", packing=True)
    assert tps(flash_attn=False, **kw) > 0.9 * tps(flash_attn=True, **kw)


def test_stated_sample_length_sets_the_padding():
    from gpuledger.estimate.throughput import padding_factors

    assert padding_factors(4, False) == (0.5, 0.8)  # no cap known: spread evenly over it
    # a cap but no stated mean: a typical instruction set's lengths (DEFAULT_SAMPLE_TOKENS), whatever the cap
    from gpuledger.estimate.coefficients import DEFAULT_SAMPLE_TOKENS

    for cap in (2048, 4096):
        real_d, _ = padding_factors(4, False, cap, None)
        assert real_d * cap == pytest.approx(DEFAULT_SAMPLE_TOKENS, rel=0.02)
    real_short, padded_short = padding_factors(4, False, 200, None)  # a cap below the mean: most samples fill it
    assert 0.7 < real_short < padded_short < 1.0
    real, padded = padding_factors(1, False, 4096, 200)
    assert real == pytest.approx(200 / 4096, rel=0.02) and padded == pytest.approx(real)
    r8, p8 = padding_factors(8, False, 4096, 200)
    assert r8 == pytest.approx(real) and p8 > 1.8 * r8  # the longest of 8 skewed lengths, not their mean
    assert padding_factors(8, True, 4096, 200) == (1.0, 1.0)
    # short samples pay the per-micro-batch costs on fewer tokens: slower per token than long ones
    kw = dict(method="lora", params_trainable=4e6, micro_batch=1, seq_len=2048, framework="hf", packing=False)
    assert tps(sample_tokens=200, **kw) < 0.8 * tps(sample_tokens=1024, **kw)
    assert tps(sample_tokens=200, **kw) < tps(**kw) < tps(sample_tokens=1024, **kw)  # the default lies between


def test_sample_tokens_reaches_the_step_from_the_workload():
    from gpuledger.estimate import Workload, estimate, training_step

    base = dict(model="meta-llama/Llama-2-7b-hf", method="lora", micro_batch=4, seq_len=2048)
    short = training_step(estimate(Workload(**base, sample_tokens=150)), "A100")
    long = training_step(estimate(Workload(**base, sample_tokens=1024)), "A100")
    assert short.tokens_per_step < 0.2 * long.tokens_per_step
    assert any("mean 150" in a for a in short.assumptions)
    plain = training_step(estimate(Workload(**base)), "A100")  # not stated: a typical instruction set's lengths
    assert any("typical instruction set" in a for a in plain.assumptions)


def test_padding_to_max_length_computes_every_position_of_the_cap():
    from gpuledger.estimate import Workload, estimate, training_step
    from gpuledger.estimate.throughput import padding_factors

    real, padded = padding_factors(4, False, 2048, 250, "max_length")
    assert padded == 1.0 and real == pytest.approx(padding_factors(4, False, 2048, 250)[0])
    assert padding_factors(4, True, 2048, 250, "max_length") == (1.0, 1.0)  # packing fills the cap anyway
    base = dict(model="meta-llama/Llama-2-7b-hf", method="lora", micro_batch=4, seq_len=2048, sample_tokens=250)
    longest = training_step(estimate(Workload(**base)), "A100")
    to_max = training_step(estimate(Workload(**base, padding="max_length")), "A100")
    assert to_max.tokens_per_step == pytest.approx(longest.tokens_per_step)  # the same real tokens per step
    assert to_max.step_s > 3 * longest.step_s  # ~8 positions per real token instead of ~2
    assert any("train.padding: max_length" in a for a in to_max.assumptions)


def test_spec_padding_reaches_the_workload():
    from gpuledger.estimate import STACK_FIELDS
    from gpuledger.spec.models import Train

    assert "padding" in STACK_FIELDS
    assert Train(padding="max_length").padding == "max_length" and Train().padding == "longest"
    assert Train(padding="packed").packing is True
    with pytest.raises(ValueError):
        Train(padding="right")


def test_a_spec_of_samples_whose_lengths_are_unstated_is_planned_at_the_cap():
    """Issue 36: a data set counted in samples, with neither its padding nor its mean length stated, costs
    seq_len positions a sample (max_length, the most a sample can cost); stating the mean restores the
    micro-batch's longest; a run counted in tokens keeps longest; padding packed is packing true."""
    from gpuledger.estimate import STACK_FIELDS, Workload, estimate, train_time_s
    from gpuledger.spec.models import Train

    def plan_s(**train) -> float:
        t = Train(**{"seq_len": 2048, "micro_batch": 4, **train})
        w = Workload(model="meta-llama/Llama-2-7b-hf", method="lora",
                     **{f: getattr(t, f) for f in STACK_FIELDS if f in type(t).model_fields},
                     micro_batch=t.micro_batch, seq_len=t.seq_len)
        return train_time_s(estimate(w), t.tokens_per_trial, "A100")

    unstated = Train(samples=10_000, seq_len=2048)
    assert unstated.padding == "max_length" and unstated.packing is None
    assert Train(**unstated.model_dump()).padding == "max_length"  # read back: the same plan
    at_cap, stated = plan_s(samples=10_000), plan_s(samples=10_000, sample_tokens=250)
    assert Train(samples=10_000, sample_tokens=250).padding == "longest"
    assert at_cap > 3 * stated  # 2,048 positions a sample, not the ~2 x 250 of a padded micro-batch
    # the same samples at the cap cost what packed full-length rows do: samples x seq_len positions
    packed_full = plan_s(samples=10_000, packing=True, sample_tokens=2048)
    assert at_cap == pytest.approx(packed_full, rel=0.15)
    assert Train(tokens_per_trial=1e7).padding == "longest"  # tokens are real tokens: their padding is the risk
    assert Train(samples=100, framework="torchtitan").padding == "longest"  # packs by habit
    packed = Train(samples=100, padding="packed")
    assert packed.packing is True and packed.tokens_per_trial == 100 * 250
    assert Workload(model="gpt2", padding="packed").packing is True
    for bad in (lambda: Train(samples=100, padding="packed", packing=False),
                lambda: Workload(model="gpt2", padding="packed", packing=False)):
        with pytest.raises(ValueError, match="packed"):
            bad()


def test_the_estimate_says_what_it_assumed_of_the_sample_lengths():
    from gpuledger.estimate import Workload, sample_lengths_note

    base = dict(model="meta-llama/Llama-2-7b-hf", method="lora", seq_len=2048)
    assert "mean 250" in sample_lengths_note(Workload(**base)) and "--sample-tokens" in sample_lengths_note(Workload(**base))
    assert "mean 120" in sample_lengths_note(Workload(**base, sample_tokens=120))
    assert "padded to 2048" in sample_lengths_note(Workload(**base, padding="max_length"))
    assert sample_lengths_note(Workload(**base, packing=True)) is None
    assert sample_lengths_note(Workload(**{**base, "method": "full"}, framework="megatron")) is None  # packs by habit


def test_a_spec_may_give_the_data_sets_samples_and_epochs_for_its_tokens():
    from gpuledger.estimate.coefficients import DEFAULT_SAMPLE_TOKENS
    from gpuledger.estimate.throughput import mean_real_tokens
    from gpuledger.spec.models import Train

    t = Train(samples="10k", epochs=3, seq_len=2048)  # unpacked (hf): the default lengths cut at the cap
    assert t.tokens_per_trial == round(30_000 * mean_real_tokens(2048, False))
    assert 0.9 * DEFAULT_SAMPLE_TOKENS < t.tokens_per_trial / 30_000 <= DEFAULT_SAMPLE_TOKENS
    assert Train(samples=1000, seq_len=128).tokens_per_trial < 128 * 1000  # a short cap truncates most samples
    assert Train(samples=1000, packing=True, sample_tokens=554).tokens_per_trial == 554_000  # packed: whole samples
    assert Train(**t.model_dump()).tokens_per_trial == t.tokens_per_trial  # a spec read back keeps its tokens
    assert Train(**Train(tokens_per_trial=5000).model_dump()).tokens_per_trial == 5000
    for bad in (dict(samples=10, tokens_per_trial=5), dict(epochs=2, tokens_per_trial=5)):
        with pytest.raises(ValueError, match="train.samples"):
            Train(**bad)


def test_evaluation_during_training_is_charged_as_forward_passes():
    from gpuledger.estimate import (
        Workload,
        estimate,
        eval_passes,
        run_overheads_s,
        train_time_s,
        training_step,
    )

    assert eval_passes(None, 1000) == 0 and eval_passes(100, 1000) == 10 and eval_passes(100, 99) == 0
    assert eval_passes(0.25, 1000) == 4 and eval_passes(1 / 3, 1000) == 3 and eval_passes(1 - 1e-9, 7) == 1  # ratios, epochs
    base = dict(model="meta-llama/Llama-3.1-8B", method="lora", micro_batch=4, seq_len=2048)
    plain = estimate(Workload(**base))
    step = training_step(plain, "A100-80GB")
    assert run_overheads_s(plain, 20e6, step)["eval"] == 0.0  # the Trainer's default eval_strategy "no"
    one = estimate(Workload(**base, eval_steps=0.5, eval_samples=1000))  # two evaluations of 1,000 samples
    two = estimate(Workload(**base, eval_steps=0.5, eval_samples=2000))
    e1 = run_overheads_s(one, 20e6, training_step(one, "A100-80GB"))["eval"]
    e2 = run_overheads_s(two, 20e6, training_step(two, "A100-80GB"))["eval"]
    assert e2 == pytest.approx(2 * e1)
    # forward only: 2 evaluations x 1,000 samples cost less than training on that many samples (~1/3 for LoRA +
    # recompute, 2P of 6P), and the whole-run time holds them
    from gpuledger.estimate.throughput import mean_real_tokens

    train_same = step.time_s(2 * 1000 * mean_real_tokens(2048, False))
    assert 0.25 * train_same < e1 < 0.5 * train_same
    assert train_time_s(one, 20e6, "A100-80GB") == pytest.approx(train_time_s(plain, 20e6, "A100-80GB") + e1, rel=1e-6)
    with pytest.raises(ValueError, match="go together"):
        Workload(**base, eval_steps=100)


def test_a_spec_states_its_evaluation_as_the_trainer_does():
    from gpuledger.estimate import STACK_FIELDS
    from gpuledger.spec.models import Train

    assert {"eval_steps", "eval_samples"} <= set(STACK_FIELDS)
    assert Train(eval_steps=200, eval_samples=500).eval_steps == 200  # eval_strategy steps implied
    t = Train(samples=1000, epochs=3, eval_strategy="epoch", eval_samples=100)
    assert t.eval_steps == pytest.approx(1 / 3)  # one evaluation per epoch: a third of the run's steps
    assert Train(**t.model_dump()).eval_steps == t.eval_steps  # a spec read back
    assert Train(samples=1000, eval_strategy="epoch", eval_samples=100).eval_steps < 1  # one epoch: once, at its end
    for bad, says in ((dict(eval_samples=100), "eval_steps"), (dict(eval_steps=100), "eval_samples"),
                      (dict(eval_strategy="epoch", eval_samples=10), "train.samples"),
                      (dict(eval_steps=2.5, eval_samples=10), "whole number"),
                      (dict(eval_strategy="no", eval_steps=10, eval_samples=10), "eval_strategy steps")):
        with pytest.raises(ValueError, match=says):
            Train(**bad)


def test_whole_runs_carry_their_evaluation_and_dollar_claims():
    from gpuledger.estimate import estimate, train_time_s
    from gpuledger.estimate.public import whole_runs

    runs = {r.id: r for r in whole_runs()}
    r = runs["llmc_gpt2_124m_8xa100"]  # llm.c: val + HellaSwag every 250 steps, "90 minutes for $20"
    assert r.workload.eval_steps == 250 and r.workload.eval_samples > 0 and r.claimed_usd == 20
    bare = r.workload.model_copy(update={"eval_steps": None, "eval_samples": None})
    assert r.model_s() > 1.05 * train_time_s(estimate(bare), r.tokens, r.accelerator)  # evaluation is in the run
    assert runs["philschmid23_a10g_llama2_7b_qlora_dolly_eager"].workload.flash_attn is False
    assert all(x.claimed_usd is None or x.claimed_usd > 0 for x in runs.values())


def test_a_tuned_stacks_distributed_optimizer_is_not_charged_deepspeeds_step():
    from gpuledger.estimate import Workload, estimate, training_step

    def optimizer_s(framework):
        w = Workload(model="meta-llama/Llama-3.1-8B", method="full", framework=framework, gpus=8, sharding="zero1")
        return training_step(estimate(w), "H100").parts_s["optimizer"]

    # Megatron-Core / NeMo ZeRO-1 = their fused distributed optimizer; DeepSpeed (under hf) pays its unfused
    # passes over the partition (~0.2 s per step for 1e9 parameters per GPU, ZERO_STEP_S_PER_PARAM)
    assert optimizer_s("nemo") < 0.1 * optimizer_s("hf")
    assert optimizer_s("megatron") == optimizer_s("nemo")
