"""Shared test settings: every test gets its own warehouse and never talks to the network.

Tests by kind: tests/unit/ (fast and pure: no server, browser, PostgreSQL, trial subprocess or Prefect;
`make test-fast`, less the unit tests over ~0.5 s alone, which carry `slow` and their reason: docs/development.md),
tests/integration/ (real processes, servers, browsers; marked `integration` and `slow` here, so
`pytest -m "not slow"` runs the fast unit tests), helpers in tests/helpers/ (`helpers.<module>`).
tests/unit/test_test_layout.py keeps it so."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers import fake_launcher

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")
# local plans as on a quiet machine (gpuledger/inputs/machine.py measures the load at every plan, issue 38):
# the suite's budgets and timings must not move with the CI machine's load; tests of the load set their own
os.environ.setdefault("GPULEDGER_MACHINE_LOAD", "0")

fake_launcher.register()  # `launcher: fake` exists only in tests (gpuledger.launch.register_launcher)


INTEGRATION = REPO / "tests" / "integration"


#: seconds a test file takes alone (tests/file_seconds.json, measured; see its note): the suite runs the costliest
#: files first, so that `pytest -n 2 --dist loadfile --no-loadscope-reorder` (make test) ends on small files
#: on both workers instead of one long file on one of them (xdist's own order, by number of tests, put every
#: one-test end-to-end file last)
FILE_SECONDS = REPO / "tests" / "file_seconds.json"
#: what an unlisted file is taken to cost: a new integration file early rather than last
DEFAULT_SECONDS = {"integration": 60.0, "unit": 2.0}


def _rel(item) -> str:
    path = Path(str(item.fspath)).resolve()
    return path.relative_to(REPO).as_posix() if REPO in path.parents else path.as_posix()


def pytest_collection_modifyitems(config, items):
    """Marks every test under tests/integration/ `integration` and `slow`; orders the files costliest first
    (FILE_SECONDS; a file's tests stay together and in their order)."""
    import json

    for item in items:
        if INTEGRATION in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.integration)
            item.add_marker(pytest.mark.slow)
    known = json.loads(FILE_SECONDS.read_text(encoding="utf-8"))["seconds"]
    rank: dict[str, tuple[float, int]] = {}
    for item in items:
        rel = _rel(item)
        if rel not in rank:
            kind = "integration" if rel.startswith("tests/integration/") else "unit"
            rank[rel] = (-float(known.get(rel, DEFAULT_SECONDS[kind])), len(rank))
    items[:] = sorted(items, key=lambda item: rank[_rel(item)])  # stable: a file's own order is kept


@pytest.fixture(autouse=True)
def _isolated_warehouse(tmp_path_factory, monkeypatch):
    """Points the warehouse, the run-time folder and the reports at fresh temporary folders, so that no
    test writes into the checkout (itself a gpuledger project: its .gpuledger/ and reports/)."""
    folder = tmp_path_factory.mktemp("wh")
    path = folder / "ledger.duckdb"
    monkeypatch.setenv("GPULEDGER_WAREHOUSE", str(path))
    monkeypatch.setenv("GPULEDGER_DATA_DIR", str(folder / "data"))
    monkeypatch.setenv("GPULEDGER_REPORTS_DIR", str(folder / "reports"))
    yield path


UNIT = REPO / "tests" / "unit"


@pytest.fixture(autouse=True)
def _warehouse_from_template(request, monkeypatch):
    """A unit test's new local warehouse starts as a copy of a migrated empty one built once per process
    (helpers/warehouse_template.py; migrating a new file costs seconds, a copy milliseconds), unless the
    test is marked `real_migrations`. Integration tests migrate as a user's first command does."""
    if UNIT in Path(str(request.node.fspath)).parents and request.node.get_closest_marker("real_migrations") is None:
        from helpers.warehouse_template import copy_template_on_create

        copy_template_on_create(monkeypatch)
    yield


@pytest.fixture
def repo_root() -> Path:
    return REPO


@pytest.fixture
def shared_dir() -> Path:
    """`../shared` beside the checkout (reference data); tests needing it skip on a user's machine."""
    if not SHARED.is_dir():
        pytest.skip(f"{SHARED} is absent (it exists only beside the project's own checkout)")
    return SHARED
