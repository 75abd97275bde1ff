"""Tests by kind: every test module in tests/unit/ (fast, pure) or tests/integration/ (real processes,
servers, browsers, PostgreSQL), helpers in tests/helpers/; unit tests import no server, browser or
Prefect; module names unique across folders (pytest imports them by name)."""

from __future__ import annotations

import ast
from pathlib import Path

from helpers import pysource

TESTS = Path(__file__).resolve().parents[1]
KINDS = ("unit", "integration")
#: what a unit test must not import: a server, a browser, PostgreSQL, Prefect (tests/integration/ may)
NOT_IN_UNIT = ("prefect", "playwright", "psycopg", "helpers.browser", "helpers.postgres", "helpers.prefect_server",
               "gpuledger.flows")


def test_no_test_or_helper_module_lies_directly_under_tests():
    loose = sorted(p.name for p in TESTS.glob("*.py") if p.name != "conftest.py")
    assert loose == [], ("move test modules to tests/unit/ (fast, pure) or tests/integration/ (real processes, "
                         f"servers, browsers) and helpers to tests/helpers/: {loose}")


def test_unit_tests_import_no_server_browser_or_prefect():
    found = []
    for path in sorted((TESTS / "unit").glob("*.py")):
        for node in pysource.nodes(pysource.tree(path)):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            found += [f"{path.name}: {n}" for n in names if any(n == m or n.startswith(m + ".") for m in NOT_IN_UNIT)]
    assert found == [], f"unit tests start no server, browser or Prefect (move them to tests/integration/): {found}"


def test_test_module_names_are_unique_across_kinds():
    names = [p.name for kind in KINDS for p in (TESTS / kind).glob("test_*.py")]
    assert len(names) > 50 and sorted(n for n in set(names) if names.count(n) > 1) == []
