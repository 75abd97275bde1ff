"""`method` and `precision` as users write them (issue 36: the hidden cases are written "as a user writes the
spec"): any case, `_` or spaces for `-`, and the usual synonyms; anything else one located message."""

from __future__ import annotations

import pytest

from gpuledger import vocabulary
from gpuledger.estimate import Workload
from gpuledger.spec import SpecError, parse_spec

SPEC = """
kind: sweep
name: spellings
project: tests
owner: ci
model: meta-llama/Llama-3.1-8B
method: METHOD
precision: PRECISION
train: {seq_len: 2048, tokens_per_trial: 20M}
search:
  strategy: grid
  params: {learning_rate: [1.0e-4]}
  objective: {metric: eval_loss, goal: minimize}
resources: {accelerators: [H100], gpus_per_trial: 1, max_parallel: 1}
budget: {max_usd: 500}
launcher: skypilot
task:
  run: python train.py --lr {learning_rate}
"""


@pytest.mark.parametrize("written, method", [("QLoRA", "qlora"), ("LoRA", "lora"), ("Full", "full"),
                                             ("full fine-tune", "full"), ("full_finetune", "full"),
                                             ("pretraining", "full"), ("GRPO", "grpo")])
def test_a_method_in_any_case_or_a_synonym(written, method):
    assert Workload(model="gpt2", method=written, precision="nf4" if method == "qlora" else "bf16").method == method
    assert vocabulary.method_name(written) == method


@pytest.mark.parametrize("written, precision", [("BF16", "bf16"), ("bfloat16", "bf16"), ("float16", "fp16"),
                                                ("4bit", "nf4"), ("load_in_4bit", "nf4"), ("8bit", "int8"),
                                                ("load_in_8bit", "int8"), ("amp_bf16", "bf16-mixed"),
                                                ("BF16-Mixed", "bf16-mixed"), ("float8", "fp8"), ("NF4", "nf4")])
def test_a_precision_in_any_case_or_a_synonym(written, precision):
    assert Workload(model="gpt2", method="lora", precision=written).precision == precision


def test_a_spec_reads_them_and_refuses_what_names_nothing_at_its_line():
    spec = parse_spec(SPEC.replace("METHOD", "QLoRA").replace("PRECISION", "4bit"), "s.yaml")
    assert (spec.method, spec.precision) == ("qlora", "nf4")
    for field, bad in (("method", "sft"), ("precision", "qlora-4bit")):
        text = SPEC.replace("METHOD", "lora" if field == "precision" else bad).replace(
            "PRECISION", "bf16" if field == "method" else bad)
        with pytest.raises(SpecError) as info:
            parse_spec(text, "s.yaml")
        (line,) = [str(p) for p in info.value.problems if field in str(p)]
        assert line.startswith("s.yaml:") and bad in line


def test_estimate_takes_them(capsys):
    from gpuledger.cli import main

    assert main(["estimate", "gpt2", "--method", "QLoRA", "--precision", "4bit"]) == 0
    assert "qlora, nf4" in capsys.readouterr().out
    with pytest.raises(SystemExit) as bad:
        main(["estimate", "gpt2", "--method", "sft"])
    assert bad.value.code == 2 and "sft" in capsys.readouterr().err



@pytest.mark.parametrize(("argv", "own", "extra"), [
    (["capacity", "specs/chat-capacity.yaml", "--qps", "5"], "gpuledger capacity", "--qps 5"),
    (["report", "weekly", "--bogus"], "gpuledger report weekly", "--bogus"),
])
def test_an_unknown_option_is_refused_by_the_command_it_was_given_to(argv, own, extra, capsys):
    """An option the command does not have is answered with that command's usage and `--help`, not the list
    of commands (argparse's parse_args says it on the top parser, whose help does not list the option)."""
    from gpuledger.cli import main

    with pytest.raises(SystemExit) as bad:
        main(argv)
    err = capsys.readouterr().err
    assert bad.value.code == 2
    assert f"usage: {own} [-h]" in err and f"{own}: error: unrecognized arguments: {extra}\n" in err
    assert f"(see `{own} --help`)" in err
