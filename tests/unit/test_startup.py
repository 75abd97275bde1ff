"""The commands of the prompt start fast (issue 38: within 3x of a bare `python -c "import pydantic, yaml"`;
benchmarks/cli_startup.py measures the ratios, docs/measurements.md keeps them): `validate`, `estimate`
and `sql` import none of the heavy libraries they do not need. This checks the import graph, not a
time: issue 39 measured validate at 8.5x the bare import because the planner's package and polars came
with it, and `sql` at 5.6 s because binding a query parameter made DuckDB import pandas and numpy."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("polars", "numpy", "pandas", "pyarrow", "pandera", "prefect", "sky", "torch", "rich", "matplotlib",
         "optuna", "httpx")
#: the planner's own modules (offers, prices, schedule): validate checks a spec, it does not plan it
PLANNER = ("gpuledger.catalog.pricing", "gpuledger.catalog.offers", "gpuledger.catalog.skypilot", "gpuledger.capacity", "gpuledger.plan.sweep", "gpuledger.plan.candidates",
           "gpuledger.plan.prices", "gpuledger.plan.schedule", "gpuledger.runtime")

CASES = {
    "validate": (["validate", "specs/lora-grid.yaml"], (*HEAVY, "duckdb", "gpuledger.warehouse", *PLANNER)),
    "estimate": (["estimate", "Qwen/Qwen2.5-0.5B"], (*HEAVY, "duckdb", "gpuledger.warehouse", *PLANNER)),
    "sql": (["sql", "select count(*) as n from v_runs where cost_usd > 0"], (*HEAVY, *PLANNER)),
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


@pytest.mark.parametrize("command", sorted(CASES))
def test_the_prompt_commands_import_nothing_heavy(command, repo_root, tmp_path):
    argv, refused = CASES[command]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "GPULEDGER_WAREHOUSE": str(tmp_path / "x.duckdb")}
    if command == "sql":  # a migrated warehouse to read (made in another process, which may import anything)
        subprocess.run([sys.executable, "-c", "from gpuledger.warehouse import Warehouse\nwith Warehouse.open(): pass"],
                       cwd=repo_root, env=env, check=True, timeout=120, capture_output=True)
    exit_code, heavy = _imported(argv, refused, repo_root, env)
    assert exit_code == 0 and heavy == [], f"gpuledger {command} imported {heavy}"


def test_the_lazy_polars_is_polars():
    """The warehouse's stand-in imports polars on first use and is then the real thing."""
    from gpuledger.warehouse.lazy import polars as pl

    frame = pl.DataFrame({"a": [1, 2]})
    assert type(frame).__module__.startswith("polars") and frame["a"].sum() == 3
    assert pl.Int32 is sys.modules["polars"].Int32
