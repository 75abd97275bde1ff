"""SQL for someone who is not the user (an agent through `gpuledger mcp`): the ledger only, bounded.

`gpuledger sql` is the user's: it reads the warehouse AND the user's files (`read_csv('x.csv')`),
which is their right (`gpuledger.warehouse.readonly`). An agent is not the user: what it may read is
the ledger, nothing else. `ledger_query(sql, ...)` is the one way an agent's SQL runs (every MCP path
calls it, whichever layer it goes through):

1. the statement checks of `gpuledger sql` without `--write` (`read_only_problems`, `writing_statements`):
   COPY, EXPORT, ATTACH, INSTALL/LOAD, SET, CREATE, ... refused by DuckDB's own parser first;
2. the connection: read-only, extensions never installed or auto-loaded, and AFTER the warehouse file
   is attached `SET enable_external_access = false` (DuckDB then refuses every file, URL, ATTACH, COPY
   and extension: `read_text('~/.aws/credentials')`, `read_csv('/etc/passwd')`, httpfs), a
   `memory_limit` of `LEDGER_MEMORY_LIMIT`, then `lock_configuration` so no statement turns them back;
3. the result streamed (`fetchmany`), at most `max_rows` rows and `max_bytes` of values kept: a
   300 MB result is never built in Python (`truncated` says it was cut), within `timeout_s`.

A refusal is one `UserError` line that says why (`LEDGER_ONLY`).
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import math
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from gpuledger.errors import UserError
from gpuledger.warehouse.connect import one_line
from gpuledger.warehouse.readonly import READ_ONLY_CONFIG, read_only_problems, writing_statements

#: rows an agent's query returns at most (more are not fetched)
LEDGER_MAX_ROWS = 1000
#: bytes of values (as JSON text) an agent's query returns at most
LEDGER_MAX_BYTES = 4 * 2**20
#: DuckDB's own memory for an agent's query (sorts, joins, a huge value): past it the query fails
LEDGER_MEMORY_LIMIT = "256MB"
#: rows fetched from DuckDB's stream at a time (few: a row may hold a large value)
FETCH_ROWS = 16

#: what every refusal starts with
LEDGER_ONLY = ("the agent's sql reads the ledger only (DuckDB's external access is off: no files, URLs, "
               "ATTACH, COPY or extensions; a person runs `gpuledger sql` for their own files)")

#: the connection's settings before the file is attached (external access goes off after it is)
LEDGER_CONNECT_CONFIG: dict[str, Any] = {k: v for k, v in READ_ONLY_CONFIG.items() if k != "lock_configuration"}


@dataclass(frozen=True)
class LedgerRows:
    """An agent's query result: JSON-ready rows (at most `max_rows`, `max_bytes`), and whether it was cut."""

    columns: list[str]
    rows: list[dict[str, Any]] = field(default_factory=list)
    truncated: bool = False
    #: why it was cut: "rows" or "bytes" (None when whole)
    cut_by: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"columns": self.columns, "rows": self.rows, "row_count": len(self.rows),
                "truncated": self.truncated, "cut_by": self.cut_by}


def json_value(value: Any) -> Any:
    """Returns a DuckDB value as JSON (timestamps ISO, decimals as numbers, NaN and infinities as null: JSON has no
    number for them, and text would read as the string 'nan' a column may hold; bytes base64)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, decimal.Decimal):
        return float(value) if value.is_finite() else None
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, dict):
        return {str(k): json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_value(v) for v in value]
    return str(value)


def ledger_only(con: duckdb.DuckDBPyConnection, memory_limit: str = LEDGER_MEMORY_LIMIT) -> None:
    """Turns a connection with the warehouse attached into a ledger-only one: no external access, a memory
    limit, the configuration locked (irreversible for this connection)."""
    con.execute("SET enable_external_access = false")
    if not re.fullmatch(r"\d+(\.\d+)?\s*[KMGT]i?B", memory_limit):
        raise ValueError(f"memory_limit {memory_limit!r}: give e.g. '256MB'")
    con.execute(f"SET memory_limit = '{memory_limit}'")
    con.execute("SET lock_configuration = true")


def ledger_problems(sql: str) -> list[str]:
    """Returns why `sql` may not run for an agent before it runs (the read-only statement checks)."""
    writes = writing_statements(sql)
    if writes:
        return [f"{', '.join(writes)} (it changes the warehouse, its settings or files)"]
    return read_only_problems(sql)


def _refused(why: str) -> UserError:
    return UserError(f"refusing: {LEDGER_ONLY}; {why}")


def ledger_query(sql: str, *, path: str | Path | None = None, max_rows: int = LEDGER_MAX_ROWS,
                 max_bytes: int = LEDGER_MAX_BYTES, timeout_s: float = 300.0,
                 lock_timeout_s: float | None = None, memory_limit: str = LEDGER_MEMORY_LIMIT) -> LedgerRows:
    """Returns the rows of `sql` read from the warehouse only (see the module doc); raises `UserError`
    (one line saying why) for a statement that writes or reaches outside the ledger, bad SQL, the time
    limit, or a query over DuckDB's memory limit."""
    problems = ledger_problems(sql)
    if problems:
        raise _refused("; ".join(problems))
    from gpuledger.warehouse import Warehouse

    with Warehouse.open(path, read_only=True, config=LEDGER_CONNECT_CONFIG, lock_timeout_s=lock_timeout_s) as wh:
        if wh.backend != "duckdb":
            raise _refused("the team warehouse (DuckLake) needs its catalog's connection; ask a person")
        con = wh._con
        ledger_only(con, memory_limit)
        return _bounded(con, sql, max_rows=max_rows, max_bytes=max_bytes, timeout_s=timeout_s,
                        memory_limit=memory_limit)


def _bounded(con: duckdb.DuckDBPyConnection, sql: str, *, max_rows: int, max_bytes: int,
             timeout_s: float, memory_limit: str) -> LedgerRows:
    outcome: dict[str, Any] = {}

    def work() -> None:
        try:
            outcome["rows"] = _fetch(con, sql, max_rows=max_rows, max_bytes=max_bytes)
        except BaseException as err:  # noqa: BLE001 - handed to the caller's thread
            outcome["err"] = err

    worker = threading.Thread(target=work, name="gpuledger-ledger-sql", daemon=True)
    deadline = time.monotonic() + timeout_s
    worker.start()
    while worker.is_alive() and time.monotonic() < deadline:
        worker.join(min(0.1, max(0.0, deadline - time.monotonic())))
    if worker.is_alive():
        stop_by = time.monotonic() + 10.0
        while worker.is_alive() and time.monotonic() < stop_by:
            con.interrupt()
            worker.join(0.1)
        raise UserError(f"the query ran longer than {timeout_s:g} s and was stopped")
    err = outcome.get("err")
    if isinstance(err, duckdb.PermissionException):
        raise _refused(one_line(err)) from None
    if isinstance(err, duckdb.OutOfMemoryException):
        raise UserError(f"the query needs more than the agent's {memory_limit} of memory "
                        f"({one_line(err)}); aggregate, or select fewer rows or columns") from None
    if isinstance(err, duckdb.Error):
        raise UserError(one_line(err)) from None
    if err is not None:
        raise err
    return outcome["rows"]


def _fetch(con: duckdb.DuckDBPyConnection, sql: str, *, max_rows: int, max_bytes: int) -> LedgerRows:
    cur = con.execute(sql)  # streamed: rows come from DuckDB as fetched, not all at once
    if cur.description is None:
        return LedgerRows(columns=[])
    columns = [str(d[0]) for d in cur.description]
    rows: list[dict[str, Any]] = []
    size = 0
    while True:
        batch = cur.fetchmany(min(FETCH_ROWS, max_rows - len(rows) + 1))
        if not batch:
            return LedgerRows(columns, rows)
        for raw in batch:
            if len(rows) >= max_rows:
                return LedgerRows(columns, rows, truncated=True, cut_by="rows")
            size += sum(len(v) if isinstance(v, (str, bytes)) else 0 for v in raw)  # before any copy of a huge value
            if size > max_bytes:
                return LedgerRows(columns, rows, truncated=True, cut_by="bytes")
            row = {c: json_value(v) for c, v in zip(columns, raw, strict=False)}
            size += len(json.dumps(row, default=str))
            if size > max_bytes:
                return LedgerRows(columns, rows, truncated=True, cut_by="bytes")
            rows.append(row)
