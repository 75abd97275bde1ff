"""The ingest service (`[warehouse] ingest = "service"`, gpuledger/warehouse/ingest_service.py) on a real
DuckDB file with a folder landing: landed records are stored once (by record hash), in one commit per
batch with its bookkeeping rows; landed files go only after the commit; refused ones move aside with
their reason; a commit conflict is retried with backoff."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from helpers.record_fixtures import example_record, ingest_known

from gpuledger.warehouse import Warehouse, ingest_service, landing_store

SWEEP = "svc-0123abcd"


def _records(n: int, start: int = 0) -> list[dict]:
    return [example_record(f"t{i:04d}-a1-{i:08x}", f"t{i:04d}", sweep_id=SWEEP, wall_s=60.0, usd_per_hour=1.0,
                           metrics=[{"step": s, "name": "loss", "value": 1.0 / (s + 1)} for s in range(5)])
            for i in range(start, start + n)]


@pytest.fixture
def wh(tmp_path):
    with Warehouse.open(tmp_path / "ledger.duckdb") as w:
        recs = _records(6)
        ingest_known(w, recs[:1])  # registers the sweep and trial t0000 (stored directly)
        w.upsert_trials(SWEEP, [{"trial_id": r["trial_id"]} for r in recs])
        yield w


def _landed(store) -> list[str]:
    return [x.key for x in store.list(landing_store.RECORDS, 10_000)]


def test_landed_twice_is_stored_once_and_files_go_after_the_commit(wh, tmp_path):
    store = landing_store.FolderLanding(tmp_path / "landing")
    recs = _records(5, start=1)
    ingest_service.land(recs, store)
    ingest_service.land(recs[:2], store)  # landed twice: the same hash
    ingest_service.land(_records(1), store)  # a record the warehouse already holds (stored directly)
    assert len(_landed(store)) == 8

    batch = ingest_service.ingest_batch(wh, store, max_records=100)
    assert batch is not None
    assert (batch.landed, batch.stored, batch.new_runs, batch.duplicates) == (8, 6, 5, 2)
    assert batch.attempts == 1 and not batch.rejected
    assert _landed(store) == []
    assert wh.scalar("select count(*) from runs") == 6
    assert wh.scalar("select count(distinct run_id) from runs") == 6
    assert wh.scalar("select count(*) from metrics") == 6 * 5
    row = wh.query("select * from v_ingest_batches").row(0, named=True)
    assert row["stored"] == 6 and row["duplicates"] == 2 and row["landed"] == 8
    assert row["lag_p50_s"] is not None and 0 <= row["lag_p50_s"] <= row["lag_max_s"] < 600
    assert wh.scalar("select count(*) from ingested_records") == 6
    assert ingest_service.ingest_batch(wh, store) is None  # nothing waiting

    # the same records landed again later (a sweep that retried its upload): removed, nothing written
    ingest_service.land(recs, store)
    again = ingest_service.ingest_batch(wh, store)
    assert (again.duplicates, again.stored) == (5, 0)
    assert wh.scalar("select count(*) from runs") == 6 and _landed(store) == []


def test_refused_records_move_to_rejected_with_the_reason(wh, tmp_path):
    store = landing_store.FolderLanding(tmp_path / "landing")
    good, = _records(1, start=2)
    unknown = example_record("zz-a1-00000001", "zz", sweep_id="nope-00000000")
    ingest_service.land([good, unknown], store)
    store.put("records/0000000000001-broken.json", b'{"run_id": "x", ')
    batch = ingest_service.ingest_batch(wh, store)
    assert batch.stored == 1 and len(batch.rejected) == 2
    assert _landed(store) == []
    rejected = sorted(p.name for p in (tmp_path / "landing" / "rejected").iterdir())
    assert len([n for n in rejected if n.endswith(".reason.txt")]) == 2
    reasons = " ".join((tmp_path / "landing" / "rejected" / n).read_text() for n in rejected if n.endswith(".txt"))
    assert "not valid JSON" in reasons and "nope-00000000" in reasons
    assert wh.scalar("select rejected from ingest_batches") == 2


def test_a_commit_conflict_is_retried_and_a_failure_leaves_the_files(wh, tmp_path, monkeypatch):
    store = landing_store.FolderLanding(tmp_path / "landing")
    ingest_service.land(_records(2, start=3), store)
    monkeypatch.setattr(ingest_service, "BACKOFF_S", 0.001)
    calls = {"n": 0}
    real = wh.ingest_records

    def flaky(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] < 3:
            raise RuntimeError("TransactionContext Error: Failed to commit: write-write conflict")
        return real(*args, **kwargs)

    monkeypatch.setattr(wh, "ingest_records", flaky)
    batch = ingest_service.ingest_batch(wh, store)
    assert batch.attempts == 3 and batch.stored == 2
    assert wh.scalar("select attempts from ingest_batches") == 3

    ingest_service.land(_records(1, start=5), store)

    def broken(*args, **kwargs):
        raise RuntimeError("IO Error: disk on fire")

    monkeypatch.setattr(wh, "ingest_records", broken)
    with pytest.raises(RuntimeError, match="disk on fire"):
        ingest_service.ingest_batch(wh, store)
    assert len(_landed(store)) == 1  # not committed: still landed, for the next run


def test_keys_sort_by_landing_time_and_carry_it():
    key = ingest_service.landing_key("run/1 x", "ab" * 32)
    assert key.startswith("records/") and key.endswith(".json") and "/" not in key[len("records/"):]
    at = ingest_service.landed_at(key)
    assert at is not None and abs((at - datetime.now(UTC).replace(tzinfo=None)).total_seconds()) < 60
    assert ingest_service.landed_at("records/not-a-time.json") is None
    assert json.loads(ingest_service.canonical({"b": 1, "a": [1, 2]})) == {"a": [1, 2], "b": 1}


def test_the_mode_setting(monkeypatch):
    monkeypatch.setenv("GPULEDGER_INGEST", "Service")
    assert ingest_service.mode() == "service"
    monkeypatch.setenv("GPULEDGER_INGEST", "sometimes")
    with pytest.raises(Exception, match="give 'direct' or 'service'"):
        ingest_service.mode()


@pytest.mark.slow  # over ~1 s (a whole report, replay, plan or warehouse): make test runs it, make test-fast does not
def test_a_sweeps_writer_in_service_mode_lands_records_and_waits_for_the_service(tmp_path, monkeypatch):
    """The sweep's one writer (gpuledger/runtime/writer.py) with `[warehouse] ingest = "service"`: records go to
    the landing (not the warehouse), their local files move to ingested/ once landed, and `await_ingest` returns
    once the service stored them (0 missing), or counts those it did not store in time."""
    import logging
    import subprocess
    import sys

    from gpuledger.record import parse_record
    from gpuledger.runtime import landing
    from gpuledger.runtime.writer import Writer

    (tmp_path / "gpuledger.toml").write_text("", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GPULEDGER_INGEST", "service")
    monkeypatch.setenv("GPULEDGER_INGEST_WAIT_S", "2")
    monkeypatch.delenv("GPULEDGER_WAREHOUSE", raising=False)
    recs = [parse_record(r) for r in _records(2)]
    with Warehouse.open() as w:
        w.register_sweep(sweep_id=SWEEP, name="svc", started_at="2026-01-05T09:00:00")
        w.upsert_trials(SWEEP, [{"trial_id": r.trial_id} for r in recs])
    folder = landing.landing_dir_for(SWEEP)
    writer = Writer(SWEEP, folder, logging.getLogger("test"))
    assert writer.service
    for r in recs:
        landing.keep(folder, r)
    writer.results(recs, {})
    writer.close()
    assert writer.landed == {r.run_id for r in recs} and not writer.unstored
    assert landing.waiting(folder) == [] and len(list((folder / landing.INGESTED).glob("*.json"))) == 2
    store = landing_store.open_landing()
    assert len(_landed(store)) == 2
    with Warehouse.open(read_only=True) as w:
        assert w.scalar("select count(*) from runs") == 0  # not written by the sweep
    where, missing = writer.await_ingest()  # no service ran: both still landed, counted
    assert missing == 2 and where == store.where
    monkeypatch.setenv("GPULEDGER_INGEST_WAIT_S", "300")
    service = subprocess.Popen([sys.executable, "-c", "from gpuledger.warehouse import ingest_service; "
                                "print(ingest_service.run_service().summary())"], cwd=tmp_path,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # another process, as in a team
    _, missing = writer.await_ingest()
    out = service.communicate(timeout=300)[0]
    assert service.returncode == 0, out
    assert missing == 0 and _landed(store) == [], out
