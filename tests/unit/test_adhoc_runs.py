"""Ad-hoc runs (`gpuledger.track.init/log/finish` outside a sweep): measured in the process, stored in the
ledger with wall-clock, inventory, peak memory and cost, and covered by the weekly report; inside a sweep
the same calls leave the measuring to the agent."""

from __future__ import annotations

import json
import time

import pytest

import gpuledger.track as track
from gpuledger.api import Ledger
from gpuledger.report.weeks import current_week


@pytest.fixture(autouse=True)
def _no_run_left():
    yield
    if track.run is not None:
        track.finish()


@pytest.mark.slow  # a warehouse and the weekly report: beyond the edit loop (make test runs it)
def test_an_adhoc_run_lands_in_the_ledger_and_the_weekly_report(monkeypatch):
    monkeypatch.delenv("GPULEDGER_RUN_ID", raising=False)
    monkeypatch.delenv("GPULEDGER_METRICS", raising=False)
    run = track.init(project="notebooks", name="tiny", config={"lr": 1e-3, "model": {"layers": 2}}, usd_per_hour=3.6)
    assert run.adhoc is not None and run.id.startswith("adhoc-tiny-")
    for step in range(1, 4):
        track.log({"loss": 2.0 / step, "tokens": 64 * step}, step=step)
    track.log(step=3, eval_loss=0.9)  # gpuledger's own shape works the same
    time.sleep(0.2)
    done = track.finish()
    assert done.stored and done.status == "succeeded" and done.wall_s > 0
    assert done.cost_usd == pytest.approx(3.6 * done.wall_s / 3600, rel=1e-6)
    assert track.run is None and track.finish() is None

    runs = Ledger().runs()
    row = runs.filter(runs["run_id"] == done.run_id).row(0, named=True)
    assert row["launcher"] == "external" and row["status"] == "succeeded" and row["sweep_id"] == "adhoc-notebooks"
    assert row["project"] == "notebooks" and row["wall_s"] == pytest.approx(done.wall_s)
    assert row["cost_usd"] == pytest.approx(done.cost_usd) and row["peak_rss_gib"] > 0
    finals = Ledger().sql(f"select name, value from final_metrics where run_id = '{done.run_id}' order by name")
    assert dict(finals.rows()) == {"eval_loss": 0.9, "loss": pytest.approx(2 / 3), "tokens": 192.0}
    assert Ledger().final_metrics(done.run_id) == dict(finals.rows())
    assert json.loads(row["final_metrics"])["tokens"] == 192.0
    params = Ledger().sql(f"select params->>'$.\"model.layers\"' as layers from runs where run_id = '{done.run_id}'")
    assert params["layers"].to_list() == ["2"]

    files = Ledger().report_weekly(current_week())
    assert "notebooks" in files.markdown.read_text(encoding="utf-8")


def test_inside_a_sweep_the_agent_measures(monkeypatch, capsys):
    monkeypatch.setenv("GPULEDGER_RUN_ID", "r-1")
    monkeypatch.delenv("GPULEDGER_METRICS", raising=False)
    run = track.init(project="p", config={"a": 1})
    assert run.adhoc is None and run.id == "r-1" and run.config == {"a": 1}
    track.log({"loss": 1.5}, step=2)
    assert 'GPULEDGER_METRIC {"name":"loss","value":1.5,"step":2' in capsys.readouterr().out
    assert track.finish() is None


def test_a_failed_adhoc_run_says_so(monkeypatch):
    monkeypatch.delenv("GPULEDGER_RUN_ID", raising=False)
    monkeypatch.delenv("GPULEDGER_METRICS", raising=False)
    with pytest.raises(RuntimeError), track.init(project="notebooks", name="crash", usd_per_hour=0.0):
        track.log({"loss": 3.0}, step=1)
        raise RuntimeError("diverged")
    frame = Ledger().runs(sweep="adhoc-notebooks")
    assert frame["status"].to_list() == ["failed"] and frame["reason"].to_list() == ["exit code 1"]
