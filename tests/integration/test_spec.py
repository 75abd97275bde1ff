"""The spec language: shipped specs validate; malformed specs give exact, located messages."""

from __future__ import annotations

import math
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuledger.spec import (
    SpecError,
    SweepSpec,
    expand_trials,
    grid_size,
    load_spec,
    parse_duration,
    parse_money,
    parse_spec,
    sweep_id_for,
    trial_id_for,
)

REPO = Path(__file__).resolve().parents[2]

GOOD = textwrap.dedent(
    """\
    kind: sweep
    name: t-grid
    project: p
    owner: o
    model: gpt2
    method: lora
    train: {seq_len: 128, tokens_per_trial: 1000}
    search:
      strategy: grid
      params:
        lora_r: [4, 8]
        learning_rate: [1.0e-3, 3e-4]
      objective: {metric: eval_loss, goal: minimize}
    resources:
      accelerators: [a100-80gb]
      spot: auto
    budget: {max_usd: 10, deadline: 1h}
    task:
      run: python train.py --r {lora_r} --lr {learning_rate}
    """
)


def _variant(old: str, new: str) -> str:
    assert old in GOOD, old
    return GOOD.replace(old, new, 1)


def test_shipped_specs_validate():
    specs = sorted((REPO / "specs").glob("*.yaml"))
    assert len(specs) >= 4
    kinds = {load_spec(p).kind for p in specs}
    assert kinds == {"sweep", "capacity"}


def test_good_spec_parses_and_normalises():
    spec = parse_spec(GOOD, "g.yaml")
    assert isinstance(spec, SweepSpec)
    assert spec.resources.accelerators == ["A100-80GB"]
    assert spec.budget.deadline_s == 3600.0
    # YAML 1.2 floats: 3e-4 is a number, not the string "3e-4"
    assert spec.search.params["learning_rate"] == [1.0e-3, 3e-4]
    assert len(expand_trials(spec)) == 4


# (name, yaml text, expected exact line)
MALFORMED = [
    ("wrong type", _variant("max_usd: 10", "max_usd: lots"),
     "m.yaml:17:19: budget.max_usd: expected an amount of US dollars like 300 or '$1,200' (got 'lots')"),
    ("unknown key", _variant("  spot: auto", "  sppot: auto"),
     "m.yaml:16:3: resources.sppot: unknown key; did you mean 'spot'?"),
    ("bad enum", _variant("  spot: auto", "  spot: sometimes"),
     "m.yaml:16:9: resources.spot: must be one of auto, always, never (got 'sometimes')"),
    ("negative budget", _variant("max_usd: 10", "max_usd: -5"),
     "m.yaml:17:19: budget.max_usd: must be a non-negative amount of US dollars (got -5)"),
    ("zero budget", _variant("max_usd: 10", "max_usd: 0"),
     "m.yaml:17:19: budget.max_usd: must be > 0 (got 0)"),
    ("duplicate key", _variant("owner: o\n", "owner: o\nowner: q\n"),
     "m.yaml:5:1: owner: duplicate key (first given on line 4)"),
    ("unknown placeholder", _variant("--lr {learning_rate}", "--lr {lr}"),
     "m.yaml:19:8: task.run: unknown placeholder {lr}: not a search parameter or known field; did you mean {lora_r}?"),
    ("../ in name", _variant("name: t-grid", "name: ../etc"),
     "m.yaml:2:7: name: must be lowercase letters, digits and '-' ([a-z0-9-]+, at most 63); it names files, "
     "so no '/', '.' or spaces (got '../etc')"),
    ("empty grid", _variant("lora_r: [4, 8]", "lora_r: []"),
     "m.yaml:11:13: search.params.lora_r: empty list of values: the grid would have no trials"),
    ("random without n_trials", _variant("strategy: grid", "strategy: random"),
     "m.yaml:9:13: search.strategy: strategy: random needs n_trials (how many trials to draw)"),
    ("yaml syntax error", _variant("  spot: auto", "  spot: [auto"),
     "m.yaml:17:1: YAML syntax error: while parsing a flow sequence expected ',' or ']', but got '<stream end>'"
     if False else None),
    ("unknown accelerator", _variant("[a100-80gb]", "[a100-80gb, H1000]"),
     "m.yaml:15:29: resources.accelerators[1]: unknown accelerator 'H1000' (known: T4, L4, A10G, A10, L40, L40S, A100, "
     "A100-80GB, H100, H100-PCIe, H100-NVL, H200, B200, RTX4090, A6000, V100, H800, H20, A800, A40, RTX6000-Ada, GH200, GB200, MI300X); "
     "did you mean H100?"),
    ("bad duration", _variant("deadline: 1h", "deadline: 8x"),
     "m.yaml:17:33: budget.deadline: expected a duration like 8h, 90m, 2d or 1h30m (got '8x')"),
    ("missing field", _variant("owner: o\n", ""),
     "m.yaml:1:1: owner: required field is missing"),
    ("bad kind", _variant("kind: sweep", "kind: swep"),
     "m.yaml:1:7: kind: must be one of sweep, capacity (got 'swep')"),
    ("bad method", _variant("method: lora", "method: dpo"),
     "m.yaml:6:9: method: must be one of full, lora, qlora, grpo, ppo, inference (got 'dpo')"),
    ("exclude unknown param", _variant("  objective:", "  exclude: [{lora_rank: 4}]\n  objective:"),
     "m.yaml:13:14: search.exclude[0].lora_rank: 'lora_rank' is not a search parameter; did you mean 'lora_r'?"),
    ("exclude everything", _variant("  objective:", "  exclude: [{lora_r: [4, 8]}]\n  objective:"),
     "m.yaml:13:12: search.exclude: the exclude rules leave no trial"),
    ("format spec in placeholder", _variant("{lora_r}", "{lora_r:>5}"),
     "m.yaml:19:8: task.run: placeholder {lora_r} may not carry a format or conversion"),
    ("max_parallel zero", _variant("  spot: auto", "  spot: auto\n  max_parallel: 0"),
     "m.yaml:17:17: resources.max_parallel: must be >= 1 (got 0)"),
    ("not a mapping", "- just\n- a list\n", "m.yaml:1:1: a spec must be a mapping (key: value lines)"),
    ("gpus_per_trial too many", _variant("  spot: auto", "  spot: auto\n  gpus_per_trial: 2000"),
     "m.yaml:17:19: resources.gpus_per_trial: must be <= 1024 (got 2000)"),
]


@pytest.mark.parametrize("name,text,expected", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_spec_gives_exact_line(name, text, expected):
    with pytest.raises(SpecError) as info:
        parse_spec(text, "m.yaml")
    lines = str(info.value).splitlines()
    if expected is None:  # syntax errors: the line and the words, not PyYAML's exact phrasing
        assert lines[0].startswith("m.yaml:17:") and "YAML syntax error" in lines[0], lines
    else:
        assert expected in lines, lines


def test_every_problem_reported_at_once():
    text = _variant("  spot: auto", "  spot: sometimes\n  colour: red")
    text = text.replace("max_usd: 10", "max_usd: -1").replace("{learning_rate}", "{nope}")
    with pytest.raises(SpecError) as info:
        parse_spec(text, "m.yaml")
    paths = [p.path for p in info.value.problems]
    assert paths == ["resources.spot", "resources.colour", "budget.max_usd", "task.run"]


def test_validate_cli_exit_codes(tmp_path):
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text(GOOD)
    bad.write_text(_variant("  spot: auto", "  spot: sometimes"))
    cmd = [sys.executable, "-m", "gpuledger.cli", "validate"]
    ok = subprocess.run([*cmd, str(good)], capture_output=True, text=True)
    assert ok.returncode == 0 and "ok (sweep t-grid, 4 trials)" in ok.stdout
    no = subprocess.run([*cmd, str(good), str(bad)], capture_output=True, text=True)
    assert no.returncode == 1
    assert no.stderr.strip() == f"{bad}:16:9: resources.spot: must be one of auto, always, never (got 'sometimes')"
    assert "Traceback" not in no.stderr
    missing = subprocess.run([*cmd, str(tmp_path / "nope.yaml")], capture_output=True, text=True)
    assert missing.returncode == 1 and "nope.yaml:1:1: no such file" in missing.stderr


def test_dangerous_value_reaches_command_only_quoted():
    # a numeric hyper-parameter refuses it outright (not a number); a text parameter keeps it, quoted
    with pytest.raises(SpecError, match="is not a number"):
        parse_spec(_variant("lora_r: [4, 8]", "lora_r: ['1; rm -rf ~', 8]"), "m.yaml")
    text = _variant("lora_r: [4, 8]", "lora_r: [4]\n    tag: ['x; rm -rf ~', b]").replace(
        "--r {lora_r}", "--r {lora_r} --tag {tag}")
    spec = parse_spec(text, "m.yaml")
    trial = expand_trials(spec)[0]
    assert trial.params["tag"] == "x; rm -rf ~"
    assert trial.run == "python train.py --r 4 --tag 'x; rm -rf ~' --lr 0.001"
    # the shell sees one argument, not a command separator
    assert shlex.split(trial.run)[5] == "x; rm -rf ~"


def test_trial_ids_stable_and_distinct():
    spec = parse_spec(GOOD, "g.yaml")
    ids = [t.trial_id for t in expand_trials(spec)]
    assert ids == [t.trial_id for t in expand_trials(parse_spec(GOOD, "other.yaml"))]
    assert len(set(ids)) == 4 and all(len(i) == 12 for i in ids)
    assert ids[0] == trial_id_for("t-grid", {"lora_r": 4, "learning_rate": 1.0e-3})
    # the sweep id does not change with the budget, but does with the search
    assert sweep_id_for(spec) == sweep_id_for(parse_spec(_variant("max_usd: 10", "max_usd: 99"), "g.yaml"))
    assert sweep_id_for(spec) != sweep_id_for(parse_spec(_variant("[4, 8]", "[4, 16]"), "g.yaml"))


def test_random_search_reproducible():
    text = _variant("strategy: grid", "strategy: random\n  n_trials: 5\n  seed: 7").replace(
        "learning_rate: [1.0e-3, 3e-4]", "learning_rate: {low: 1.0e-5, high: 1.0e-2, log: true}"
    )
    a, b = expand_trials(parse_spec(text, "r.yaml")), expand_trials(parse_spec(text, "r.yaml"))
    assert [t.params for t in a] == [t.params for t in b]
    assert len(a) == 5
    assert all(1e-5 <= t.params["learning_rate"] <= 1e-2 and t.params["lora_r"] in (4, 8) for t in a)


@pytest.mark.parametrize(
    "text,seconds", [("8h", 28800), ("90m", 5400), ("2d", 172800), ("1h30m", 5400), ("45s", 45), (600, 600)]
)
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text,usd", [(300, 300.0), ("$1,200", 1200.0), ("99.5 USD", 99.5), ("1_000", 1000.0)])
def test_money(text, usd):
    assert parse_money(text) == usd


_values = st.lists(st.integers(0, 5), min_size=1, max_size=4, unique=True)


@settings(max_examples=60, deadline=None)
@given(
    a=_values, b=_values, c=_values,
    rules=st.lists(st.fixed_dictionaries({}, optional={"a": st.integers(0, 5), "b": st.integers(0, 5)}), max_size=3),
)
def test_grid_size_is_product_minus_exclusions(a, b, c, rules):
    rules = [r for r in rules if r]
    params = {"a": a, "b": b, "c": c}
    spec = SweepSpec.model_validate(
        {"kind": "sweep", "name": "h", "project": "p", "owner": "o", "model": "gpt2",
         "search": {"params": params, "exclude": rules, "objective": {"metric": "m"}},
         "budget": {"max_usd": 1}, "task": {"run": "echo {a} {b} {c}"}}
    )
    excluded = sum(
        1 for x in a for y in b for _z in c
        if any(all({"a": x, "b": y}[k] == v for k, v in r.items()) for r in rules)
    )
    assert grid_size(spec) == math.prod(map(len, (a, b, c))) - excluded
    trials = expand_trials(spec)
    assert len(trials) == grid_size(spec)
    assert len({t.trial_id for t in trials}) == len(trials)


def test_schema_covers_both_kinds():
    from gpuledger.spec import json_schema

    schema = json_schema()
    assert {"SweepSpec", "CapacitySpec"} <= set(schema["$defs"])
    assert schema["$defs"]["Resources"]["properties"]["spot"]["enum"] == ["auto", "always", "never"]
