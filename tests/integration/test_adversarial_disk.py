"""Issue 31: a full disk loses nothing silently. The sweep's runtime with the fake launcher against a
real DuckDB warehouse; the disk is "full" for gpuledger's file writes (os.write raises ENOSPC in
gpuledger/files.py, the one place every generated file is written) and, in the worst case, for
the warehouse's ingest too."""

from __future__ import annotations

import errno
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from test_runtime import _run, _wh  # noqa: E402

from gpuledger import files, vocabulary  # noqa: E402
from gpuledger.runtime import landing  # noqa: E402
from gpuledger.runtime.engine import Hooks, execute  # noqa: E402
from gpuledger.runtime.events import progress_listener  # noqa: E402


def _full(*_args):
    raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.parametrize("key_made", [True, False])
def test_landing_full_but_warehouse_fine_stores_every_record(tmp_path, monkeypatch, key_made):
    monkeypatch.chdir(tmp_path)
    run, _ = _run(tmp_path, launcher_kw={"write_landing": False})
    if key_made:  # else the disk is full before the landing folder's key could be made
        landing.landing_key(landing.landing_dir_for(run.sweep_id))
    monkeypatch.setattr(files.os, "write", _full)
    summary = execute(run, Hooks())
    assert summary.status == vocabulary.SWEEP_SUCCEEDED and summary.unrecorded == 0 and summary.lost == []
    with _wh() as wh:
        assert wh.scalar("SELECT count(*) FROM runs WHERE sweep_id = ?", [run.sweep_id]) == 4


def test_nothing_can_be_written_the_sweep_says_lost_and_ends_unrecorded(tmp_path, monkeypatch):
    from gpuledger.warehouse import Warehouse

    monkeypatch.chdir(tmp_path)
    run, _ = _run(tmp_path, launcher_kw={"write_landing": False})
    landing.landing_key(landing.landing_dir_for(run.sweep_id))
    events: list[dict] = []
    monkeypatch.setattr(files.os, "write", _full)
    monkeypatch.setattr(Warehouse, "ingest_records", _full)  # the warehouse's disk is full as well
    with progress_listener(events.append):
        summary = execute(run, Hooks())
    # reproduced: no record could be kept or stored
    assert landing.waiting(landing.landing_dir_for(run.sweep_id)) == []
    # said exactly: every result lost (not "kept in landing"), the run unrecorded, exit 1
    results = [e for e in events if e["kind"] == "result"]
    assert len(results) == 4 and all(not e["stored"] and not e["kept"] for e in results)
    assert all("No space left" in e["not_kept"] for e in results)
    assert summary.status == vocabulary.SWEEP_UNRECORDED and summary.exit_code() == 1
    assert summary.unrecorded == 4 and len(summary.lost) == 4
    with _wh() as wh:
        status = wh.scalar("SELECT status FROM sweeps WHERE sweep_id = ?", [run.sweep_id])
        trials = wh.query("SELECT status, reason FROM trials WHERE sweep_id = ?", [run.sweep_id])
    assert status == vocabulary.SWEEP_UNRECORDED  # not `running` for ever
    assert set(trials["status"]) == {vocabulary.FAILED}  # not `pending` for ever: a re-run runs them again
    assert all("was lost" in r for r in trials["reason"])


def test_the_cli_line_says_lost_not_kept(capsys):
    from gpuledger.cli.commands.sweep import _Lines

    line = _Lines()
    base = {"kind": "result", "trial_id": "t1", "status": "succeeded", "done": 1, "total": 1, "spent_usd": 0.0}
    line({**base, "stored": False, "kept": False, "not_kept": "could not keep it: No space left on device"})
    line({**base, "stored": False, "kept": True})
    line({**base, "stored": True})
    out = capsys.readouterr().out.splitlines()
    assert "LOST" in out[0] and "No space left" in out[0] and "kept in landing" not in out[0]
    assert "NOT stored (kept in landing)" in out[1] and out[2].endswith("stored (1/1, spent $0.0000)")
