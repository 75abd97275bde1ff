"""A year of a 50-person team in the warehouse: do the weekly report and the documented views answer in
seconds, on the DuckDB file and on the team's DuckLake?

    python benchmarks/warehouse_scale.py                       # 1,000,000 runs, 50,000,000 metric points
    python benchmarks/warehouse_scale.py --sweeps 2000         # a tenth of that
    python benchmarks/warehouse_scale.py --lake 'dbname=ledger host=127.0.0.1 port=5432 user=postgres'

The data is synthetic and deterministic (benchmarks/sql/scale_generate.sql): `--sweeps` sweeps of
`--runs-per-sweep` trials with one run each and `--metrics-per-run` metric points per run, spread over
52 weeks and 50 owners. Each view is read whole (every row fetched); the weekly report is written for
one week. With `--lake`, the file is pushed into a DuckLake warehouse on that PostgreSQL catalog
(`gpuledger warehouse push`'s code path) and the same reads are timed there.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from pathlib import Path

import duckdb

from gpuledger.report.weekly import write_weekly_report
from gpuledger.warehouse import Warehouse, lake
from gpuledger.warehouse.sqlfiles import view_docs

REPO = Path(__file__).resolve().parent.parent
GENERATE = REPO / "benchmarks" / "sql" / "scale_generate.sql"


def generate(path: Path, sweeps: int, runs_per_sweep: int, metrics_per_run: int) -> float:
    with Warehouse.open(path):
        pass  # migrated, empty
    params = {"sweeps": sweeps, "runs_per_sweep": runs_per_sweep, "metrics_per_run": metrics_per_run}
    t0 = time.perf_counter()
    con = duckdb.connect(str(path))
    try:
        text = "\n".join(line for line in GENERATE.read_text().splitlines() if not line.strip().startswith("--"))
        for statement in text.split(";"):
            body = statement.strip()
            if not body:
                continue
            used = {k: v for k, v in params.items() if re.search(rf"\${k}\b", body)}
            con.execute(body, used)
        con.execute("CHECKPOINT")
    finally:
        con.close()
    return time.perf_counter() - t0


def time_reads(target: str, out_dir: Path) -> dict[str, float]:
    times: dict[str, float] = {}
    with Warehouse.open(target, read_only=True) as wh:
        for view in view_docs():
            t0 = time.perf_counter()
            wh.query(f'SELECT * FROM "{view}"')  # every row fetched; identifiers from views.yml
            times[view] = time.perf_counter() - t0
        t0 = time.perf_counter()
        write_weekly_report(wh, week="2025-W30", out_dir=out_dir)
        times["weekly report (2025-W30)"] = time.perf_counter() - t0
    return times


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sweeps", type=int, default=20_000)
    ap.add_argument("--runs-per-sweep", type=int, default=50)
    ap.add_argument("--metrics-per-run", type=int, default=50)
    ap.add_argument("--lake", default=None, metavar="LIBPQ", help="also push into DuckLake on this PostgreSQL")
    args = ap.parse_args()
    runs = args.sweeps * args.runs_per_sweep
    with tempfile.TemporaryDirectory(prefix="gpuledger-scale-") as tmp:
        path = Path(tmp) / "ledger.duckdb"
        gen_s = generate(path, args.sweeps, args.runs_per_sweep, args.metrics_per_run)
        size = path.stat().st_size / 2**30
        print(f"generated {runs:,} runs, {runs * args.metrics_per_run:,} metric points in {gen_s:.1f} s "
              f"({size:.2f} GiB file; load average {os.getloadavg()[0]:.1f})")
        results = {"duckdb file": time_reads(str(path), Path(tmp) / "r1")}
        if args.lake:
            target = f"ducklake:postgres:{args.lake}"
            t0 = time.perf_counter()
            lake.push_ledger(path, target, data_path=str(Path(tmp) / "lake"))
            print(f"pushed into DuckLake in {time.perf_counter() - t0:.1f} s")
            results["ducklake"] = time_reads(target, Path(tmp) / "r2")
        names = list(next(iter(results.values())))
        print(f"{'read':36}" + "".join(f"{k:>16}" for k in results))
        for n in names:
            print(f"{n:36}" + "".join(f"{r[n]:15.2f}s" for r in results.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
