"""The MCP tools' answers to bad input, called in-process (`gpuledger.mcp_server.server.GpuledgerTools`, the
object behind each tool): the message names what the agent gave, where; tests/integration/test_mcp.py drives
the same tools over stdio."""

from __future__ import annotations

import pytest
from mcp.server.mcpserver.exceptions import ToolError

from gpuledger.errors import UserError
from gpuledger.mcp_server.server import GpuledgerTools


@pytest.fixture
def tools(tmp_path, monkeypatch):
    proj = tmp_path / "proj"
    (proj / "specs").mkdir(parents=True)
    (proj / "gpuledger.toml").write_text('[paths]\ndata_dir = ".gpuledger"\n', encoding="utf-8")
    monkeypatch.setenv("GPULEDGER_CONFIG", str(tmp_path / "user.toml"))
    monkeypatch.delenv("GPULEDGER_WAREHOUSE", raising=False)
    monkeypatch.chdir(proj)
    return GpuledgerTools(None, True)


def test_a_plan_refused_names_the_agents_spec_not_the_servers_kept_copy(tools):
    spec = "specs/broken spec.yaml"
    with open(spec, "w", encoding="utf-8") as fh:
        fh.write("kind: sweep\nname: x\nbudget: {max_usd: 5\n")
    with pytest.raises((ToolError, UserError)) as err:  # the tool's guard makes a UserError a tool error
        tools.plan(spec)
    assert str(err.value).startswith(f"{spec}:") and "mcp/specs" not in str(err.value)


def test_prices_says_each_offers_region_and_its_on_demand_and_spot_rate_per_hour(tools):
    result = tools.prices("H100", "aws")
    text, offers = result.content[0].text, result.structured_content["offers"]
    first = offers[0]
    line = text.splitlines()[1]
    assert first["region"] in line and first["instance_type"] in line
    assert f"on demand ${first['usd_per_hour']['on_demand']:,.4g}/h" in line and "{" not in line
