"""The repository's Python sources parsed once per test process: the structural tests (import cycles, layering,
faces, constants, settings, the test layout) walk the same ~230 modules, and parsing is most of their time
(ast.parse ~10 s of CPU over make test-fast when each file parsed them itself). Trees are shared: read them,
never change them."""

from __future__ import annotations

import ast
import functools
from pathlib import Path


def tree(path: Path) -> ast.Module:
    """Returns the parsed module at `path` (parsed again only when its text changed)."""
    return _parse(Path(path).read_text(encoding="utf-8"), str(path))


@functools.cache
def _parse(text: str, filename: str) -> ast.Module:
    return ast.parse(text, filename=filename)


@functools.cache
def nodes(tree: ast.AST) -> tuple[ast.AST, ...]:
    """Returns every node under `tree` (`ast.walk`'s order), walked once per tree: the structural tests walk
    the same trees, one test per heavy library or rule (a full walk of the package is ~0.7 s)."""
    return tuple(ast.walk(tree))
