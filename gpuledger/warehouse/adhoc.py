"""Ad-hoc SQL against the warehouse (`gpuledger sql`, `Ledger.sql`, the MCP `sql` tool): one place
that decides whether a statement may run and runs it.

Read-only by default, and read-only means it writes nothing anywhere: each statement is checked with
DuckDB's own parser (`gpuledger.warehouse.readonly`), and it runs on a read-only connection whose
configuration is locked and which loads no extension. A query runs at most `timeout_s` seconds
(`sql.timeout_s`, `GPULEDGER_SQL_TIMEOUT_S`, default 300).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any

from gpuledger import settings
from gpuledger.errors import UserError
from gpuledger.warehouse.lazy import polars as pl
from gpuledger.warehouse.readonly import READ_ONLY_CONFIG, read_only_problems, writing_statements


def sql_timeout_s(timeout_s: float | None = None) -> float:
    """Returns `timeout_s` (a caller's limit), else the setting `sql.timeout_s`; UserError naming which when it
    is not a number of seconds above 0 (inf: no limit)."""
    where = "timeout_s" if timeout_s is not None else "sql.timeout_s (GPULEDGER_SQL_TIMEOUT_S)"
    value = timeout_s if timeout_s is not None else settings.current().get("sql.timeout_s")
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = math.nan
    if not seconds > 0:
        raise UserError(f"{where} is {value!r}; give a number of seconds > 0")
    return seconds


#: how each face that runs a user's SQL spells its switch to write (the refusal names the caller's)
WRITE_SWITCH = {"api": "write=True", "cli": "--write"}


def check_query(query: str, *, write: bool = False, face: str = "api") -> list[str]:
    """Returns the statement kinds of `query` that change the warehouse; raises UserError (one line)
    when `write` is False and the query would write anything anywhere, naming the switch of `face`
    (`WRITE_SWITCH`: `Ledger.sql`'s write=True, `gpuledger sql`'s --write)."""
    switch = WRITE_SWITCH[face]
    writes = writing_statements(query)
    if not write:
        if writes:
            raise UserError(f"refusing a statement that changes the warehouse ({', '.join(writes)}); "
                            f"add {switch} if you mean it")
        problems = read_only_problems(query)
        if problems:
            raise UserError(f"refusing, without {switch}: {'; '.join(problems)}")
    return writes


@dataclass(frozen=True)
class SqlRows:
    """A query's result as plain Python values (no frame: `gpuledger sql` prints it without polars)."""

    columns: list[str]
    rows: list[tuple[Any, ...]] = field(default_factory=list)


def run_query(query: str, *, write: bool = False, timeout_s: float | None = None,
              path: str | os.PathLike[str] | None = None, rows: bool = False) -> pl.DataFrame | SqlRows:
    """Returns the result of `query` as a polars frame (`SqlRows` when `rows`; read-only unless `write`),
    within `timeout_s` (default: `sql_timeout_s()`); UserError for a refused statement or an SQL error
    (one line)."""
    from gpuledger.warehouse import Warehouse

    check_query(query, write=write)
    limit = sql_timeout_s(timeout_s)
    with Warehouse.open(path, read_only=not write, config=None if write else READ_ONLY_CONFIG) as wh:
        if rows:
            columns, values = wh.query_bounded(query, limit, rows=True)
            return SqlRows(columns, values)
        return wh.query_bounded(query, limit)
