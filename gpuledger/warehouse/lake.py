"""A team warehouse on DuckLake: catalog in PostgreSQL, Parquet data files on a shared path or S3.

Selected by `GPULEDGER_WAREHOUSE=ducklake:postgres:<libpq connection string>` and
`GPULEDGER_WAREHOUSE_DATA=<path or s3://bucket/prefix>` (the data path is needed when the catalog
is created; later connections read it from the catalog).

- Extensions (ducklake, postgres_scanner, httpfs) come from the pip packages `duckdb-ext-*` pinned
  with DuckDB 1.4 LTS and are loaded from site-packages: nothing is downloaded at run time.
- Schema: DuckLake has no PRIMARY KEY or UNIQUE constraints, so the tables are created from a
  reference schema (the migrations applied to an in-memory DuckDB: `reference()`), column by column,
  without constraints; a column a later migration adds is added with ALTER TABLE. The same
  `gpuledger/warehouse/sql/views/*.sql` and the same views.yml comments as the file.
- Idempotent writes: delete the rows with the incoming keys (the reference schema's primary keys),
  then insert, in one transaction.
- Several writers: DuckLake commits optimistically and lets concurrent INSERTs through, so every
  writing transaction first updates the single row of `lake_writer`: two writers that overlap
  conflict on that row, the later one's commit fails and it retries from the start (seeing the
  earlier one's rows). Nothing is lost, nothing duplicated (`push_ledger`; tests/integration/test_lake.py).
"""

from __future__ import annotations

import contextlib
import glob
import os
import random
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import duckdb

from gpuledger.errors import UserError
from gpuledger.warehouse import objectstore, sqlfiles
from gpuledger.warehouse.connect import NO_EXTENSION_DOWNLOADS, now, one_line, remember_secrets
from gpuledger.warehouse.connect import redact as connect_redact

PREFIX = "ducklake:"
ENV_DATA = "GPULEDGER_WAREHOUSE_DATA"
ALIAS = "lake"
#: tables of a file's own bookkeeping: never created in the lake (its schema is `reference()`'s)
FILE_ONLY = ("schema_migrations", "schema_views")
#: tables `push_ledger` does not copy: the file's bookkeeping, and its leases (a lease held on one
#: machine's file says nothing about who runs a sweep against the team warehouse)
LOCAL_ONLY = (*FILE_ONLY, "sweep_leases")
#: rows a commit may keep inlined in the catalog per table (DuckLake's data inlining,
#: https://ducklake.select/docs/stable/duckdb/advanced_features/data_inlining)
INLINE_ROWS = 10
#: how long a writer waits for the catalog's writer lock: the holder is always doing bounded work (one
#: batch, one schema change); waiting is better than failing a sweep's batch (measured: at load 30 on
#: 2 cores, creating the schema for 8 racing sweeps held it for minutes)
LOCK_WAIT_S = 600.0
#: how long a writer retries a transaction that conflicted with another writer
RETRY_S = 120.0


class LakeError(UserError):
    """The DuckLake warehouse cannot be reached or used."""


def is_lake(target: str | os.PathLike[str] | None) -> bool:
    return target is not None and str(target).startswith(PREFIX)


@dataclass(frozen=True)
class TableShape:
    name: str
    columns: list[tuple[str, str]]  # (name, DuckDB type)
    keys: list[str]


@cache
def reference() -> dict[str, TableShape]:
    """The tables as the migrations define them (applied to an in-memory DuckDB), with their keys."""
    from gpuledger.warehouse.migrate import migrate

    con = duckdb.connect(":memory:", config=NO_EXTENSION_DOWNLOADS)
    try:
        migrate(con)
        shapes: dict[str, TableShape] = {}
        for (table,) in sqlfiles.run(con, "tables_list").fetchall():
            cols = [(c, t) for tb, c, t in sqlfiles.run(con, "database_columns", {"database": "memory"}).fetchall()
                    if tb == table]
            keys = sqlfiles.run(con, "table_primary_key", {"table": table}).fetchall()
            shapes[table] = TableShape(table, [(c, t) for c, t in cols], list(keys[0][0]) if keys else [c for c, _ in cols])
        return shapes
    finally:
        con.close()


def _extension_dir() -> str:
    import duckdb_ext  # type: ignore[import-not-found]  # the pip packages duckdb-ext-*

    roots = [p for base in duckdb_ext.__path__ for p in glob.glob(os.path.join(base, "extensions"))]
    if not roots:
        raise LakeError("the DuckDB extension packages (duckdb-ext-ducklake, -postgres, -httpfs) are not "
                        "installed; reinstall gpuledger (`pip install --force-reinstall gpuledger` "
                        "or `uv tool install --reinstall .`), which brings them")
    return roots[0]


def connect(target: str, *, read_only: bool, data_path: str | None = None) -> duckdb.DuckDBPyConnection:
    """Returns a connection with the DuckLake catalog attached as the default database."""
    rest = target[len(PREFIX):]
    if not rest.startswith("postgres:"):
        raise LakeError(f"GPULEDGER_WAREHOUSE={target!r}: only ducklake:postgres:<connection string> is "
                        "supported (a PostgreSQL catalog)")
    data_path = data_path if data_path is not None else data_path_setting()
    remember_secrets(target)  # DuckDB's own error text quotes the connection string: redacted everywhere
    store = store_for(data_path)
    try:
        con = duckdb.connect(":memory:", config={"extension_directory": _extension_dir(), **NO_EXTENSION_DOWNLOADS})
        con.execute("LOAD ducklake")
        con.execute("LOAD postgres_scanner")
        con.execute("LOAD httpfs")  # a catalog whose data path is object storage cannot attach without it
        if store is not None:
            # the keys reach DuckDB as a temporary secret of this connection only (never printed:
            # objectstore.store_config hands every key to redact)
            con.execute(objectstore.secret_statement(store))
        # small commits (a lease renewal, one trial's record) stay in the catalog instead of making a
        # Parquet file each, the small-file explosion of many writers; `warehouse maintain` flushes them
        options = ["READ_ONLY"] if read_only else [f"DATA_INLINING_ROW_LIMIT {INLINE_ROWS}"]
        if data_path and not read_only:
            if store is None:
                Path(data_path).mkdir(parents=True, exist_ok=True)
            options.append(f"DATA_PATH {sqlfiles.literal(data_path)}")
        opts = f" ({', '.join(options)})" if options else ""
        _attach(con, f"ATTACH {sqlfiles.literal(target)} AS {ALIAS}{opts}")
        con.execute(f"USE {ALIAS}")
        if store is None:  # no data path given here: the catalog's own (set when it was created)
            store = store_for(_catalog_data_path(con))
            if store is not None:
                con.execute(objectstore.secret_statement(store))
    except duckdb.Error as err:
        where = f" (data on {store.describe()})" if store is not None else ""
        raise LakeError(f"cannot open the DuckLake warehouse {redact(target)}{where}: {one_line(err)}") from None
    return con


def _catalog_data_path(con: duckdb.DuckDBPyConnection) -> str | None:
    row = sqlfiles.run(con, "lake_data_path", {"alias": ALIAS}).fetchone()
    return row[0] if row else None


def data_path_setting() -> str | None:
    """The team warehouse's data path: `[warehouse] data_path` / `$GPULEDGER_WAREHOUSE_DATA`."""
    from gpuledger import settings

    value = settings.current().get("warehouse.data_path")  # $GPULEDGER_WAREHOUSE_DATA over the files
    return value or None


def store_for(data_path: str | None) -> objectstore.StoreConfig | None:
    """How to reach an object-storage data path (with the `[warehouse]` s3 settings), or None for a folder."""
    if not objectstore.is_object_store(data_path):
        return None
    from gpuledger import settings

    values = settings.current().values
    return objectstore.store_config(str(data_path), endpoint=values.get("warehouse.s3_endpoint"),
                                    region=values.get("warehouse.s3_region"),
                                    url_style=values.get("warehouse.s3_url_style"))


def _attach(con: duckdb.DuckDBPyConnection, statement: str, retry_s: float = 60.0) -> None:
    """ATTACH, again while another process is creating the same new catalog (its metadata tables
    'already exist' half-way, or a duplicate key): the first to create it wins, the others attach."""
    deadline = time.monotonic() + retry_s
    delay = 0.1
    while True:
        try:
            con.execute(statement)
            return
        except duckdb.Error as err:
            text = str(err).lower()
            racing = "already exists" in text or "duplicate key" in text or "conflict" in text
            if not racing or time.monotonic() >= deadline:
                raise
            time.sleep(delay * (1 + random.random()))
            delay = min(delay * 2, 2.0)


#: words of DuckLake/PostgreSQL errors that mean another writer committed first: the transaction is
#: retried from the start (DuckLake's commit of concurrent schema changes fails as "Failed to commit
#: DuckLake transaction" with PostgreSQL's duplicate key underneath, not always with "conflict")
_RETRYABLE = ("conflict", "failed to commit", "duplicate key", "could not serialize", "already exists")


def retryable(err: BaseException) -> bool:
    """True when `err` says a concurrent writer got there first (retry from the start)."""
    text = str(err).lower()
    return any(word in text for word in _RETRYABLE)


def redact(target: str) -> str:
    """The connection string without a password, for messages (`gpuledger.warehouse.connect.redact`)."""
    return connect_redact(target)


#: catalogs (their targets) this process found or made current: a later writable open of the same
#: catalog does not read every table's columns and every view's text again (a batch's open, measured
#: by benchmarks/team_scale.py); the schema only ever grows while a process runs
_CURRENT: set[str] = set()


def ensure_schema(con: duckdb.DuckDBPyConnection, *, retry_s: float = RETRY_S, lock: WriterLock | None = None,
                  key: str | None = None) -> None:
    """Creates missing tables and columns (no constraints), then the views and their comments (holding
    `lock` meanwhile, when given); again from the start while another process creating them at the same
    moment conflicts (bounded). A catalog that is already current is only read, and only once per process
    for a `key` (its target)."""
    if key is not None and key in _CURRENT:
        return
    deadline = time.monotonic() + retry_s
    delay = 0.05
    while True:
        try:
            if _schema_current(con):
                if key is not None:
                    _CURRENT.add(key)
                return
            if lock is not None:
                lock.acquire()
            try:
                _ensure_schema_once(con)
            finally:
                if lock is not None:
                    lock.release()
            if key is not None:
                _CURRENT.add(key)
            return
        except duckdb.Error as err:
            with _suppress():
                con.rollback()
            if not retryable(err) or time.monotonic() >= deadline:
                raise LakeError(f"cannot create the warehouse schema in the DuckLake catalog: {one_line(err)}") from None
            time.sleep(delay * (1 + random.random()))
            delay = min(delay * 2, 2.0)


def _schema_current(con: duckdb.DuckDBPyConnection) -> bool:
    """True when every table and column of the reference schema, `lake_writer` and every view (at its
    text's checksum) already exist: nothing to write."""
    have = {(t, c) for t, c, _ in sqlfiles.run(con, "database_columns", {"database": ALIAS}).fetchall()}
    tables = {t for t, _ in have}
    if "lake_writer" not in tables:
        return False
    for shape in reference().values():
        if shape.name not in FILE_ONLY and any((shape.name, c) not in have for c, _ in shape.columns):
            return False
    existing = dict(sqlfiles.run(con, "database_views", {"database": ALIAS}).fetchall())
    return all(f"-- gpuledger:{sqlfiles.checksum(sql)[:16]}" in existing.get(n, "")
               for n, sql in sqlfiles.views().items())


def _ensure_schema_once(con: duckdb.DuckDBPyConnection) -> None:
    have = {(t, c) for t, c, _ in sqlfiles.run(con, "database_columns", {"database": ALIAS}).fetchall()}
    tables = {t for t, _ in have}
    with transaction(con):
        sqlfiles.run(con, "lake_writer_create")
        sqlfiles.run(con, "lake_writer_seed", {"at": now()})
        for shape in reference().values():
            if shape.name in FILE_ONLY:
                continue
            if shape.name not in tables:
                cols = ", ".join(f"{sqlfiles.ident(c)} {t}" for c, t in shape.columns)
                con.execute(f"CREATE TABLE {sqlfiles.ident(shape.name)} ({cols})")
                continue
            for c, t in shape.columns:
                if (shape.name, c) not in have:
                    con.execute(f"ALTER TABLE {sqlfiles.ident(shape.name)} ADD COLUMN {sqlfiles.ident(c)} {t}")
    _sync_views(con)


def _sync_views(con: duckdb.DuckDBPyConnection) -> None:
    wanted = sqlfiles.views()
    existing = set(sqlfiles.run(con, "database_views", {"database": ALIAS}).fetchall())
    names = {n for n, _ in existing}
    docs = sqlfiles.view_docs()
    marker = {n: f"-- gpuledger:{sqlfiles.checksum(sql)[:16]}" for n, sql in wanted.items()}
    todo = [n for n in sqlfiles.dependency_order(wanted)
            if n not in names or not any(n == e and marker[n] in s for e, s in existing)]
    if not todo:
        return
    with transaction(con):
        for n in todo:
            con.execute(f"CREATE OR REPLACE VIEW {sqlfiles.ident(n)} AS\n{marker[n]}\n{wanted[n]}")
            doc = docs.get(n)
            if doc:
                con.execute(f"COMMENT ON VIEW {sqlfiles.ident(n)} IS {sqlfiles.literal(doc['description'])}")


def transaction(con: duckdb.DuckDBPyConnection):
    from gpuledger.warehouse import migrate

    return migrate.transaction(con)


#: the PostgreSQL advisory lock every gpuledger writer of one DuckLake catalog takes (a constant key:
#: one catalog per database, https://www.postgresql.org/docs/current/explicit-locking.html#ADVISORY-LOCKS)
WRITER_LOCK_KEY = 0x67706C6564676572 & 0x7FFFFFFFFFFFFFFF  # "gpledger"


class WriterLock:
    """Serializes the writers of one DuckLake catalog across processes and machines: a session-level
    PostgreSQL advisory lock on the catalog's own database, taken before each writing transaction and
    let go after its commit. DuckLake commits optimistically (a writer that overlaps another fails at
    COMMIT), which at 8+ concurrent sweeps means most commits fail and retry; waiting for the lock
    instead makes every commit succeed the first time. A writer that dies lets go with its PostgreSQL
    session. The `lake_writer` row stays as the safety net for writers that do not take the lock."""

    def __init__(self, target: str, *, shared: bool = False) -> None:
        self.dsn = target[len(PREFIX) + len("postgres:"):]
        self._pg: Any = None
        self._pid = os.getpid()
        self.shared = shared  # one per process and catalog (`for_target`): `close()` keeps its session
        #: the threads of this process take turns (the PostgreSQL lock is the session's, shared by them)
        self._threads = threading.RLock()
        self.waited_s = 0.0  # total seconds spent waiting for other writers (ingest lag)
        self.acquired = 0

    @classmethod
    def for_target(cls, target: str) -> WriterLock:
        """This process's writer lock of the catalog `target`: one PostgreSQL session for every writable
        open (a batch of the ingest service or of a sweep's writer no longer connects a second time)."""
        with _SHARED_GUARD:
            lock = _SHARED.get(target)
            if lock is None or lock._pid != os.getpid():
                lock = _SHARED[target] = cls(target, shared=True)
            return lock

    def _connection(self) -> Any:
        if self._pg is not None and self._pid != os.getpid():  # a forked child: never use the parent's session
            self._pg, self._pid = None, os.getpid()
        if self._pg is None or self._pg.closed:
            import psycopg2

            try:
                self._pg = psycopg2.connect(self.dsn, application_name=f"gpuledger writer {holder_name()}",
                                            connect_timeout=30)
            except psycopg2.Error as err:
                raise LakeError(f"cannot reach the DuckLake catalog's PostgreSQL for the writer lock: "
                                f"{connect_redact(str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__)}"
                                ) from None
            self._pg.autocommit = True
        return self._pg

    def acquire(self, wait_s: float = LOCK_WAIT_S) -> None:
        """Waits (bounded by `wait_s`, with backoff) until this process holds the writer lock."""
        import psycopg2

        deadline = time.monotonic() + wait_s
        started = time.monotonic()
        if not self._threads.acquire(timeout=wait_s):
            raise LakeError(f"another thread of this process held the team warehouse's writer lock for {wait_s:g} s")
        delay = 0.02
        while True:
            try:
                with self._connection().cursor() as cur:
                    cur.execute("SELECT pg_try_advisory_lock(%s)", (WRITER_LOCK_KEY,))
                    got = bool(cur.fetchone()[0])
            except psycopg2.Error as err:
                self._reset()
                self._threads.release()
                raise LakeError(f"the DuckLake catalog's writer lock: {connect_redact(str(err).strip())}") from None
            except BaseException:
                self._threads.release()
                raise
            if got:
                self.waited_s += time.monotonic() - started
                self.acquired += 1
                return
            if time.monotonic() >= deadline:
                self._threads.release()
                raise LakeError(f"another writer held the team warehouse's writer lock for {wait_s:g} s "
                                f"({self._holder()}); retry when it has finished")
            time.sleep(delay * (1 + random.random()))
            delay = min(delay * 2, 0.5)

    def _holder(self) -> str:
        try:
            with self._connection().cursor() as cur:
                cur.execute("SELECT a.application_name, a.client_addr, a.pid FROM pg_locks l "
                            "JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted")
                rows = cur.fetchall()
            return "; ".join(f"{r[0] or 'PostgreSQL pid ' + str(r[2])}" for r in rows) or "holder unknown"
        except Exception:  # only for the message
            return "holder unknown"

    def release(self) -> None:
        try:
            if self._pg is None or self._pg.closed:
                return
            import psycopg2

            try:
                with self._pg.cursor() as cur:
                    cur.execute("SELECT pg_advisory_unlock(%s)", (WRITER_LOCK_KEY,))
            except psycopg2.Error:
                self._reset()  # the session's end lets go of the lock
        finally:
            with contextlib.suppress(RuntimeError):  # not held by this thread (a reset lock)
                self._threads.release()

    def close(self) -> None:
        """Ends the lock's PostgreSQL session, unless it is the process's shared one (`for_target`)."""
        if not self.shared:
            self._reset()

    def _reset(self) -> None:
        if self._pg is not None:
            with contextlib.suppress(Exception):
                self._pg.close()
            self._pg = None


_SHARED: dict[str, WriterLock] = {}
_SHARED_GUARD = threading.Lock()


def claim_writer(con: duckdb.DuckDBPyConnection, holder: str) -> None:
    """Inside a transaction: touches the writers' row, so that overlapping writers conflict."""
    sqlfiles.run(con, "lake_writer_claim", {"holder": holder, "at": now()})


def holder_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def with_retries(con: duckdb.DuckDBPyConnection, body: Callable[[], Any], *, what: str,
                 retry_s: float = RETRY_S, lock: WriterLock | None = None) -> Any:
    """Runs `body` in a writing transaction (holding `lock` while it runs, when given), again from the
    start while it conflicts with another writer (bounded by `retry_s`); returns what `body` returns."""
    deadline = time.monotonic() + retry_s
    delay = 0.05
    attempts = 0
    while True:
        attempts += 1
        if lock is not None:
            lock.acquire()
        con.begin()
        try:
            claim_writer(con, holder_name())
            out = body()
            con.commit()
            return out
        except duckdb.Error as err:
            with _suppress():
                con.rollback()
            conflict = retryable(err)
            if conflict and time.monotonic() < deadline:
                time.sleep(delay * (1 + random.random()))
                delay = min(delay * 2, 2.0)
                continue
            raise LakeError(f"{what}: {one_line(err)}"
                            + (f" (after {attempts} attempts)" if conflict else "")) from None
        except BaseException:
            with _suppress():
                con.rollback()
            raise
        finally:
            if lock is not None:
                lock.release()


def _suppress():
    from contextlib import suppress

    return suppress(duckdb.Error)


def replace_rows(con: duckdb.DuckDBPyConnection, table: str, source: str, columns: list[str]) -> int:
    """Inside a transaction: deletes the rows of `table` whose keys appear in `source`, then inserts
    `source` (only `columns`); returns the rows inserted."""
    keys = [k for k in reference()[table].keys if k in columns]
    t, s = sqlfiles.ident(table), source
    if keys:
        key_list = ", ".join(sqlfiles.ident(k) for k in keys)
        con.execute(f"DELETE FROM {t} WHERE ({key_list}) IN (SELECT DISTINCT {key_list} FROM {s})")
    cols = ", ".join(sqlfiles.ident(c) for c in columns)
    con.execute(f"INSERT INTO {t} ({cols}) SELECT {cols} FROM {s}")
    return int(con.execute(f"SELECT count(*) FROM {s}").fetchone()[0])  # identifiers only, as core.py


@dataclass
class PushResult:
    file: str
    target: str
    rows: dict[str, int]
    attempts: int = 1

    def summary(self) -> str:
        moved = ", ".join(f"{t} {n}" for t, n in self.rows.items() if n)
        return f"pushed {self.file} into {redact(self.target)}: {moved or 'nothing (empty ledger)'}"


def push_ledger(file: str | os.PathLike[str], target: str, *, data_path: str | None = None) -> PushResult:
    """Copies every table of a local DuckDB ledger into the DuckLake warehouse `target`, idempotently:
    rows are replaced by key, so pushing twice (or from two processes at once) duplicates nothing."""
    path = Path(file)
    if not target[len(PREFIX):].startswith("postgres:"):
        connect(target, read_only=True)  # raises the one-line "only ducklake:postgres" message
    if not path.is_file():
        raise UserError(f"{path}: no such ledger file (a DuckDB warehouse file, e.g. .gpuledger/ledger.duckdb of a project)")
    con = connect(target, read_only=False, data_path=data_path)
    lock = WriterLock(target)
    try:
        ensure_schema(con, lock=lock)
        try:
            con.execute(f"ATTACH {sqlfiles.literal(str(path.resolve()))} AS src (READ_ONLY)")
        except duckdb.Error as err:
            raise UserError(f"{path}: cannot be read as a DuckDB ledger: {one_line(err)}") from None
        src_cols = {}
        for t, c, _ in sqlfiles.run(con, "database_columns", {"database": "src"}).fetchall():
            src_cols.setdefault(t, []).append(c)

        def body() -> dict[str, int]:
            rows: dict[str, int] = {}
            for shape in reference().values():
                if shape.name in LOCAL_ONLY or shape.name not in src_cols:
                    continue
                cols = [c for c, _ in shape.columns if c in src_cols[shape.name]]
                rows[shape.name] = replace_rows(con, shape.name, f"src.{sqlfiles.ident(shape.name)}", cols)
            return rows

        rows = with_retries(con, body, what=f"push {path}", lock=lock)
        return PushResult(str(path), target, rows)
    finally:
        lock.close()
        con.close()
