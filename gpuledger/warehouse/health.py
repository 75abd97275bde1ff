"""What `gpuledger doctor` asks of a warehouse file, without changing it: does it open for reading,
could this user write it, which schema version it has and which migrations of this gpuledger it
still lacks (an older gpuledger wrote it; the next writer applies them).

Opens the file read-only with a short lock wait and never migrates; a missing file is a state
(`exists=False`: the first sweep creates it), not an error.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from gpuledger.errors import UserError
from gpuledger.warehouse import sqlfiles
from gpuledger.warehouse.connect import connect, one_line

#: how long doctor waits for a file another process holds (s)
LOCK_WAIT_S = 0.5


@dataclass
class WarehouseHealth:
    """The state of one warehouse file (see the module doc)."""

    path: Path
    exists: bool = False
    readable: bool = False
    writable: bool = False
    #: the newest migration applied to the file, and the newest this gpuledger ships
    version: int | None = None
    latest: int = 0
    pending: list[int] = field(default_factory=list)
    views_current: bool = False
    error: str | None = None


def _writable(path: Path) -> bool:
    """True when this user may write `path`, or create it (its nearest existing folder is writable)."""
    if path.exists():
        return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return os.access(folder, os.W_OK | os.X_OK)


def inspect(path: str | os.PathLike[str]) -> WarehouseHealth:
    """Returns the WarehouseHealth of the DuckDB file at `path` (read-only; changes nothing)."""
    p = Path(path)
    shipped = [v for v, _name, _sql in sqlfiles.migrations()]
    h = WarehouseHealth(path=p, exists=p.is_file(), latest=max(shipped, default=0), writable=_writable(p))
    if not h.exists:
        if p.exists():
            h.error = "exists but is not a regular file"
        return h
    try:
        con = connect(p, read_only=True, timeout_s=LOCK_WAIT_S)
    except UserError as err:  # busy (a running sweep writes it) or not a DuckDB file
        h.error = str(err)
        return h
    try:
        h.readable = True
        try:
            applied = {int(v) for v, _name, _checksum in sqlfiles.run(con, "schema_migrations_applied").fetchall()}
        except duckdb.Error:
            applied = set()  # no schema_migrations table: nothing applied
        h.version = max(applied, default=None)
        h.pending = [v for v in shipped if v not in applied]
        try:
            known = dict(sqlfiles.run(con, "schema_views_known").fetchall())
            h.views_current = all(known.get(n) == sqlfiles.checksum(s) for n, s in sqlfiles.views().items())
        except duckdb.Error:
            h.views_current = False
    except duckdb.Error as err:
        h.error = one_line(err)
    finally:
        con.close()
    return h
