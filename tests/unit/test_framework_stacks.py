"""`train.framework` as users write it (issue 36: each case names the stack its source ran): an engine, or a
stack built on one (`axolotl`, `Unsloth`, `LLaMA-Factory`, `trl`, ...: `vocabulary.FRAMEWORK_STACKS`), in any
case and with `_` or spaces; a stack is timed and sized as its engine, with its own defaults
(`estimate.workload.STACK_HABITS`) where the workload does not say, and the estimate names both (Unsloth's
adapter steps also run its own kernels' measured speed-up: tests/unit/test_stack_speed.py)."""

from __future__ import annotations

import pytest

from gpuledger import vocabulary
from gpuledger.estimate import Workload, estimate
from gpuledger.spec import SpecError, parse_spec

SPEC = """\
kind: sweep
name: stacks
project: p
owner: o
model: google/gemma-7b
method: lora
train: {seq_len: 8192, micro_batch: 2, tokens_per_trial: 1000000, framework: FRAMEWORK}
search:
  params:
    learning_rate: [1e-4]
  objective: {metric: eval_loss}
budget: {max_usd: 10}
task:
  run: python train.py --lr {learning_rate}
"""


@pytest.mark.parametrize("name", vocabulary.FRAMEWORK_STACKS)
def test_every_stack_is_its_engine_and_keeps_its_name(name):
    w = Workload(model="gpt2", framework=name)
    assert w.framework == vocabulary.FRAMEWORK_STACKS[name] and w.stack == name
    assert w.model_dump()["stack"] == name and Workload(**w.model_dump()) == w  # the plan's workload text keeps it
    assert "stack" not in Workload(model="gpt2", framework=w.framework).model_dump()  # an engine's text as before


@pytest.mark.parametrize("written, engine, stack", [("LLaMA-Factory", "hf", "llama-factory"),
                                                    ("llama_factory", "hf", "llama-factory"),
                                                    ("MS Swift", "hf", "ms-swift"), ("Megatron-LM", "megatron", "megatron-lm"),
                                                    ("HF", "hf", None), ("NeMo", "nemo", None)])
def test_a_name_is_read_in_any_case_with_underscores_or_spaces(written, engine, stack):
    w = Workload(model="gpt2", framework=written)
    assert (w.framework, w.stack) == (engine, stack)


def test_an_engine_written_in_capitals_keeps_its_own_checkpointing_habit():
    assert Workload(model="gpt2", framework="Megatron").checkpointing == "selective"
    assert Workload(model="gpt2", framework="megatron").checkpointing == "selective"


def test_a_stack_is_sized_as_its_engine_and_the_estimate_says_both():
    kw = dict(model="google/gemma-7b", method="lora", micro_batch=2, seq_len=8192)
    hf, axolotl = estimate(Workload(**kw)), estimate(Workload(**kw, framework="axolotl"))
    assert axolotl.memory_gib == hf.memory_gib
    assert any("axolotl runs on" in a for a in axolotl.assumptions)
    assert not any("runs on" in a for a in hf.assumptions)


def test_unsloth_computes_no_full_logits_and_offloads_checkpoints_unless_the_workload_says():
    kw = dict(model="google/gemma-7b", method="lora", micro_batch=2, seq_len=8192)
    hf, unsloth = estimate(Workload(**kw)), estimate(Workload(**kw, framework="unsloth"))
    w = unsloth.workload
    assert w.fused_ce and w.activation_offload
    assert unsloth.memory_gib["logits"] < 0.01 * hf.memory_gib["logits"]  # 256k vocabulary x 16k tokens
    fused_only = estimate(Workload(**kw, fused_ce=True))  # the offloaded checkpoints: less than the loss alone saves
    assert unsloth.memory_gib["device"] < fused_only.memory_gib["device"] < 0.5 * hf.memory_gib["device"]
    assert any("fused_ce true" in a for a in unsloth.assumptions)
    stated = Workload(**kw, framework="unsloth", fused_ce=False, activation_offload=False)
    assert estimate(stated).memory_gib == hf.memory_gib  # what the workload says wins over the stack's habit


def test_a_spec_names_the_stack_and_plans_with_its_engine():
    spec = parse_spec(SPEC.replace("FRAMEWORK", "Unsloth"), "stacks.yaml")
    t = spec.train
    assert (t.framework, t.stack, t.fused_ce, t.activation_offload) == ("hf", "unsloth", True, True)
    stated = parse_spec(SPEC.replace("FRAMEWORK", "unsloth, fused_ce: false"), "stacks.yaml").train
    assert (stated.fused_ce, stated.activation_offload) == (False, True)
    assert parse_spec(SPEC.replace("FRAMEWORK", "xtuner"), "stacks.yaml").train.packing is True


@pytest.mark.parametrize("value, where, words", [
    ("pytorch-magic", "train.framework", ["unknown framework 'pytorch-magic'", "axolotl", "hf"]),
    ("hf, stack: axolotl", "train", ["stack is not a key to write"]),
])
def test_a_name_of_nothing_known_is_one_located_message_listing_the_names(value, where, words):
    with pytest.raises(SpecError) as info:
        parse_spec(SPEC.replace("FRAMEWORK", value), "stacks.yaml")
    message = str(info.value)
    assert "stacks.yaml:7:" in message and where in message and all(w in message for w in words), message


def test_estimate_takes_a_stack_name_and_refuses_an_unknown_one(capsys):
    from gpuledger.cli import main

    assert main(["estimate", "google/gemma-7b", "--seq", "8192", "--batch", "2", "--framework", "Unsloth"]) == 0
    out = capsys.readouterr().out
    assert "unsloth runs on" in out and "fused linear cross-entropy" in out
    # a switch left unset is the stack's habit; the hf default stays unfused
    assert main(["estimate", "google/gemma-7b", "--seq", "8192", "--batch", "2"]) == 0
    assert "unchunked cross-entropy" in capsys.readouterr().out
    with pytest.raises(SystemExit) as bad:
        main(["estimate", "gpt2", "--framework", "pytorch-magic"])
    assert bad.value.code == 2 and "pytorch-magic" in capsys.readouterr().err


def test_the_plan_states_the_stack_and_its_engine_and_is_silent_for_an_engine():
    from gpuledger.plan.assumptions import stack_notes

    (note,) = stack_notes(parse_spec(SPEC.replace("FRAMEWORK", "unsloth"), "stacks.yaml"))
    assert note.startswith("train.framework unsloth: hf") and "fused_ce true" in note
    assert stack_notes(parse_spec(SPEC.replace("FRAMEWORK", "hf"), "stacks.yaml")) == []


@pytest.mark.parametrize("written, engine, stack", [
    ("Hugging Face Transformers + PEFT", "hf", "hugging-face"), ("HF Trainer + DeepSpeed ZeRO-3", "hf", "hf-trainer"),
    ("Axolotl (DeepSpeed)", "hf", "axolotl"), ("TRL + Unsloth", "hf", "unsloth"), ("torchtune (FSDP2)", "torchtune", None),
    ("NeMo 2.0", "nemo", None), ("Megatron-Core via NeMo", "nemo", None), ("Megatron-Core FP8", "megatron", "megatron-core"),
    ("native PyTorch FSDP2", "torchtitan", "pytorch"), ("llm.c", "torchtitan", "llm-c"),
    ("NeMo AutoModel", "torchtitan", "nemo-automodel"), ("Transformers + FSDP", "hf", "transformers"),
    ("Transformers + Liger Kernel", "hf", "liger-kernel")])
def test_a_name_of_several_words_is_its_most_telling_name(written, engine, stack):
    """The runtime (PyTorch, FSDP) says least, the libraries a stack is built of (Transformers, PEFT, DeepSpeed,
    Megatron-Core) less than the stack; every name at the telling level must run on one engine."""
    w = Workload(model="gpt2", framework=written)
    assert (w.framework, w.stack) == (engine, stack)


@pytest.mark.parametrize("written", ["pytorch-magic", "Megatron-Core + Transformers", "torchtune + litgpt", "my trainer"])
def test_a_name_of_several_engines_or_of_a_runtime_and_something_else_is_refused(written):
    with pytest.raises(ValueError, match="unknown framework"):
        Workload(model="gpt2", framework=written)


def test_liger_kernel_keeps_no_logits_unless_the_workload_says():
    liger, hf = (estimate(Workload(model="google/gemma-7b", seq_len=8192, micro_batch=2, framework=f))
                 for f in ("Liger Kernel", "hf"))
    assert liger.workload.fused_ce and liger.memory_gib["logits"] < 0.01 * hf.memory_gib["logits"]
    stated = estimate(Workload(model="google/gemma-7b", seq_len=8192, micro_batch=2, framework="liger", fused_ce=False))
    assert stated.memory_gib == hf.memory_gib


@pytest.mark.parametrize("extra, fused", [
    ({"trl_version": "1.4.0"}, True), ({"trl_version": "1.5.1", "framework": "TRL"}, True),
    ({"trl_version": "1.3"}, False), ({}, False), ({"trl_version": "0.19"}, False),
    ({"trl_version": "1.5", "fused_ce": False}, False), ({"trl_version": "1.5", "use_liger_kernel": True}, True),
    ({"trl_version": "1.5", "framework": "axolotl"}, False), ({"trl_version": "1.5", "framework": "torchtune"}, False)])
def test_trl_from_1_4_computes_its_sft_loss_in_chunks_unless_the_workload_says(extra, fused):
    """TRL's SFTTrainer defaults to loss_type chunked_nll from v1.4.0 (huggingface/trl #5846): no full logits. A
    workload of TRL's SFT at that version is sized with fused_ce; an older or unstated version, another stack's
    trainer, or a workload that sets fused_ce keeps what it says."""
    w = Workload(**{"model": "Qwen/Qwen3-1.7B", "method": "lora", "micro_batch": 4, "seq_len": 2048, **extra})
    assert w.fused_ce is fused
    e = estimate(w)
    assert (e.memory_gib["logits"] < 0.5) is fused


def test_a_spec_stating_trl_1_4_plans_without_full_logits():
    text = SPEC.replace("FRAMEWORK", "trl, trl_version: '1.4.0'")
    assert parse_spec(text, "stacks.yaml").train.fused_ce is True
    assert parse_spec(SPEC.replace("FRAMEWORK", "trl"), "stacks.yaml").train.fused_ce is False
