"""The SQL text of the warehouse: package data under `gpuledger/warehouse/sql/`, read through
`importlib.resources` so an installed gpuledger finds it (no SQL in Python strings).

- `gpuledger/warehouse/sql/migrations/NNN_name.sql`: schema changes, applied once each, in order;
- `gpuledger/warehouse/sql/views/<name>.sql`: one SELECT per view, (re)created when its text changes;
- `gpuledger/warehouse/sql/views.yml`: the documentation of every view and column (applied as `COMMENT ON`);
- `gpuledger/warehouse/sql/queries/<name>.sql`: every other statement, one per file, DuckDB `$param` placeholders.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import re
from importlib import resources
from pathlib import Path
from typing import Any

#: the package data folder `gpuledger/warehouse/sql/`: migrations, views, views.yml, queries
SQL_ROOT = Path(str(resources.files("gpuledger.warehouse").joinpath("sql")))
MIGRATIONS_DIR = SQL_ROOT / "migrations"
VIEWS_DIR = SQL_ROOT / "views"
VIEWS_DOC = SQL_ROOT / "views.yml"
QUERIES_DIR = SQL_ROOT / "queries"

_MIGRATION_RE = re.compile(r"^(\d{3,})_([a-z0-9_]+)\.sql$")
_NAME_RE = re.compile(r"[a-z0-9_]+")


def checksum(text: str) -> str:
    """Returns the sha256 hex digest of `text` (migrations and views are recorded by it)."""
    return hashlib.sha256(text.encode()).hexdigest()


@functools.cache
def named_sql(name: str) -> str:
    """Returns the text of `gpuledger/warehouse/sql/queries/<name>.sql` (a known name: no path from user input)."""
    if not _NAME_RE.fullmatch(name):
        raise ValueError(f"named query {name!r}: names are lower-case letters, digits and '_'")
    path = QUERIES_DIR / f"{name}.sql"
    if not path.is_file():
        raise ValueError(f"no named query {name!r} ({path} is missing)")
    return path.read_text(encoding="utf-8").strip().rstrip(";")


def migrations() -> list[tuple[int, str, str]]:
    """Returns (version, name, sql) of `gpuledger/warehouse/sql/migrations/NNN_name.sql`, in version order."""
    out = []
    for f in sorted(MIGRATIONS_DIR.glob("*.sql")):
        m = _MIGRATION_RE.match(f.name)
        if not m:
            raise RuntimeError(f"migration file name {f.name} does not match NNN_name.sql")
        out.append((int(m.group(1)), m.group(2), f.read_text(encoding="utf-8")))
    versions = [v for v, _, _ in out]
    if len(set(versions)) != len(versions):
        raise RuntimeError(f"duplicate migration versions in {MIGRATIONS_DIR}")
    return sorted(out)


def migration_file(version: int, name: str) -> Path:
    """Returns the path of migration `version` `name` (for messages)."""
    return MIGRATIONS_DIR / f"{version:03d}_{name}.sql"


def views() -> dict[str, str]:
    """Returns {name: select sql} of `gpuledger/warehouse/sql/views/<name>.sql`."""
    return {f.stem: f.read_text(encoding="utf-8").strip().rstrip(";") for f in sorted(VIEWS_DIR.glob("*.sql"))}


def view_docs() -> dict[str, dict[str, Any]]:
    """Returns {view: {"description": str, "columns": {column: description}}} of views.yml (a fresh copy:
    the parse is kept per file version, because every migration of a warehouse applies it)."""
    stat = VIEWS_DOC.stat()
    return copy.deepcopy(_parsed_view_docs(stat.st_mtime_ns, stat.st_size))


@functools.lru_cache(maxsize=2)
def _parsed_view_docs(_mtime_ns: int, _size: int) -> dict[str, dict[str, Any]]:
    """views.yml parsed by libyaml's C loader where PyYAML has it (44 kB: 0.10 s in pure Python, 0.01 s in C;
    our own package file, so not the position-tracking loader a user's spec gets: gpuledger/safeyaml.py)."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    doc = yaml.load(VIEWS_DOC.read_text(encoding="utf-8"), Loader=loader) or {}
    out: dict[str, dict[str, Any]] = {}
    for name, v in (doc.get("views") or {}).items():
        cols = {}
        for c in v.get("columns") or []:
            text = str(c.get("description") or "")
            if c.get("unit"):
                text = f"{text} [{c['unit']}]"
            cols[str(c["name"])] = text
        out[str(name)] = {"description": str(v.get("description") or ""), "columns": cols}
    return out


def dependency_order(views_sql: dict[str, str]) -> list[str]:
    """Returns the view names so that each comes after the views its SQL mentions (outside `--`
    comments: a comment may name the view that builds on this one)."""
    code = {n: re.sub(r"--[^\n]*", "", sql) for n, sql in views_sql.items()}
    deps = {n: {m for m in views_sql if m != n and re.search(rf"\b{re.escape(m)}\b", sql)}
            for n, sql in code.items()}
    order: list[str] = []
    seen: set[str] = set()

    def visit(n: str, path: tuple[str, ...]) -> None:
        if n in seen:
            return
        if n in path:
            raise RuntimeError(f"views depend on each other in a cycle: {' -> '.join((*path, n))}")
        for m in sorted(deps[n]):
            visit(m, (*path, n))
        seen.add(n)
        order.append(n)

    for n in sorted(views_sql):
        visit(n, ())
    return order


def ident(name: str) -> str:
    """Returns `name` as a quoted SQL identifier (names come from our own files and schemas)."""
    return '"' + name.replace('"', '""') + '"'


def literal(text: str) -> str:
    """Returns `text` as a quoted SQL string literal (for statements that take no parameters)."""
    return "'" + text.replace("'", "''") + "'"


def run(con: Any, name: str, params: dict[str, Any] | None = None) -> Any:
    """Executes the named query `name` on DuckDB connection `con`; returns the connection (for fetch*)."""
    return con.execute(named_sql(name), params) if params else con.execute(named_sql(name))
