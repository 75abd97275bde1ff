"""The `Warehouse` connection object: open (lock-aware), transactions, queries, validated upserts.

The methods that write sweeps, trials, records and leases live in their own modules
(`sweeps`, `ingest`, `lease`) as mixins; `gpuledger.warehouse.Warehouse` combines them.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import duckdb

from gpuledger.errors import UserError
from gpuledger.settings import ENV_PATH, resolve_path
from gpuledger.warehouse import lake, sqlfiles
from gpuledger.warehouse import migrate as _migrate
from gpuledger.warehouse.connect import connect, one_line
from gpuledger.warehouse.lazy import polars as pl
from gpuledger.warehouse.records import frames_module


def _migrated_then_reopened(con: duckdb.DuckDBPyConnection, path: Path, lock_timeout_s: float | None,
                            config: dict[str, Any] | None) -> duckdb.DuckDBPyConnection:
    """A reader found the file behind this version's schema (a migration or a view written by an
    older gpuledger): brings it up to date through a short writer open, then reads again. When no
    writer can open it now (another process holds it, or the file is read-only), reads it as it is:
    a query of something newer then fails with its own one-line message."""
    con.close()
    try:
        writer = connect(path, read_only=False, timeout_s=lock_timeout_s)
    except (UserError, duckdb.Error, OSError):
        writer = None
    if writer is not None:
        try:
            _migrate.migrate(writer)  # MigrationChanged (an edited migration) is said, as to a writer
        finally:
            writer.close()
    return connect(path, read_only=True, timeout_s=lock_timeout_s, config=config)


class WarehouseBase:
    """A connection to the DuckDB warehouse file. Use as a context manager; see the package doc."""

    #: Test hook: called inside each ingest transaction just before COMMIT (crash tests set it).
    _before_commit: Callable[[str], None] | None = None

    #: "duckdb" (one file) or "ducklake" (the team warehouse)
    backend = "duckdb"
    #: DuckLake writers: the catalog's writer lock (`lake.WriterLock`), else None
    _writer_lock: Any = None

    def __init__(self, con: duckdb.DuckDBPyConnection, path: Path, read_only: bool):
        self._con = con
        self.path = path
        self.read_only = read_only

    # ---------------------------------------------------------------- connect

    @classmethod
    def open(cls, path: str | os.PathLike[str] | None = None, read_only: bool = False, *,
             lock_timeout_s: float | None = None, migrate: bool = True,
             config: dict[str, Any] | None = None) -> Any:
        """Returns an open warehouse (a context manager).

        `path`: the file; else the settings' warehouse (`$GPULEDGER_WAREHOUSE`, the project's
        `paths.warehouse`, else `.gpuledger/ledger.duckdb` of the project: `gpuledger.settings`). Writers create the parent folder and migrate (unless `migrate=False`).
        Readers (`read_only=True`) need the file to exist; one that finds the file behind this
        version's migrations or views (written by an older gpuledger) brings it up to date first
        through a short writer open, when one is possible. While another process holds the file
        (a writer, or for a writer any reader), retries for `lock_timeout_s` (default
        `$GPULEDGER_LOCK_TIMEOUT_S` or 10 s), then raises `WarehouseBusy` (a `UserError`) naming
        that process and whether it reads or writes. `config`: DuckDB settings of the connection.

        A `ducklake:postgres:<connection string>` (as `path` or `$GPULEDGER_WAREHOUSE`) opens the team
        warehouse on DuckLake instead (`gpuledger.warehouse.lake`): same tables, views and writes.
        """
        if path is None:  # the settings' warehouse: $GPULEDGER_WAREHOUSE, the project's paths.warehouse, ...
            from gpuledger import settings

            target: str | None = settings.current().warehouse
        else:
            target = str(path)
        if lake.is_lake(target):
            con = lake.connect(str(target), read_only=read_only)
            wh = cls(con, Path(lake.redact(str(target))), read_only)
            wh.backend = "ducklake"
            if not read_only:
                wh._writer_lock = lake.WriterLock.for_target(str(target))
            if not read_only and migrate:
                try:
                    lake.ensure_schema(con, lock=wh._writer_lock, key=str(target))
                except BaseException:
                    con.close()
                    raise
            return wh
        p = resolve_path(path)
        if read_only and not p.exists():
            raise UserError(f"no warehouse at {p} yet; run `gpuledger sweep SPEC` (or `gpuledger demo`) "
                            f"to create one (or point {ENV_PATH} at an existing file)")
        if not read_only:
            p.parent.mkdir(parents=True, exist_ok=True)
        con = connect(p, read_only=read_only, timeout_s=lock_timeout_s, config=config)
        if read_only and migrate and not _migrate.is_current(con):
            con = _migrated_then_reopened(con, p, lock_timeout_s, config)
        wh = cls(con, p, read_only)
        if not read_only and migrate:
            try:
                wh.migrate()
            except BaseException:
                con.close()
                raise
        return wh

    def close(self) -> None:
        """Closes the connection (idempotent)."""
        if self._writer_lock is not None:
            self._writer_lock.close()
        if self._con is not None:
            self._con.close()
            self._con = None  # type: ignore[assignment]

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _unregister(self, name: str) -> None:
        # when the transaction already failed, the real error is on its way: do not mask it
        with suppress(duckdb.Error):
            self._con.unregister(name)

    def _require_writer(self, what: str) -> None:
        if self.read_only:
            raise UserError(f"{what} needs a writable warehouse; open it with read_only=False")

    def _hook(self, where: str) -> None:
        hook = type(self)._before_commit
        if hook is not None:
            hook(where)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Runs the body in one transaction: COMMIT at the end, ROLLBACK on any exception.
        On DuckLake the transaction first claims the writers' row, so that a concurrent writer's
        commit conflicts instead of duplicating rows (`gpuledger.warehouse.lake`)."""
        lock = self._writer_lock
        if lock is not None:  # DuckLake: wait for the other writers (across machines) instead of conflicting
            lock.acquire()
        try:
            with _migrate.transaction(self._con, str(self.path)):
                if self.backend == "ducklake":
                    lake.claim_writer(self._con, lake.holder_name())
                yield
        finally:
            if lock is not None:
                lock.release()

    def _run(self, name: str, params: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
        """Runs the named query `gpuledger/warehouse/sql/queries/<name>.sql`; returns its rows (tuples)."""
        cur = sqlfiles.run(self._con, name, params)
        return cur.fetchall() if cur.description else []

    # ---------------------------------------------------------------- migrate

    def migrate(self) -> list[int]:
        """Applies the pending migrations in order, (re)creates changed views and applies views.yml
        as comments. Returns the versions applied now (empty when up to date). Raises
        `MigrationChanged` when an applied migration's file was edited since."""
        self._require_writer("migrate")
        return _migrate.migrate(self._con)

    # ---------------------------------------------------------------- query

    def query(self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None) -> pl.DataFrame:
        """Returns the result of one SQL query as a polars DataFrame (empty for a statement without rows).

        Raises `UserError` with DuckDB's one-line message (e.g. 'Binder Error: ...') on bad SQL.
        """
        try:
            rel = self._con.sql(sql, params=params)
            if rel is None:
                return pl.DataFrame()
            return rel.pl()
        except duckdb.Error as err:
            raise UserError(one_line(err)) from None

    def query_rows(self, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        """Returns the column names and rows (Python values) of one SQL query, with no frame built (polars
        is not imported: `gpuledger sql` starts without it); UserError with DuckDB's one line on bad SQL."""
        try:
            rel = self._con.sql(sql)
            if rel is None:
                return [], []
            return list(rel.columns), rel.fetchall()
        except duckdb.Error as err:
            raise UserError(one_line(err)) from None

    def query_bounded(self, sql: str, timeout_s: float, *, rows: bool = False) -> Any:
        """Returns `query(sql)` (`query_rows(sql)` when `rows`), stopped (DuckDB's `interrupt`) after
        `timeout_s` seconds or at Ctrl-C, either way a one-line UserError (exit code 130 for Ctrl-C). The
        query runs on a worker thread so that the main thread, where Python's signals arrive, stays free
        to stop it."""
        outcome: dict[str, Any] = {}

        def work() -> None:
            try:
                outcome["df"] = self.query_rows(sql) if rows else self.query(sql)
            except BaseException as err:  # noqa: BLE001 - handed to the caller's thread
                outcome["err"] = err

        worker = threading.Thread(target=work, name="gpuledger-sql", daemon=True)
        deadline = time.monotonic() + timeout_s
        worker.start()
        try:
            while worker.is_alive() and time.monotonic() < deadline:
                worker.join(min(0.1, max(0.0, deadline - time.monotonic())))
        except KeyboardInterrupt:
            self._stop(worker)
            raise UserError("interrupted (Ctrl-C): the query was stopped", exit_code=130) from None
        if worker.is_alive():
            self._stop(worker)
            raise UserError(f"the query ran longer than {timeout_s:g} s and was stopped (the setting sql.timeout_s, "
                            "GPULEDGER_SQL_TIMEOUT_S, sets the limit)")
        if "err" in outcome:
            raise outcome["err"]
        return outcome["df"]

    def _stop(self, worker: threading.Thread, within_s: float = 10.0) -> None:
        """Interrupts the connection until `worker`'s query ends (at most `within_s`): an interrupt that
        comes before DuckDB has started the query is lost, so it is repeated every 0.1 s."""
        deadline = time.monotonic() + within_s
        while worker.is_alive() and time.monotonic() < deadline:
            self._con.interrupt()
            worker.join(0.1)

    def query_named(self, name: str, params: dict[str, Any] | None = None) -> pl.DataFrame:
        """Runs the named query `gpuledger/warehouse/sql/queries/<name>.sql` with DuckDB named parameters (`$week`).

        Every SQL statement of gpuledger lives in a .sql file under warehouse/ (views, migrations and
        these named queries); callers pass values, never SQL text.
        """
        return self.query(sqlfiles.named_sql(name), params or None)

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None) -> None:
        """Runs statements that return nothing (writers only; prefer the typed methods)."""
        try:
            self._con.execute(sql, params)
        except duckdb.Error as err:
            raise UserError(one_line(err)) from None

    def scalar(self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None) -> Any:
        """Returns the first column of the first row (None when there is no row)."""
        rows = self._con.execute(sql, params).fetchall()
        return rows[0][0] if rows else None

    def tables(self) -> list[str]:
        """Returns the base tables of the warehouse."""
        return [n for (n,) in self._run("tables_list")]

    def views(self) -> dict[str, list[str]]:
        """Returns {view name: [column names]} of the warehouse's views."""
        out: dict[str, list[str]] = {}
        for view, col in self._run("views_columns"):
            out.setdefault(view, []).append(col)
        return out

    def export_parquet(self, out_dir: str | os.PathLike[str]) -> list[Path]:
        """Writes every base table to `out_dir/<table>.parquet`; returns the files written."""
        out = Path(out_dir)
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise UserError(f"cannot create export folder {out}: {err.strerror or err}") from None
        written = []
        for table in self.tables():
            target = out / f"{table}.parquet"
            # COPY takes no parameters: identifier and path are quoted
            self._con.execute(f"COPY {sqlfiles.ident(table)} TO {sqlfiles.literal(str(target))} (FORMAT parquet)")
            written.append(target)
        return written

    # ---------------------------------------------------------------- measured spot preemption

    def spot_preemption_stats(self, cloud: str | None = None, accelerator: str | None = None) -> tuple[float, int]:
        """Returns (spot_hours, preemptions) measured on spot runs, optionally of one cloud/accelerator.

        spot_hours = sum of wall_s/3600 of spot runs; the planner's measured preemption rate is
        preemptions / spot_hours (per hour), when spot_hours is large enough to trust.
        """
        hours, n = self._run("runs_spot_stats", {"cloud": cloud, "accelerator": accelerator})[0]
        return float(hours), int(n)

    def measured_preemption(self) -> dict[tuple[str, str], tuple[float, int]]:
        """Returns {(cloud, accelerator): (spot_hours, preemptions)} of every spot run measured: the
        planner's `measured_preemption` input (it trusts a pair once its spot hours pass a threshold)."""
        return {(c, a): (float(h), int(n)) for c, a, h, n in self._run("runs_spot_by_offer")}

    # ---------------------------------------------------------------- generic validated upsert

    def write_frame(self, table: str, df: pl.DataFrame, *, replace_where: str | None = None) -> int:
        """Validates `df` with `table`'s pandera schema and upserts it (by primary key) in one transaction.

        `replace_where`: a key column; rows of the table whose value of that column appears in `df`
        are deleted first (children of a run/sweep replaced as a whole). Returns the rows written.
        """
        self._require_writer("write")
        df = frames_module().validate_frame(table, df)
        with self.transaction():
            self._upsert(table, df, replace_where=replace_where)
        return df.height

    # The three statement shapes below are generated from identifiers only (a table of the
    # migrations, its primary key read from DuckDB, the columns of a validated frame): the one
    # place where the warehouse builds SQL instead of reading it from gpuledger/warehouse/sql/queries/.

    def _delete_in(self, table: str, column: str, source: str) -> None:
        """Inside a transaction: deletes the rows of `table` whose `column` appears in `source`."""
        t, c = sqlfiles.ident(table), sqlfiles.ident(column)
        self._con.execute(f"DELETE FROM {t} WHERE {c} IN (SELECT DISTINCT {c} FROM {sqlfiles.ident(source)})")

    def _insert(self, table: str, df: pl.DataFrame) -> None:
        """Inside a transaction: plain INSERT of a validated frame (Arrow scan, no conflict check)."""
        name = f"_in_{table}"
        self._con.register(name, df)
        try:
            cols = ", ".join(sqlfiles.ident(c) for c in df.columns)
            self._con.execute(f"INSERT INTO {sqlfiles.ident(table)} ({cols}) SELECT {cols} FROM {sqlfiles.ident(name)}")
        finally:
            self._unregister(name)

    def _upsert(self, table: str, df: pl.DataFrame, *, replace_where: str | None = None,
                update: dict[str, str] | None = None, keep: Sequence[str] = ()) -> None:
        """Inside a transaction: writes a validated frame. `update` overrides the SET expression of
        a column on conflict; `keep` lists columns left as they are on conflict."""
        if df.height == 0:
            return
        if self.backend == "ducklake":  # no primary keys there: replace the incoming keys' rows
            name = f"_in_{table}"
            self._con.register(name, df)
            try:
                lake.replace_rows(self._con, table, sqlfiles.ident(name), list(df.columns))
            finally:
                self._unregister(name)
            return
        if replace_where:
            name = f"_in_{table}"
            self._con.register(name, df)
            try:
                self._delete_in(table, replace_where, name)
            finally:
                self._unregister(name)
            self._insert(table, df)
            return
        name = f"_in_{table}"
        self._con.register(name, df)
        try:
            cols = df.columns
            col_list = ", ".join(sqlfiles.ident(c) for c in cols)
            keys = list(self._run("table_primary_key", {"table": table})[0][0])
            update = update or {}
            sets = [f"{sqlfiles.ident(c)} = {update.get(c, f'excluded.{sqlfiles.ident(c)}')}"
                    for c in cols if c not in keys and c not in keep]
            target = ", ".join(sqlfiles.ident(k) for k in keys)
            conflict = (f"ON CONFLICT ({target}) DO UPDATE SET {', '.join(sets)}" if sets
                        else f"ON CONFLICT ({target}) DO NOTHING")
            self._con.execute(f"INSERT INTO {sqlfiles.ident(table)} ({col_list}) SELECT {col_list} "
                              f"FROM {sqlfiles.ident(name)} {conflict}")
        finally:
            self._unregister(name)
