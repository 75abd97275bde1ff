"""No module-level name of gpuledger is assigned twice at the top of its module (the later value silently
wins and the source note on the earlier one lies: issue 39's MATMUL_EFFICIENCY). Read from the source."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

from helpers import pysource

ROOT = Path(__file__).resolve().parents[2] / "gpuledger"


def twice(tree: ast.Module) -> list[str]:
    """Returns the names a module's top level assigns more than once (plain or annotated assignments)."""
    names: Counter[str] = Counter()
    for node in tree.body:
        if isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            names[node.target.id] += 1
    return sorted(n for n, count in names.items() if count > 1)


def test_no_module_level_name_is_assigned_twice():
    found = {str(p.relative_to(ROOT.parent)): names for p in sorted(ROOT.rglob("*.py"))
             if (names := twice(pysource.tree(p)))}
    assert not found, f"module-level names assigned twice (keep one, with its source): {found}"


def test_the_reader_finds_a_second_assignment():
    assert twice(ast.parse("A = 1\nB: int = 2\nA = 3\n")) == ["A"]
