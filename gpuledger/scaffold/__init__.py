"""What `gpuledger init` writes into a new project (package data, read with `importlib.resources`):
`gpuledger.toml`, `specs/` (the demo grid and ASHA specs, the cloud LoRA example, a capacity example,
the spec JSON Schema), `trainers/` (the PEFT trainer of the cloud example: the user's own code from
then on), `prefect.yaml` (deployments whose entrypoints are module paths of the installed package) and
`prefect.toml`. The gpuledger checkout is itself a project: its root links to these files.

`init_project(folder)` copies them, never overwriting a file (idempotent), and adds the run-time
folder to the project's `.gitignore`. It never writes through a symlink that leads out of the project
(a `.gitignore` or a `specs/` linked elsewhere): those are named in `InitResult.refused`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import resources
from importlib.abc import Traversable
from pathlib import Path

from gpuledger.errors import UserError

#: the line `init` puts in the project's .gitignore (the run-time folder, settings.DATA_DIR_NAME)
GITIGNORE_LINE = ".gpuledger/"
#: package files that are not part of a project
_NOT_COPIED = ("__init__.py", "__pycache__")


@dataclass
class InitResult:
    """What `init_project` did: the project folder, the files it wrote and those it kept as they were."""

    root: Path
    written: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    #: paths not written because a symlink on the way leads out of the project: "REL (why)"
    refused: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {"project": str(self.root), "written": self.written, "kept": self.kept, "refused": self.refused}


def outside_project(root: Path, path: Path) -> Path | None:
    """Returns where `path` really leads when a symlink on the way (the file or a folder above it)
    takes it out of the project `root`, else None (writing there stays inside)."""
    real_root = root.resolve()
    real = path.resolve()  # follows every link, dangling ones included as far as they go
    if real == real_root or real_root in real.parents:
        return None
    return real


def scaffold_files() -> Iterator[tuple[str, Traversable]]:
    """Yields (relative path, package file) of every file a project gets, in a stable order."""

    def walk(node: Traversable, prefix: str) -> Iterator[tuple[str, Traversable]]:
        for child in sorted(node.iterdir(), key=lambda c: c.name):
            if child.name in _NOT_COPIED or child.name.endswith(".pyc"):
                continue
            rel = f"{prefix}{child.name}"
            if child.is_dir():
                yield from walk(child, rel + "/")
            else:
                yield rel, child

    yield from walk(resources.files(__name__), "")


def _gitignore(root: Path, result: InitResult) -> None:
    path = root / ".gitignore"
    away = outside_project(root, path)
    if away is not None:
        result.refused.append(f".gitignore (a symlink to {away}, outside the project: not written; add "
                              f"{GITIGNORE_LINE} to the project's .gitignore yourself)")
        return
    if path.is_symlink() and not path.exists():  # a dangling link inside the project: do not create its target
        result.refused.append(f".gitignore (a dangling symlink: not written; add {GITIGNORE_LINE} yourself)")
        return
    if not path.exists():
        path.write_text(f"# gpuledger's run-time data (warehouse, landing, studies, Prefect home)\n{GITIGNORE_LINE}\n",
                        encoding="utf-8")
        result.written.append(".gitignore")
        return
    text = path.read_text(encoding="utf-8", errors="replace")
    entries = {line.strip() for line in text.splitlines()}
    if entries & {GITIGNORE_LINE, GITIGNORE_LINE.rstrip("/"), "/" + GITIGNORE_LINE, "/" + GITIGNORE_LINE.rstrip("/")}:
        result.kept.append(".gitignore")
        return
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(("" if text.endswith("\n") or not text else "\n") + f"{GITIGNORE_LINE}\n")
    result.written.append(f".gitignore (added {GITIGNORE_LINE})")


def init_project(folder: str | Path = ".") -> InitResult:
    """Makes `folder` a gpuledger project: writes every scaffold file it lacks (never overwrites one)
    and adds the run-time folder to its `.gitignore`. Idempotent."""
    root = Path(folder).expanduser()
    if root.exists() and not root.is_dir():
        raise UserError(f"{root} is a file; `gpuledger init` needs a folder (it is made if missing)")
    root.mkdir(parents=True, exist_ok=True)
    result = InitResult(root=root.resolve())
    for rel, source in scaffold_files():
        target = root / rel
        if target.exists() or target.is_symlink():
            result.kept.append(rel)
            continue
        away = outside_project(root, target)
        if away is not None:
            result.refused.append(f"{rel} (would be written to {away}: a symlink on the way leaves the project)")
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "xb") as fh:  # exclusive: a file that appeared meanwhile is not overwritten
            fh.write(source.read_bytes())
        result.written.append(rel)
    _gitignore(root, result)
    return result
