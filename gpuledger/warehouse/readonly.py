"""Read-only SQL for `gpuledger sql` (without `--write`): it reads the warehouse and the user's files,
and writes nothing, anywhere.

Two layers, both needed:

1. `read_only_problems(sql)` checks every statement with DuckDB's own parser before anything runs:
   - statement types: SELECT, EXPLAIN (of an allowed statement; EXPLAIN ANALYZE runs it), PRAGMA,
     CALL and `SET VARIABLE` only; COPY, EXPORT, ATTACH, INSTALL/LOAD, SET, CREATE, INSERT, ...
     are refused;
   - PRAGMA: only the introspection pragmas of `READ_ONLY_PRAGMAS` (no `profile_output`,
     `enable_profiling`, `log_query_path`, `import_database`, ...);
   - table functions (in FROM, in CTEs, subqueries, CALL): only those of `READ_ONLY_TABLE_FUNCTIONS`
     (file readers, generators, metadata); `enable_logging(storage='file', ...)` writes files and
     `query('...')` runs SQL text the check cannot see, so both are refused.
2. `READ_ONLY_CONFIG`, the settings of the connection it then runs on (`Warehouse.open(..., config=)`):
   opened read-only, extensions neither installed nor auto-loaded (nothing downloaded, no network
   file systems), and `lock_configuration` so that no statement can change a setting (e.g. point
   `profile_output` or `log_query_path` at a file) even if one slipped past layer 1.

External access stays on, on purpose: `select * from 'results.parquet'`, `read_csv('x.csv')`,
`glob('runs/*.json')` read the user's files (anything the user can read), which README documents.
"""

from __future__ import annotations

import json
import re
from typing import Any

import duckdb

from gpuledger.errors import UserError
from gpuledger.warehouse.connect import NO_EXTENSION_DOWNLOADS, one_line

#: statement types `gpuledger sql` may run without `--write` (names of duckdb.StatementType);
#: PRAGMA, CALL and EXPLAIN are checked further
READ_ONLY_STATEMENTS = frozenset({"SELECT", "EXPLAIN", "PRAGMA", "CALL", "VARIABLE_SET"})

#: PRAGMAs that only show things
READ_ONLY_PRAGMAS = frozenset({
    "collations", "database_list", "database_size", "extension_versions", "functions", "metadata_info",
    "platform", "show", "show_databases", "show_tables", "show_tables_expanded", "storage_info",
    "table_info", "user_agent", "version",
})

#: table functions that only read (files, generators, the catalog)
READ_ONLY_TABLE_FUNCTIONS = frozenset({
    "generate_series", "range", "repeat", "repeat_row", "unnest", "glob", "sniff_csv", "summary",
    "read_blob", "read_text", "read_csv", "read_csv_auto", "read_json", "read_json_auto", "read_json_objects",
    "read_json_objects_auto", "read_ndjson", "read_ndjson_auto", "read_ndjson_objects", "read_parquet",
    "parquet_scan", "parquet_metadata", "parquet_schema", "parquet_file_metadata", "parquet_kv_metadata",
    "parquet_bloom_probe", "json_each", "json_tree", "icu_calendar_names", "pg_timezone_names",
    "duckdb_columns", "duckdb_constraints", "duckdb_databases", "duckdb_dependencies", "duckdb_extensions",
    "duckdb_functions", "duckdb_indexes", "duckdb_keywords", "duckdb_memory", "duckdb_optimizers",
    "duckdb_schemas", "duckdb_sequences", "duckdb_settings", "duckdb_tables", "duckdb_types",
    "duckdb_variables", "duckdb_views", "duckdb_temporary_files", "duckdb_approx_database_count",
    "duckdb_logs", "duckdb_log_contexts", "duckdb_connection_count", "duckdb_prepared_statements",
    "duckdb_secret_types", "duckdb_table_sample", "duckdb_external_file_cache",
    "pragma_collations", "pragma_database_size", "pragma_metadata_info", "pragma_platform", "pragma_show",
    "pragma_storage_info", "pragma_table_info", "pragma_user_agent", "pragma_version",
})

#: settings of the connection `gpuledger sql` reads on (see the module doc)
READ_ONLY_CONFIG: dict[str, Any] = {
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "allow_community_extensions": False,
    "allow_unsigned_extensions": False,
    "lock_configuration": True,
}

_LEADING_COMMENTS = re.compile(r"^(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/)*", re.S)
_PRAGMA_NAME = re.compile(r"pragma\s+([a-z_][a-z0-9_]*)\s*(=|\(|;|$)", re.I)
_CALL = re.compile(r"call\s+(.*)$", re.I | re.S)
_VARIABLE_SET = re.compile(r"set\s+variable\s+\S+\s*=\s*(.*)$", re.I | re.S)
_EXPLAIN = re.compile(r"explain\s+(?:\(\s*format\s+\w+\s*\)\s*)?(analy[sz]e\s+)?(.*)$", re.I | re.S)


def _statements(sql: str) -> list[Any]:
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as err:
        raise UserError(one_line(err)) from None
    if not statements:
        raise UserError("no SQL statement given")
    return statements


def writing_statements(sql: str) -> list[str]:
    """Returns the types of the statements of `sql` that are not read-only (e.g. ['INSERT']).

    Uses DuckDB's own parser (`extract_statements`); raises `UserError` on a syntax error.
    """
    return [s.type.name for s in _statements(sql) if s.type.name not in READ_ONLY_STATEMENTS]


def read_only_problems(sql: str) -> list[str]:
    """Returns why each refused statement of `sql` cannot run without `--write` (empty: all may run)."""
    problems: list[str] = []
    for st in _statements(sql):
        problem = _problem(st.type.name, _body(st.query), depth=0)
        if problem:
            problems.append(problem)
    return problems


def _body(text: str) -> str:
    return _LEADING_COMMENTS.sub("", text, count=1).strip().rstrip(";").strip()


def _problem(kind: str, text: str, depth: int) -> str | None:
    if kind not in READ_ONLY_STATEMENTS:
        return f"{kind} (it changes the warehouse, its settings or files)"
    if kind == "PRAGMA":
        m = _PRAGMA_NAME.match(text)
        name = m.group(1).lower() if m else "?"
        if not m or m.group(2) == "=" or name not in READ_ONLY_PRAGMAS:
            return f"PRAGMA {name} (only the pragmas that show things: {', '.join(sorted(READ_ONLY_PRAGMAS))})"
        return None
    if kind == "CALL":
        m = _CALL.match(text)
        return _select_problem(f"SELECT * FROM {m.group(1)}" if m else text)
    if kind == "EXPLAIN":
        m = _EXPLAIN.match(text)
        if not m or depth > 2:
            return "EXPLAIN of a statement it cannot read"
        inner = _statements(m.group(2))
        if len(inner) != 1:
            return "EXPLAIN of more than one statement"
        return _problem(inner[0].type.name, _body(inner[0].query), depth + 1)
    if kind == "VARIABLE_SET":  # its value is an expression: it may hold a subquery
        m = _VARIABLE_SET.match(text)
        return _select_problem(f"SELECT ({m.group(1)})") if m else None
    if kind == "SELECT":
        return _select_problem(text)
    return None


def _select_problem(text: str) -> str | None:
    """Returns why the SELECT `text` may not run read-only (a table function that is not allowed)."""
    con = duckdb.connect(":memory:", config=NO_EXTENSION_DOWNLOADS)
    try:
        # the text as a quoted literal, not a bound parameter: binding a Python value makes DuckDB
        # import pandas and numpy (seconds at the prompt, tests/unit/test_startup.py)
        raw = con.execute("SELECT json_serialize_sql('" + text.replace("'", "''") + "')").fetchone()[0]
    except duckdb.Error as err:
        return f"cannot check the statement: {one_line(err)}"
    finally:
        con.close()
    tree = json.loads(raw)
    if tree.get("error"):
        return f"cannot check the statement: {tree.get('error_message', 'not a plain query')}"
    refused = sorted({n for n in _table_functions(tree) if n not in READ_ONLY_TABLE_FUNCTIONS})
    if refused:
        return (f"table function {', '.join(refused)} (read-only SQL may call only functions that read: "
                "read_csv, read_parquet, read_json, glob, range, duckdb_* and pragma_* metadata, ...)")
    return None


def _table_functions(node: Any) -> list[str]:
    """Returns the names of every table function called anywhere in a serialized statement tree."""
    out: list[str] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, dict):
            if n.get("type") == "TABLE_FUNCTION" and isinstance(n.get("function"), dict):
                out.append(str(n["function"].get("function_name", "?")).lower())
            stack.extend(n.values())
        elif isinstance(n, list):
            stack.extend(n)
    return out
