"""Warehouse: open/migrate, idempotent ingest, rejection of bad records, sweep/trial upserts."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from helpers.record_fixtures import example_record, ingest_known
from helpers.warehouse_template import fresh_warehouse

from gpuledger.errors import UserError
from gpuledger.warehouse import Warehouse, resolve_path

TABLES = ("specs", "sweeps", "trials", "runs", "final_metrics", "metrics", "billing", "prices")


def counts(wh: Warehouse) -> dict[str, int]:
    return {t: wh.scalar(f"select count(*) from {t}") for t in TABLES}


def rec(run_id: str, trial: str = "t1", **kw):
    kw.setdefault("sweep_id", "s-1")
    kw.setdefault("final_metrics", {"eval_loss": 1.0})
    kw.setdefault("metrics", [{"name": "loss", "value": 2.0 - i / 10, "step": i, "t_s": float(i)} for i in range(5)])
    return example_record(run_id, trial, **kw)


def test_migrate_twice_is_a_noop(tmp_path):
    path = tmp_path / "sub" / "ledger.duckdb"
    with Warehouse.open(path) as wh:  # creates the parent folder, migrates
        first = wh.query("select * from schema_migrations")
        views = wh.query("select * from schema_views")
        assert first.height >= 1 and first["version"].to_list() == sorted(first["version"].to_list())
        assert wh.migrate() == []
        assert wh.query("select * from schema_migrations").equals(first)
    with Warehouse.open(path) as wh:
        assert wh.migrate() == []
        assert wh.query("select * from schema_migrations").equals(first)
        assert wh.query("select * from schema_views").equals(views)  # views unchanged: not re-created
        assert set(TABLES) <= set(wh.tables())


def test_an_edited_applied_migration_is_a_clear_error(tmp_path, monkeypatch):
    from gpuledger.warehouse import MigrationChanged, sqlfiles

    migrations = tmp_path / "migrations"
    shutil.copytree(sqlfiles.MIGRATIONS_DIR, migrations)
    monkeypatch.setattr(sqlfiles, "MIGRATIONS_DIR", migrations)
    path = tmp_path / "ledger.duckdb"
    Warehouse.open(path).close()
    first = sorted(migrations.glob("001_*.sql"))[0]
    first.write_text(first.read_text() + "\n-- an afterthought\n")
    with pytest.raises(MigrationChanged) as err:
        Warehouse.open(path)
    assert str(first) in str(err.value) and "edited after it was applied" in str(err.value)
    assert "new migration" in str(err.value)
    with Warehouse.open(path, read_only=True) as wh:  # readers do not migrate: still readable
        assert wh.scalar("select count(*) from schema_migrations") >= 1


def test_a_reader_brings_a_warehouse_of_an_older_version_up_to_date_first(tmp_path):
    import duckdb

    path = tmp_path / "ledger.duckdb"
    Warehouse.open(path).close()
    # as an older gpuledger left it: before migration 008 and the view v_run_facts, older view texts
    con = duckdb.connect(str(path))
    con.execute("DROP VIEW v_trial_results; DROP VIEW v_runs; DROP VIEW v_run_facts")
    con.execute("ALTER TABLE trials DROP COLUMN est_pruned_cost_usd")
    con.execute("DELETE FROM schema_migrations WHERE version = 8")
    con.execute("DELETE FROM schema_views WHERE name IN ('v_trial_results', 'v_runs', 'v_run_facts')")
    con.close()
    with Warehouse.open(path, read_only=True) as wh:  # the weekly report and the adaptive report read these
        assert wh.query("select * from v_run_facts").height == 0
        assert "est_pruned_cost_usd" in wh.query("select * from v_trial_results").columns
        assert 8 in wh.query("select version from schema_migrations")["version"].to_list()
    with Warehouse.open(path) as wh:
        assert wh.migrate() == []  # nothing left for a writer


def test_views_yml_is_applied_as_comments(tmp_path):
    import yaml

    from gpuledger.warehouse import VIEWS_DOC

    doc = yaml.safe_load(VIEWS_DOC.read_text())["views"]
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        views = dict(wh.query("select view_name, comment from duckdb_views() where not internal").rows())
        cols = {(r[0], r[1]): r[2] for r in wh.query(
            "select table_name, column_name, comment from duckdb_columns() where table_name like 'v_%'").rows()}
    for name, v in doc.items():
        assert views[name] == v["description"]
        for c in v["columns"]:
            want = c["description"] + (f" [{c['unit']}]" if c.get("unit") else "")
            assert cols[(name, c["name"])] == want
    # any SQL client sees them: the DuckDB CLI, read-only
    out = subprocess.run([str(Path(sys.executable).parent / "duckdb"), "-readonly", str(tmp_path / "w.duckdb"),
                          "-csv", "-c", "select comment from duckdb_views() where view_name = 'v_waste'"],
                         capture_output=True, text=True, timeout=60)
    assert doc["v_waste"]["description"] in out.stdout


def test_path_resolution(tmp_path, monkeypatch):
    monkeypatch.setenv("GPULEDGER_WAREHOUSE", str(tmp_path / "env.duckdb"))
    assert resolve_path() == tmp_path / "env.duckdb"
    assert resolve_path(tmp_path / "x.duckdb") == tmp_path / "x.duckdb"
    monkeypatch.delenv("GPULEDGER_WAREHOUSE")
    monkeypatch.delenv("GPULEDGER_DATA_DIR")  # tests/conftest.py's run-time folder: the project's own here
    (tmp_path / "proj" / "sub" / "deeper").mkdir(parents=True)
    (tmp_path / "proj" / "gpuledger.toml").write_text("[paths]\n")
    monkeypatch.chdir(tmp_path / "proj" / "sub" / "deeper")
    assert resolve_path() == tmp_path / "proj" / ".gpuledger" / "ledger.duckdb"  # the project's, from a subfolder
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError, match="gpuledger init"):
        resolve_path()  # outside a project, no explicit warehouse: one line saying how to make one


def test_reader_of_a_missing_warehouse_gets_a_clear_message(tmp_path):
    with pytest.raises(UserError, match=r"no warehouse at .*nope\.duckdb yet; run `gpuledger sweep SPEC`"):
        Warehouse.open(tmp_path / "nope.duckdb", read_only=True)


def test_ingest_twice_adds_nothing(tmp_path):
    records = [rec("r1"), rec("r2", "t2", status="failed"), rec("r3", "t3", spot=True, usd_per_hour=3.0)]
    with Warehouse.open(fresh_warehouse(tmp_path / "w.duckdb")) as wh:
        first = ingest_known(wh, records)
        assert (first.ingested, first.new, first.metric_rows, first.rejected) == (3, 3, 15, [])
        after = counts(wh)
        assert after["runs"] == 3 and after["metrics"] == 15 and after["billing"] == 3
        again = ingest_known(wh, records)
        assert (again.ingested, again.new) == (3, 0)
        assert counts(wh) == after
        # a new run twice within one batch: last one wins, one row
        ingest_known(wh, [rec("r9", wall_s=10.0), rec("r9", wall_s=20.0)])
        assert counts(wh)["runs"] == after["runs"] + 1
        assert wh.scalar("select wall_s from runs where run_id = 'r9'") == 20.0


@pytest.mark.parametrize("change", [{"wall_s": 1.0}, {"metrics": [{"name": "loss", "value": 0.5}]},
                                    {"status": "failed"}])
def test_a_stored_run_is_never_replaced_by_another_record(tmp_path, change):
    """Issue 31: an ingested record reusing a stored run id never silently replaces the measured run."""
    with Warehouse.open(fresh_warehouse(tmp_path / "w.duckdb")) as wh:
        ingest_known(wh, [rec("r1")])
        before = counts(wh)
        stored = wh.query("select * exclude (ingested_at) from runs")
        again = ingest_known(wh, [rec("r1", **change)])
        assert again.ingested == 0 and len(again.rejected) == 1
        assert "already stored with other values" in again.rejected[0].reason
        assert counts(wh) == before and wh.query("select * exclude (ingested_at) from runs").equals(stored)
        assert ingest_known(wh, [rec("r1")]).ingested == 1  # the same record again: taken (idempotent)


def test_invalid_records_are_rejected_with_reason_and_others_land(tmp_path):
    land = tmp_path / "landing"
    land.mkdir()
    for i in range(3):
        (land / f"ok{i}.json").write_text(json.dumps(rec(f"ok{i}")))
    (land / "corrupt.json").write_text('{"schema": "gpuledger.result/1", "run_id": ')
    bad_type = rec("bad-type")
    bad_type["wall_s"] = "ten minutes"
    (land / "bad_type.json").write_text(json.dumps(bad_type))
    future = rec("future")
    future["schema"] = "gpuledger.result/9"
    (land / "future.json").write_text(json.dumps(future))
    backwards = rec("backwards")
    backwards["ended_at"] = "2026-01-01T00:00:00Z"  # before started_at: the pandera frame check
    (land / "backwards.json").write_text(json.dumps(backwards))
    (land / "list.json").write_text(json.dumps([rec("l1"), rec("l2")]))

    with Warehouse.open(fresh_warehouse(tmp_path / "w.duckdb")) as wh:
        wh.register_sweep(sweep_id="s-1", name="s")
        wh.upsert_trials("s-1", [{"trial_id": "t1"}])
        result = wh.ingest_landing(land)
        assert sorted(wh.query("select run_id from runs")["run_id"]) == ["l1", "l2", "ok0", "ok1", "ok2"]
        assert result.ingested == 5 and len(result.rejected) == 4
    reasons = {p.name.removesuffix(".reason.txt"): p.read_text() for p in (land / "rejected").glob("*.reason.txt")}
    assert set(reasons) == {"corrupt.json", "bad_type.json", "future.json", "backwards.json"}
    assert "not valid JSON" in reasons["corrupt.json"]
    assert "wall_s" in reasons["bad_type.json"]
    assert "unknown schema version 'gpuledger.result/9'" in reasons["future.json"]
    assert "ends_after_start" in reasons["backwards.json"]
    assert (land / "rejected" / "corrupt.json").exists()
    assert sorted(p.name for p in (land / "ingested").iterdir()) == ["list.json", "ok0.json", "ok1.json", "ok2.json"]
    assert list(land.glob("*.json")) == []
    with Warehouse.open(tmp_path / "w.duckdb") as wh:  # nothing left: a second ingest does nothing
        assert wh.ingest_landing(land).ingested == 0


def test_ingest_landing_needs_the_folder(tmp_path):
    db = fresh_warehouse(tmp_path / "w.duckdb")
    with Warehouse.open(db) as wh, pytest.raises(UserError, match="no landing folder"):
        wh.ingest_landing(tmp_path / "missing")


def test_sweep_and_trials_upserts(tmp_path):
    with Warehouse.open(fresh_warehouse(tmp_path / "w.duckdb")) as wh:
        kw = dict(sweep_id="s-1", name="s", project="p", owner="o", objective_metric="eval_loss",
                  spec_yaml="name: s\n", spec_json={"name": "s"}, plan_json={"trials": 2},
                  prices=[{"cloud": "aws", "accelerator": "H100", "count": 8, "spot": True,
                           "usd_per_hour": 20.0, "offer_id": "x"}])
        spec_id = wh.register_sweep(started_at="2026-01-05T10:00:00Z", **kw)
        wh.register_sweep(started_at="2026-01-06T10:00:00Z", **kw)  # a resume: the first start stays
        s = wh.query("select * from sweeps").to_dicts()
        assert len(s) == 1 and str(s[0]["started_at"]) == "2026-01-05 10:00:00" and s[0]["spec_id"] == spec_id
        assert wh.scalar("select count(*) from specs") == 1
        assert wh.query("select extra from prices")["extra"].to_list() == ['{"offer_id": "x"}']

        trials = [{"trial_id": "a", "index": 0, "params": {"lr": 1e-4}, "est_cost_usd": 1.0, "feasible": True},
                  {"trial_id": "b", "index": 1, "params": {"lr": 3e-4}}]
        assert wh.upsert_trials("s-1", trials) == 2
        ingest_known(wh, [rec("r1", "a")])  # sets trial a to its run's status
        assert wh.succeeded_trial_ids("s-1") == {"a"}
        wh.upsert_trials("s-1", trials)  # re-plan: 'pending' does not overwrite 'succeeded'
        wh.mark_trials("s-1", ["b"], "skipped-budget", reason="over budget")
        st = dict(wh.query("select trial_id, status from trials").iter_rows())
        assert st == {"a": "succeeded", "b": "skipped-budget"}
        assert wh.scalar("select params from trials where trial_id = 'b'") == '{"lr": 0.0003}'
        wh.finish_sweep("s-1", status="succeeded", ended_at="2026-01-05T12:00:00Z")
        assert wh.scalar("select status from sweeps") == "succeeded"
        assert wh.latest_sweep_id("s") == "s-1"
        with pytest.raises(UserError, match="unknown trial status"):
            wh.mark_trials("s-1", ["a"], "exploded")
        with pytest.raises(UserError, match="est_cost_usd"):
            wh.upsert_trials("s-1", [{"trial_id": "c", "est_cost_usd": -1.0}])
        with pytest.raises(UserError, match="unknown trial fields"):
            wh.upsert_trials("s-1", [{"trial_id": "c", "colour": "red"}])


def test_query_params_and_errors(tmp_path):
    with Warehouse.open(fresh_warehouse(tmp_path / "w.duckdb")) as wh:
        ingest_known(wh, [rec("r1"), rec("r2")])
        assert wh.query("select run_id from runs where run_id = ?", ["r2"])["run_id"].to_list() == ["r2"]
        assert isinstance(wh.query("select * from v_runs"), pl.DataFrame)
        with pytest.raises(UserError, match="Binder Error"):
            wh.query("select nope from runs")


def test_export_parquet(tmp_path):
    with Warehouse.open(fresh_warehouse(tmp_path / "w.duckdb")) as wh:
        ingest_known(wh, [rec("r1")])
    with Warehouse.open(tmp_path / "w.duckdb", read_only=True) as wh:
        files = wh.export_parquet(tmp_path / "out")
    names = {f.stem for f in files}
    assert set(TABLES) <= names
    assert pl.read_parquet(tmp_path / "out" / "metrics.parquet").height == 5


def test_reader_cannot_write(tmp_path):
    with Warehouse.open(fresh_warehouse(tmp_path / "w.duckdb")):
        pass
    with Warehouse.open(tmp_path / "w.duckdb", read_only=True) as wh, pytest.raises(UserError):
        ingest_known(wh, [rec("r1")])
