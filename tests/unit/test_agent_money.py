"""The agent's configuration is fixed at the server's start (issue 43 item 5) and a launched sweep runs what was
priced (item 1): gpuledger/mcp_server/agent_money.py and gpuledger.runtime.money.adopted."""

from __future__ import annotations

import hashlib

import pytest

from gpuledger.errors import BudgetExceeded, UserError
from gpuledger.mcp_server.agent_money import Pinned, snapshot
from gpuledger.runtime import money


@pytest.fixture
def project(tmp_path, monkeypatch):
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "gpuledger.toml").write_text('[agent]\nbudget_usd = 10\n[[budgets]]\nname = "team"\nlimit_usd = 50\n')
    user = tmp_path / "user.toml"
    monkeypatch.setenv("GPULEDGER_CONFIG", str(user))
    monkeypatch.delenv("GPULEDGER_WAREHOUSE", raising=False)
    for name in ("GPULEDGER_AGENT_BUDGET_USD", "GPULEDGER_PROJECT"):
        monkeypatch.setenv(name, "")  # restored after the test (at_start writes them)
        monkeypatch.delenv(name)
    monkeypatch.chdir(proj)
    return proj, user


def test_the_warehouse_budget_and_envelopes_are_pinned_and_a_rewrite_is_refused(project, monkeypatch):
    proj, user = project
    pinned = Pinned.at_start()
    monkeypatch.setenv("GPULEDGER_WAREHOUSE", pinned.warehouse)  # at_start pinned it; restored after the test
    assert pinned.budget_usd == 10.0 and [e.name for e in pinned.envelopes] == ["team", "agent"]
    assert pinned.warehouse.endswith("ledger.duckdb") and pinned.warehouse.startswith("/")
    assert pinned.changed() is None
    pinned.check()
    user.write_text(f'[paths]\nwarehouse = "{proj.parent / "fresh.duckdb"}"\n')  # what an agent with a shell does
    assert "warehouse" in (pinned.changed() or "")
    with pytest.raises(UserError, match="changed since it started"):
        pinned.check()
    user.write_text("")
    (proj / "gpuledger.toml").write_text('[agent]\nbudget_usd = 1000\n[[budgets]]\nname = "team"\nlimit_usd = 50\n')
    assert "budget_usd" in (pinned.changed() or "")


def test_the_sweep_process_runs_the_priced_bytes_at_the_priced_cost(tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text("kind: sweep\nname: s\n")
    copy, digest = snapshot(spec, tmp_path / "data")
    assert copy.read_bytes() == spec.read_bytes() and digest == hashlib.sha256(spec.read_bytes()).hexdigest()
    env = {money.ENV_LAUNCH_ID: "L1", money.ENV_SPEC_SHA256: digest, money.ENV_PLANNED_USD: "6.12",
           money.ENV_NEEDS_APPROVAL: "0"}
    assert money.adopted(copy, {"total_est_cost_usd": 6.0}, env) is False
    assert money.adopted(copy, {"total_est_cost_usd": 6.0}, {**env, money.ENV_NEEDS_APPROVAL: "1"}) is True
    assert money.adopted(copy, {"total_est_cost_usd": 6.0}, {}) is None  # not an agent launch
    with pytest.raises(BudgetExceeded, match="re-priced"):
        money.adopted(copy, {"total_est_cost_usd": 6.0, "total_cost_usd_p90": 18.36}, env)
    spec.write_text("kind: sweep\nname: s\n# three trials now\n")
    with pytest.raises(BudgetExceeded, match="not the spec"):
        money.adopted(spec, {"total_est_cost_usd": 6.0}, env)
