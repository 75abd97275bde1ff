"""The faces (the CLI, the MCP server, the Prefect flows) go through the application layer
(`gpuledger.api`), never through one another; the layers below know neither the faces nor the API.

Read from the source (AST: every import, also inside functions), like tests/unit/test_import_cycles.py.
`gpuledger.flows.server` is the local Prefect server's process machinery (it imports no Prefect and
runs no flow: `serve`, the port option, `doctor`'s check), not a flow, so the CLI may use it.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

from helpers import pysource

REPO = Path(__file__).resolve().parents[2]
FACES = ("gpuledger.cli", "gpuledger.mcp_server", "gpuledger.flows")
API = "gpuledger.api"
#: modules of a face another face may import, and why (see the module docstring)
SHARED = {"gpuledger.flows.server": ("gpuledger.cli",)}


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted((REPO / "gpuledger").rglob("*.py")):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _imports(path: Path) -> list[tuple[str, int]]:
    out = []
    for node in pysource.nodes(pysource.tree(path)):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out += [(f"{node.module}.{a.name}", node.lineno) for a in node.names]
    return out


def _room(name: str) -> str | None:
    return next((room for room in (*FACES, API) if name == room or name.startswith(room + ".")), None)


def test_no_face_imports_another_face():
    wrong = []
    for name, path in _modules().items():
        face = _room(name)
        if face is None or face == API:
            continue
        for target, line in _imports(path):
            other = _room(target)
            if other in FACES and other != face and face not in SHARED.get(target.rsplit(".", 1)[0], SHARED.get(target, ())):
                wrong.append(f"{path.relative_to(REPO)}:{line} imports {target}")
    assert not wrong, f"a face imports another face (call gpuledger.api instead): {wrong}"


def test_every_face_calls_the_application_layer():
    modules = _modules()
    for face in FACES:
        users = [n for n, p in modules.items() if _room(n) == face and any(_room(t) == API for t, _ in _imports(p))]
        assert users, f"no module of {face} imports {API}"


def test_the_mcp_server_never_names_the_cli():
    for path in sorted((REPO / "gpuledger" / "mcp_server").rglob("*.py")):
        assert "gpuledger.cli" not in path.read_text(encoding="utf-8"), f"{path} names gpuledger.cli"


def test_the_layers_below_know_neither_the_faces_nor_the_api():
    wrong = [f"{p.relative_to(REPO)}:{line} imports {t}" for n, p in _modules().items() if _room(n) is None
             and n != "gpuledger" for t, line in _imports(p) if _room(t) is not None]
    assert not wrong, f"a lower layer imports a face or the application layer: {wrong}"


def test_the_api_imports_no_face_and_names_its_prefect_runner():
    from gpuledger.api.ledger import PREFECT_RUNNER

    wrong = [f"{p.relative_to(REPO)}:{line} imports {t}" for n, p in _modules().items() if _room(n) == API
             for t, line in _imports(p) if _room(t) in FACES]
    assert not wrong, f"the application layer imports a face: {wrong}"
    spec = importlib.util.find_spec(PREFECT_RUNNER)
    assert spec is not None and spec.origin
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    assert {"run_sweep_flow", "serve", "decide_approval"} <= {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
