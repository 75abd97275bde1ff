"""Numbers as people write them: `--tokens 20M`, `2e7`, `20_000_000` (the CLI and `train.tokens_per_trial`
read them alike, `gpuledger.spec.types.parse_count`), and numbers in a spec checked as numbers: a
`learning_rate` value of `"3e-4x"` is one located problem, before anything is planned."""

from __future__ import annotations

import pytest

from gpuledger.spec import SpecError, parse_spec
from gpuledger.spec.types import parse_count

SPEC = """\
kind: sweep
name: nums
project: p
owner: o
model: gpt2
train: {seq_len: 128, tokens_per_trial: TOKENS}
search:
  params:
    learning_rate: LRS
    optimizer: [adamw, sgd]
  objective: {metric: eval_loss}
budget: {max_usd: 10}
task:
  run: python train.py --lr {learning_rate} --opt {optimizer}
"""


def spec_text(tokens: str = "1000", lrs: str = "[1e-4, 3e-4]") -> str:
    return SPEC.replace("TOKENS", tokens).replace("LRS", lrs)


@pytest.mark.parametrize("text, value", [("20M", 20_000_000), ("2e7", 20_000_000), ("20_000_000", 20_000_000),
                                         ("20,000,000", 20_000_000), ("1.5B", 1_500_000_000), ("500k", 500_000),
                                         ("2048", 2048), (2048, 2048), (2e7, 20_000_000)])
def test_counts_as_people_write_them(text, value):
    assert parse_count(text) == value


@pytest.mark.parametrize("text", ["3e-4x", "2.5", "-5", "20MM", "", "1e400", True, "twenty"])
def test_what_is_not_a_count_is_refused_in_one_message(text):
    with pytest.raises(ValueError) as info:
        parse_count(text)
    assert len(str(info.value).splitlines()) == 1


@pytest.mark.parametrize("tokens", ["20M", "2e7", "20_000_000"])
def test_tokens_per_trial_reads_the_same_forms(tokens):
    assert parse_spec(spec_text(tokens=tokens), "nums.yaml").train.tokens_per_trial == 20_000_000


def test_a_learning_rate_that_is_not_a_number_is_refused_at_its_line():
    with pytest.raises(SpecError) as info:
        parse_spec(spec_text(lrs='[1e-4, "3e-4x"]'), "nums.yaml")
    text = str(info.value)
    assert "nums.yaml:9:" in text and "search.params.learning_rate" in text and "'3e-4x' is not a number" in text


def test_a_number_like_typo_beside_numbers_is_refused_and_categories_stay_text():
    bad = spec_text().replace("optimizer: [adamw, sgd]", "warm: [0.1, 0.2.1]")
    with pytest.raises(SpecError) as info:
        parse_spec(bad.replace("--opt {optimizer}", "--warm {warm}"), "nums.yaml")
    assert "'0.2.1' is not a number" in str(info.value)
    spec = parse_spec(spec_text(), "nums.yaml")  # positive control: text categories and YAML 1.2 floats
    assert spec.search.params["optimizer"] == ["adamw", "sgd"] and spec.search.params["learning_rate"] == [1e-4, 3e-4]


def test_estimate_takes_tokens_as_20M(capsys):
    from gpuledger.cli import main

    code = main(["estimate", "gpt2", "--method", "lora", "--tokens", "20M", "--accelerator", "A10G", "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    with pytest.raises(SystemExit) as bad:
        main(["estimate", "gpt2", "--tokens", "3e-4x"])
    assert bad.value.code == 2 and "3e-4x" in capsys.readouterr().err
