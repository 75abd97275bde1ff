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
        _ORIGINAL_OPEN(Warehouse, folder / "ledger.duckdb").close()
        _template = folder / "ledger.duckdb"
    return _template


def fresh_warehouse(path: str | Path) -> Path:
    """Copies the migrated template to `path` unless a file is there already; returns `path`."""
    path = Path(path)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(template(), path)
    return path


_ORIGINAL_OPEN = Warehouse.open.__func__


def _open_from_template(cls, path=None, read_only=False, **kwargs):
    """`Warehouse.open` that, for a writer about to create a local warehouse file, copies the template
    there first (then opens it as usual: the migrations find nothing left to do)."""
    if not read_only and kwargs.get("migrate", True):
        from gpuledger import settings
        from gpuledger.warehouse import lake

        target = str(path) if path is not None else settings.current().warehouse
        if not lake.is_lake(target) and not Path(target).exists():
            fresh_warehouse(target)
    return _ORIGINAL_OPEN(cls, path, read_only, **kwargs)


def copy_template_on_create(monkeypatch) -> None:
    """Makes every new local warehouse of this test start as a copy of the migrated template (a
    migration of a new file costs seconds; tests/conftest.py does it for every test but those marked
    `real_migrations`, which migrate a new file as a user's first command does)."""
    monkeypatch.setattr(Warehouse, "open", classmethod(_open_from_template))
