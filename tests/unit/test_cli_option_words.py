"""Every option a CLI message names is an option of the command the user ran (no `--seq-len` for `--seq`)."""

from __future__ import annotations

import argparse
import re

import pytest

from gpuledger.cli import build_parser, main

#: an option named in a message: `--word` or `--word-word` (not inside another word)
OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9]*(?:-[a-z0-9]+)*")


def options_of(command: str) -> set[str]:
    parser = build_parser(command)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return set(sub.choices[command]._option_string_actions)


def named_options(text: str) -> set[str]:
    return set(OPTION.findall(text))


@pytest.mark.parametrize("argv", [
    ["--gpu-memory", "-1"],
    ["--vllm-gpu-util", "3"],
    ["--zero-bucket", "-3"],
    ["--method", "grpo", "--dynamic-sampling", "pass_rate=2"],
    ["--eval-steps", "-1"],
    ["--grad-accum", "0"],
    ["--lora-targets", "zz"],
    ["--tensor-parallel", "0"],
    ["--sample-tokens", "0"],
])
def test_estimate_refusals_name_only_options_estimate_has(argv, capsys):
    assert main(["estimate", "gpt2", *argv]) != 0
    err = capsys.readouterr().err
    assert named_options(err), err
    assert named_options(err) <= options_of("estimate"), err


def test_every_workload_field_estimate_sets_is_named_by_a_real_option():
    from gpuledger.cli.commands.estimate import STACK_OPTIONS, option_of

    known = options_of("estimate")
    fields = ["micro_batch", "seq_len", "method", "precision", "optimizer", "grad_ckpt", "flash_attn", "lora_r",
              "lora_targets", "gpus", "sharding", "prompt_len", "completion_len", "group_size", "device",
              "framework", "accelerators", *(name for _, name, _ in STACK_OPTIONS)]
    assert {f: option_of(f) for f in fields if option_of(f) not in known} == {}
    assert option_of("model") == "MODEL"


def _parsers(parser, path=("gpuledger",)):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, (*path, name))


def test_an_option_is_read_only_by_its_full_name(capsys):
    # argparse's prefix matching read `--sequence 8` as --sequence-parallel 8, and said nothing
    with pytest.raises(SystemExit) as exit_:
        main(["estimate", "gpt2", "--sequence", "8"])
    assert exit_.value.code == 2
    assert "unrecognized arguments: --sequence 8" in capsys.readouterr().err
    from gpuledger.agent import build_parser as agent_parser

    abbreviating = [" ".join(path) for path, p in _parsers(build_parser()) if p.allow_abbrev]
    assert abbreviating + (["python -m gpuledger.agent"] if agent_parser().allow_abbrev else []) == []


def test_the_explicit_aliases_stay(capsys):
    assert main(["estimate", "gpt2", "--gpu", "H100", "--json"]) == 0
    assert main(["prices", "--accelerator", "H100", "--json"]) == 0
    capsys.readouterr()
