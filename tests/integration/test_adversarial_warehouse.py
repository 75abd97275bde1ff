"""Adversarial inputs of the warehouse side (issue #17): one test per attack, each reproducing it first.

A reader holding the file while a writer needs it (17.1), a second run of the same sweep (17.4, see
also tests/integration/test_warehouse_lease.py), records that lie (17.5, 17.9), and "read-only" SQL that tries
to write files (17.7). Each is answered with one clear message, in bounded time and memory,
nothing stored lost, no traceback. Real second processes and real files throughout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from helpers.record_fixtures import example_record
from helpers.warehouse_template import fresh_warehouse

from gpuledger.warehouse import Warehouse, WarehouseBusy

REPO = Path(__file__).resolve().parents[2]
GPULEDGER = [sys.executable, "-m", "gpuledger.cli"]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests")])}

# A reader that holds a read-only connection until a file appears (like `duckdb -readonly`, a notebook).
READER = textwrap.dedent("""
    import sys, time, pathlib, duckdb
    con = duckdb.connect(sys.argv[1], read_only=True)
    con.execute("select count(*) from runs").fetchall()
    print("READING", flush=True)
    release = pathlib.Path(sys.argv[2])
    while not release.exists():
        time.sleep(0.02)
    con.close()
    print("CLOSED", flush=True)
    time.sleep(30)
""")


@pytest.fixture
def ledger(tmp_path) -> Path:
    path = fresh_warehouse(tmp_path / "ledger.duckdb")  # a migrated copy: the migrations are not what this tests
    with Warehouse.open(path) as wh:
        wh.register_sweep(sweep_id="s-1", name="s", started_at="2026-01-05T09:00:00")
        wh.upsert_trials("s-1", [{"trial_id": "t1", "index": 0}, {"trial_id": "t2", "index": 1}])
        wh.ingest_records([example_record("r1", "t1", sweep_id="s-1", usd_per_hour=6.0, wall_s=600)])
    return path


class _Reader:
    def __init__(self, path: Path, tmp: Path):
        self.release = tmp / f"release-{time.monotonic_ns()}"
        self.proc = subprocess.Popen([sys.executable, "-c", READER, str(path), str(self.release)],
                                     stdout=subprocess.PIPE, text=True, env=ENV)
        assert self.proc.stdout.readline().strip() == "READING"

    def let_go(self) -> None:
        self.release.touch()
        assert self.proc.stdout.readline().strip() == "CLOSED"

    def stop(self) -> None:
        self.release.touch()
        self.proc.kill()
        self.proc.wait(timeout=30)


@pytest.mark.slow
def test_writer_waits_for_a_reader_and_then_writes(ledger, tmp_path):
    reader = _Reader(ledger, tmp_path)
    try:
        import threading

        threading.Timer(1.0, reader.let_go).start()  # the reader lets go while the writer waits
        t0 = time.monotonic()
        with Warehouse.open(ledger, lock_timeout_s=30) as wh:
            waited = time.monotonic() - t0
            assert wh.ingest_records([example_record("r2", "t2", sweep_id="s-1")]).new == 1
        assert 0.9 <= waited < 10
    finally:
        reader.stop()
    with Warehouse.open(ledger, read_only=True) as wh:
        assert wh.scalar("select count(*) from runs") == 2


@pytest.mark.slow
def test_a_reader_that_never_lets_go_is_named_as_a_reader(ledger, tmp_path, monkeypatch):
    reader = _Reader(ledger, tmp_path)
    try:
        t0 = time.monotonic()
        with pytest.raises(WarehouseBusy) as err:
            Warehouse.open(ledger, lock_timeout_s=0.5)
        assert 0.5 <= time.monotonic() - t0 < 5  # it retried, within the bound
        msg = str(err.value)
        assert err.value.holder_mode == "reader" and err.value.holder_pid == reader.proc.pid
        assert f"process {reader.proc.pid}" in msg and "read-only" in msg and "writing" not in msg
        assert "GPULEDGER_LOCK_TIMEOUT_S" in msg and "0.5 s" in msg

        # the same through the CLI: one line, no traceback, the bound from the environment
        land = tmp_path / "landing"
        land.mkdir()
        (land / "a.json").write_text(json.dumps(example_record("r3", "t2", sweep_id="s-1")))
        cli = subprocess.run([*GPULEDGER, "ingest", str(land)], capture_output=True, text=True, timeout=120,
                             env={**ENV, "GPULEDGER_WAREHOUSE": str(ledger), "GPULEDGER_LOCK_TIMEOUT_S": "0.3"})
        assert cli.returncode != 0 and "Traceback" not in cli.stderr
        assert cli.stderr.startswith("gpuledger ingest: warehouse ") and "read-only" in cli.stderr
        assert (land / "a.json").exists()  # nothing moved: the next ingest picks it up
    finally:
        reader.stop()


def test_a_bad_lock_timeout_is_a_clear_error(ledger, monkeypatch):
    from gpuledger.errors import UserError

    for bad in ("soon", "-1", "nan", "inf"):
        monkeypatch.setenv("GPULEDGER_LOCK_TIMEOUT_S", bad)
        with pytest.raises(UserError, match="GPULEDGER_LOCK_TIMEOUT_S"):
            Warehouse.open(ledger)


# ---------------------------------------------------------------- 17.5 / 17.9: records that lie


def _ingest_cli(ledger: Path, land: Path, **env: str) -> subprocess.CompletedProcess:
    """`gpuledger ingest LAND` in this process (an exception fails the test: no traceback gets by); the
    command as its own process runs in test_writer_waits_for_a_reader_and_then_writes."""
    import contextlib
    import io
    from unittest import mock

    from gpuledger.cli import main

    out, err = io.StringIO(), io.StringIO()
    with (mock.patch.dict(os.environ, {"GPULEDGER_WAREHOUSE": str(ledger), **env}), contextlib.redirect_stdout(out),
          contextlib.redirect_stderr(err)):
        code = main(["ingest", str(land)])
    return subprocess.CompletedProcess(["gpuledger", "ingest", str(land)], code, out.getvalue(), err.getvalue())


def _landing(tmp_path: Path, files: dict[str, object]) -> Path:
    land = tmp_path / "landing"
    land.mkdir(exist_ok=True)
    for name, value in files.items():
        (land / name).write_text(value if isinstance(value, str) else json.dumps(value))
    return land


def _refused(land: Path, name: str) -> str:
    assert (land / "rejected" / name).exists()
    return (land / "rejected" / f"{name}.reason.txt").read_text()


def _spend(ledger: Path) -> float:
    with Warehouse.open(ledger, read_only=True) as wh:
        return wh.scalar("select coalesce(sum(cost_usd), 0) from runs")


def test_records_of_unknown_sweeps_or_trials_are_refused(ledger, tmp_path):
    no_sweep = example_record("n1", "t2")  # sweep_id None
    land = _landing(tmp_path, {
        "ghost_sweep.json": example_record("g1", "t2", sweep_id="ghost-00000000"),
        "ghost_trial.json": example_record("g2", "nope", sweep_id="s-1"),
        "no_sweep.json": no_sweep,
    })
    cli = _ingest_cli(ledger, land)
    assert cli.returncode == 1 and "Traceback" not in cli.stderr
    assert "unknown sweep 'ghost-00000000'" in _refused(land, "ghost_sweep.json")
    assert "unknown trial 'nope' of sweep 's-1'" in _refused(land, "ghost_trial.json")
    assert "no sweep_id" in _refused(land, "no_sweep.json")
    with Warehouse.open(ledger, read_only=True) as wh:
        assert wh.scalar("select count(*) from runs") == 1  # only the fixture's r1


def test_a_cost_that_is_not_rate_times_hours_is_refused(ledger, tmp_path):
    huge = example_record("c1", "t2", sweep_id="s-1", usd_per_hour=2.0, wall_s=3600)
    huge["billing"][0]["cost_usd"] = 1e308
    rounded = example_record("c2", "t2", sweep_id="s-1", usd_per_hour=2.0, wall_s=3600)
    rounded["billing"][0]["cost_usd"] = 2.004  # within the stated tolerance (1 %, or 1 cent)
    pricey = example_record("c3", "t2", sweep_id="s-1", usd_per_hour=1e300, wall_s=3600)
    land = _landing(tmp_path, {"huge.json": huge, "rounded.json": rounded, "pricey.json": pricey})
    before = _spend(ledger)
    cli = _ingest_cli(ledger, land)
    assert cli.returncode == 1
    assert "cost_usd is 1e+308 but usd_per_hour x hours = 2 x 1 = 2 USD" in _refused(land, "huge.json")
    assert "above the 10000 USD/h" in _refused(land, "pricey.json")
    assert (land / "ingested" / "rounded.json").exists()
    assert _spend(ledger) == pytest.approx(before + 2.004)


@pytest.mark.parametrize("where", ["final", "point", "billing"])
def test_nan_and_infinite_numbers_are_refused(ledger, tmp_path, where):
    rec = example_record("x1", "t2", sweep_id="s-1", final_metrics={"eval_loss": 1.0},
                         metrics=[{"name": "loss", "value": 1.0, "step": 1}])
    if where == "final":
        rec["final_metrics"]["eval_loss"] = float("nan")
    elif where == "point":
        rec["metrics"][0]["value"] = float("inf")
    else:
        rec["billing"][0]["hours"] = float("inf")
    land = _landing(tmp_path, {"x.json": json.dumps(rec)})  # Python writes NaN/Infinity, as a sloppy job would
    assert "NaN" in (land / "x.json").read_text() or "Infinity" in (land / "x.json").read_text()
    cli = _ingest_cli(ledger, land)
    assert cli.returncode == 1 and "Traceback" not in cli.stderr
    assert "not a finite number" in _refused(land, "x.json") or "finite" in _refused(land, "x.json")
    with Warehouse.open(ledger, read_only=True) as wh:
        assert wh.scalar("select count(*) from runs where run_id = 'x1'") == 0


@pytest.mark.slow
def test_a_65_mb_record_is_refused_in_bounded_memory(ledger, tmp_path):
    land = _landing(tmp_path, {})
    head = json.dumps(example_record("big", "t2", sweep_id="s-1", metrics=[]))[:-1]
    with (land / "big.json").open("w") as fh:  # ~65 MB of metric points, written as a stream
        fh.write(head.replace('"metrics": []', '"metrics": [' + ", ".join(
            f'{{"name": "loss", "value": 1.0, "step": {i}, "t_s": {i}.0}}' for i in range(950_000)) + "]") + "}")
    size_mb = (land / "big.json").stat().st_size / 1e6
    assert size_mb > 60
    over_cap = example_record("many", "t2", sweep_id="s-1")
    over_cap["metrics"] = [{"name": "loss", "value": 1.0, "step": i} for i in range(20_001)]
    (land / "many.json").write_text(json.dumps(over_cap))  # under the byte cap, over the point cap
    # measure the ingest's peak memory (RSS of the child) with a small script around the CLI
    probe = textwrap.dedent("""
        import resource, subprocess, sys
        rc = subprocess.run(sys.argv[1:]).returncode
        print("PEAK_MB", resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, "RC", rc)
    """)
    out = subprocess.run([sys.executable, "-c", probe, *GPULEDGER, "ingest", str(land)], capture_output=True,
                         text=True, timeout=300, env={**ENV, "GPULEDGER_WAREHOUSE": str(ledger)})
    peak_mb, rc = float(out.stdout.split()[-3]), int(out.stdout.split()[-1])
    assert rc == 1 and "Traceback" not in out.stderr
    assert "over 8 MiB" in _refused(land, "big.json")
    assert "20001 metric points; a record holds at most 20000" in _refused(land, "many.json")
    assert peak_mb < 250, f"ingest of a {size_mb:.0f} MB record peaked at {peak_mb:.0f} MB"


def test_a_fifo_or_a_device_in_landing_is_refused_without_blocking(ledger, tmp_path):
    land = _landing(tmp_path, {"good.json": example_record("g1", "t2", sweep_id="s-1")})
    os.mkfifo(land / "fifo.json")  # opening it for reading would block forever
    (land / "zero.json").symlink_to("/dev/zero")  # reading it would never end
    with Warehouse.open(ledger) as wh:
        result = wh.ingest_landing(land)
    assert result.ingested == 1 and sorted(Path(r.source).name for r in result.rejected) == ["fifo.json", "zero.json"]
    assert "not a regular file" in _refused(land, "fifo.json") and "not a regular file" in _refused(land, "zero.json")


def test_a_list_file_with_one_bad_item_keeps_the_good_ones(ledger, tmp_path):
    items = [example_record("l1", "t1", sweep_id="s-1"), example_record("l2", "ghost", sweep_id="s-1"),
             example_record("l3", "t2", sweep_id="s-1")]
    land = _landing(tmp_path, {"batch.json": items})
    cli = _ingest_cli(ledger, land)
    assert cli.returncode == 1 and "1 rejected" in cli.stdout and "3 records" not in cli.stdout
    assert "batch.json[1]: unknown trial 'ghost'" in cli.stderr
    kept = json.loads((land / "ingested" / "batch.json").read_text())
    refused = json.loads((land / "rejected" / "batch.json").read_text())
    assert [r["run_id"] for r in kept] == ["l1", "l3"] and [r["run_id"] for r in refused] == ["l2"]
    assert "batch.json[1]: unknown trial 'ghost'" in _refused(land, "batch.json")
    assert not (land / "batch.json").exists()
    with Warehouse.open(ledger, read_only=True) as wh:
        assert sorted(wh.query("select run_id from runs")["run_id"]) == ["l1", "l3", "r1"]
    assert _ingest_cli(ledger, land).returncode == 0  # nothing left to do: success


# ---------------------------------------------------------------- 17.7: "read-only" SQL that writes files


def _sql(ledger: Path, query: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([*GPULEDGER, "sql", query, *extra], capture_output=True, text=True, timeout=120,
                          cwd=ledger.parent, env={**ENV, "GPULEDGER_WAREHOUSE": str(ledger)})


WRITE_ATTACKS = {
    "profile_output": "pragma profile_output='{out}'",
    "profile_output_set": "set profile_output='{out}'",
    "enable_profiling": "pragma enable_profiling='json'",
    "log_query_path": "set log_query_path='{out}'",
    "copy_to": "copy (select * from runs) to '{out}'",
    "export_database": "export database '{out}'",
    "attach_new_file": "attach '{out}' as x",
    "install": "install httpfs",
    "load": "load httpfs",
    "enable_logging_call": "call enable_logging(storage='file', storage_path='{out}')",
    "enable_logging_select": "select * from enable_logging(storage='file', storage_path='{out}')",
    "nested_in_cte": "with x as (select * from enable_logging(storage='file', storage_path='{out}')) select 1",
    "query_text": "select * from query('copy runs to ''{out}''')",
    "explain_analyze_copy": "explain analyze copy runs to '{out}'",
    "after_a_select": "select 1; copy runs to '{out}'",
    "commented": "/* select */ -- x\n copy runs to '{out}'",
    "set_variable_subquery": "set variable v = (select count(*) from enable_logging(storage='file', storage_path='{out}'))",
}


@pytest.mark.slow
def test_profile_output_pragma_cannot_overwrite_a_file(ledger, tmp_path):
    victim = tmp_path / "victim.txt"  # a file the user can write: it must stay as it is
    victim.write_text("precious\n")
    cli = _sql(ledger, f"pragma profile_output='{victim}'; select * from runs")  # the real CLI, a real process
    assert cli.returncode == 1 and "Traceback" not in cli.stderr
    assert cli.stderr.startswith("gpuledger sql: refusing") and cli.stderr.count("\n") == 1
    assert victim.read_text() == "precious\n"


@pytest.mark.parametrize("name", sorted(WRITE_ATTACKS))
def test_read_only_sql_cannot_write_files(ledger, tmp_path, name, monkeypatch, capsys):
    from gpuledger.cli import main

    out = tmp_path / f"pwned-{name}"
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    query = WRITE_ATTACKS[name].format(out=out if name != "profile_output" else victim)
    monkeypatch.setenv("GPULEDGER_WAREHOUSE", str(ledger))
    monkeypatch.chdir(tmp_path)
    assert main(["sql", query]) == 1
    err = capsys.readouterr().err
    assert err.startswith("gpuledger sql: refusing") and err.count("\n") == 1
    assert "Traceback" not in err and "--write" in err
    assert not out.exists() and victim.read_text() == "precious\n"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("pwned")) == []


def test_even_past_the_check_the_connection_is_locked(ledger, tmp_path):
    from gpuledger.errors import UserError
    from gpuledger.warehouse import READ_ONLY_CONFIG

    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    with Warehouse.open(ledger, read_only=True, config=READ_ONLY_CONFIG) as wh:
        with pytest.raises(UserError, match="configuration has been locked"):
            wh.query(f"pragma profile_output='{victim}'")
        with pytest.raises(UserError, match="locked"):
            wh.query("set autoload_known_extensions = true")
    assert victim.read_text() == "precious\n"


@pytest.mark.slow
def test_read_only_sql_still_reads_the_users_files_and_the_catalog(ledger, tmp_path, monkeypatch, capsys):
    """The CLI's main in this process (a process per query cost ~2.5 s each; the real process is
    test_profile_output_pragma_cannot_overwrite_a_file's)."""
    from gpuledger.cli import main

    (tmp_path / "extra.csv").write_text("trial_id,note\nt1,good\n")
    with Warehouse.open(ledger, read_only=True) as wh:
        wh.export_parquet(tmp_path / "pq")
    monkeypatch.setenv("GPULEDGER_WAREHOUSE", str(ledger))
    monkeypatch.chdir(ledger.parent)

    def sql(query: str, *extra: str) -> tuple[int, str, str]:
        code = main(["sql", query, *extra])
        out, err = capsys.readouterr()
        return code, out, err

    code, out, err = sql("select r.run_id, e.note from runs r join 'extra.csv' e using (trial_id)", "--format", "csv")
    assert code == 0, err
    assert out == "run_id,note\nr1,good\n"
    code, out, err = sql(f"select count(*) as n from read_parquet('{tmp_path / 'pq' / 'runs.parquet'}')",
                         "--format", "csv")
    assert code == 0 and out == "n\n1\n", err
    for ok in ("pragma table_info('runs')", "call pragma_table_info('runs')", "pragma version",
               "select view_name, comment from duckdb_views() where view_name = 'v_waste'",
               "explain select * from v_runs"):
        code, out, err = sql(ok)
        assert code == 0 and out and "Traceback" not in err, (ok, err)


@pytest.mark.slow
def test_with_write_the_user_may_copy_out(ledger, tmp_path):
    out = tmp_path / "runs.csv"
    cli = _sql(ledger, f"copy (select run_id from runs) to '{out}'", "--write")
    assert cli.returncode == 0, cli.stderr
    assert out.read_text().splitlines() == ["run_id", "r1"]


# -- issue 31: inputs that would break the write are refused at ingest, never wedging landing ----------


@pytest.mark.parametrize("bad", [
    {"final_metrics": {"n" * 200_000: 1.0}},                       # DuckDB's index key size
    {"metrics": [{"name": "m" * 201, "value": 1.0}]},
    {"metrics": [{"name": "loss\nINFO forged log line", "value": 1.0}]},
    {"metrics": [{"name": "loss", "value": 1.0, "step": 2**63 + 5}]},
    {"trial_id": "t" * 300},
    {"reason": "r" * 100_000},
])
def test_a_record_that_would_break_the_write_is_refused_and_landing_goes_on(ledger, tmp_path, bad):
    land = tmp_path / "landing"
    land.mkdir()
    (land / "bad.json").write_text(json.dumps({**example_record("r-bad", "t1", sweep_id="s-1"), **bad}))
    (land / "good.json").write_text(json.dumps(example_record("r-good", "t2", sweep_id="s-1")))
    with Warehouse.open(ledger) as wh:
        result = wh.ingest_landing(land)
        again = wh.ingest_landing(land)  # landing is not wedged: nothing left, nothing raised
        stored = sorted(wh.query("select run_id from runs")["run_id"])
    assert result.ingested == 1 and [r.source.endswith("bad.json") for r in result.rejected] == [True]
    reason = (land / "rejected" / "bad.json.reason.txt").read_text()
    assert len(reason.strip().splitlines()) == 1 and len(reason) < 400
    assert stored == ["r-good", "r1"] and again.ingested == 0 and again.rejected == []
