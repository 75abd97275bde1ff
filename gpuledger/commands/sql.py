"""`gpuledger sql QUERY [--format table|csv|json] [--write]`: ad-hoc SQL against the warehouse.

Read-only by default: the statements are classified with DuckDB's own parser
(`warehouse.writing_statements`) and anything but SELECT/EXPLAIN/PRAGMA/CALL/SET is refused
unless `--write`; the connection itself is also opened read-only. SQL errors become one line
(`gpuledger sql: Binder Error: ...`), never a traceback.
"""

from __future__ import annotations

import argparse
import sys

from gpuledger.errors import UserError

#: rows shown by --format table (csv/json print every row)
TABLE_ROWS = 200


def run(args: argparse.Namespace) -> int:
    import polars as pl

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
        shown = df.head(TABLE_ROWS)
        with pl.Config(tbl_rows=TABLE_ROWS, tbl_cols=-1, tbl_width_chars=240, fmt_str_lengths=60,
                       tbl_hide_dataframe_shape=True, tbl_hide_column_data_types=False):
            print(shown)
        note = f"{df.height} row{'s' if df.height != 1 else ''}"
        if df.height > TABLE_ROWS:
            note += f", first {TABLE_ROWS} shown (use --format csv for all)"
        print(note)
    return 0
