"""No import circles among gpuledger's modules.

The graph is read from the source (AST), not by importing: an edge A -> B for every `import B`,
`from B import x` and `from B.x import y` (x a module: the edge goes to B.x) in A, at module level
AND inside functions or `if TYPE_CHECKING:` blocks: an import deferred into a function is still a
circle (it only hides the order problem until run time). Relative imports are resolved. The
implicit import of a parent package (importing `gpuledger.plan.choice` runs `gpuledger/plan/__init__`)
is not an edge: a package's `__init__` re-exporting its modules is not a circle.
"""

from __future__ import annotations

import ast
from pathlib import Path

from helpers import pysource

REPO = Path(__file__).resolve().parents[2]
PACKAGE = "gpuledger"


def _parsed(path: Path) -> ast.AST:
    return pysource.tree(path)  # each source parsed once per process (both tests walk the same files)


def module_files(root: Path = REPO / PACKAGE) -> dict[str, Path]:
    """Returns {dotted module name: file} for every .py file under `root`."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _known(name: str, modules: dict[str, Path]) -> str | None:
    """The longest prefix of `name` that is one of `modules` (None when it is not ours)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(modules: dict[str, Path]) -> dict[str, dict[str, int]]:
    """Returns {module: {imported module: first line}} for imports among `modules`."""
    graph: dict[str, dict[str, int]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: dict[str, int] = {}
        for node in pysource.nodes(_parsed(path)):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                targets = [f"{source}.{alias.name}" if f"{source}.{alias.name}" in modules else source
                           for alias in node.names]
            for target in targets:
                known = _known(target, modules)
                if known and known != name:
                    edges.setdefault(known, node.lineno)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Returns one cycle (a list of modules, first repeated at the end) per strongly connected
    component of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(graph.get(child, {}))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(component)
    return [_path_within(sorted(c), graph) for c in components]


def _path_within(component: list[str], graph: dict[str, dict[str, int]]) -> list[str]:
    """A shortest cycle through the component's first module, staying inside the component."""
    members = set(component)
    start = component[0]
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in graph[node]:
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [*reversed(path), start]
                if child in members and child not in previous:
                    previous[child] = node
                    following.append(child)
        frontier = following
    return [*component, start]


def _describe(cycle: list[str], graph: dict[str, dict[str, int]], modules: dict[str, Path]) -> str:
    steps = [f"{a} (line {graph[a][b]} of {modules[a].relative_to(REPO).as_posix()}) -> {b}"
             for a, b in zip(cycle, cycle[1:], strict=False)]
    return "; ".join(steps)


def test_no_import_cycles_among_gpuledger_modules():
    modules = module_files()
    graph = import_graph(modules)
    found = cycles(graph)
    assert not found, "import circles (break each by moving the shared part down):\n" + "\n".join(
        _describe(c, graph, modules) for c in found)


def test_the_finder_sees_a_circle_hidden_in_a_function_and_a_relative_import(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from pkg.a import f\n")
    (pkg / "a.py").write_text("def f():\n    from pkg.sub import b\n    return b\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "b.py").write_text("from ..c import g\n")
    (pkg / "c.py").write_text("import pkg.a\n")
    (pkg / "d.py").write_text("from pkg import a\nfrom pkg.sub import b\n")
    modules = module_files(pkg)
    graph = import_graph(modules)
    assert graph["pkg.sub.b"] == {"pkg.c": 1}
    assert graph["pkg.d"] == {"pkg.a": 1, "pkg.sub.b": 2}
    assert cycles(graph) == [["pkg.a", "pkg.sub.b", "pkg.c", "pkg.a"]]
    (pkg / "c.py").write_text("import json\n")
    assert cycles(import_graph(module_files(pkg))) == []


#: Short names only third-party habit allows (numpy as np, polars as pl, pandas as pd, pandera as pa).
CONVENTIONAL_ALIASES = {"np", "pl", "pd", "pa"}


def test_gpuledger_modules_are_imported_by_their_full_names():
    """`from gpuledger import protocol as P` hides every use from a search for `protocol.`: a module of
    gpuledger imported under an alias of three letters or fewer is refused, in gpuledger/ and tests/."""
    short = []
    for folder in (REPO / PACKAGE, REPO / "tests"):
        for path in sorted(folder.rglob("*.py")):
            for node in pysource.nodes(_parsed(path)):
                if isinstance(node, ast.Import | ast.ImportFrom):
                    source = node.module if isinstance(node, ast.ImportFrom) else ""
                    for alias in node.names:
                        full = f"{source}.{alias.name}" if source else alias.name
                        if (alias.asname and len(alias.asname) <= 3 and alias.asname not in CONVENTIONAL_ALIASES
                                and (full.startswith(PACKAGE) or getattr(node, "level", 0) > 0)):
                            short.append(f"{path.relative_to(REPO).as_posix()}:{node.lineno}: {full} as {alias.asname}")
    assert not short, "import gpuledger modules by their full names:\n" + "\n".join(short)
