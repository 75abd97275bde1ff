"""The command line as a person meets it: clear one-line errors, no tracebacks, lazy imports."""

from __future__ import annotations

import subprocess
import sys


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpuledger.cli", *args], capture_output=True, text=True, timeout=120)


def test_unwritable_export_path_is_one_line_not_a_traceback(tmp_path, _isolated_warehouse):
    from gpuledger.warehouse import Warehouse

    with Warehouse.open(_isolated_warehouse):
        pass
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
