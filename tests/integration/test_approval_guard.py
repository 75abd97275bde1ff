"""The flow's envelope guard (gpuledger/flows/approvals.py `guard_envelopes`): what a dry run, a refusal and a
launch that waits for approval leave in the warehouse (reservations, approval requests, alerts)."""

from __future__ import annotations

import logging
import sys
from types import SimpleNamespace

import pytest
from helpers.warehouse_template import fresh_warehouse

from gpuledger.flows.approvals import guard_envelopes
from gpuledger.runtime import money
from gpuledger.warehouse import Warehouse

LOG = logging.getLogger("test-approval-guard")


@pytest.fixture
def project(tmp_path, monkeypatch, _isolated_warehouse):
    fresh_warehouse(_isolated_warehouse)
    proj = tmp_path / "proj"
    proj.mkdir()
    sent = tmp_path / "alerts.txt"
    script = tmp_path / "alert.py"
    script.write_text(f"import sys\nopen({str(sent)!r}, 'a').write(sys.argv[-1] + '\\n')\n")
    (proj / "gpuledger.toml").write_text(
        '[[budgets]]\nname = "team"\nscope = "project:tests"\nwindow = "month"\nlimit_usd = 10\nsoft_usd = 2\n\n'
        f'[[alerts]]\ncommand = "{sys.executable} {script}"\non = ["budget", "failed"]\n')
    monkeypatch.setenv("GPULEDGER_CONFIG", str(tmp_path / "user.toml"))
    monkeypatch.delenv(money.ENV_LAUNCH_ID, raising=False)
    monkeypatch.chdir(proj)
    return sent


def _accepted(sweep_id: str, usd: float) -> SimpleNamespace:
    return SimpleNamespace(sweep_id=sweep_id, spec=SimpleNamespace(name=sweep_id.split("-")[0], project="tests", owner="ci"),
                           spec_path="unused.yaml", plan=SimpleNamespace(to_json=lambda: {"total_est_cost_usd": usd}))


def _alerts() -> list[str]:
    with Warehouse.open(read_only=True) as wh:
        return wh.query("select subject from alerts_sent order by sent_at")["subject"].to_list()


def test_a_dry_run_refusal_sends_no_alert_and_leaves_the_real_refusals_alert_to_be_sent(project):
    sent = project
    state = guard_envelopes(_accepted("big-1", 50.0), True, LOG)
    assert state is not None and state.is_failed() and "would cross" in state.message
    assert _alerts() == [] and not sent.exists()  # a question, not an event
    state = guard_envelopes(_accepted("big-1", 50.0), False, LOG)
    assert state is not None and state.is_failed()
    assert _alerts() == ["big-1:refused"]
    assert "big-1" in sent.read_text() and "would cross" in sent.read_text()


def _held_and_waiting(sweep_id: str) -> tuple[float, list[str]]:
    with Warehouse.open(read_only=True) as wh:
        held = sum(h["held_usd"] for h in wh.budget_holds(sweep_id))
        states = wh.query("select state from budget_approvals where sweep_id = $s", {"s": sweep_id})["state"].to_list()
    return held, states


def test_a_sweep_stopped_while_it_waits_for_approval_gives_its_reservation_back(project, monkeypatch):
    import prefect.flow_runs

    def interrupted(**_kw):
        raise KeyboardInterrupt  # Ctrl-C (a termination signal is the same) while the flow run is paused

    monkeypatch.setattr(prefect.flow_runs, "pause_flow_run", interrupted)
    with pytest.raises(KeyboardInterrupt):
        guard_envelopes(_accepted("mid-1", 3.0), False, LOG)  # past soft_usd 2: reserves, then waits
    held, states = _held_and_waiting("mid-1")
    assert held == pytest.approx(0.0)  # was $3.00 held for ever
    assert states == ["expired"]  # not shown as waiting for an approval nobody can give any more
