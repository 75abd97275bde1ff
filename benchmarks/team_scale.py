"""Team-scale benchmark: result records at a stated rate from several writer processes into DuckLake
(catalog on a real PostgreSQL, data on a real S3-compatible server), through the ingest service (the
default, `--mode service`: the writers land records in the bucket, one service process stores them in
batches, one commit each) or written directly by each writer (`--mode direct`, one commit per writer
batch); then maintenance and the weekly report over the result.

    .venv/bin/python benchmarks/team_scale.py [--mode service|direct] [--rows-per-s 1200] [--seconds 600]
                                              [--writers 4] [--batch-s 2] [--points 100] [--json]
                                              [--out benchmarks/results/team_scale.json]

Each writer process stands for a machine's sweeps: it registers its sweep and trials once, then every
`--batch-s` seconds hands over the runs that "finished" in that window (each with `--points` metric
points and 2 more rows: its runs row and a billing line), so the rows arrive at `--rows-per-s` in total.
Reported: rows and runs stored (checked: each exactly once), rows/s achieved (the rows sent, all stored,
over the time from starting the writers to the last commit), ingest lag (service: from a record's landing to its commit,
`v_ingest_batches`; direct: from a batch's window end to its commit), P50/P99, commits and commit seconds
(P50/P99), live data files before and after `maintain`, objects in the bucket, and the weekly report's
seconds. Starts its own PostgreSQL and S3 server (the test suite's helpers: Debian's postgresql and
PyPI's moto[server]).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
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


def _trials(index: int, n: int) -> list[str]:
    return [f"{index:04x}{i:08x}" for i in range(n)]


def _writer(index: int, args: argparse.Namespace, env: dict[str, str], out: mp.Queue) -> None:
    os.environ.update(env)
    from helpers.record_fixtures import example_record

    from gpuledger.warehouse import Warehouse, ingest_service, landing_store

    runs_per_batch = max(1, round(args.rows_per_s * args.batch_s / args.writers / (args.points + 2)))
    batches = max(1, int(args.seconds // args.batch_s))
    sweep = f"team-w{index}-{os.getpid():08x}"[-40:]
    stats = {"writer": index, "batches": [], "runs": 0, "rows": 0, "lock_wait_s": 0.0}
    trials = _trials(index, runs_per_batch * batches)
    wh = Warehouse.open()
    wh.register_sweep(sweep_id=sweep, name=f"team-w{index}", started_at=datetime.now(UTC).replace(tzinfo=None).isoformat())
    wh.upsert_trials(sweep, [{"trial_id": t} for t in trials])  # a sweep registers its trials once, at its start
    store = landing_store.open_landing() if args.mode == "service" else None
    if store is not None:
        wh.close()
    start = time.monotonic()
    for b in range(batches):
        window_end = start + (b + 1) * args.batch_s
        time.sleep(max(0.0, window_end - time.monotonic()))
        now = datetime.now(UTC).replace(tzinfo=None)
        recs = [example_record(f"{t}-a1-{index:02x}", t, sweep_id=sweep, started_at=now.isoformat(), wall_s=60.0,
                               usd_per_hour=2.0, final_metrics={"eval_loss": 1.0 + (b + i) % 7 / 10},
                               metrics=[{"step": s, "name": "loss", "value": 2.0 / (s + 1)} for s in range(args.points)])
                for i, t in enumerate(trials[b * runs_per_batch:(b + 1) * runs_per_batch])]
        t0 = time.monotonic()
        if store is not None:
            ingest_service.land(recs, store)
        else:
            wh.ingest_records(recs)
        done = time.monotonic()
        stats["batches"].append({"commit_s": done - t0, "lag_s": done - window_end, "rows": len(recs) * (args.points + 2)})
        stats["runs"] += len(recs)
        stats["rows"] += len(recs) * (args.points + 2)
    if store is None:
        lock = wh._writer_lock
        stats["lock_wait_s"] = lock.waited_s if lock is not None else 0.0
        wh.close()
    out.put(stats)


def _service(args: argparse.Namespace, env: dict[str, str], out: mp.Queue) -> None:
    os.environ.update(env)
    from gpuledger.warehouse import ingest_service

    result = ingest_service.run_service(seconds=args.seconds + 10, poll_s=0.5)
    out.put({"batches": len(result.batches), "stored": result.stored})


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mode", choices=("service", "direct"), default="service")
    ap.add_argument("--rows-per-s", type=float, default=1200.0)
    ap.add_argument("--seconds", type=float, default=600.0)
    ap.add_argument("--writers", type=int, default=4)
    ap.add_argument("--batch-s", type=float, default=2.0)
    ap.add_argument("--points", type=int, default=100)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--out", default=None, help="also write the summary as JSON to this file")
    args = ap.parse_args()

    from helpers.postgres import postgres_cluster
    from helpers.s3_server import s3_server

    with s3_server() as s3, postgres_cluster("ledger") as conn:
        env = {**s3.env(), "GPULEDGER_WAREHOUSE": f"ducklake:postgres:{conn}",
               "GPULEDGER_WAREHOUSE_DATA": f"s3://{s3.bucket}/ledger/", "GPULEDGER_PROJECT": tempfile.mkdtemp(),
               "GPULEDGER_INGEST": args.mode}
        Path(env["GPULEDGER_PROJECT"], "gpuledger.toml").write_text("", encoding="utf-8")
        os.environ.update(env)
        from gpuledger.warehouse import Warehouse, ingest_service
        from gpuledger.warehouse.maintenance import data_files, maintain

        with Warehouse.open():  # the catalog and its schema, before the writers race for it
            pass
        ctx = mp.get_context("spawn")
        queue: mp.Queue = ctx.Queue()
        service_q: mp.Queue = ctx.Queue()
        t0 = time.monotonic()
        began = datetime.now(UTC).replace(tzinfo=None)
        service = ctx.Process(target=_service, args=(args, env, service_q)) if args.mode == "service" else None
        if service is not None:
            service.start()
        procs = [ctx.Process(target=_writer, args=(i, args, env, queue)) for i in range(args.writers)]
        for p in procs:
            p.start()
        results = [queue.get(timeout=args.seconds + 900) for _ in procs]
        for p in procs:
            p.join(timeout=60)
        if service is not None:
            service_q.get(timeout=3600)
            service.join(timeout=60)
            ingest_service.run_service()  # whatever landed after the service's last poll
        wall = time.monotonic() - t0
        batches = [b for r in results for b in r["batches"]]
        with Warehouse.open(read_only=True) as wh:
            stored = wh.query("select count(*) as n, count(distinct run_id) as d from runs").row(0, named=True)
            points = wh.query("select count(*) as n from metrics").row(0, named=True)["n"]
            svc = wh.query("select count(*) as commits, quantile_cont(commit_s, 0.5) as c50, "
                           "quantile_cont(commit_s, 0.99) as c99, sum(stored)::BIGINT as stored, max(attempts) as attempts, "
                           "sum(duplicates)::BIGINT as duplicates, min(started_at) as first, max(committed_at) as last "
                           "from ingest_batches").row(0, named=True)
            lag = wh.query("select quantile_cont(epoch(stored_at - landed_at), 0.5) as p50, "
                           "quantile_cont(epoch(stored_at - landed_at), 0.99) as p99, "
                           "max(epoch(stored_at - landed_at)) as mx from ingested_records").row(0, named=True)
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
        rows_sent = sum(r["rows"] for r in results)
        service_mode = args.mode == "service"
        summary = {
            "date": datetime.now(UTC).isoformat(timespec="seconds"), "machine": f"{os.cpu_count()} cores",
            "load_average": os.getloadavg(), "mode": args.mode, "writers": args.writers,
            "target_rows_per_s": args.rows_per_s, "seconds": args.seconds, "batch_s": args.batch_s,
            "points_per_run": args.points, "rows_sent": rows_sent, "runs_sent": expected_runs,
            "runs_stored": stored["n"], "runs_distinct": stored["d"], "metric_points_stored": points,
            "every_run_once": stored["n"] == stored["d"] == expected_runs,
            "rows_per_s_achieved": rows_sent / ((svc["last"] - began).total_seconds() if service_mode and svc["last"]
                                                else wall), "wall_s": wall,
            "commits": svc["commits"] if service_mode else len(batches),
            "commit_s_p50": svc["c50"] if service_mode else _pct([b["commit_s"] for b in batches], 0.5),
            "commit_s_p99": svc["c99"] if service_mode else _pct([b["commit_s"] for b in batches], 0.99),
            "lag_s_p50": lag["p50"] if service_mode else _pct([b["lag_s"] for b in batches], 0.5),
            "lag_s_p99": lag["p99"] if service_mode else _pct([b["lag_s"] for b in batches], 0.99),
            "lag_s_max": lag["mx"] if service_mode else max((b["lag_s"] for b in batches), default=None),
            "land_s_p50": _pct([b["commit_s"] for b in batches], 0.5) if service_mode else None,
            "commit_attempts_max": svc["attempts"], "duplicates_skipped": svc["duplicates"],
            "lock_wait_s_total": sum(r["lock_wait_s"] for r in results),
            "data_files_before_maintain": files_before, "data_files_after_maintain": m.files_after,
            "metric_rows_after_downsample": m.metric_rows_after, "maintain_s": m.seconds,
            "bucket_objects": len(s3.keys()), "weekly_report_s": report_s,
        }
    text = json.dumps(summary, indent=2, default=str)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    if args.json:
        print(text)
    else:
        for k, v in summary.items():
            print(f"{k:32s} {v:.3f}" if isinstance(v, float) else f"{k:32s} {v}")
    return 0 if summary["every_run_once"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
