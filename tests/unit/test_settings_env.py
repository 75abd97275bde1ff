"""User-facing settings are read only through gpuledger/settings.py: no other module reads a GPULEDGER_*
variable from the environment (`os.environ.get`, `os.getenv`, `os.environ[...]`, `... in os.environ`),
except where a child process's protocol needs it (the allow-list, each with its reason).

A read counts when its key is a GPULEDGER_ literal, a constant holding one (any module's), or, in a module
that names a GPULEDGER_ variable at all, any key not a literal (a helper's parameter: `_env(name)`)."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest
from helpers import pysource

PACKAGE = Path(__file__).resolve().parents[2] / "gpuledger"

#: module -> why it reads GPULEDGER_* variables itself (a protocol between processes, not a setting)
ALLOWED = {
    "agent/__init__.py": "the trial agent reads what the sweep's runtime hands its child (run id, limits, "
                         "metrics file): the launch protocol, set per trial by gpuledger itself",
    "agent/signing.py": "the agent takes the sweep's signing key from its environment and scrubs it",
    "track.py": "a trial's gpuledger.track finds its agent (run id, metrics file, probe limits) through "
                "the variables the agent set for it",
    "runtime/probe.py": "an MCP-launched probe knows the server reserved its money by the launch id the "
                        "server set for the child",
    "flows/approvals.py": "an MCP-launched sweep hands its server-side reservation back by the launch id",
    "runtime/envelopes.py": "GPULEDGER_LAUNCHED_BY=mcp marks a sweep the MCP server started (its child)",
    "trainers/demo_lora.py": "the demo trainer is a child process that runs on a worker without a project "
                             "(its model cache and pretraining steps are its own options)",
    "scaffold/trainers/grpo.py": "the scaffold GRPO trainer runs in a SkyPilot job group's trainer task and reaches "
                                 "the rollout task's vLLM server at the host and port the group's launch set "
                                 "(gpuledger/launch/skypilot_group.py), only as its flags' defaults",
}


@functools.cache
def _sources() -> dict[str, str]:
    return {p.relative_to(PACKAGE).as_posix(): p.read_text(encoding="utf-8") for p in sorted(PACKAGE.rglob("*.py"))}


@functools.cache
def _tree(name: str) -> ast.Module:
    return pysource.tree(PACKAGE / name)


@functools.cache
def _gpuledger_constants() -> frozenset[str]:
    """Names of module-level constants, anywhere in the package, whose value is a GPULEDGER_ name."""
    names = set()
    for name, text in _sources().items():
        if "GPULEDGER_" not in text:
            continue
        for node in _tree(name).body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) \
                    and isinstance(node.value.value, str) and node.value.value.startswith("GPULEDGER_"):
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return frozenset(names)


def _is_environ(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ" or isinstance(node, ast.Name) and node.id == "environ"


def _params(tree: ast.AST) -> dict[int, set[str]]:
    """{id of a node inside a function: that function's parameter names}."""
    out: dict[int, set[str]] = {}
    for fn in pysource.nodes(tree):
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            names = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)}
            for node in pysource.nodes(fn):
                out.setdefault(id(node), set()).update(names)
    return out


def _reads(tree: ast.AST) -> list[tuple[int, ast.AST]]:
    """(line, key) of every read of os.environ / os.getenv in `tree`."""
    out = []
    for node in pysource.nodes(tree):
        if isinstance(node, ast.Call) and node.args:
            f = node.func
            if isinstance(f, ast.Attribute) and (f.attr in ("get", "pop") and _is_environ(f.value) or f.attr == "getenv"):
                out.append((node.lineno, node.args[0]))
        elif isinstance(node, ast.Subscript) and _is_environ(node.value) and isinstance(node.ctx, ast.Load):
            out.append((node.lineno, node.slice))
        elif isinstance(node, ast.Compare) and any(isinstance(op, ast.In | ast.NotIn) for op in node.ops) \
                and any(_is_environ(c) for c in node.comparators):
            out.append((node.lineno, node.left))
    return out


def _offences_in(text: str, name: str, constants: frozenset[str], tree: ast.Module | None = None) -> list[str]:
    if "environ" not in text and "getenv" not in text:
        return []
    names_one = "GPULEDGER_" in text
    tree = tree or ast.parse(text)
    params: dict[int, set[str]] | None = None
    found = []
    for line, key in _reads(tree):
        if isinstance(key, ast.Constant):
            bad = isinstance(key.value, str) and key.value.startswith("GPULEDGER_")
        elif isinstance(key, ast.Attribute):
            bad = key.attr in constants
        elif isinstance(key, ast.Name):  # a constant, or a helper's parameter (`_env(name)`) in such a module
            if key.id in constants:
                bad = True
            elif names_one:
                params = _params(tree) if params is None else params
                bad = key.id in params.get(id(key), ())
            else:
                bad = False
        else:
            bad = False
        if bad:
            found.append(f"{name}:{line}: {ast.unparse(key)}")
    return found


def _offences(name: str) -> list[str]:
    text = _sources()[name]
    if "environ" not in text and "getenv" not in text:
        return []
    return _offences_in(text, name, _gpuledger_constants(), _tree(name))


def test_no_module_but_settings_reads_a_gpuledger_variable():
    offences = [o for name in _sources() if name != "settings.py" and name not in ALLOWED for o in _offences(name)]
    assert not offences, ("read these through gpuledger.settings (a row of SETTINGS), or allow-list the module "
                          "with the child-process protocol that needs it:\n" + "\n".join(offences))


def test_every_allowed_module_still_needs_it():
    stale = [m for m in ALLOWED if not _offences(m)]
    assert not stale, f"allow-listed but reading no GPULEDGER_ variable any more: {stale}"


@pytest.mark.parametrize("source, flagged", [
    ('import os\nx = os.environ.get("GPULEDGER_X")', True),
    ('import os\nx = os.getenv("GPULEDGER_X", "")', True),
    ('import os\nENV = "GPULEDGER_X"\nx = os.environ[ENV]', True),
    ('import os\nENV = "GPULEDGER_X"\nx = ENV in os.environ', True),
    ('import os\nx = os.environ.get("HOME")', False),
    ('import os\nos.environ["GPULEDGER_X"] = "1"', False),  # a write: a parent telling its child
    ('import os\nfor e in ("AWS_X",):\n    os.environ.get(e)  # GPULEDGER_', False),  # a loop over others
    ('import os\ndef _env(name):\n    return os.environ.get(name)\n_env("GPULEDGER_X")', True),
])
def test_the_check_sees_each_kind_of_read(source, flagged):
    assert bool(_offences_in(source, "example.py", frozenset({"ENV"}))) is flagged
