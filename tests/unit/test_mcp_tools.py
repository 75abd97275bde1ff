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


#: six measured runs of LoRA on A100s, each twice as slow and half again as large as planned: what moves the
#: estimate's calibration, its memory band and its GPU table's time bands
TEAM_RUNS = [{"run_id": f"r{i}", "sweep_id": f"s{i}", "method": "lora", "precision": "bf16", "framework": "hf",
              "accelerator": "A100", "gpus": 1, "est_basis": "estimate", "est_wall_s": 100.0, "wall_s": 200.0 + i,
              "est_memory_gib": 10.0, "measured_memory_gib": 15.0 + i / 10} for i in range(6)]


def test_estimate_answers_what_the_cli_json_prints_with_the_teams_runs(tools, monkeypatch, capsys):
    import json

    from gpuledger.cli import main
    from gpuledger.estimate import calibration

    monkeypatch.setattr(calibration, "load_runs", lambda path=None: TEAM_RUNS)
    assert main(["estimate", "Qwen/Qwen2.5-0.5B", "--batch", "2", "--seq", "1024", "--tokens", "1e8",
                 "--accelerator", "A100", "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    mcp = tools.estimate("Qwen/Qwen2.5-0.5B", method="lora", precision="bf16", batch=2, seq=1024, gpus=1,
                         tokens=1e8, accelerator="A100").structured_content
    assert cli["calibration"]["applied"] and "memory_band" in cli and "warnings" in cli
    assert mcp == cli


def test_the_apis_gpu_table_is_the_clis_with_the_teams_runs(monkeypatch, capsys):
    import json

    from gpuledger.api import Ledger
    from gpuledger.cli import main
    from gpuledger.estimate import calibration

    monkeypatch.setattr(calibration, "load_runs", lambda path=None: TEAM_RUNS)
    assert main(["estimate", "Qwen/Qwen2.5-0.5B", "--tokens", "1e8", "--accelerator", "A100", "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)["options"]
    ledger = Ledger()
    api = ledger.gpu_options(ledger.workload("Qwen/Qwen2.5-0.5B"), 1e8, accelerators=["A100"])
    assert [(o["time_s"], o["time_band"], o["memory_band"]) for o in api] == \
        [(o["time_s"], o["time_band"], o["memory_band"]) for o in cli]


def test_plan_keeps_no_copy_of_a_file_that_is_no_spec(tools):
    from gpuledger import settings

    secrets = "secrets.env"  # what /proc/self/environ holds: the server's environment, cloud credentials and all
    with open(secrets, "w", encoding="utf-8") as fh:
        fh.write("AWS_SECRET_ACCESS_KEY=abc123\n")
    with pytest.raises((ToolError, UserError), match=r"^secrets.env:1:1: "):
        tools.plan(secrets)
    kept = settings.current().data_dir / "mcp" / "specs"
    assert not kept.is_dir() or not any(kept.iterdir())


def test_a_spec_path_with_a_nul_character_is_no_such_file_not_a_value_error(tools):
    spec = "specs/a\x00b.yaml"  # JSON carries it (\u0000); no file has one
    check = tools.validate(spec).structured_content
    assert not check["valid"] and check["problems"] == ["specs/a\\x00b.yaml:1:1: no such file (the path holds a NUL character)"]
    with pytest.raises((ToolError, UserError), match="NUL character"):
        tools.plan(spec)


@pytest.mark.parametrize(("tool", "arguments", "line"), [
    ("estimate", {"model": "gpuledger/demo-char-gpt", "seq": 10**16},
     "Error executing tool estimate: argument seq: Input should be less than or equal to 1000000000000000 "
     "(got 10000000000000000)"),
    ("estimate", {"model": "gpuledger/demo-char-gpt", "batch": 0, "seq": "long"},
     "Error executing tool estimate: argument batch: Input should be greater than or equal to 1 (got 0); "
     "argument seq: Input should be a valid integer, unable to parse string as an integer (got 'long')"),
    ("estimate", {}, "Error executing tool estimate: argument model: required"),
    ("sweep", {"spec": "specs/x.yaml", "max_parallel": 0},
     "Error executing tool sweep: argument max_parallel: Input should be greater than or equal to 1 (got 0)"),
    ("plan", {"spec": ""}, "Error executing tool plan: argument spec: String should have at least 1 character (got '')"),
])
def test_arguments_the_sdk_refuses_come_back_as_one_line_naming_the_tool_and_the_argument(tools, tool, arguments,
                                                                                           line):
    import asyncio

    from mcp.client import Client

    from gpuledger.mcp_server.server import build_server

    async def call():
        async with Client(build_server(tools)) as client:
            return await client.call_tool(tool, arguments)

    result = asyncio.run(call())
    assert result.is_error and [block.text for block in result.content] == [line]
