"""Read-only SQL for `gpuledger sql`: which statements change the warehouse (DuckDB's own parser)."""

from __future__ import annotations

import duckdb

from gpuledger.errors import UserError
from gpuledger.warehouse.connect import one_line

#: statement types `gpuledger sql` runs without `--write` (names of duckdb.StatementType)
READ_ONLY_STATEMENTS = frozenset({"SELECT", "EXPLAIN", "PRAGMA", "CALL", "SET", "VARIABLE_SET"})


def writing_statements(sql: str) -> list[str]:
    """Returns the types of the statements of `sql` that are not read-only (e.g. ['INSERT']).

    Uses DuckDB's own parser (`extract_statements`); raises `UserError` on a syntax error.
    """
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as err:
        raise UserError(one_line(err)) from None
    if not statements:
        raise UserError("no SQL statement given")
    return [s.type.name for s in statements if s.type.name not in READ_ONLY_STATEMENTS]
