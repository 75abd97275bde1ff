"""`gpuledger sql`, `ingest`, `export`: read-only by default, one-line errors, formats."""

from __future__ import annotations

import json

import pytest
from helpers.record_fixtures import example_record, ingest_known

from gpuledger.cli import main
from gpuledger.warehouse import Warehouse, writing_statements


@pytest.fixture
def wh_path(tmp_path, monkeypatch):
    path = tmp_path / "ledger.duckdb"
    monkeypatch.setenv("GPULEDGER_WAREHOUSE", str(path))
    with Warehouse.open(path) as wh:
        wh.register_sweep(sweep_id="s-1", name="s", project="p", owner="o", objective_metric="eval_loss")
        ingest_known(wh, [example_record("r1", "t1", sweep_id="s-1", usd_per_hour=6.0, wall_s=600,
                                          final_metrics={"eval_loss": 1.5})])
    return path


@pytest.mark.parametrize("sql, writes", [
    ("select 1", []),
    ("with a as (select 1) select * from a", []),
    ("explain select 1", []),
    ("insert into runs select * from runs", ["INSERT"]),
    ("select 1; delete from runs", ["DELETE"]),
    ("update runs set wall_s = 0", ["UPDATE"]),
    ("drop table runs", ["DROP"]),
    ("create table x as select 1", ["CREATE"]),
    ("copy runs to 'x.csv'", ["COPY"]),
    ("attach 'other.duckdb'", ["ATTACH"]),
])
def test_writing_statements_by_duckdb_parser(sql, writes):
    assert writing_statements(sql) == writes


def test_select_table_csv_json(wh_path, capsys):
    assert main(["sql", "select run_id, cost_usd from v_runs"]) == 0
    out = capsys.readouterr().out
    assert "r1" in out and "1.0" in out and "1 row" in out
    assert main(["sql", "select run_id, cost_usd from v_runs", "--format", "csv"]) == 0
    assert capsys.readouterr().out == "run_id,cost_usd\nr1,1.0\n"
    assert main(["sql", "select run_id, cost_usd from v_runs", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"run_id": "r1", "cost_usd": 1.0}]


def test_writes_refused_without_write(wh_path, capsys):
    assert main(["sql", "delete from runs"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("gpuledger sql: refusing a statement that changes the warehouse (DELETE)")
    assert "--write" in err
    with Warehouse.open(wh_path, read_only=True) as wh:
        assert wh.scalar("select count(*) from runs") == 1
    assert main(["sql", "delete from runs", "--write"]) == 0
    assert "ok" in capsys.readouterr().out
    with Warehouse.open(wh_path, read_only=True) as wh:
        assert wh.scalar("select count(*) from runs") == 0


def test_sql_errors_are_one_line(wh_path, capsys):
    assert main(["sql", "select nope from runs"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("gpuledger sql: Binder Error:") and err.count("\n") == 1
    assert main(["sql", "selec 1"]) == 1
    assert capsys.readouterr().err.startswith("gpuledger sql: Parser Error:")


def test_sql_without_warehouse(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GPULEDGER_WAREHOUSE", str(tmp_path / "none.duckdb"))
    assert main(["sql", "select 1"]) == 1
    assert "no warehouse at" in capsys.readouterr().err


@pytest.mark.slow  # over ~0.5 s alone (a report, warehouse, plan or subprocess): make test runs it, make test-fast does not
def test_ingest_and_export_commands(wh_path, tmp_path, capsys):
    land = tmp_path / "landing"
    land.mkdir()
    (land / "a.json").write_text(json.dumps(example_record("r2", "t2", sweep_id="s-1")))
    (land / "b.json").write_text("not json")  # not a record (no record's marks): someone else's file, left
    (land / "c.json").write_text('{"schema": "gpuledger.result/1", "run_id": ')  # a cut record: refused
    with Warehouse.open(wh_path) as wh:
        wh.upsert_trials("s-1", [{"trial_id": "t2"}])
    assert main(["ingest", str(land)]) == 1  # it rejected a file: not a success
    captured = capsys.readouterr()
    assert "1 records ingested (1 new" in captured.out and "1 rejected" in captured.out
    assert "c.json" in captured.err and "left in place (not result records): " in captured.out
    assert (land / "b.json").read_text() == "not json"
    assert main(["export", "--parquet", str(tmp_path / "pq")]) == 0
    assert (tmp_path / "pq" / "runs.parquet").exists()


def test_nan_and_infinities_come_back_as_json_null_from_the_cli_and_the_mcp_tool(wh_path, capsys):
    import asyncio

    from gpuledger.mcp_server.server import GpuledgerTools, build_server

    query = "select 'nan'::double as x, '-inf'::double as y, 'nan' as t, 1.5 as z"
    want = [{"x": None, "y": None, "t": "nan", "z": 1.5}]  # the text 'nan' stays text: it is no number
    assert main(["sql", query, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == want
    server = build_server(GpuledgerTools(None, True))
    result = asyncio.run(server.call_tool("sql", {"query": query}))
    wire = json.loads(result.model_dump_json(by_alias=True, exclude_none=True))  # what the agent receives
    assert wire["structuredContent"]["rows"] == want
    assert json.loads(wire["content"][0]["text"].splitlines()[1]) == want[0]


@pytest.mark.parametrize(("query", "api", "cli"), [
    ("delete from runs", "add write=True if you mean it", "add --write if you mean it"),
    ("set threads = 1", "add write=True if you mean it", "add --write if you mean it"),
])
def test_a_refused_statement_names_the_switch_of_the_face_that_ran_it(wh_path, capsys, query, api, cli):
    from gpuledger.api import Ledger
    from gpuledger.errors import UserError

    with pytest.raises(UserError) as err:
        Ledger().sql(query)
    assert api in str(err.value) and "--write" not in str(err.value)
    assert main(["sql", query]) == 1
    said = capsys.readouterr().err
    assert cli in said and "write=True" not in said
