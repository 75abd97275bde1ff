"""`gpuledger sql QUERY [--format table|csv|json] [--write]`: ad-hoc SQL against the warehouse.

Read-only by default, and read-only means it writes nothing anywhere: each statement is checked
with DuckDB's own parser (`gpuledger.warehouse.readonly`: statement types, pragmas and table
functions on allow-lists; COPY, EXPORT, ATTACH, INSTALL/LOAD, SET, `pragma profile_output`,
`enable_logging(...)` are refused unless `--write`), and it runs on a read-only connection whose
configuration is locked and which loads no extension. It still reads the user's files
(`select * from 'x.parquet'`, `read_csv(...)`). Table output fits the terminal
(`$COLUMNS`, else 120): a table when the columns fit, else one block per row, one `column | value`
line each (`gpuledger.cli.table_text`). SQL errors become one line
(`gpuledger sql: Binder Error: ...`), never a traceback. A query runs at most `sql.timeout_s` seconds
(`GPULEDGER_SQL_TIMEOUT_S`, default 300) and Ctrl-C stops it at once (DuckDB's `interrupt`).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import signal
import sys
import threading
from typing import Any

from gpuledger.errors import UserError

#: rows shown by --format table (csv/json print every row)
TABLE_ROWS = 200


def _leave_interrupted(message: str) -> None:
    """Leaves at once with exit 130 and one line. Ctrl-C stops DuckDB mid-query or mid-open, and its
    threads then abort or hang the interpreter's ordinary exit ("terminate called without an active
    exception", or a wait that never ends); nothing was written (read-only, or --write's statement
    rolled back), so there is nothing to clean up."""
    print(f"gpuledger sql: {message}", file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(130)


def run(args: argparse.Namespace) -> int:
    """Runs the command; Ctrl-C anywhere in it (the imports, the open, the query) leaves at once with
    one line and exit 130 (`_leave_interrupted`): a KeyboardInterrupt raised inside an extension's
    import or DuckDB's open can be swallowed, and the query then runs on."""
    if threading.current_thread() is not threading.main_thread():  # signals are the main thread's
        return _run(args)
    said = ("interrupted (Ctrl-C): a statement that had not committed is rolled back" if args.write
            else "interrupted (Ctrl-C); nothing was written")
    previous = signal.signal(signal.SIGINT, lambda *_: _leave_interrupted(said))
    try:
        return _run(args)
    finally:
        signal.signal(signal.SIGINT, previous)


def _run(args: argparse.Namespace) -> int:
    from gpuledger.api import Ledger
    from gpuledger.cli import table_text
    from gpuledger.warehouse.adhoc import check_query, sql_timeout_s

    query: str = args.query
    writes = check_query(query, write=args.write, face="cli")  # refused in the CLI's words, before the Ledger
    timeout_s = sql_timeout_s()
    try:
        result = Ledger().sql(query, write=args.write, timeout_s=timeout_s, rows=True)
    except UserError as err:
        if err.exit_code != 130:
            raise
        _leave_interrupted(str(err))
    except KeyboardInterrupt:  # Ctrl-C while the warehouse opens, before the query's own handler
        _leave_interrupted("interrupted (Ctrl-C) while opening the warehouse; nothing ran")
    columns, rows = result.columns, result.rows
    out = sys.stdout
    if args.format == "csv":
        _write_csv(out, columns, rows)
    elif args.format == "json":
        from gpuledger.warehouse.ledger_sql import json_value

        out.write(json.dumps([{c: json_value(v) for c, v in zip(columns, row, strict=True)} for row in rows],
                             ensure_ascii=False) + "\n")
    else:
        if not columns or (writes and columns == ["Count"]):
            changed = f" ({rows[0][0]} rows)" if len(columns) == 1 and len(rows) == 1 else ""
            print(f"ok{changed}")
            return 0
        print(table_text.render(columns, rows[:TABLE_ROWS], shutil.get_terminal_size((120, 24)).columns))
        note = f"{len(rows)} row{'s' if len(rows) != 1 else ''}"
        if len(rows) > TABLE_ROWS:
            note += f", first {TABLE_ROWS} shown (use --format csv for all)"
        print(note)
    return 0


def _csv_value(value: Any) -> Any:
    """A value as CSV text: empty for NULL, true/false, timestamps ISO, nested values as JSON."""
    from gpuledger.warehouse.ledger_sql import json_value

    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, str)):
        return value
    plain = json_value(value)
    return plain if isinstance(plain, str) else json.dumps(plain, ensure_ascii=False)


def _write_csv(out: Any, columns: list[str], rows: list[tuple[Any, ...]]) -> None:
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([_csv_value(v) for v in row])
