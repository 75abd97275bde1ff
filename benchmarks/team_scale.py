"""Team-scale benchmark: result records at a stated rate from several writer processes into DuckLake
(catalog on a real PostgreSQL, data on a real S3-compatible server), through the warehouse's own ingest
(pandera validation, one transaction per batch, the catalog's writer lock); then maintenance and the
weekly report over the result.

    .venv/bin/python benchmarks/team_scale.py [--rows-per-s 1200] [--seconds 600] [--writers 4]
                                              [--batch-s 10] [--points 100] [--json]

Each writer process stands for a machine's sweeps: every `--batch-s` seconds it ingests the runs that
"finished" in that window (each run with `--points` metric points), so the rows arrive at
`--rows-per-s` in total. Reported: rows and runs stored (checked: each exactly once), rows/s achieved,
ingest lag (from a batch's window end to its commit, P50/P99), commit seconds (P50/P99), the time
writers waited for each other's lock, commits, live data files before and after `maintain`, objects in
the bucket, and the weekly report's seconds. Starts its own PostgreSQL and S3 server (the test suite's
helpers: Debian's postgresql and PyPI's moto[server]).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _writer(index: int, args: argparse.Namespace, env: dict[str, str], out: mp.Queue) -> None:
    os.environ.update(env)
    from helpers.record_fixtures import example_record

    from gpuledger.warehouse import Warehouse

    runs_per_batch = max(1, round(args.rows_per_s * args.batch_s / args.writers / (args.points + 2)))
    sweep = f"team-w{index}-{os.getpid():08x}"[-40:]
    stats = {"writer": index, "batches": [], "runs": 0, "rows": 0, "lock_wait_s": 0.0}
    start = time.monotonic()
    with Warehouse.open() as wh:
        wh.register_sweep(sweep_id=sweep,
                          name=f"team-w{index}", started_at=datetime.now(UTC).replace(tzinfo=None).isoformat())
        n = 0
        while time.monotonic() - start < args.seconds:
            window_end = start + (len(stats["batches"]) + 1) * args.batch_s
            time.sleep(max(0.0, window_end - time.monotonic()))
            trials = [f"{index:04x}{n + i:08x}" for i in range(runs_per_batch)]
            wh.upsert_trials(sweep, [{"trial_id": t} for t in trials])
            now = datetime.now(UTC).replace(tzinfo=None)
            recs = [example_record(f"{t}-a1-{index:02x}", t, sweep_id=sweep, started_at=now.isoformat(), wall_s=60.0,
                                   usd_per_hour=2.0, final_metrics={"eval_loss": 1.0 + (n + i) % 7 / 10},
                                   metrics=[{"step": s, "name": "loss", "value": 2.0 / (s + 1)} for s in range(args.points)])
                    for i, t in enumerate(trials)]
            t0 = time.monotonic()
            wh.ingest_records(recs)
            committed = time.monotonic()
            stats["batches"].append({"commit_s": committed - t0, "lag_s": committed - window_end,
                                     "rows": len(recs) * (args.points + 2)})
            stats["runs"] += len(recs)
            stats["rows"] += len(recs) * (args.points + 2)
            n += runs_per_batch
        lock = wh._writer_lock
        stats["lock_wait_s"] = lock.waited_s if lock is not None else 0.0
    out.put(stats)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows-per-s", type=float, default=1200.0)
    ap.add_argument("--seconds", type=float, default=600.0)
    ap.add_argument("--writers", type=int, default=4)
    ap.add_argument("--batch-s", type=float, default=10.0)
    ap.add_argument("--points", type=int, default=100)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    from helpers.postgres import postgres_cluster
    from helpers.s3_server import s3_server

    with s3_server() as s3, postgres_cluster("ledger") as conn:
        env = {**s3.env(), "GPULEDGER_WAREHOUSE": f"ducklake:postgres:{conn}",
               "GPULEDGER_WAREHOUSE_DATA": f"s3://{s3.bucket}/ledger/", "GPULEDGER_PROJECT": tempfile.mkdtemp()}
        Path(env["GPULEDGER_PROJECT"], "gpuledger.toml").write_text("", encoding="utf-8")
        os.environ.update(env)
        from gpuledger.warehouse import Warehouse
        from gpuledger.warehouse.maintenance import data_files, maintain

        with Warehouse.open():  # the catalog and its schema, before the writers race for it
            pass
        queue: mp.Queue = mp.get_context("spawn").Queue()
        ctx = mp.get_context("spawn")
        t0 = time.monotonic()
        procs = [ctx.Process(target=_writer, args=(i, args, env, queue)) for i in range(args.writers)]
        for p in procs:
            p.start()
        results = [queue.get(timeout=args.seconds + 900) for _ in procs]
        for p in procs:
            p.join(timeout=60)
        wall = time.monotonic() - t0
        batches = [b for r in results for b in r["batches"]]
        with Warehouse.open(read_only=True) as wh:
            stored = wh.query("select count(*) as n, count(distinct run_id) as d from runs").row(0, named=True)
            points = wh.query("select count(*) as n from metrics").row(0, named=True)["n"]
        with Warehouse.open() as wh:
            files_before = data_files(wh._con)
            m = maintain(wh, metrics_older_than_days=0, every=10, expire_older_than_days=0)
        from gpuledger.report import write_weekly_report
        from gpuledger.report.weeks import check_week

        week = check_week(time.strftime("%G-W%V", time.gmtime()))
        r0 = time.monotonic()
        with Warehouse.open(read_only=True) as wh:
            write_weekly_report(wh, week=week, out_dir=Path(tempfile.mkdtemp()))
        report_s = time.monotonic() - r0
        expected_runs = sum(r["runs"] for r in results)
        summary = {
            "date": datetime.now(UTC).isoformat(timespec="seconds"), "machine": f"{os.cpu_count()} cores",
            "load_average": os.getloadavg(), "writers": args.writers, "target_rows_per_s": args.rows_per_s,
            "seconds": args.seconds, "batch_s": args.batch_s, "points_per_run": args.points,
            "rows_sent": sum(r["rows"] for r in results), "runs_sent": expected_runs,
            "runs_stored": stored["n"], "runs_distinct": stored["d"], "metric_points_stored": points,
            "every_run_once": stored["n"] == stored["d"] == expected_runs,
            "rows_per_s_achieved": sum(r["rows"] for r in results) / wall, "wall_s": wall,
            "commits": len(batches),
            "lag_s_p50": _pct([b["lag_s"] for b in batches], 0.5), "lag_s_p99": _pct([b["lag_s"] for b in batches], 0.99),
            "commit_s_p50": _pct([b["commit_s"] for b in batches], 0.5),
            "commit_s_p99": _pct([b["commit_s"] for b in batches], 0.99),
            "lock_wait_s_total": sum(r["lock_wait_s"] for r in results),
            "data_files_before_maintain": files_before, "data_files_after_maintain": m.files_after,
            "metric_rows_after_downsample": m.metric_rows_after, "maintain_s": m.seconds,
            "bucket_objects": len(s3.keys()), "weekly_report_s": report_s,
            "commit_s_mean": statistics.fmean(b["commit_s"] for b in batches) if batches else None,
        }
    if args.json:
        print(json.dumps(summary, indent=2, default=str))
    else:
        for k, v in summary.items():
            print(f"{k:32s} {v:.3f}" if isinstance(v, float) else f"{k:32s} {v}")
    return 0 if summary["every_run_once"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
