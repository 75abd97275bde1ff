"""The agent budget as a limit (issue 43 items 1 and 5), through a real `gpuledger mcp` over stdio: four
concurrent `sweep` calls that each fit alone launch exactly one; the launched sweep runs the planned bytes
(its spec file rewritten after the call changes nothing) and is stopped, its running trial cancelled, when
its accrued spend would cross the agent budget; a user config rewritten to point the warehouse elsewhere
gets every later call refused instead of a fresh $0."""

from __future__ import annotations

import asyncio
import sys
import time

import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from test_mcp import _env, _launches, _project, _text, _tiny_spec

from gpuledger.warehouse import Warehouse


def _client(proj, prefect_api_url: str) -> Client:
    """A `gpuledger mcp` whose sweeps write their running trials' accrual every 0.5 s."""
    env = {**_env(proj, prefect_api_url), "GPULEDGER_ACCRUE_INTERVAL_S": "0.5"}
    return Client(StdioServerParameters(command=sys.executable, args=["-m", "gpuledger.cli", "mcp"], cwd=str(proj),
                                        env=env), read_timeout_seconds=300)


def _stop(pid: int | None) -> None:
    """The launched sweep's process (its own session) ends with the test: it has written its end by now."""
    import contextlib
    import os
    import signal

    if pid:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)


def _sweep_status(proj, sweep_id: str) -> str | None:
    path = proj / ".gpuledger" / "ledger.duckdb"
    try:
        with Warehouse.open(path, read_only=True, lock_timeout_s=2) as wh:
            return wh.scalar("select status from sweeps where sweep_id = $s", {"s": sweep_id})
    except Exception:  # noqa: BLE001 - busy: asked again
        return None


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_concurrent_calls_launch_once_the_sweep_stops_at_the_agent_budget_and_the_config_is_pinned(
        tmp_path, prefect_api_url):
    proj = _project(tmp_path, budget_usd=None)
    spec = _tiny_spec(proj, "agent-long", hold=tmp_path / "never")  # its trial runs ~100 s at $36/h, far past its plan
    home = tmp_path / "home"
    (home / ".config" / "gpuledger").mkdir(parents=True)
    with Warehouse.open(proj / ".gpuledger" / "ledger.duckdb"):
        pass

    state: dict = {}

    async def talk() -> None:
        nonlocal_state = state
        async with _client(proj, prefect_api_url) as first:
            plan = await first.call_tool("plan", {"spec": "specs/agent-long.yaml"})
            assert not plan.is_error, _text(plan)
            nonlocal_state["planned"] = plan.structured_content["planned_usd"]
        planned = nonlocal_state["planned"]
        # the budget: 1.6 plans (one launch fits, two do not), set before the server that launches starts
        (proj / "gpuledger.toml").write_text(f"[paths]\ndata_dir = \".gpuledger\"\n[agent]\nbudget_usd = {1.6 * planned}\n")
        async with _client(proj, prefect_api_url) as client:
            plan = await client.call_tool("plan", {"spec": "specs/agent-long.yaml"})
            assert not plan.is_error, _text(plan)
            args = {"spec": "specs/agent-long.yaml", "plan_id": plan.structured_content["plan_id"]}
            calls = await asyncio.gather(*(client.call_tool("sweep", args) for _ in range(4)))
            launched = [c for c in calls if not c.is_error]
            assert len(launched) == 1, [_text(c) for c in calls]
            assert all("refused" in _text(c) for c in calls if c.is_error)
            sweep_id = launched[0].structured_content["sweep_id"]
            nonlocal_state["pid"] = launched[0].structured_content["pid"]
            spec.write_text(spec.read_text().replace("x: [0.1]", "x: [0.1, 0.2, 0.3]"))  # after the call: not run

            end = time.monotonic() + 400
            while time.monotonic() < end and _sweep_status(proj, sweep_id) not in ("budget-stopped", "succeeded",
                                                                                   "partial", "failed"):
                await asyncio.sleep(2)
            assert _sweep_status(proj, sweep_id) == "budget-stopped"
            status = await client.call_tool("status", {"sweep": sweep_id})
            assert "budget-stopped" in _text(status), _text(status)

            (home / ".config" / "gpuledger" / "config.toml").write_text(
                f"[paths]\nwarehouse = \"{tmp_path / 'fresh.duckdb'}\"\n")
            reset = await client.call_tool("plan", {"spec": "specs/agent-long.yaml"})
            assert reset.is_error and "changed since it started" in _text(reset), _text(reset)
            again = await client.call_tool("sweep", args)
            assert again.is_error and "changed since it started" in _text(again)

    try:
        asyncio.run(talk())
    finally:
        _stop(state.get("pid"))
    assert _launches(proj) == 1
    assert not (tmp_path / "fresh.duckdb").exists()
    with Warehouse.open(proj / ".gpuledger" / "ledger.duckdb", read_only=True) as wh:
        trials = wh.scalar("select count(*) from trials")
        cost = float(wh.scalar("select coalesce(sum(cost_usd), 0) from runs"))
        ledger = wh.query("select sum(spent_usd) as spent, sum(reserved_usd) as held from budget_ledger "
                          "where budget = 'agent'").to_dicts()[0]
        budget = float(wh.scalar("select limit_usd from budget_envelopes where budget = 'agent'"))
    assert trials == 1  # the planned bytes ran, not the rewritten three-trial spec
    assert cost < 1.5 * budget  # stopped at the budget (an accrual look and the cancel's lag past it), not 2.5x past
    assert ledger["spent"] == pytest.approx(cost) and ledger["held"] == pytest.approx(0.0, abs=1e-9)
