"""A migrated, empty warehouse built once per test process and copied: a test that needs a new warehouse
(and does not test the migrations themselves) starts from `fresh_warehouse(path)` rather than migrating a
new file; tests/unit/test_test_layout.py measures the two side by side.

    with Warehouse.open(fresh_warehouse(tmp_path / "w.duckdb")) as wh: ...
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

from gpuledger.warehouse import Warehouse

_template: Path | None = None


def template() -> Path:
    """Returns the process's migrated empty warehouse file (built on first use, removed at exit)."""
    global _template
    if _template is None:
        folder = Path(tempfile.mkdtemp(prefix="gpuledger-template-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        Warehouse.open(folder / "ledger.duckdb").close()
        _template = folder / "ledger.duckdb"
    return _template


def fresh_warehouse(path: str | Path) -> Path:
    """Copies the migrated template to `path` unless a file is there already; returns `path`."""
    path = Path(path)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(template(), path)
    return path
