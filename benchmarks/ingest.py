"""Ingest benchmark: 1,000,000 metric rows through pandera validation + the warehouse's ingest
(one transaction: delete the runs' old rows, insert) vs a bare DuckDB insert of the same Arrow
table into an identical table. Prints both times and the ratio (goal: within 2x).

    .venv/bin/python benchmarks/ingest.py [--rows N] [--runs R]

Measured in one run, each side on a fresh file; the two sides use the same table definition
(primary key included), so the difference is validation + the upsert bookkeeping.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa

from gpuledger.warehouse import Warehouse, frames


def metric_table(rows: int, runs: int, seed: int = 0) -> pa.Table:
    """Returns an Arrow table of `rows` metric points spread over `runs` runs (2 metric names)."""
    rng = np.random.default_rng(seed)
    per_run = rows // runs
    run_ids = np.repeat(np.array([f"run-{i:05d}" for i in range(runs)]), per_run)
    names = np.tile(np.array(["loss", "eval_loss"]), rows // 2)[: per_run * runs]
    seq = np.tile(np.repeat(np.arange(per_run // 2, dtype=np.int32), 2), runs)
    df = pl.DataFrame({
        "run_id": run_ids, "name": names, "seq": seq,
        "step": seq.astype(np.int64) * 10,
        "t_s": seq.astype(np.float64) * 0.5,
        "value": rng.random(per_run * runs),
    })
    return df.to_arrow()


def bare_insert(path: Path, table: pa.Table) -> float:
    con = duckdb.connect(str(path))
    con.execute("""CREATE TABLE metrics (run_id VARCHAR NOT NULL, name VARCHAR NOT NULL, seq INTEGER NOT NULL,
                   step BIGINT, t_s DOUBLE, value DOUBLE, PRIMARY KEY (run_id, name, seq))""")
    t0 = time.perf_counter()
    con.register("arrow_in", table)
    con.execute("INSERT INTO metrics SELECT * FROM arrow_in")
    elapsed = time.perf_counter() - t0
    assert con.execute("SELECT count(*) FROM metrics").fetchall()[0][0] == table.num_rows
    con.close()
    return elapsed


def warehouse_ingest(path: Path, table: pa.Table) -> tuple[float, float]:
    """Returns (total seconds, of which validation seconds) of Warehouse.ingest_metrics_frame."""
    with Warehouse.open(path) as wh:
        df = pl.from_arrow(table)
        frames.validate_frame("metrics", df.head(10))  # warm pandera's schema cache outside the clock
        t0 = time.perf_counter()
        frames.validate_frame("metrics", df)
        validate_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        n = wh.ingest_metrics_frame(df)  # validates again, then the transaction
        total = time.perf_counter() - t0
        assert n == table.num_rows == wh.scalar("select count(*) from metrics")
    return total, validate_s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=2, help="alternate the two sides; keep the best of each")
    args = ap.parse_args()
    table = metric_table(args.rows, args.runs)
    bares, totals, validates = [], [], []
    for i in range(args.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            if i % 2:  # alternate the order so neither side always runs on a warm cache
                t, v = warehouse_ingest(Path(tmp) / "ledger.duckdb", table)
                b = bare_insert(Path(tmp) / "bare.duckdb", table)
            else:
                b = bare_insert(Path(tmp) / "bare.duckdb", table)
                t, v = warehouse_ingest(Path(tmp) / "ledger.duckdb", table)
        bares.append(b)
        totals.append(t)
        validates.append(v)
    bare, total, validate_s = min(bares), min(totals), min(validates)
    print(f"rows: {table.num_rows:,} (best of {args.repeat})")
    print(f"bare DuckDB insert of the Arrow table: {bare:.3f} s")
    print(f"validate (pandera, polars) + ingest:   {total:.3f} s  (validation alone {validate_s:.3f} s)")
    print(f"ratio: {total / bare:.2f}x  (goal <= 2x)")


if __name__ == "__main__":
    main()
