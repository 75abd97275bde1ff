"""The commands of the edit loop start fast: `validate` and `estimate` import neither polars nor numpy
(nor Prefect, SkyPilot, DuckDB); issue 39 measured validate at 8.5x a bare `import pydantic, yaml`
because the planner's package came with it (docs/measurements.md has the timings)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("polars", "numpy", "prefect", "sky", "duckdb", "pandas", "torch")


@pytest.mark.parametrize("argv", [["validate", "specs/lora-grid.yaml"], ["estimate", "Qwen/Qwen2.5-0.5B"]])
def test_the_edit_loop_commands_import_nothing_heavy(argv, repo_root, tmp_path):
    code = (f"import sys, json; from gpuledger.cli import main; code = main({argv!r}); "
            f"print(json.dumps([code, sorted(m for m in {HEAVY!r} if m in sys.modules)]))")
    done = subprocess.run([sys.executable, "-c", code], cwd=repo_root, capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "GPULEDGER_WAREHOUSE": str(tmp_path / "x.duckdb")})
    assert done.returncode == 0, done.stderr
    exit_code, heavy = json.loads(done.stdout.strip().splitlines()[-1])
    assert exit_code == 0 and heavy == [], f"gpuledger {argv[0]} imported {heavy}"
