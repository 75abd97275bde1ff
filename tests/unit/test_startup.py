"""The commands of the prompt start fast (issue 38: within 3x of a bare `python -c "import pydantic, yaml"`;
benchmarks/cli_startup.py measures the ratios, docs/measurements.md keeps them): `validate`, `estimate`
and `sql` import none of the heavy libraries they do not need. This checks the import graph, not a
time: issue 39 measured validate at 8.5x the bare import because the planner's package and polars came
with it, and `sql` at 5.6 s because binding a query parameter made DuckDB import pandas and numpy."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

HEAVY = ("polars", "numpy", "pandas", "pyarrow", "pandera", "prefect", "sky", "torch", "rich", "matplotlib",
         "optuna", "httpx")
#: the pydantic models of `kind: capacity`: a sweep spec is validated by its own kind's model (issue 38: they
#: were 0.18 s of validate's 0.35 s when every spec built both kinds)
CAPACITY = ("gpuledger.spec.capacity_models",)
#: the planner's own modules (offers, prices, schedule): validate checks a spec, it does not plan it
PLANNER = ("gpuledger.catalog.pricing", "gpuledger.catalog.offers", "gpuledger.catalog.skypilot", "gpuledger.capacity", "gpuledger.plan.sweep", "gpuledger.plan.candidates",
           "gpuledger.plan.prices", "gpuledger.plan.schedule", "gpuledger.runtime")

#: the in-job agent (`python -m gpuledger.agent`): psutil and the agent's own package
AGENT = ("psutil", "gpuledger.agent")

CASES = {
    "validate": (["validate", "specs/lora-grid.yaml"], (*HEAVY, "duckdb", "gpuledger.warehouse", *PLANNER, *CAPACITY, *AGENT)),
    # one trial of specs/lora-grid.yaml (benchmarks/cli_startup.py's estimate): no spec models at all
    "estimate": (["estimate", "gpuledger/demo-char-gpt", "--method", "lora", "--precision", "fp32", "--seq", "64",
                  "--batch", "8", "--lora-r", "16", "--lora-targets", "q,k,v,o", "--no-grad-ckpt", "--no-flash-attn",
                  "--device", "cpu"],
                 (*HEAVY, "duckdb", "gpuledger.warehouse", *PLANNER, *CAPACITY, *AGENT, "gpuledger.spec.models")),
    "estimate-gpu": (["estimate", "Qwen/Qwen2.5-0.5B"], (*HEAVY, "duckdb", "gpuledger.warehouse", *PLANNER, *CAPACITY, *AGENT)),
    # nor the in-job agent and its psutil (60-80 ms; the warehouse's record checks import its caps on first use)
    "sql": (["sql", "select count(*) as n from v_runs where cost_usd > 0"], (*HEAVY, *PLANNER, *AGENT)),
}


def _imported(argv: list[str], refused: tuple[str, ...], repo_root, env) -> tuple[int, list[str]]:
    code = (f"import sys, json; from gpuledger.cli import main; code = main({argv!r}); "
            f"print(json.dumps([code, sorted(m for m in sys.modules if m.split('.')[0] in {refused!r} "
            f"or any(m == r or m.startswith(r + '.') for r in {refused!r}))]))")
    done = subprocess.run([sys.executable, "-c", code], cwd=repo_root, capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    exit_code, heavy = json.loads(done.stdout.strip().splitlines()[-1])
    return exit_code, heavy


@pytest.mark.slow  # over ~0.5 s alone (a report, warehouse, plan or subprocess): make test runs it, make test-fast does not
@pytest.mark.parametrize("command", sorted(CASES))
def test_the_prompt_commands_import_nothing_heavy(command, repo_root, tmp_path):
    argv, refused = CASES[command]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "GPULEDGER_WAREHOUSE": str(tmp_path / "x.duckdb")}
    if command == "sql":  # a migrated warehouse to read (made in another process, which may import anything)
        subprocess.run([sys.executable, "-c", "from gpuledger.warehouse import Warehouse\nwith Warehouse.open(): pass"],
                       cwd=repo_root, env=env, check=True, timeout=120, capture_output=True)
    exit_code, heavy = _imported(argv, refused, repo_root, env)
    assert exit_code == 0 and heavy == [], f"gpuledger {command} imported {heavy}"


@pytest.mark.slow  # over ~0.5 s alone (a report, warehouse, plan or subprocess): make test runs it, make test-fast does not
def test_a_capacity_spec_imports_the_capacity_models(repo_root, tmp_path):
    """The control of the cases above: the module they refuse is the one a capacity spec needs (a renamed module
    would make the refusal pass by itself)."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "GPULEDGER_WAREHOUSE": str(tmp_path / "x.duckdb")}
    exit_code, imported = _imported(["validate", "specs/chat-capacity.yaml"], CAPACITY, repo_root, env)
    assert exit_code == 0 and imported == list(CAPACITY)


BROKEN = {
    "sweep": """kind: sweep
name: Bad_Name
project: p
owner: o
model: gpt2
methd: lora
train: {tokens_per_trial: -5, seq_lenn: 64}
search: {strategy: grid, params: {lora_r: [4]}, objective: {metric: eval_loss, goal: up}}
resources: {max_parallel: 0}
budget: {max_usd: five}
task: {run: "echo {lora_r}"}
""",
    "capacity": """kind: capacity
name: svc
project: p
owner: o
model: gpt2
engine: vlm
traffic: {qps: -1, prompt_tokns: 5}
slo: {p95_ttft_ms: 0}
headroom: 7
""",
}


@pytest.mark.parametrize("kind", sorted(BROKEN))
def test_a_spec_validated_by_its_kind_says_what_the_two_kind_union_said(kind):
    """`parse_spec` validates by the spec's own kind's model; its located messages are the ones the two-kind
    union (`spec_adapter`, what it validated with before issue 38) gives, line for line."""
    from pydantic import ValidationError

    from gpuledger.spec.models import spec_adapter
    from gpuledger.spec.problems import _kind_model, _problems_from_validation
    from gpuledger.spec.yamlpos import _load_yaml

    data, positions, _ = _load_yaml(BROKEN[kind], "bad.yaml")
    with pytest.raises(ValidationError) as union:
        spec_adapter().validate_python(data)
    with pytest.raises(ValidationError) as own:
        _kind_model(kind).model_validate(data)
    tagged = _problems_from_validation(union.value, positions, "bad.yaml", kind, data)
    untagged = _problems_from_validation(own.value, positions, "bad.yaml", kind, data, tagged=False)
    assert len(tagged) >= 4 and [str(p) for p in untagged] == [str(p) for p in tagged]


def test_the_spec_package_serves_every_name_it_lists():
    """`gpuledger.spec` imports its modules on first use: each name of `__all__` is served, from the module
    that defines it."""
    import gpuledger.spec as spec

    assert sorted(spec.__all__) == sorted(spec._WHERE)
    for name in spec.__all__:
        value = getattr(spec, name)
        assert getattr(sys.modules[f"gpuledger.spec.{spec._WHERE[name]}"], name) is value
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        spec.nope  # noqa: B018


def test_the_parser_asks_for_each_word_once_and_puts_argparse_back(monkeypatch):
    """argparse asks gettext for its own words at each of the CLI's 34 parsers (a locale-folder search each
    time, 11-14 ms of every command's start): `build_parser` asks once per word, and leaves argparse as it was."""
    import argparse
    import gettext

    from gpuledger.cli import build_parser

    asked: list[str] = []

    def counting(message: str) -> str:
        asked.append(message)
        return gettext.gettext(message)

    monkeypatch.setattr(argparse, "_", counting)
    parser = build_parser()
    assert argparse._ is counting
    assert len(set(asked)) >= 3 and len(asked) == len(set(asked)), sorted(asked)
    assert "show this help message and exit" in parser.format_help()


def test_the_lazy_polars_is_polars():
    """The warehouse's stand-in imports polars on first use and is then the real thing."""
    from gpuledger.warehouse.lazy import polars as pl

    frame = pl.DataFrame({"a": [1, 2]})
    assert type(frame).__module__.startswith("polars") and frame["a"].sum() == 3
    assert pl.Int32 is sys.modules["polars"].Int32


def test_the_warehouse_checks_use_the_agents_caps():
    """`gpuledger.warehouse.checks` imports the agent's caps where a record is checked (not at import: the
    `sql` case above refuses psutil): a record over the agent's cap is refused, one at it is not."""
    from gpuledger.agent import measure
    from gpuledger.warehouse import checks

    over = {"metrics": [{"name": "loss", "value": 1.0}] * (measure.MAX_METRIC_POINTS + 1)}
    assert f"at most {measure.MAX_METRIC_POINTS}" in checks.precheck(over)
    assert checks.precheck({"metrics": over["metrics"][:-1]}) is None


def test_a_command_builds_its_own_parser_alone_and_the_same(capsys):
    """`gpuledger COMMAND` builds only COMMAND's parser (each `add_argument` makes a HelpFormatter: ~14 ms
    of every start for the 34 parsers, issue 38): that parser is the whole CLI's for COMMAND (same
    options, defaults and help); an unknown command gets the whole list."""
    import argparse

    from gpuledger.cli import build_parser, main

    def commands(parser):
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        return action.choices

    def shape(parser):
        return [(a.option_strings, a.dest, a.default, a.choices, a.help, a.nargs) for a in parser._actions
                if not isinstance(a, argparse._SubParsersAction)]

    whole = commands(build_parser())
    for name in ("validate", "estimate", "report", "warehouse", "probe", "status"):
        alone = commands(build_parser(name))
        assert list(alone) == [name]
        assert shape(alone[name]) == shape(whole[name]), name
        assert alone[name].format_help() == whole[name].format_help(), name
    report_alone = commands(commands(build_parser("report"))["report"])
    assert {k: shape(v) for k, v in report_alone.items()} == {
        k: shape(v) for k, v in commands(whole["report"]).items()}
    assert build_parser("nope") is None
    with pytest.raises(SystemExit) as exit_:
        main(["nope"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'nope'" in err and "'validate'" in err and "'serve'" in err


@pytest.mark.parametrize("argv", [["validate", "specs/lora-grid.yaml", "BAD", "--json"],
                                  ["estimate", "gpuledger/demo-char-gpt", "--method", "lora", "--device", "cpu"]])
@pytest.mark.slow  # over ~0.5 s alone (a report, warehouse, plan or subprocess): make test runs it, make test-fast does not
def test_a_command_that_leaves_at_once_prints_all_and_keeps_its_code(argv, repo_root, tmp_path, capsys):
    """validate and estimate skip the interpreter's teardown in a process of their own (cli._LEAVE_AT_ONCE):
    through a pipe they print exactly what the same command prints in-process, with its exit code."""
    from gpuledger.cli import main

    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: sweep\nname: x\n", encoding="utf-8")
    argv = [str(bad) if a == "BAD" else a for a in argv]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # block-buffered, as in a user's pipe
    proc = subprocess.run([sys.executable, "-m", "gpuledger.cli", *argv], cwd=repo_root, capture_output=True,
                          text=True, timeout=120, env=env)
    code = main(argv)
    seen = capsys.readouterr()
    assert (proc.returncode, proc.stdout, proc.stderr) == (code, seen.out, seen.err)
    assert proc.stdout.strip() and code == (1 if argv[0] == "validate" else 0)
    if argv[0] == "validate":
        assert [r["ok"] for r in json.loads(proc.stdout)] == [True, False]
