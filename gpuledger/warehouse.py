"""The DuckDB warehouse: the only module of gpuledger that imports `duckdb`.

Connect (read-only for readers), migrate (`warehouse/migrations/NNN_*.sql` in order, recorded in
`schema_migrations`; views from `warehouse/views/*.sql`, documented in `warehouse/views.yml`),
ingest (validate with the pandera schemas of `gpuledger.frames`, then upsert in ONE transaction
per batch), query to polars.

Usage (a writer; writers migrate on open)::

    with Warehouse.open() as wh:                       # GPULEDGER_WAREHOUSE or warehouse/ledger.duckdb
        wh.register_sweep(sweep_id="lora-grid-1a2b3c4d", name="lora-grid", project="p", owner="o",
                          objective_metric="eval_loss", objective_goal="minimize", started_at=now)
        wh.upsert_trials("lora-grid-1a2b3c4d", [{"trial_id": "ab12", "index": 0, "params": {...}}])
        wh.ingest_records(records)                     # result records (dicts) of the launchers
        wh.finish_sweep("lora-grid-1a2b3c4d", status="succeeded")

    with Warehouse.open(read_only=True) as wh:         # a reader
        df = wh.query("select * from v_sweep_roi where sweep_id = ?", ["lora-grid-1a2b3c4d"])

DuckDB allows ONE writing process and no reader while it writes: hold a writer only for the
duration of a batch (open, write, close) so `gpuledger sql` and reports can read in between.
A second process that finds the file locked retries for a few seconds
(`GPULEDGER_LOCK_TIMEOUT_S`, default 3) and then gets a `UserError` naming the process that holds it.

Timestamps are stored as naive UTC (`TIMESTAMP`); aware datetimes are converted to UTC first.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from gpuledger.errors import UserError
from gpuledger.paths import ENV_PATH, resolve_path

ENV_LOCK_TIMEOUT = "GPULEDGER_LOCK_TIMEOUT_S"
#: `warehouse/` of the source tree: migrations, views, views.yml
SQL_ROOT = Path(__file__).resolve().parent.parent / "warehouse"
MIGRATIONS_DIR = SQL_ROOT / "migrations"
VIEWS_DIR = SQL_ROOT / "views"
VIEWS_DOC = SQL_ROOT / "views.yml"
QUERIES_DIR = SQL_ROOT / "queries"

#: base tables, in the order `export_parquet` writes them
TABLES = ("schema_migrations", "schema_views", "specs", "sweeps", "trials", "runs", "final_metrics", "metrics",
          "billing", "prices")

#: statement types `gpuledger sql` runs without `--write` (names of duckdb.StatementType)
READ_ONLY_STATEMENTS = frozenset({"SELECT", "EXPLAIN", "PRAGMA", "CALL", "SET", "VARIABLE_SET"})

_MIGRATION_RE = re.compile(r"^(\d{3,})_([a-z0-9_]+)\.sql$")
_LOCK_PID_RE = re.compile(r"\(PID (\d+)\)")
_TERMINAL_TRIAL = ("succeeded", "failed", "oom", "preempted", "cancelled", "skipped-budget")


# --------------------------------------------------------------------------------------------
# results


@dataclass
class Rejection:
    """A record that was not ingested: where it came from and why."""

    source: str  # file path, or "record[3]" for an in-memory record
    reason: str


@dataclass
class IngestResult:
    """What one `ingest_records` / `ingest_landing` call did.

    `ingested`: records written (new or replaced); `new`: of those, run ids not in the warehouse
    before; `rejected`: the records refused, each with its reason; `metric_rows`, `billing_rows`:
    rows written to `metrics`/`billing`.
    """

    ingested: int = 0
    new: int = 0
    metric_rows: int = 0
    billing_rows: int = 0
    rejected: list[Rejection] = field(default_factory=list)
    run_ids: list[str] = field(default_factory=list)

    def summary(self) -> str:
        """Returns one line of counts, e.g. `3 records ingested (2 new), 1 rejected`."""
        return (f"{self.ingested} records ingested ({self.new} new, {self.metric_rows} metric rows), "
                f"{len(self.rejected)} rejected")


# --------------------------------------------------------------------------------------------
# helpers on plain values


def utc_naive(value: datetime | str | None) -> datetime | None:
    """Returns `value` as a naive UTC datetime (aware values are converted; naive ones taken as UTC)."""
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if value.tzinfo is not None:
        value = value.astimezone(UTC).replace(tzinfo=None)
    return value


def _json_text(value: Any) -> str | None:
    """Returns `value` as JSON text (a str is taken to be JSON already); None stays None."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, default=str)


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def _lock_holder(message: str) -> str:
    """Returns 'process 1234 (python -m gpuledger sweep ...)' from DuckDB's lock error message."""
    m = _LOCK_PID_RE.search(message)
    if not m:
        return "another process"
    pid = int(m.group(1))
    what = ""
    try:
        import psutil

        proc = psutil.Process(pid)
        cmd = " ".join(proc.cmdline()) or proc.name()
        what = f" ({cmd[:160]})"
    except Exception:  # gone, or not ours to inspect
        pass
    return f"process {pid}{what}"


def writing_statements(sql: str) -> list[str]:
    """Returns the types of the statements of `sql` that are not read-only (e.g. ['INSERT']).

    Uses DuckDB's own parser (`extract_statements`); raises `UserError` on a syntax error.
    """
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as err:
        raise UserError(_one_line(err)) from None
    if not statements:
        raise UserError("no SQL statement given")
    return [s.type.name for s in statements if s.type.name not in READ_ONLY_STATEMENTS]


def _one_line(err: BaseException) -> str:
    """Returns the first line of a DuckDB error (e.g. 'Binder Error: column "x" not found ...')."""
    text = str(err).strip()
    first = text.splitlines()[0] if text else type(err).__name__
    # DuckDB adds 'LINE 1: ...' context on later lines; keep the first line, plus a candidate hint
    hint = next((ln.strip() for ln in text.splitlines()[1:] if ln.strip().startswith("Candidate")), "")
    return f"{first} {hint}".strip()


def example_record(
    run_id: str,
    trial_id: str,
    *,
    sweep_id: str | None = None,
    started_at: datetime | str = "2026-01-05T10:00:00",
    wall_s: float = 600.0,
    status: str = "succeeded",
    attempt: int = 1,
    launcher: str = "local",
    accelerator: str | None = None,
    gpus: int = 0,
    cloud: str | None = None,
    spot: bool = False,
    usd_per_hour: float = 0.0,
    on_demand_usd_per_hour: float | None = None,
    source: str | None = None,
    final_metrics: dict[str, float] | None = None,
    metrics: list[dict[str, Any]] | None = None,
    peak_gpu_mem_gib: float | None = None,
    peak_rss_gib: float | None = 1.0,
    preemptions: int = 0,
    params: dict[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """Returns a valid result-record dict (schema gpuledger.result/1) built from a few literals.

    For fixtures (tests of reports, flows): ended_at = started_at + wall_s; one billing line of
    `wall_s` hours at `usd_per_hour` (source 'local' for the local launcher, else 'catalog');
    `extra` sets any other record field (region, instance_type, reason, exit_code, ...).
    """
    start = utc_naive(started_at)
    assert start is not None
    hours = wall_s / 3600.0
    record: dict[str, Any] = {
        "schema": "gpuledger.result/1",
        "run_id": run_id,
        "sweep_id": sweep_id,
        "trial_id": trial_id,
        "attempt": attempt,
        "launcher": launcher,
        "cloud": cloud,
        "accelerator": accelerator,
        "gpus": gpus,
        "spot": spot,
        "started_at": start.isoformat() + "Z",
        "ended_at": (start + timedelta(seconds=wall_s)).isoformat() + "Z",
        "wall_s": wall_s,
        "exit_code": 0 if status == "succeeded" else 1,
        "status": status,
        "peak_gpu_mem_gib": peak_gpu_mem_gib,
        "peak_rss_gib": peak_rss_gib,
        "preemptions": preemptions,
        "params": params or {},
        "metrics": metrics or [],
        "final_metrics": final_metrics or {},
        "billing": [
            {
                "source": source or ("local" if launcher == "local" else "catalog"),
                "description": "fixture",
                "usd_per_hour": usd_per_hour,
                "hours": hours,
                "cost_usd": usd_per_hour * hours,
                "spot": spot,
                "on_demand_usd_per_hour": on_demand_usd_per_hour,
            }
        ],
    }
    record.update(extra)
    return record


# --------------------------------------------------------------------------------------------
# result records -> frames


def _record_reason(data: Any) -> tuple[Any, str | None]:
    """Returns (ResultRecord, None) or (None, reason) for one decoded JSON value."""
    from pydantic import ValidationError

    from gpuledger.record import SCHEMA, ResultRecord, parse_record

    if isinstance(data, ResultRecord):
        return data, None
    if not isinstance(data, dict):
        return None, f"not a result record: expected a JSON object, got {type(data).__name__}"
    version = data.get("schema")
    if version != SCHEMA:
        return None, (f"unknown schema version {version!r}: this gpuledger reads {SCHEMA!r}; "
                      "upgrade gpuledger or re-write the record")
    try:
        return parse_record(data), None
    except ValidationError as err:
        problems = []
        for e in err.errors():
            loc = ".".join(str(p) for p in e["loc"]) or "(record)"
            got = "" if e["type"] == "missing" else f" (got {e.get('input')!r:.60})"
            problems.append(f"{loc}: {e['msg']}{got}")
        return None, "invalid result record: " + "; ".join(problems)


def records_to_frames(records: Sequence[Any], ingested_at: datetime | None = None) -> dict[str, pl.DataFrame]:
    """Returns the frames (runs, final_metrics, metrics, billing) of validated `ResultRecord`s."""
    ingested_at = ingested_at or _now()
    runs: dict[str, list[Any]] = {c: [] for c in _frames().columns("runs")}
    fm: dict[str, list[Any]] = {"run_id": [], "name": [], "value": []}
    mt: dict[str, list[Any]] = {"run_id": [], "name": [], "seq": [], "step": [], "t_s": [], "value": []}
    bl: dict[str, list[Any]] = {c: [] for c in _frames().columns("billing")}
    for r in records:
        row = {
            "run_id": r.run_id, "sweep_id": r.sweep_id, "trial_id": r.trial_id, "attempt": r.attempt,
            "launcher": r.launcher, "cloud": r.cloud, "region": r.region, "instance_type": r.instance_type,
            "accelerator": r.accelerator, "gpus": r.gpus, "spot": r.spot,
            "started_at": utc_naive(r.started_at), "ended_at": utc_naive(r.ended_at), "wall_s": r.wall_s,
            "exit_code": r.exit_code, "status": r.status, "reason": r.reason,
            "peak_gpu_mem_gib": r.peak_gpu_mem_gib, "peak_gpu_util_pct": r.peak_gpu_util_pct,
            "peak_rss_gib": r.peak_rss_gib, "preemptions": r.preemptions, "recoveries": r.recoveries,
            "hostname": r.hostname, "command": r.command, "params": _json_text(r.params),
            "stderr_tail": r.stderr_tail, "cost_usd": float(r.cost_usd), "ingested_at": ingested_at,
        }
        for k, v in row.items():
            runs[k].append(v)
        for name, value in r.final_metrics.items():
            fm["run_id"].append(r.run_id)
            fm["name"].append(name)
            fm["value"].append(value)
        seq: dict[str, int] = {}
        for p in r.metrics:
            n = seq.get(p.name, 0)
            seq[p.name] = n + 1
            mt["run_id"].append(r.run_id)
            mt["name"].append(p.name)
            mt["seq"].append(n)
            mt["step"].append(p.step)
            mt["t_s"].append(p.t_s)
            mt["value"].append(p.value)
        for i, line in enumerate(r.billing):
            for k, v in (("run_id", r.run_id), ("line_no", i), ("source", line.source),
                         ("description", line.description), ("usd_per_hour", line.usd_per_hour),
                         ("hours", line.hours), ("cost_usd", line.cost_usd), ("spot", line.spot),
                         ("on_demand_usd_per_hour", line.on_demand_usd_per_hour)):
                bl[k].append(v)

    def frame(table: str, data: dict[str, list[Any]]) -> pl.DataFrame:
        empty = _frames().empty_frame(table)
        return pl.DataFrame(data, schema=empty.schema, strict=False)

    return {"runs": frame("runs", runs), "final_metrics": frame("final_metrics", fm),
            "metrics": frame("metrics", mt), "billing": frame("billing", bl)}


# --------------------------------------------------------------------------------------------
# the warehouse


class Warehouse:
    """A connection to the DuckDB warehouse file. Use as a context manager; see the module doc."""

    #: Test hook: called inside each ingest transaction just before COMMIT (crash tests set it).
    _before_commit: Callable[[str], None] | None = None

    def __init__(self, con: duckdb.DuckDBPyConnection, path: Path, read_only: bool):
        self._con = con
        self.path = path
        self.read_only = read_only

    # ---------------------------------------------------------------- connect

    @classmethod
    def open(cls, path: str | os.PathLike[str] | None = None, read_only: bool = False, *,
             lock_timeout_s: float | None = None, migrate: bool = True) -> Warehouse:
        """Returns an open warehouse (a context manager).

        `path`: the file; else `$GPULEDGER_WAREHOUSE`; else `warehouse/ledger.duckdb` under the
        current directory. Writers create the parent folder and migrate (unless `migrate=False`).
        Readers (`read_only=True`) need the file to exist. While another process holds the file,
        retries for `lock_timeout_s` (default `$GPULEDGER_LOCK_TIMEOUT_S` or 3 s), then raises
        `UserError` naming that process.
        """
        p = resolve_path(path)
        if read_only and not p.exists():
            raise UserError(f"no warehouse at {p} yet; run `make demo` or `gpuledger sweep SPEC` "
                            f"to create one (or point {ENV_PATH} at an existing file)")
        if not read_only:
            p.parent.mkdir(parents=True, exist_ok=True)
        if lock_timeout_s is None:
            lock_timeout_s = float(os.environ.get(ENV_LOCK_TIMEOUT, "3"))
        deadline = time.monotonic() + lock_timeout_s
        delay = 0.05
        while True:
            try:
                con = duckdb.connect(str(p), read_only=read_only)
                break
            except duckdb.Error as err:
                text = str(err)
                if "lock" in text.lower() and time.monotonic() < deadline:
                    time.sleep(delay)
                    delay = min(delay * 2, 0.5)
                    continue
                if "lock" in text.lower():
                    raise UserError(
                        f"warehouse {p} is locked by {_lock_holder(text)}, which is writing to it "
                        f"(waited {lock_timeout_s:g} s); wait for it to finish and retry, or stop that "
                        f"process if it is stuck") from None
                if "different configuration" in text:
                    raise UserError(f"warehouse {p} is already open in this process with another mode "
                                    f"(read-only vs read-write); close it first") from None
                raise UserError(f"cannot open warehouse {p}: {_one_line(err)}") from None
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
        if self._con is not None:
            self._con.close()
            self._con = None  # type: ignore[assignment]

    def __enter__(self) -> Warehouse:
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

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Runs the body in one transaction: COMMIT at the end, ROLLBACK on any exception."""
        self._con.begin()
        try:
            yield
        except BaseException:
            self._con.rollback()
            raise
        self._con.commit()

    # ---------------------------------------------------------------- migrate

    def migrate(self) -> list[int]:
        """Applies the pending migrations in order and (re)creates changed views.

        Returns the versions applied now (empty when up to date: migrating twice is a no-op).
        Each migration runs in its own transaction together with its `schema_migrations` row.
        """
        self._require_writer("migrate")
        con = self._con
        con.execute("""CREATE TABLE IF NOT EXISTS schema_migrations (
            version INTEGER PRIMARY KEY, name VARCHAR NOT NULL, checksum VARCHAR NOT NULL,
            applied_at TIMESTAMP NOT NULL)""")
        applied = {v for (v,) in con.execute("SELECT version FROM schema_migrations").fetchall()}
        done: list[int] = []
        for version, name, sql in _migrations():
            if version in applied:
                continue
            with self.transaction():
                con.execute(sql)
                con.execute("INSERT INTO schema_migrations VALUES (?, ?, ?, ?)",
                            [version, name, hashlib.sha256(sql.encode()).hexdigest(), _now()])
            done.append(version)
        self._sync_views()
        return done

    def _sync_views(self) -> None:
        """Creates or replaces every view of `warehouse/views/` whose SQL changed; drops removed ones."""
        con = self._con
        con.execute("""CREATE TABLE IF NOT EXISTS schema_views (
            name VARCHAR PRIMARY KEY, checksum VARCHAR NOT NULL, created_at TIMESTAMP NOT NULL)""")
        known = dict(con.execute("SELECT name, checksum FROM schema_views").fetchall())
        existing = {n for (n,) in con.execute(
            "SELECT view_name FROM duckdb_views() WHERE NOT internal AND schema_name = 'main'").fetchall()}
        wanted = {name: sql for name, sql in _views()}
        todo = {n: s for n, s in wanted.items()
                if known.get(n) != _checksum(s) or n not in existing}
        stale = [n for n in known if n not in wanted]
        if not todo and not stale:
            return
        with self.transaction():
            for n in stale:
                con.execute(f'DROP VIEW IF EXISTS "{n}"')
                con.execute("DELETE FROM schema_views WHERE name = ?", [n])
            # a view may use other views: create them in dependency order (names mentioned in the SQL)
            for n in _dependency_order(wanted):
                if n in todo:
                    con.execute(f'CREATE OR REPLACE VIEW "{n}" AS\n{todo[n]}')
                    con.execute("INSERT OR REPLACE INTO schema_views VALUES (?, ?, ?)", [n, _checksum(todo[n]), _now()])

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
            raise UserError(_one_line(err)) from None

    def query_named(self, name: str, params: dict[str, Any] | None = None) -> pl.DataFrame:
        """Runs the named query `warehouse/queries/<name>.sql` with DuckDB named parameters (`$week`).

        Every SQL statement of gpuledger lives in a .sql file under warehouse/ (views, migrations and
        these named queries); callers pass values, never SQL text.
        """
        return self.query(named_sql(name), params or None)

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None) -> None:
        """Runs statements that return nothing (writers only; prefer the typed methods)."""
        try:
            self._con.execute(sql, params)
        except duckdb.Error as err:
            raise UserError(_one_line(err)) from None

    def scalar(self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None) -> Any:
        """Returns the first column of the first row (None when there is no row)."""
        rows = self._con.execute(sql, params).fetchall()
        return rows[0][0] if rows else None

    def tables(self) -> list[str]:
        """Returns the base tables of the warehouse."""
        return [n for (n,) in self._con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main' ORDER BY table_name").fetchall()]

    def views(self) -> dict[str, list[str]]:
        """Returns {view name: [column names]} of the warehouse's views."""
        rows = self._con.execute("""
            SELECT c.table_name, c.column_name FROM information_schema.columns c
            JOIN duckdb_views() v ON v.view_name = c.table_name AND NOT v.internal AND v.schema_name = 'main'
            WHERE c.table_schema = 'main' ORDER BY c.table_name, c.ordinal_position""").fetchall()
        out: dict[str, list[str]] = {}
        for view, col in rows:
            out.setdefault(view, []).append(col)
        return out

    def export_parquet(self, out_dir: str | os.PathLike[str]) -> list[Path]:
        """Writes every base table to `out_dir/<table>.parquet`; returns the files written."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        written = []
        for table in self.tables():
            target = out / f"{table}.parquet"
            self._con.execute(f"COPY \"{table}\" TO '{_sql_str(str(target))}' (FORMAT parquet)")
            written.append(target)
        return written

    # ---------------------------------------------------------------- generic validated upsert

    def write_frame(self, table: str, df: pl.DataFrame, *, replace_where: str | None = None) -> int:
        """Validates `df` with `table`'s pandera schema and upserts it (by primary key) in one transaction.

        `replace_where`: a key column; rows of the table whose value of that column appears in `df`
        are deleted first (children of a run/sweep replaced as a whole). Returns the rows written.
        """
        self._require_writer("write")
        df = _frames().validate_frame(table, df)
        with self.transaction():
            self._upsert(table, df, replace_where=replace_where)
        return df.height

    def _upsert(self, table: str, df: pl.DataFrame, *, replace_where: str | None = None,
                update: dict[str, str] | None = None, keep: Sequence[str] = ()) -> None:
        """Inside a transaction: writes a validated frame. `update` overrides the SET expression of
        a column on conflict; `keep` lists columns left as they are on conflict."""
        if df.height == 0:
            return
        name = f"_in_{table}"
        self._con.register(name, df)
        try:
            cols = df.columns
            col_list = ", ".join(f'"{c}"' for c in cols)
            if replace_where:
                self._con.execute(
                    f'DELETE FROM "{table}" WHERE "{replace_where}" IN (SELECT DISTINCT "{replace_where}" FROM {name})')
                self._con.execute(f'INSERT INTO "{table}" ({col_list}) SELECT {col_list} FROM {name}')
                return
            keys = _primary_key(self._con, table)
            update = update or {}
            sets = [f'"{c}" = {update.get(c, f"excluded.{c}")}' for c in cols if c not in keys and c not in keep]
            conflict = f'ON CONFLICT ({", ".join(keys)}) DO UPDATE SET {", ".join(sets)}' if sets else \
                f'ON CONFLICT ({", ".join(keys)}) DO NOTHING'
            self._con.execute(f'INSERT INTO "{table}" ({col_list}) SELECT {col_list} FROM {name} {conflict}')
        finally:
            self._unregister(name)

    # ---------------------------------------------------------------- sweeps and trials (the flow)

    def register_sweep(
        self,
        *,
        sweep_id: str,
        name: str,
        project: str | None = None,
        owner: str | None = None,
        kind: str = "sweep",
        method: str | None = None,
        model: str | None = None,
        launcher: str | None = None,
        objective_metric: str | None = None,
        objective_goal: str | None = "minimize",
        objective_target: float | None = None,
        budget_usd: float | None = None,
        deadline_s: float | None = None,
        max_parallel: int | None = None,
        forced: bool = False,
        started_at: datetime | str | None = None,
        status: str = "running",
        spec_path: str | os.PathLike[str] | None = None,
        spec_yaml: str | None = None,
        spec_json: dict[str, Any] | str | None = None,
        plan_json: dict[str, Any] | str | None = None,
        prices: pl.DataFrame | Sequence[dict[str, Any]] | None = None,
    ) -> str:
        """Inserts or updates a sweep (and its spec and price snapshot) in one transaction; returns its spec_id.

        A second call with the same `sweep_id` (a re-run/resume) updates every field, keeps the
        EARLIEST `started_at`, clears `ended_at` and sets `status` (default 'running'). `prices`:
        the offers the plan used, rows with any of cloud, region, instance_type, accelerator,
        accelerator_count (or count/gpus), spot, usd_per_hour, on_demand_usd_per_hour, source,
        as_of; other keys go to the JSON column `extra`. They replace the sweep's earlier snapshot.
        `spec_json`/`plan_json` take a dict (stored as JSON) or JSON text.
        """
        self._require_writer("register_sweep")
        now = _now()
        spec_json_text = _json_text(spec_json)
        basis = spec_json_text or spec_yaml or sweep_id
        spec_id = hashlib.sha256(basis.encode()).hexdigest()
        spec_df = pl.DataFrame([{
            "spec_id": spec_id, "name": name, "kind": kind,
            "path": str(spec_path) if spec_path is not None else None,
            "yaml_text": spec_yaml, "spec_json": spec_json_text, "first_seen_at": now,
        }], schema=_frames().empty_frame("specs").schema)
        sweep_row = {
            "sweep_id": sweep_id, "name": name, "project": project, "owner": owner, "spec_id": spec_id,
            "spec_path": str(spec_path) if spec_path is not None else None, "kind": kind,
            "method": method, "model": model, "launcher": launcher, "objective_metric": objective_metric,
            "objective_goal": objective_goal, "objective_target": objective_target,
            "budget_usd": budget_usd, "deadline_s": deadline_s, "max_parallel": max_parallel,
            "forced": bool(forced), "started_at": utc_naive(started_at) or now, "ended_at": None,
            "status": status, "plan_json": _json_text(plan_json), "updated_at": now,
        }
        sweep_df = pl.DataFrame([sweep_row], schema=_frames().empty_frame("sweeps").schema)
        try:
            spec_df = _frames().validate_frame("specs", spec_df)
            sweep_df = _frames().validate_frame("sweeps", sweep_df)
            price_df = _frames().validate_frame("prices", _price_frame(sweep_id, prices)) if prices is not None else None
        except _frames().FrameError as err:
            raise UserError(f"cannot register sweep {sweep_id}: {err}") from None
        with self.transaction():
            self._upsert("specs", spec_df, keep=["first_seen_at"])
            self._upsert("sweeps", sweep_df, update={
                "started_at": "least(sweeps.started_at, excluded.started_at)"})
            if price_df is not None:
                self._con.execute("DELETE FROM prices WHERE sweep_id = ?", [sweep_id])
                self._upsert("prices", price_df)
        return spec_id

    def upsert_trials(self, sweep_id: str, trials: pl.DataFrame | Iterable[dict[str, Any]]) -> int:
        """Inserts or updates the planned trials of a sweep in one transaction; returns how many.

        Each trial: `trial_id` (required), `index` (or `trial_index`), `params` (dict or JSON
        text), `accelerator`, `gpus`, `cloud`, `region`, `instance_type`, `spot`,
        `est_memory_gib`, `est_wall_s`, `est_cost_usd`, `feasible`, `reason`, `status`
        (pending|running|succeeded|failed|oom|preempted|cancelled|skipped-budget; default pending).
        On conflict (sweep_id, trial_id) every given field is replaced, except that 'pending'
        never overwrites a status the trial already has (re-planning a resumed sweep keeps
        'succeeded'). Raises `UserError` naming the bad field.
        """
        self._require_writer("upsert_trials")
        df = trials if isinstance(trials, pl.DataFrame) else pl.DataFrame(
            [_trial_row(t) for t in trials], schema_overrides=_TRIAL_INPUT_SCHEMA, strict=False)
        if df.height == 0:
            return 0
        if "index" in df.columns:
            df = df.rename({"index": "trial_index"})
        if "params" in df.columns and df.schema["params"] != pl.String:
            df = df.with_columns(pl.col("params").map_elements(_json_text, return_dtype=pl.String))
        floats = [c for c, t in df.schema.items() if t in (pl.Float32, pl.Float64)]
        if floats:  # an estimate the planner could not make (NaN) is stored as unknown (NULL)
            df = df.with_columns(pl.col(floats).fill_nan(None))
        df = df.with_columns(sweep_id=pl.lit(sweep_id), updated_at=pl.lit(_now()))
        if "status" not in df.columns:
            df = df.with_columns(status=pl.lit("pending"))
        else:
            df = df.with_columns(pl.col("status").fill_null("pending"))
        try:
            df = _frames().validate_frame("trials", df)
        except _frames().FrameError as err:
            raise UserError(f"cannot write trials of {sweep_id}: {err}") from None
        with self.transaction():
            self._upsert("trials", df, update={
                "status": "CASE WHEN excluded.status = 'pending' THEN trials.status ELSE excluded.status END"})
        return df.height

    def mark_trials(self, sweep_id: str, trial_ids: Iterable[str], status: str, reason: str | None = None) -> int:
        """Sets the status (and reason, when given) of the listed trials; returns how many rows changed.

        Trials not registered yet are created with just that status (e.g. 'skipped-budget').
        """
        self._require_writer("mark_trials")
        if status not in _frames().TRIAL_STATUSES:
            raise UserError(f"unknown trial status {status!r}; one of {', '.join(_frames().TRIAL_STATUSES)}")
        ids = list(dict.fromkeys(trial_ids))
        if not ids:
            return 0
        df = pl.DataFrame({"sweep_id": [sweep_id] * len(ids), "trial_id": ids,
                           "status": [status] * len(ids), "updated_at": [_now()] * len(ids)})
        if reason is not None:
            df = df.with_columns(reason=pl.lit(reason))
        df = _frames().validate_frame("trials", df)
        # only the given columns change on conflict
        given = {"status", "updated_at"} | ({"reason"} if reason is not None else set())
        with self.transaction():
            self._upsert("trials", df, keep=[c for c in df.columns if c not in given])
        return len(ids)

    def finish_sweep(self, sweep_id: str, status: str = "succeeded", ended_at: datetime | str | None = None) -> None:
        """Records the end of a sweep: `ended_at` (default now, UTC) and `status`."""
        self._require_writer("finish_sweep")
        with self.transaction():
            self._con.execute("UPDATE sweeps SET ended_at = ?, status = ?, updated_at = ? WHERE sweep_id = ?",
                              [utc_naive(ended_at) or _now(), status, _now(), sweep_id])

    def succeeded_trial_ids(self, sweep_id: str) -> set[str]:
        """Returns the trial ids of `sweep_id` that already succeeded (a run or the trial's status)."""
        rows = self._con.execute("""
            SELECT trial_id FROM runs WHERE sweep_id = ? AND status = 'succeeded'
            UNION SELECT trial_id FROM trials WHERE sweep_id = ? AND status = 'succeeded'""",
                                 [sweep_id, sweep_id]).fetchall()
        return {r[0] for r in rows}

    def latest_sweep_id(self, name: str) -> str | None:
        """Returns the sweep id of the most recently started sweep called `name` (None when none)."""
        return self.scalar("SELECT sweep_id FROM sweeps WHERE name = ? ORDER BY started_at DESC NULLS LAST, "
                           "updated_at DESC LIMIT 1", [name])

    def spot_preemption_stats(self, cloud: str | None = None, accelerator: str | None = None) -> tuple[float, int]:
        """Returns (spot_hours, preemptions) measured on spot runs, optionally of one cloud/accelerator.

        spot_hours = sum of wall_s/3600 of spot runs; the planner's measured preemption rate is
        preemptions / spot_hours (per hour), when spot_hours is large enough to trust.
        """
        row = self._con.execute("""
            SELECT coalesce(sum(wall_s), 0) / 3600.0, coalesce(sum(preemptions), 0) FROM runs
            WHERE spot AND (? IS NULL OR cloud = ?) AND (? IS NULL OR accelerator = ?)""",
                                [cloud, cloud, accelerator, accelerator]).fetchall()[0]
        return float(row[0]), int(row[1])

    def measured_preemption(self) -> dict[tuple[str, str], tuple[float, int]]:
        """Returns {(cloud, accelerator): (spot_hours, preemptions)} of every spot run measured: the
        planner's `measured_preemption` input (it trusts a pair once its spot hours pass a threshold)."""
        rows = self._con.execute("""
            SELECT cloud, accelerator, coalesce(sum(wall_s), 0) / 3600.0, coalesce(sum(preemptions), 0)
            FROM runs WHERE spot AND cloud IS NOT NULL AND accelerator IS NOT NULL
            GROUP BY cloud, accelerator""").fetchall()
        return {(c, a): (float(h), int(n)) for c, a, h, n in rows}

    # ---------------------------------------------------------------- ingest (result records)

    def ingest_records(self, records: Iterable[Any], *, sources: Sequence[str] | None = None) -> IngestResult:
        """Validates and upserts result records (dicts or `ResultRecord`s) in ONE transaction.

        Idempotent by run_id: a record ingested again replaces its run row and its metrics,
        final metrics and billing lines (nothing is duplicated). A record that fails validation
        (pydantic record model, then the pandera frame schemas) is left out and listed in
        `rejected` with its reason; the others are written. Also sets the status of each
        registered trial that got a run to the status of its latest attempt.
        """
        self._require_writer("ingest")
        result = IngestResult()
        good: dict[str, Any] = {}  # run_id -> record (last one wins within a batch)
        origin: dict[str, str] = {}
        for i, data in enumerate(records):
            src = sources[i] if sources is not None else f"record[{i}]"
            rec, reason = _record_reason(data)
            if rec is None:
                result.rejected.append(Rejection(src, reason or "invalid"))
                continue
            good[rec.run_id] = rec
            origin[rec.run_id] = src
        if not good:
            return result
        built = self._validated_frames(list(good.values()), origin, result)
        if built is None:
            return result
        run_ids = built["runs"]["run_id"].to_list()
        with self.transaction():
            ids = pl.DataFrame({"run_id": run_ids})
            self._con.register("_in_ids", ids)
            try:
                existing = self._con.execute(
                    "SELECT count(*) FROM runs WHERE run_id IN (SELECT run_id FROM _in_ids)").fetchall()[0][0]
                for child in ("metrics", "billing", "final_metrics"):
                    self._con.execute(f"DELETE FROM {child} WHERE run_id IN (SELECT run_id FROM _in_ids)")
            finally:
                self._unregister("_in_ids")
            self._upsert("runs", built["runs"])
            for child in ("final_metrics", "metrics", "billing"):
                if built[child].height:
                    self._insert(child, built[child])
            self._con.execute("""
                UPDATE trials SET status = latest.status, updated_at = ?
                FROM (SELECT sweep_id, trial_id, arg_max(status, (attempt, ended_at)) AS status
                      FROM runs WHERE sweep_id IS NOT NULL GROUP BY ALL) AS latest
                WHERE trials.sweep_id = latest.sweep_id AND trials.trial_id = latest.trial_id
                  AND trials.status IS DISTINCT FROM latest.status""", [_now()])
            if Warehouse._before_commit is not None:
                Warehouse._before_commit("ingest_records")
        result.ingested = len(run_ids)
        result.new = len(run_ids) - int(existing)
        result.metric_rows = built["metrics"].height
        result.billing_rows = built["billing"].height
        result.run_ids = run_ids
        return result

    def _insert(self, table: str, df: pl.DataFrame) -> None:
        """Inside a transaction: plain INSERT of a validated frame (Arrow scan, no conflict check)."""
        name = f"_in_{table}"
        self._con.register(name, df)
        try:
            cols = ", ".join(f'"{c}"' for c in df.columns)
            self._con.execute(f'INSERT INTO "{table}" ({cols}) SELECT {cols} FROM {name}')
        finally:
            self._unregister(name)

    def _validated_frames(self, recs: list[Any], origin: dict[str, str],
                          result: IngestResult) -> dict[str, pl.DataFrame] | None:
        """Returns the validated frames of `recs`; records whose frames fail go to `result.rejected`."""
        try:
            built = records_to_frames(recs)
            return {t: _frames().validate_frame(t, df) for t, df in built.items()}
        except _frames().FrameError:
            pass
        # find the culprits one by one (rare path), keep the rest
        keep = []
        for rec in recs:
            try:
                for t, df in records_to_frames([rec]).items():
                    _frames().validate_frame(t, df)
                keep.append(rec)
            except _frames().FrameError as err:
                result.rejected.append(Rejection(origin[rec.run_id], f"invalid result record: {err}"))
        if not keep:
            return None
        built = records_to_frames(keep)
        return {t: _frames().validate_frame(t, df) for t, df in built.items()}

    def ingest_metrics_frame(self, df: pl.DataFrame) -> int:
        """Validates a metrics frame (run_id, name, seq, step, t_s, value) and replaces the metrics of
        its runs in one transaction; returns the rows written. (Bulk path; `benchmarks/ingest.py`.)"""
        self._require_writer("ingest")
        df = _frames().validate_frame("metrics", df)
        with self.transaction():
            self._con.register("_in_ids", df.select("run_id").unique())
            try:
                self._con.execute("DELETE FROM metrics WHERE run_id IN (SELECT run_id FROM _in_ids)")
            finally:
                self._unregister("_in_ids")
            self._insert("metrics", df)
            if Warehouse._before_commit is not None:
                Warehouse._before_commit("ingest_metrics_frame")
        return df.height

    def ingest_landing(self, landing: str | os.PathLike[str] | None = None) -> IngestResult:
        """Ingests every `*.json` of a landing folder (default `warehouse/landing/` beside the file).

        A file holds one record (an object) or several (a list). Records that fail are moved to
        `landing/rejected/` with `<file>.reason.txt` beside them; the others are ingested in one
        transaction and their files then moved to `landing/ingested/` (a crash between the commit
        and the move only means the next ingest re-reads them, which is idempotent).
        """
        self._require_writer("ingest")
        land = Path(landing) if landing is not None else self.path.parent / "landing"
        if not land.is_dir():
            raise UserError(f"no landing folder at {land}; pass the folder that holds the result records")
        files = sorted(p for p in land.glob("*.json") if p.is_file())
        records: list[Any] = []
        sources: list[str] = []
        per_file: dict[str, list[int]] = {}
        file_errors: dict[Path, str] = {}
        for f in files:
            try:
                data = json.loads(f.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
                file_errors[f] = f"not valid JSON: {err}"
                continue
            items = data if isinstance(data, list) else [data]
            for j, item in enumerate(items):
                per_file.setdefault(str(f), []).append(len(records))
                records.append(item)
                sources.append(str(f) if len(items) == 1 else f"{f}[{j}]")
        result = self.ingest_records(records, sources=sources) if records else IngestResult()
        for f, reason in file_errors.items():
            result.rejected.append(Rejection(str(f), reason))
        reasons: dict[Path, list[str]] = {}
        for rej in result.rejected:
            path = Path(re.sub(r"\[\d+\]$", "", rej.source))
            reasons.setdefault(path, []).append(f"{rej.source}: {rej.reason}")
        for f in files:
            if f in reasons:
                _move(f, land / "rejected")
                (land / "rejected" / (f.name + ".reason.txt")).write_text("\n".join(reasons[f]) + "\n",
                                                                        encoding="utf-8")
            else:
                _move(f, land / "ingested")
        return result


# --------------------------------------------------------------------------------------------
# module helpers


def _frames():
    """Returns `gpuledger.frames`, imported on first use: pandera is slow to import, and readers
    (`gpuledger sql`, reports) never validate."""
    from gpuledger import frames

    return frames


def _checksum(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _sql_str(text: str) -> str:
    return text.replace("'", "''")


def _migrations() -> list[tuple[int, str, str]]:
    """Returns (version, name, sql) of `warehouse/migrations/NNN_name.sql`, in version order."""
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


def named_sql(name: str) -> str:
    """Returns the text of `warehouse/queries/<name>.sql` (a known name: no path from user input)."""
    if not re.fullmatch(r"[a-z0-9_]+", name):
        raise ValueError(f"named query {name!r}: names are lower-case letters, digits and '_'")
    path = QUERIES_DIR / f"{name}.sql"
    if not path.is_file():
        raise ValueError(f"no named query {name!r} ({path} is missing)")
    return path.read_text(encoding="utf-8").strip().rstrip(";")


def _views() -> list[tuple[str, str]]:
    """Returns (name, select sql) of `warehouse/views/<name>.sql`."""
    out = []
    for f in sorted(VIEWS_DIR.glob("*.sql")):
        sql = f.read_text(encoding="utf-8").strip().rstrip(";")
        out.append((f.stem, sql))
    return out


def _dependency_order(views: dict[str, str]) -> list[str]:
    """Returns the view names so that each comes after the views its SQL mentions."""
    deps = {n: {m for m in views if m != n and re.search(rf"\b{re.escape(m)}\b", sql)} for n, sql in views.items()}
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

    for n in sorted(views):
        visit(n, ())
    return order


def _primary_key(con: duckdb.DuckDBPyConnection, table: str) -> list[str]:
    row = con.execute("""SELECT constraint_column_names FROM duckdb_constraints()
                         WHERE table_name = ? AND constraint_type = 'PRIMARY KEY'""", [table]).fetchall()
    row = row[0] if row else None
    if not row:
        raise RuntimeError(f"table {table} has no primary key")
    return list(row[0])


def _move(src: Path, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    shutil.move(str(src), str(folder / src.name))


_TRIAL_INPUT_SCHEMA = {
    "trial_index": pl.Int32, "gpus": pl.Int32, "spot": pl.Boolean, "feasible": pl.Boolean,
    "est_memory_gib": pl.Float64, "est_wall_s": pl.Float64, "est_cost_usd": pl.Float64,
    "params": pl.String,
}
def _trial_row(t: dict[str, Any]) -> dict[str, Any]:
    known = set(_frames().columns("trials")) - {"sweep_id", "updated_at"}
    row = dict(t)
    if "index" in row:
        row["trial_index"] = row.pop("index")
    if "params" in row:
        row["params"] = _json_text(row["params"])
    unknown = set(row) - known - {"sweep_id"}
    if unknown:
        raise UserError(f"unknown trial fields {sorted(unknown)}; known: {sorted(known)}")
    row.pop("sweep_id", None)
    return row


_PRICE_FIELDS = ("cloud", "region", "instance_type", "accelerator", "accelerator_count", "spot",
                 "usd_per_hour", "on_demand_usd_per_hour", "source", "as_of")
_PRICE_ALIASES = {"count": "accelerator_count", "gpus": "accelerator_count", "price_usd_per_hour": "usd_per_hour"}


def _price_frame(sweep_id: str, prices: pl.DataFrame | Sequence[dict[str, Any]]) -> pl.DataFrame:
    rows = prices.to_dicts() if isinstance(prices, pl.DataFrame) else [dict(r) for r in prices]
    out = []
    for i, r in enumerate(rows):
        r = {_PRICE_ALIASES.get(k, k): v for k, v in r.items()}
        r.pop("sweep_id", None)
        row: dict[str, Any] = {"sweep_id": sweep_id, "seq": i}
        for k in _PRICE_FIELDS:
            v = r.pop(k, None)
            row[k] = str(v) if k == "as_of" and v is not None else v
        row["extra"] = json.dumps(r, sort_keys=True, default=str) if r else None
        out.append(row)
    return pl.DataFrame(out, schema=_frames().empty_frame("prices").schema, strict=False)


def measured_preemption_if_any(path: str | Path | None = None) -> dict[tuple[str, str], tuple[float, int]]:
    """Returns the warehouse's measured spot preemptions for the planner, or {} when there is no
    warehouse yet (never creates one) or it is busy (a running sweep holds it: plan with defaults)."""
    target = resolve_path(path)
    if not target.exists():
        return {}
    try:
        with Warehouse.open(target, read_only=True, lock_timeout_s=0.5) as wh:
            return wh.measured_preemption()
    except UserError:
        return {}
