"""`gpuledger mcp` as a subprocess, spoken to with the official MCP SDK's client over stdio: the tools and
resources, a plan's cost, read-only SQL, and the agent budget refusing before anything launches (also
across server restarts, counted from the ledger)."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import textwrap
import time
from pathlib import Path

import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

from gpuledger.warehouse import Warehouse

REPO = Path(__file__).resolve().parents[2]
TOOLS = {"validate", "estimate", "plan", "prices", "sweep", "status", "report", "sql"}


def _project(tmp_path: Path, budget_usd: float | None) -> Path:
    proj = tmp_path / "proj"
    (proj / "specs").mkdir(parents=True)
    agent = f"[agent]\nbudget_usd = {budget_usd}\n" if budget_usd is not None else ""
    (proj / "gpuledger.toml").write_text(f"[paths]\ndata_dir = \".gpuledger\"\n{agent}", encoding="utf-8")
    shutil.copy(REPO / "gpuledger" / "scaffold" / "specs" / "lora-grid.yaml", proj / "specs" / "lora-grid.yaml")
    return proj


def _tiny_spec(proj: Path, name: str, hold: Path | None = None) -> Path:
    """A one-trial sweep; with `hold`, its trial runs until that file exists (at most 100 s, within its 2 min trial_timeout), so the test
    decides when the sweep ends (no fixed sleep to outlast)."""
    trial = proj / f"trial-{name}.py"  # one script per spec: a second spec must not rewrite the first's
    trial.write_text(textwrap.dedent(f"""
        import pathlib, time, sys
        from gpuledger.track import log
        hold, deadline = {str(hold) if hold else ""!r}, time.monotonic() + 100  # within trial_timeout
        while hold and not pathlib.Path(hold).exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        log(eval_loss=abs(float(sys.argv[1]) - 0.3) + 1)
    """), encoding="utf-8")
    path = proj / "specs" / f"{name}.yaml"
    path.write_text(textwrap.dedent(f"""
        kind: sweep
        name: {name}
        project: tests
        owner: ci
        model: gpuledger/demo-char-gpt
        method: lora
        precision: fp32
        train: {{seq_len: 64, tokens_per_trial: 1000, grad_checkpointing: false, flash_attention: false}}
        search:
          strategy: grid
          params: {{x: [0.1]}}
          objective: {{metric: eval_loss, goal: minimize}}
        resources: {{max_parallel: 1}}
        budget: {{max_usd: 5}}
        launcher: local
        local: {{usd_per_hour: 36, trial_timeout: 2m}}
        task:
          run: python {trial} {{x}}
    """), encoding="utf-8")
    return path


def _env(proj: Path, prefect_api_url: str = "") -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPULEDGER_")}
    env.update({"HOME": str(proj.parent / "home"), "GPULEDGER_MACHINE_FILE": os.environ.get("GPULEDGER_MACHINE_FILE", ""),
                "DO_NOT_TRACK": "1", "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PREFECT_API_URL": prefect_api_url})
    return {k: v for k, v in env.items() if v}


def _client(proj: Path, prefect_api_url: str = "") -> Client:
    """An MCP client of a new `gpuledger mcp` process; the sweeps it launches use the Prefect server at
    `prefect_api_url` (else each starts a temporary one)."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "gpuledger.cli", "mcp"], cwd=str(proj),
                                   env=_env(proj, prefect_api_url))
    return Client(params, read_timeout_seconds=300)


def _text(result) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


def _launches(proj: Path) -> int:
    path = proj / ".gpuledger" / "ledger.duckdb"
    if not path.exists():
        return 0
    with Warehouse.open(path, read_only=True) as wh:
        return int(wh.scalar("select count(*) from agent_launches"))


@pytest.mark.slow
def test_tools_plan_sql_and_a_budget_far_below_the_plan_refuses_before_anything_launches(tmp_path):
    proj = _project(tmp_path, budget_usd=0.0001)
    with Warehouse.open(proj / ".gpuledger" / "ledger.duckdb"):
        pass  # an empty, migrated ledger (as after `gpuledger init` and a first sweep)

    async def talk() -> None:
        async with _client(proj) as client:
            tools = await client.list_tools()
            assert {tool.name for tool in tools.tools} >= TOOLS
            resources = await client.list_resources()
            assert "gpuledger://views.yml" in {str(r.uri) for r in resources.resources}
            doc = await client.read_resource("gpuledger://views.yml")
            assert "v_sweep_roi" in doc.contents[0].text

            plan = await client.call_tool("plan", {"spec": "specs/lora-grid.yaml"})
            assert not plan.is_error, _text(plan)
            planned = plan.structured_content["planned_usd"]
            assert planned > 0.0001 * 10  # "far below": the agent budget is under a tenth of the plan
            assert plan.structured_content["plan"]["trials"], "the plan's trials come back structured"
            assert "does NOT fit" in _text(plan)

            refused = await client.call_tool("sweep", {"spec": "specs/lora-grid.yaml",
                                                       "plan_id": plan.structured_content["plan_id"]})
            assert refused.is_error
            assert "refused before launch" in _text(refused) and f"${planned:.2f}" in _text(refused)
            assert "Traceback" not in _text(refused)

            no_plan = await client.call_tool("sweep", {"spec": "specs/lora-grid.yaml"})
            assert no_plan.is_error and "plan first" in _text(no_plan)

            rows = await client.call_tool("sql", {"query": "select count(*) as n from sweeps"})
            assert not rows.is_error, _text(rows)
            assert rows.structured_content["rows"] == [{"n": 0}]
            write = await client.call_tool("sql", {"query": "delete from sweeps"})
            assert write.is_error and "refusing" in _text(write)

            bad = await client.call_tool("validate", {"spec": "specs/missing.yaml"})
            assert not bad.is_error and bad.structured_content["valid"] is False

    asyncio.run(talk())
    assert _launches(proj) == 0  # nothing recorded, nothing launched
    with Warehouse.open(proj / ".gpuledger" / "ledger.duckdb", read_only=True) as wh:
        assert wh.scalar("select count(*) from sweeps") == 0
    assert not (proj / ".gpuledger" / "landing").exists()


@pytest.mark.slow
def test_the_budget_is_counted_from_the_ledger_across_server_restarts(tmp_path, prefect_api_url):
    proj = _project(tmp_path, budget_usd=None)
    release = tmp_path / "release-agent-one"
    first, second = _tiny_spec(proj, "agent-one", hold=release), _tiny_spec(proj, "agent-two")

    async def plan_of(spec: Path) -> dict:
        async with _client(proj) as client:
            plan = await client.call_tool("plan", {"spec": str(spec)})
            assert not plan.is_error, _text(plan)
            return plan.structured_content

    planned = asyncio.run(plan_of(first))["planned_usd"]
    assert planned > 0
    # room for one launch of that size, not two
    (proj / "gpuledger.toml").write_text(f"[agent]\nbudget_usd = {planned * 1.5}\n", encoding="utf-8")

    async def launch(spec: Path) -> tuple[bool, str, dict | None]:
        async with _client(proj, prefect_api_url) as client:  # a new server each time: nothing is remembered
            plan = await client.call_tool("plan", {"spec": str(spec)})
            result = await client.call_tool("sweep", {"spec": str(spec), "plan_id": plan.structured_content["plan_id"]})
            return result.is_error, _text(result), result.structured_content

    failed, text, launched = asyncio.run(launch(first))
    assert not failed, text
    try:
        failed, text, _ = asyncio.run(launch(second))  # the first still holds its planned spend
        assert failed and "refused before launch" in text and "1 still running" in text
    finally:
        release.touch()  # the first sweep's trial may finish now

    async def wait_for_the_end(sweep_id: str) -> list[dict]:
        async with _client(proj) as client:  # one server polled (restarts are what the launches test)
            deadline = time.monotonic() + 240
            while time.monotonic() < deadline:
                rows = (await client.call_tool("status", {"sweep": sweep_id})).structured_content["sweeps"]
                if rows and rows[0]["status"] not in ("planned", "running"):
                    break
                await asyncio.sleep(1.0)
            return rows

    rows = asyncio.run(wait_for_the_end(launched["sweep_id"]))
    assert rows and rows[0]["status"] == "succeeded", rows
    failed, text, relaunched = asyncio.run(launch(second))  # the first ended: it now counts what it was billed
    assert not failed, text
    assert _launches(proj) == 2
    # it runs to its end here (a sweep left running would outlive the test)
    rows = asyncio.run(wait_for_the_end(relaunched["sweep_id"]))
    assert rows and rows[0]["status"] == "succeeded", rows
