"""`gpuledger doctor`: one line per check with a fix, exit 1 on a failure; real files, no network."""

from __future__ import annotations

import json
import socket
from datetime import date

import duckdb
import pytest

from gpuledger.cli import main
from gpuledger.cli.commands import doctor


@pytest.fixture
def project(tmp_path, monkeypatch):
    for var in ("GPULEDGER_WAREHOUSE", "GPULEDGER_DATA_DIR", "GPULEDGER_REPORTS_DIR", "PREFECT_HOME", "PREFECT_API_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("GPULEDGER_CONFIG", str(tmp_path / "no-user-config.toml"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no cloud credential files
    root = tmp_path / "proj"
    root.mkdir()
    (root / "gpuledger.toml").write_text("[paths]\n")
    monkeypatch.chdir(root)
    return root


def _by_name(checks):
    out = {}
    for c in checks:
        out.setdefault(c.name, []).append(c)
    return out


def test_a_fresh_project_is_ready_and_every_line_has_a_status(project, capsys):
    code = main(["doctor"])
    out = capsys.readouterr().out.splitlines()
    assert code == 0, out
    assert out[-1].startswith("ready: ")
    assert all(line.split()[0] in ("ok", "warn", "fail") for line in out[:-1])
    checks = _by_name(doctor.run_checks())
    assert {"python", "package", "project", "run-dir", "warehouse", "prefect", "skypilot", "gpu", "prices"} <= set(checks)
    assert "none yet" in checks["warehouse"][0].detail
    assert checks["skypilot"][0].status == "warn" and "no cloud credential files" in checks["skypilot"][0].detail


def test_credentials_are_found_as_files_without_a_network_call(project, tmp_path):
    creds = tmp_path / "home" / ".aws" / "credentials"
    creds.parent.mkdir(parents=True)
    creds.write_text("[default]\n")
    check = doctor.check_skypilot()
    assert check.status == "ok" and "aws" in check.detail and "gcp" not in check.detail


def test_a_warehouse_of_an_older_version_has_its_pending_migrations_named(project):
    from gpuledger.warehouse import Warehouse
    from gpuledger.warehouse.health import inspect

    path = project / ".gpuledger" / "ledger.duckdb"
    with Warehouse.open(path):
        pass
    current = inspect(path)
    assert current.readable and current.writable and current.pending == [] and current.version == current.latest
    con = duckdb.connect(str(path))
    con.execute("DELETE FROM schema_migrations WHERE version = ?", [current.latest])
    con.close()
    older = inspect(path)
    assert older.pending == [current.latest] and older.version < current.latest
    (line,) = _by_name(doctor.run_checks())["warehouse"]
    assert line.status == "warn" and f"migration(s) {current.latest} pending" in line.detail


def test_a_warehouse_that_is_not_a_file_fails_and_exits_1(project, capsys):
    (project / ".gpuledger" / "ledger.duckdb").mkdir(parents=True)
    assert main(["doctor", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False
    (failed,) = [c for c in report["checks"] if c["status"] == "fail"]
    assert failed["name"] == "warehouse" and failed["fix"]


def test_the_price_catalog_age_is_the_bundled_snapshot_date():
    newest = doctor.check_prices(today=date(2000, 1, 1)).detail.split("as of ")[1][:10]
    assert doctor.check_prices(today=date.fromisoformat(newest)).status == "ok"
    old = doctor.check_prices(today=date.fromordinal(date.fromisoformat(newest).toordinal() + 31))
    assert old.status == "warn" and "31 days old" in old.detail


def test_a_team_warehouse_checks_its_postgresql_host_quickly(project, monkeypatch):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed once the block ends: nothing listens there
    check = doctor.check_postgres(f"ducklake:postgres:dbname=ledger host=127.0.0.1 port={port}")
    assert check.status == "fail" and f"127.0.0.1:{port}" in check.detail
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        live = server.getsockname()[1]
        assert doctor.check_postgres(f"ducklake:postgres:host=127.0.0.1 port={live} dbname=x").status == "ok"


def test_the_projects_newer_price_copy_is_the_age_that_counts(tmp_path):
    header = "cloud,region,instance_type,accelerator,accelerator_count,usd_per_hour_on_demand,usd_per_hour_spot,vcpus,memory_gib,source,as_of\n"
    copy = tmp_path / "prices" / "catalog.csv"
    copy.parent.mkdir()
    copy.write_text(header + "aws,us-east-1,p5.48xlarge,H100,8,98.32,,192,2048,SkyPilot cache,2030-01-02\n")
    check = doctor.check_prices(today=date(2030, 1, 12), project_copy=copy)
    assert check.status == "ok" and str(copy) in check.detail and "10 days old" in check.detail
    older = tmp_path / "old.csv"
    older.write_text(header + "aws,us-east-1,p5.48xlarge,H100,8,98.32,,192,2048,SkyPilot cache,2001-01-01\n")
    assert "bundled price catalog" in doctor.check_prices(today=date(2030, 1, 12), project_copy=older).detail


def _landing_check(checks):
    (landing,) = _by_name(checks)["landing"]
    return landing


def test_the_landing_is_not_used_in_direct_mode(project, monkeypatch):
    monkeypatch.delenv("GPULEDGER_INGEST", raising=False)
    check = _landing_check(doctor.run_checks())
    assert check.status == "ok" and "not used" in check.detail and "direct" in check.detail


def test_a_service_landing_folder_is_probed_and_its_backlog_and_oldest_age_reported(project, monkeypatch, capsys):
    from datetime import UTC, datetime, timedelta

    from gpuledger.warehouse import ingest_service, landing_store

    landing = project / "landing"
    monkeypatch.setenv("GPULEDGER_INGEST", "service")
    monkeypatch.setenv("GPULEDGER_INGEST_LANDING", str(landing))
    monkeypatch.setenv("GPULEDGER_INGEST_WAIT_S", "600")
    check = _landing_check(doctor.run_checks())  # not there yet: nothing is made
    assert check.status == "ok" and "none yet" in check.detail and not landing.exists()

    store = landing_store.FolderLanding(landing)
    now = datetime.now(UTC)
    for i, minutes in enumerate((3, 1)):  # two records, landed 3 and 1 minutes ago
        data = {"run_id": f"r{i}", "n": i}
        key = ingest_service.landing_key(f"r{i}", ingest_service.record_hash(data), at=now - timedelta(minutes=minutes))
        store.put(key, ingest_service.canonical(data))
    check = _landing_check(doctor.run_checks())
    assert check.status == "ok", check
    assert "writable (folder)" in check.detail and "2 record(s) waiting" in check.detail
    assert "the oldest landed 3 min ago" in check.detail
    assert sorted(p.name for p in landing.iterdir()) == ["records"]  # the probe file is gone

    monkeypatch.setenv("GPULEDGER_INGEST_WAIT_S", "60")  # the oldest is older than sweeps wait: the service is behind
    check = _landing_check(doctor.run_checks())
    assert check.status == "warn" and "ingest_wait_s" in check.detail and "ingest/team" in check.fix

    # a landing that cannot be made (under a file; a permission check would pass as root): a failure naming the setting
    monkeypatch.setenv("GPULEDGER_INGEST_LANDING", str(project / "gpuledger.toml" / "landing"))
    assert main(["doctor"]) == 1
    lines = [line for line in capsys.readouterr().out.splitlines() if line.split()[1:2] == ["landing"]]
    assert len(lines) == 1 and lines[0].startswith("fail") and "[warehouse] landing" in lines[0]


@pytest.mark.slow  # over ~0.5 s alone (a report, warehouse, plan or subprocess): make test runs it, make test-fast does not
def test_an_unreachable_landing_endpoint_is_one_line_naming_the_setting_without_the_key(project, monkeypatch, capsys):
    with socket.socket() as sock:  # a port nothing listens on: connection refused at once
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    secret = "doctor-test-secret-9f3c1a"
    monkeypatch.setenv("GPULEDGER_INGEST", "service")
    monkeypatch.setenv("GPULEDGER_INGEST_LANDING", "s3://team-bucket/landing")
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "doctor-test-key-id")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    assert main(["doctor"]) == 1
    captured = capsys.readouterr()
    out = captured.out + captured.err
    assert secret not in out and "Traceback" not in out
    (line,) = [line for line in out.splitlines() if line.split()[1:2] == ["landing"]]
    assert line.startswith("fail") and "s3://team-bucket/landing/" in line and f"127.0.0.1:{port}" in line
    assert "[warehouse] landing" in line and "AWS_ENDPOINT_URL" in line


def test_an_unreachable_data_bucket_is_one_line_naming_the_setting_without_the_key(project, monkeypatch):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    secret = "doctor-test-secret-data-77e0"
    monkeypatch.setenv("GPULEDGER_WAREHOUSE_DATA", "s3://team-data/gpuledger/")
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "doctor-test-key-id")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    check = doctor.check_bucket()
    text = check.line()
    assert check.status == "fail" and secret not in text and "\n" not in text
    assert "warehouse data s3://team-data/gpuledger/" in text and f"127.0.0.1:{port}" in text
    assert "[warehouse] data_path" in text and "AWS_ENDPOINT_URL" in text
    monkeypatch.setenv("GPULEDGER_WAREHOUSE_DATA", str(project / "lake-data"))
    assert doctor.check_bucket().status == "ok"


def test_a_team_warehouse_without_a_project_is_checked_line_by_line(tmp_path, monkeypatch, capsys):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    for var in ("GPULEDGER_DATA_DIR", "GPULEDGER_WAREHOUSE_DATA", "GPULEDGER_INGEST", "PREFECT_API_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("GPULEDGER_CONFIG", str(tmp_path / "no-user-config.toml"))
    monkeypatch.setenv("GPULEDGER_WAREHOUSE", f"ducklake:postgres:host=127.0.0.1 port={port} dbname=d")
    monkeypatch.chdir(tmp_path)
    assert main(["doctor"]) == 1  # PostgreSQL does not answer
    out = capsys.readouterr().out
    names = [line.split()[1] for line in out.splitlines()[:-1]]
    assert {"run-dir", "warehouse", "postgres", "bucket", "landing"} <= set(names), out
    assert "fail  postgres" in out and "warn  run-dir" in out
