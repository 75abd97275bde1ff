"""A year of a 50-person team in the warehouse: do the weekly report and the documented views answer in
seconds, on the DuckDB file and on the team's DuckLake?

    python benchmarks/warehouse_scale.py                       # 1,000,000 runs, 50,000,000 metric points
    python benchmarks/warehouse_scale.py --sweeps 2000         # a tenth of that
    python benchmarks/warehouse_scale.py --lake 'dbname=ledger host=127.0.0.1 port=5432 user=postgres'
    python benchmarks/warehouse_scale.py --weekly-only         # the weekly comparison alone, no view reads

The data is synthetic and deterministic (benchmarks/sql/scale_generate.sql): `--sweeps` sweeps of
`--runs-per-sweep` trials with one run and one billing line each and `--metrics-per-run` metric points
per run, spread over 52 weeks (stored in time order) and 50 owners. Each view is read whole (every
row fetched). The weekly report's queries are then timed side by side on the same warehouse, best of
`--repeat`, alternating which goes first: as they were (benchmarks/sql/weekly_strftime/: whole views
filtered by `strftime(ts, '%G-W%V') = $week`) and as they are (gpuledger/warehouse/sql/queries/: the week's range
`gpuledger.report.weeks.week_bounds` on base tables), each pair checked to give the same rows; and the whole
report (queries + charts + HTML/markdown/CSV) written with either set. With `--lake`, the file is
pushed into a DuckLake warehouse on that PostgreSQL catalog (`gpuledger warehouse push`'s code path)
and the same reads are timed there.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path

import duckdb

from gpuledger.report.weekly import write_weekly_report
from gpuledger.report.weeks import iso_week, week_bounds
from gpuledger.warehouse import Warehouse, lake
from gpuledger.warehouse.sqlfiles import view_docs

REPO = Path(__file__).resolve().parent.parent
GENERATE = REPO / "benchmarks" / "sql" / "scale_generate.sql"
BEFORE = REPO / "benchmarks" / "sql" / "weekly_strftime"
WEEK = "2025-W30"


class StrftimeQueries:
    """The warehouse as the weekly report saw it before: its named queries `report_week*` answered by
    the files of benchmarks/sql/weekly_strftime (given `$week`), every other call passed through."""

    def __init__(self, wh: Warehouse):
        self._wh = wh

    def query_named(self, name: str, params: dict | None = None):
        old = BEFORE / f"{name}.sql"
        if not old.exists():
            return self._wh.query_named(name, params)
        week = {"week": iso_week(params["week_start"])} if params and "week_start" in params else None
        return self._wh.query(old.read_text(), week)

    def __getattr__(self, name: str):
        return getattr(self._wh, name)


def _differ(old, new) -> str | None:
    """Returns the first difference of two results (rows in any order; numbers within 1e-9 relative, since
    sums may add in another order), or None when they give the same rows."""
    def rows(df):
        return sorted(df.iter_rows(), key=lambda r: repr([v for v in r if not isinstance(v, float)]))

    if old.columns != new.columns or old.height != new.height:
        return f"columns {old.columns} x {old.height} rows vs {new.columns} x {new.height} rows"
    for a, b in zip(rows(old), rows(new), strict=True):
        for x, y in zip(a, b, strict=True):
            numbers = all(isinstance(v, int | float | Decimal) and not isinstance(v, bool) for v in (x, y))
            if not (math.isclose(float(x), float(y), rel_tol=1e-9) if numbers else x == y):
                return f"{a} vs {b}"
    return None


def _pair(before, now, repeat: int) -> tuple[float, float, float, float]:
    """Returns the best wall-clock seconds of `before()` and of `now()`, then their best CPU seconds (this
    process, every DuckDB thread; what other work on the machine changes least), over `repeat` rounds,
    alternating which goes first."""
    wall, cpu = [float("inf")] * 2, [float("inf")] * 2
    for i in range(repeat):
        for k in ((0, 1) if i % 2 == 0 else (1, 0)):
            t0, c0 = time.perf_counter(), time.process_time()
            (before, now)[k]()
            wall[k] = min(wall[k], time.perf_counter() - t0)
            cpu[k] = min(cpu[k], time.process_time() - c0)
    return wall[0], wall[1], cpu[0], cpu[1]


def time_weekly(target: str, out_dir: Path, repeat: int) -> dict[str, tuple[float, float, float, float]]:
    """Returns {read: (wall s before, wall s now, CPU s before, CPU s now)}: each weekly query and the whole
    report, best of `repeat` (the two alternate which runs first); stops when a pair's rows differ."""
    times: dict[str, tuple[float, float, float, float]] = {}
    bounds = week_bounds(WEEK)
    with Warehouse.open(target, read_only=True) as wh:
        old_wh = StrftimeQueries(wh)
        wh.query("SELECT count(*) FROM runs")  # the process's first query pays for set-up
        for path in sorted(BEFORE.glob("*.sql")):
            name = path.stem
            params = None if name == "report_weeks_with_data" else bounds
            differ = _differ(old_wh.query_named(name, params), wh.query_named(name, params))
            if differ:
                raise SystemExit(f"{name}: the range filter's rows differ from the ISO-week rule's: {differ}")
            times[name] = _pair(lambda n=name, p=params: old_wh.query_named(n, p),
                                lambda n=name, p=params: wh.query_named(n, p), repeat)
        times[f"weekly report ({WEEK})"] = _pair(
            lambda: write_weekly_report(old_wh, week=WEEK, out_dir=out_dir / "before"),
            lambda: write_weekly_report(wh, week=WEEK, out_dir=out_dir / "now"), repeat)
    return times


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
    return times


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sweeps", type=int, default=20_000)
    ap.add_argument("--runs-per-sweep", type=int, default=50)
    ap.add_argument("--metrics-per-run", type=int, default=50)
    ap.add_argument("--lake", default=None, metavar="LIBPQ", help="also push into DuckLake on this PostgreSQL")
    ap.add_argument("--repeat", type=int, default=3, help="weekly reads: best of this many (default 3)")
    ap.add_argument("--weekly-only", action="store_true", help="skip reading every view whole")
    args = ap.parse_args()
    runs = args.sweeps * args.runs_per_sweep
    with tempfile.TemporaryDirectory(prefix="gpuledger-scale-") as tmp:
        path = Path(tmp) / "ledger.duckdb"
        gen_s = generate(path, args.sweeps, args.runs_per_sweep, args.metrics_per_run)
        size = path.stat().st_size / 2**30
        print(f"generated {runs:,} runs, {runs * args.metrics_per_run:,} metric points in {gen_s:.1f} s "
              f"({size:.2f} GiB file; load average {os.getloadavg()[0]:.1f})")
        targets = {"duckdb file": str(path)}
        if args.lake:
            targets["ducklake"] = f"ducklake:postgres:{args.lake}"
            t0 = time.perf_counter()
            lake.push_ledger(path, targets["ducklake"], data_path=str(Path(tmp) / "lake"))
            print(f"pushed into DuckLake in {time.perf_counter() - t0:.1f} s")
        if not args.weekly_only:
            results = {k: time_reads(t, Path(tmp) / f"views-{i}") for i, (k, t) in enumerate(targets.items())}
            print(f"{'read (whole view)':36}" + "".join(f"{k:>16}" for k in results))
            for n in next(iter(results.values())):
                print(f"{n:36}" + "".join(f"{r[n]:15.2f}s" for r in results.values()))
        for i, (k, t) in enumerate(targets.items()):
            weekly = time_weekly(t, Path(tmp) / f"weekly-{i}", args.repeat)
            print(f"\n{k}, {WEEK}, best of {args.repeat} (load average {os.getloadavg()[0]:.1f}); same rows each pair")
            print(f"{'':36}{'wall-clock s':^26}{'CPU s':^34}")
            print(f"{'read':36}{'strftime':>9}{'range':>9}{'ratio':>8}{'strftime':>10}{'range':>10}{'ratio':>8}")
            queries = [v for n, v in weekly.items() if not n.startswith("weekly report")]
            weekly["the queries together"] = tuple(sum(v[i] for v in queries) for i in range(4))
            for n, (wb, wn, cb, cn) in weekly.items():
                print(f"{n:36}{wb:9.3f}{wn:9.3f}{wb / wn:7.1f}x{cb:10.3f}{cn:10.3f}{cb / max(cn, 1e-3):7.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
