"""The team warehouse on DuckLake with a real PostgreSQL catalog (issue 20).

A demo-shaped ledger file (runs, trials, metrics, billing) is pushed from two processes at once;
the lake must then hold exactly the file's rows, and the documented views must answer the same.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.postgres import postgres_cluster
from helpers.record_fixtures import example_record, ingest_known

from gpuledger.billing import read_focus
from gpuledger.warehouse import Warehouse

DATA = Path(__file__).resolve().parents[1] / "data" / "focus"
SWEEP = "lora-grid-12345678"


@pytest.fixture(scope="module")
def catalog():
    with postgres_cluster("ledger") as conn:
        yield conn


def make_ledger(path: Path) -> None:
    trials = [f"{i:012x}" for i in range(1, 7)]
    with Warehouse.open(path) as wh:
        wh.register_sweep(sweep_id=SWEEP, name="lora-grid", project="p", owner="o",
                          objective_metric="eval_loss", objective_goal="minimize", budget_usd=5.0,
                          started_at="2026-02-02T09:00:00")
        wh.upsert_trials(SWEEP, [{"trial_id": t, "index": i, "params": {"lr": i}} for i, t in enumerate(trials)])
        recs = [example_record(f"run-{i}", t, sweep_id=SWEEP, started_at=f"2026-02-02T1{i}:00:00", wall_s=600 + i,
                               usd_per_hour=0.1 * (i + 1), final_metrics={"eval_loss": 1.0 - 0.05 * i},
                               metrics=[{"step": s, "name": "eval_loss", "value": 2.0 - s / 10} for s in range(5)])
                for i, t in enumerate(trials)]
        ingest_known(wh, recs)
        wh.ingest_billing_file(read_focus(DATA / "gpu_cloud_2026-02.csv"))


def _push(file: Path, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "gpuledger.cli", "warehouse", "push", str(file)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


COMPARE = [
    "select count(*), sum(cost_usd), sum(wall_s) from runs",
    "select count(*), count(distinct trial_id) from trials",
    "select count(*), sum(value) from metrics",
    "select count(*), sum(billed_cost) from billing_line_items",
    "select sweep_name, best_trial_id, best_metric, total_cost_usd, cost_to_recipe_usd from v_sweep_roi order by 1",
    "select trial_id, status, metric_value from v_trial_results order by trial_id",
    "select week, cost_usd from v_weekly_spend order by week",
    "select sum(billed_cost_usd), sum(effective_cost_usd), sum(unattributed_usd) from v_billed_spend",
]


def test_two_processes_push_the_same_ledger_at_once_and_the_lake_equals_the_file(tmp_path, catalog):
    ledger = tmp_path / "ledger.duckdb"
    make_ledger(ledger)
    env = {**os.environ, "GPULEDGER_WAREHOUSE": f"ducklake:postgres:{catalog}",
           "GPULEDGER_WAREHOUSE_DATA": str(tmp_path / "lake-data")}
    procs = [_push(ledger, env), _push(ledger, env)]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
        assert "Traceback" not in err and "pushed" in out
    again = _push(ledger, env)  # and a third time, later: still no duplicates
    assert again.wait(timeout=600) == 0
    with Warehouse.open(ledger, read_only=True) as local:
        expected = [local.query(q).rows() for q in COMPARE]
    with Warehouse.open(env["GPULEDGER_WAREHOUSE"], read_only=True) as team:
        got = [team.query(q).rows() for q in COMPARE]
        assert team.backend == "ducklake"
    for q, e, g in zip(COMPARE, expected, got, strict=True):
        assert g == e, q


def test_sql_reads_the_lake_and_a_bad_catalog_is_one_line(tmp_path, catalog):
    env = {**os.environ, "GPULEDGER_WAREHOUSE": "ducklake:postgres:dbname=nope host=127.0.0.1 port=1 user=x",
           "GPULEDGER_WAREHOUSE_DATA": str(tmp_path / "d")}
    proc = subprocess.run([sys.executable, "-m", "gpuledger.cli", "sql", "select 1"], capture_output=True,
                          text=True, env=env, timeout=120)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "cannot open the DuckLake warehouse" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    env["GPULEDGER_WAREHOUSE"] = "ducklake:sqlite:x.db"
    proc = subprocess.run([sys.executable, "-m", "gpuledger.cli", "warehouse", "push", "nofile.duckdb"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 1 and "only ducklake:postgres" in proc.stderr


def test_the_writer_lock_is_one_session_per_process_and_threads_take_turns(catalog):
    """`lake.WriterLock.for_target`: every writable open of one catalog in a process shares one PostgreSQL
    session (a batch does not connect twice), `close()` keeps it, and two threads never hold it at once
    (the advisory lock is the session's, so the threads take turns on the lock's own mutex)."""
    import threading
    import time

    from gpuledger.warehouse import lake

    target = f"ducklake:postgres:{catalog}"
    lock = lake.WriterLock.for_target(target)
    assert lake.WriterLock.for_target(target) is lock
    inside, overlaps = [], []

    def work(name: str) -> None:
        for _ in range(5):
            lock.acquire()
            try:
                if inside:
                    overlaps.append(name)
                inside.append(name)
                time.sleep(0.01)
                inside.remove(name)
            finally:
                lock.release()

    threads = [threading.Thread(target=work, args=(f"t{i}",)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not overlaps and lock.acquired >= 15
    session = lock._pg
    lock.close()
    assert lock._pg is session and not session.closed  # the shared session stays for the next open
    other = lake.WriterLock(target)  # a private one (push_ledger's) is another session: it waits meanwhile
    lock.acquire()
    try:
        with pytest.raises(lake.LakeError, match="held the team warehouse's writer lock"):
            other.acquire(wait_s=0.5)
    finally:
        lock.release()
        other.close()
