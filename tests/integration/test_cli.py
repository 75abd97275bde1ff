"""The command line as a person meets it: clear one-line errors, no tracebacks, lazy imports."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers.warehouse_template import fresh_warehouse

from gpuledger.cli import main


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpuledger.cli", *args], capture_output=True, text=True, timeout=120)


def test_unwritable_export_path_is_one_line_not_a_traceback(tmp_path, _isolated_warehouse):
    fresh_warehouse(_isolated_warehouse)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    done = _run("export", "--parquet", str(blocker / "sub"))
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith("gpuledger export: ") and str(blocker) in done.stderr


def test_bad_option_value_says_what_and_how_to_get_help():
    done = _run("estimate", "gpt2", "--batch", "0")
    assert done.returncode == 2
    assert "argument --batch: must be at least 1, got 0" in done.stderr and "gpuledger estimate --help" in done.stderr


def test_version_and_help_list_every_command():
    done = _run("--help")
    assert done.returncode == 0
    for command in ("validate", "schema", "estimate", "plan", "sweep", "render-task", "capacity", "report", "sql",
                    "ingest", "export", "serve"):
        assert command in done.stdout


def _commands(parser=None, prefix=()):
    """Yields (words, parser) of every command and sub-command."""
    import argparse

    from gpuledger.cli import build_parser

    parser = parser or build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*prefix, name), sub
                yield from _commands(sub, (*prefix, name))


def test_every_command_help_has_a_description_defaults_and_an_example():
    commands = dict(_commands())
    assert len(commands) >= 15
    for words, parser in commands.items():
        text = parser.format_help()
        assert parser.description and len(parser.description) > 30, words
        assert "example" in text and f"gpuledger {' '.join(words)}" in text.split("example")[-1], words
        for action in parser._actions:
            if action.option_strings and action.default not in (None, False, "==SUPPRESS==") and action.help != "==SUPPRESS==":
                assert f"(default: {action.default})" in " ".join(text.split()), (words, action.dest)


def test_the_schema_file_editors_read_is_current():
    """`gpuledger schema --write` wrote specs/gpuledger.schema.json; a change to the models must rewrite it."""
    from gpuledger.cli.commands.schema import MODELINE, SCHEMA_FILE, schema_text

    assert SCHEMA_FILE.read_text(encoding="utf-8") == schema_text(), "run `gpuledger schema --write`"
    for spec in sorted(SCHEMA_FILE.parent.glob("*.yaml")):
        assert spec.read_text(encoding="utf-8").splitlines()[0] == MODELINE, spec


@pytest.mark.parametrize("week,message", [
    ("9999-W52", "the year must be 1970 to 9998"),
    ("0001-W01", "the year must be 1970 to 9998"),
    ("2025-W53", "ISO year 2025 has weeks W01 to W52"),
    ("2026-5", "is not an ISO week; use YYYY-Www"),
])
def test_weeks_out_of_range_are_one_line(week, message, capsys):
    """`report weekly --week 9999-W52` and `0001-W01` raised OverflowError."""
    with pytest.raises(SystemExit) as exit_:
        main(["report", "weekly", "--week", week])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and message in err and "Traceback" not in err


def test_weeks_module_arithmetic_holds_at_the_bounds():
    from gpuledger.report.weeks import (
        check_week,
        iso_week,
        last_complete_week,
        previous_week,
        week_end,
        week_start,
    )

    assert week_start("2026-W01").isoformat() == "2025-12-29"
    assert previous_week("1970-W01") == "1969-W52" and week_end("9998-W52").isoformat() == "9998-12-28"
    assert iso_week(week_start("2026-W53")) == "2026-W53" == check_week("2026-W53")
    from datetime import date

    assert last_complete_week(date(2026, 1, 5)) == "2026-W01"  # a Monday: the week before is complete
    assert last_complete_week(date(2026, 1, 12)) == "2026-W02"


@pytest.mark.parametrize("args,message", [
    (["render-task", "specs/lora-grid.yaml", "--trial", "-1"], "must be 0 or more"),
    (["render-task", "specs/lora-grid.yaml", "--trial", "1e400"], "expected a whole number"),
    (["estimate", "gpt2", "--batch", "1e99"], "is too large"),
    (["sweep", "specs/lora-grid.yaml", "--max-parallel", "1e9"], "at most 1024 trials run at once"),
    (["sweep", "specs/lora-grid.yaml", "--max-parallel", "true"], "expected a whole number"),
    (["estimate", "gpt2", "--seq", "2.5"], "expected a whole number"),
    (["report", "sweep", "../../etc/passwd"], "is not a sweep name"),
    (["report", "sweep", "x", "--sweep-id", "x;rm -rf /"], "is not a sweep id"),
])
def test_bad_arguments_are_refused_by_the_parser(args, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(args)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and message in err and "Traceback" not in err


def test_estimate_says_when_it_is_beyond_any_gpu_and_the_context(capsys):
    """`estimate --batch 1e9` printed 4.6e9 GiB without a word."""
    assert main(["estimate", "llama-3.1-8b", "--batch", "1e9", "--seq", "200000"]) == 0
    out = capsys.readouterr().out
    from gpuledger.catalog import gpu_kinds

    largest = max(gpu_kinds().values(), key=lambda k: k.memory_gib)
    assert "warning: beyond any GPU:" in out
    assert f"the largest in the catalog, {largest.name}, has {largest.memory_gib:,.1f} GiB" in out
    assert "warning: beyond the model's context: --seq is 200,000 tokens; llama-3.1-8b reads at most 131,072" in out
    assert main(["estimate", "llama-3.1-8b", "--seq", "4096", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["warnings"] == []


def test_wide_sql_results_are_shown_vertically(tmp_path, monkeypatch, capsys):
    from helpers.record_fixtures import example_record, ingest_known

    from gpuledger.warehouse import Warehouse

    path = tmp_path / "ledger.duckdb"
    monkeypatch.setenv("GPULEDGER_WAREHOUSE", str(path))
    monkeypatch.setenv("COLUMNS", "80")
    with Warehouse.open(fresh_warehouse(path)) as wh:
        wh.register_sweep(sweep_id="s-1", name="s", project="p", owner="o", objective_metric="eval_loss")
        ingest_known(wh, [example_record("r1", "t1", sweep_id="s-1", usd_per_hour=6.0, wall_s=600,
                                         final_metrics={"eval_loss": 1.5})])
    assert main(["sql", "select * from v_runs"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("-[ row 1 ]") and "\nrun_id" in out and "1 row" in out
    assert max(len(line) for line in out.splitlines()) <= 80
    assert main(["sql", "select run_id, cost_usd from v_runs"]) == 0
    assert capsys.readouterr().out.splitlines()[:3] == ["run_id | cost_usd", "-------+---------", "r1     | 1.0"]
