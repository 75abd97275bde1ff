"""Issue 43 items 2 and 7: the agent's SQL (`gpuledger.warehouse.ledger_sql.ledger_query`, what the MCP
`sql` tool runs) reads the ledger only and comes back bounded; the user's `gpuledger sql` still reads the
user's files; a FIFO or device at the warehouse path is refused at once, never opened. Each hostile case
beside its harmless control, on a real DuckDB file."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.record_fixtures import example_record, ingest_known

from gpuledger.cli import main
from gpuledger.errors import UserError
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.ledger_sql import LEDGER_ONLY, ledger_query

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def ledger_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("ledger") / "ledger.duckdb"
    with Warehouse.open(path) as wh:
        wh.register_sweep(sweep_id="s-1", name="s", project="p", owner="o", objective_metric="eval_loss")
        ingest_known(wh, [example_record("r1", "t1", sweep_id="s-1", usd_per_hour=6.0, wall_s=600,
                                          final_metrics={"eval_loss": 1.5})])
    return path


@pytest.fixture
def ledger(ledger_file, monkeypatch) -> Path:
    monkeypatch.setenv("GPULEDGER_WAREHOUSE", str(ledger_file))
    return ledger_file


@pytest.fixture
def secret(tmp_path) -> Path:
    creds = tmp_path / "home" / ".aws" / "credentials"
    creds.parent.mkdir(parents=True)
    creds.write_text("[default]\naws_secret_access_key = AKIA-VERY-SECRET\n", encoding="utf-8")
    (tmp_path / "notes.csv").write_text("a,b\n1,2\n", encoding="utf-8")
    return creds


@pytest.mark.parametrize("query", [
    "select * from read_text('{creds}')",
    "select content from read_text('{creds}')",
    "select * from read_blob('{creds}')",
    "select * from read_csv('{creds}', header=false, sep='=')",
    "select * from read_csv('{notes}')",
    "select * from '{notes}'",
    "select * from glob('{home}/*')",
    "select * from read_parquet('https://example.com/x.parquet')",
    "select * from read_json('s3://bucket/key.json')",
    "with x as (select * from read_text('{creds}')) select * from x",
    "select (select content from read_text('{creds}'))",
    "copy runs to '{tmp}/out.csv'",
    "copy (select 1) to '{tmp}/out.parquet' (format parquet)",
    "attach '{tmp}/other.duckdb' as o",
    "install httpfs",
    "load httpfs",
    "set enable_external_access = true",
    "pragma enable_profiling",
    "export database '{tmp}/dump'",
])
@pytest.mark.slow  # over ~0.5 s alone (a report, warehouse, plan or subprocess): make test runs it, make test-fast does not
def test_the_agents_sql_reads_nothing_but_the_ledger(ledger, secret, tmp_path, query):
    text = query.format(creds=secret, notes=tmp_path / "notes.csv", home=secret.parents[1], tmp=tmp_path)
    with pytest.raises(UserError) as info:
        ledger_query(text, path=ledger)
    message = str(info.value)
    assert "AKIA" not in message and len(message.splitlines()) == 1
    # the refusal names why (the ledger only, external access off), or the file is simply not a table
    assert LEDGER_ONLY in message or "does not exist" in message, message
    assert not (tmp_path / "out.csv").exists() and not (tmp_path / "out.parquet").exists()
    assert not (tmp_path / "other.duckdb").exists() and not (tmp_path / "dump").exists()


def test_the_agents_sql_still_reads_the_ledger(ledger):
    # control: tables, views, metadata and pragmas that show things
    assert ledger_query("select run_id, cost_usd from v_runs", path=ledger).rows == [{"run_id": "r1", "cost_usd": 1.0}]
    assert ledger_query("select count(*) as n from sweeps", path=ledger).rows == [{"n": 1}]
    assert ledger_query("select count(*) > 5 as many from duckdb_views() where not internal", path=ledger).rows == [
        {"many": True}]
    assert ledger_query("pragma version", path=ledger).rows[0]["library_version"].startswith("v")


def test_the_users_own_sql_keeps_reading_the_users_files(ledger, secret, capsys):
    # `gpuledger sql` is the user's: it reads what the user can read (README)
    assert main(["sql", f"select content from read_text('{secret}')", "--format", "csv"]) == 0
    assert "AKIA-VERY-SECRET" in capsys.readouterr().out


@pytest.mark.slow  # over ~0.5 s alone (a report, warehouse, plan or subprocess): make test runs it, make test-fast does not
def test_a_huge_result_is_cut_at_the_limit_without_being_built(ledger):
    # ~300 MB of rows: streamed, the first 1000 kept, the rest never fetched
    code = ("import resource, time; from gpuledger.warehouse.ledger_sql import ledger_query; "
            "import gpuledger.warehouse; before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss; t = time.monotonic(); "
            f"r = ledger_query(\"select i, repeat('x', 300) as pad from range(1000000) t(i)\", path={str(ledger)!r}); "
            "print(len(r.rows), r.truncated, r.cut_by, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024, "
            "round(time.monotonic() - t, 2))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)}).stdout.split()
    rows, truncated, cut_by, grew_mib = int(out[0]), out[1], out[2], int(out[3])
    assert (rows, truncated, cut_by) == (1000, "True", "rows")
    assert grew_mib < 150, f"the server grew by {grew_mib} MiB for 1000 rows"
    # a few large values: cut by bytes, not by rows
    big = ledger_query("select repeat('y', 1000000) as v from range(50)", path=ledger)
    assert big.truncated and big.cut_by == "bytes" and 1 <= len(big.rows) < 10
    # control: a result within the limits comes back whole
    small = ledger_query("select i from range(999) t(i)", path=ledger)
    assert len(small.rows) == 999 and not small.truncated


def test_a_query_over_the_agents_memory_is_one_line(ledger):
    with pytest.raises(UserError, match="memory") as info:  # a small limit stands for the real one
        ledger_query("select i, repeat('z', 200) as v from range(200000) t(i) order by v desc, i", path=ledger,
                     memory_limit="8MB")
    assert len(str(info.value).splitlines()) == 1


@pytest.mark.parametrize("kind", ["fifo", "chardev", "folder"])
def test_a_special_file_at_the_warehouse_path_is_refused_without_blocking(tmp_path, monkeypatch, capsys, kind):
    target = {"fifo": tmp_path / "ledger.duckdb", "chardev": Path("/dev/zero"), "folder": tmp_path / "dir"}[kind]
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "folder":
        target.mkdir()
    monkeypatch.setenv("GPULEDGER_WAREHOUSE", str(target))
    (tmp_path / "landing").mkdir()
    for argv in (["sql", "select 1"], ["ingest", str(tmp_path / "landing")], ["report", "weekly"]):
        started = time.monotonic()
        code = main(argv)
        err = capsys.readouterr().err
        assert code != 0 and time.monotonic() - started < 60, (argv, err)  # a FIFO opened would block forever
        assert str(target) in err and ("FIFO" in err or "device" in err or "folder" in err), err
        assert "Traceback" not in err
    with pytest.raises(UserError, match="not a DuckDB file"):
        ledger_query("select 1", path=target)


def test_a_regular_warehouse_beside_a_fifo_opens(ledger, tmp_path, capsys):
    os.mkfifo(tmp_path / "other.fifo")  # control: a FIFO elsewhere changes nothing
    assert main(["sql", "select count(*) as n from runs", "--format", "csv"]) == 0
    assert capsys.readouterr().out == "n\n1\n"

