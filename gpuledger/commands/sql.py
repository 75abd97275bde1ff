"""`gpuledger sql QUERY [--format table|csv|json] [--write]`: ad-hoc SQL against the warehouse.

Read-only by default: the statements are classified with DuckDB's own parser
(`warehouse.writing_statements`) and anything but SELECT/EXPLAIN/PRAGMA/CALL/SET is refused
unless `--write`; the connection itself is also opened read-only. Table output fits the terminal
(`$COLUMNS`, else 120): a table when the columns fit, else one block per row, one `column | value`
line each (`gpuledger.table_text`). SQL errors become one line
(`gpuledger sql: Binder Error: ...`), never a traceback.
"""

from __future__ import annotations

import argparse
import shutil
import sys

from gpuledger.errors import UserError

#: rows shown by --format table (csv/json print every row)
TABLE_ROWS = 200


def run(args: argparse.Namespace) -> int:
    from gpuledger import table_text
    from gpuledger.warehouse import Warehouse, writing_statements

    query: str = args.query
    writes = writing_statements(query)
    if writes and not args.write:
        raise UserError(f"refusing a statement that changes the warehouse ({', '.join(writes)}); "
                        "add --write if you mean it")
    with Warehouse.open(read_only=not args.write) as wh:
        df = wh.query(query)
    out = sys.stdout
    if args.format == "csv":
        out.write(df.write_csv())
    elif args.format == "json":
        out.write(df.write_json() + "\n")
    else:
        if df.width == 0 or (writes and df.columns == ["Count"]):
            changed = f" ({df.item()} rows)" if df.shape == (1, 1) else ""
            print(f"ok{changed}")
            return 0
        print(table_text.render(df.columns, df.head(TABLE_ROWS).rows(), shutil.get_terminal_size((120, 24)).columns))
        note = f"{df.height} row{'s' if df.height != 1 else ''}"
        if df.height > TABLE_ROWS:
            note += f", first {TABLE_ROWS} shown (use --format csv for all)"
        print(note)
    return 0
