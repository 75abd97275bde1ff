"""Schema migrations, views and their documentation, applied by every writer that opens the file.

1. `gpuledger/warehouse/sql/migrations/NNN_name.sql` in version order, each in its own transaction together with
   its `schema_migrations` row (version, name, sha256 of the text). An already-applied migration
   whose file text changed since is refused (`MigrationChanged`, naming the file): migrations are
   never edited, a new one is added instead.
2. `gpuledger/warehouse/sql/views/<name>.sql`: (re)created when their text changed (`schema_views` keeps the
   checksum), in dependency order; views whose file was removed are dropped.
3. `gpuledger/warehouse/sql/views.yml` applied as `COMMENT ON VIEW` / `COMMENT ON COLUMN` wherever the database's
   comment differs, so any SQL client (the duckdb CLI's `.schema`, DBeaver, `duckdb_columns()`)
   shows the documentation.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, suppress

import duckdb

from gpuledger.errors import UserError
from gpuledger.warehouse import sqlfiles
from gpuledger.warehouse.connect import disk_full, now


class MigrationChanged(UserError):
    """An applied migration's file no longer has the text that was applied."""


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection, where: str | None = None) -> Iterator[None]:
    """Runs the body in one transaction: COMMIT at the end, ROLLBACK on any exception. A full disk
    (while writing or at the commit) is `DiskFull`, one line naming `where` (the warehouse)."""
    con.begin()
    try:
        yield
    except BaseException as err:
        _roll_back(con, err, where)
        raise
    try:
        con.commit()
    except duckdb.Error as err:
        _roll_back(con, err, where)
        raise


def _roll_back(con: duckdb.DuckDBPyConnection, err: BaseException, where: str | None) -> None:
    """Rolls the failed transaction back; raises `DiskFull` when `err` was a full disk (else the caller re-raises)."""
    with suppress(duckdb.Error):
        con.rollback()
    full = disk_full(err, where)
    if full is not None:
        raise full from None


def migrate(con: duckdb.DuckDBPyConnection) -> list[int]:
    """Applies pending migrations, then views and their comments; returns the versions applied now."""
    sqlfiles.run(con, "schema_migrations_create")
    applied = {v: (name, checksum) for v, name, checksum in sqlfiles.run(con, "schema_migrations_applied").fetchall()}
    files = sqlfiles.migrations()
    for version, name, sql in files:
        if version in applied and applied[version][1] != sqlfiles.checksum(sql):
            raise MigrationChanged(
                f"migration {sqlfiles.migration_file(version, name)} was edited after it was applied to this "
                f"warehouse (its sha256 differs from the one recorded in schema_migrations); restore the "
                f"file and put the change in a new migration file with the next number")
    done: list[int] = []
    for version, name, sql in files:
        if version in applied:
            continue
        with transaction(con):
            con.execute(sql)
            sqlfiles.run(con, "schema_migrations_insert",
                    {"version": version, "name": name, "checksum": sqlfiles.checksum(sql), "applied_at": now()})
        done.append(version)
    sync_views(con)
    sync_comments(con)
    return done


def is_current(con: duckdb.DuckDBPyConnection) -> bool:
    """True when every migration file is applied and every view has its file's text (read-only:
    a reader checks this before it reads; comments are not checked)."""
    try:
        applied = {v for v, _name, _checksum in sqlfiles.run(con, "schema_migrations_applied").fetchall()}
        known = dict(sqlfiles.run(con, "schema_views_known").fetchall())
    except duckdb.Error:  # no schema_migrations / schema_views yet
        return False
    return ({v for v, _name, _sql in sqlfiles.migrations()} <= applied
            and all(known.get(n) == sqlfiles.checksum(s) for n, s in sqlfiles.views().items()))


def sync_views(con: duckdb.DuckDBPyConnection) -> None:
    """Creates or replaces every view of `gpuledger/warehouse/sql/views/` whose SQL changed; drops removed ones."""
    sqlfiles.run(con, "schema_views_create")
    known = dict(sqlfiles.run(con, "schema_views_known").fetchall())
    existing = {n for (n,) in sqlfiles.run(con, "schema_views_existing").fetchall()}
    wanted = sqlfiles.views()
    todo = {n: s for n, s in wanted.items() if known.get(n) != sqlfiles.checksum(s) or n not in existing}
    stale = [n for n in known if n not in wanted]
    if not todo and not stale:
        return
    with transaction(con):
        for n in stale:
            con.execute(f"DROP VIEW IF EXISTS {sqlfiles.ident(n)}")
            sqlfiles.run(con, "schema_views_delete", {"name": n})
        # a view may use other views: create them in dependency order (names mentioned in the SQL)
        for n in sqlfiles.dependency_order(wanted):
            if n in todo:
                con.execute(f"CREATE OR REPLACE VIEW {sqlfiles.ident(n)} AS\n{todo[n]}")
                sqlfiles.run(con, "schema_views_upsert", {"name": n, "checksum": sqlfiles.checksum(todo[n]), "created_at": now()})


def sync_comments(con: duckdb.DuckDBPyConnection) -> None:
    """Applies views.yml as COMMENT ON VIEW/COLUMN where the stored comment differs (idempotent)."""
    docs = sqlfiles.view_docs()
    have_views = dict(sqlfiles.run(con, "schema_view_comments").fetchall())
    have_cols = {(v, c): text for v, c, text in sqlfiles.run(con, "schema_column_comments").fetchall()}
    todo: list[str] = []
    for view, doc in docs.items():
        if view not in have_views:
            continue  # documented but not created: the views.yml test names it
        if have_views[view] != doc["description"]:
            todo.append(f"COMMENT ON VIEW {sqlfiles.ident(view)} IS {sqlfiles.literal(doc['description'])}")
        for col, text in doc["columns"].items():
            if (view, col) in have_cols and have_cols[(view, col)] != text:
                todo.append(f"COMMENT ON COLUMN {sqlfiles.ident(view)}.{sqlfiles.ident(col)} IS {sqlfiles.literal(text)}")
    if not todo:
        return
    with transaction(con):
        for statement in todo:
            con.execute(statement)
