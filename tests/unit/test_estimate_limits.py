"""One limit on the estimator's numbers for every face (`gpuledger.spec.strict.MAX_COUNT`, checked by
`gpuledger.estimate.Workload`): the Python API, the CLI and the MCP tool take the same numbers and refuse
the same ones, with a message naming the argument."""

from __future__ import annotations

import asyncio

import pytest
from mcp.server.mcpserver.exceptions import ToolError

from gpuledger.api import Ledger
from gpuledger.cli import main
from gpuledger.errors import UserError
from gpuledger.mcp_server.server import GpuledgerTools, build_server
from gpuledger.spec.strict import MAX_COUNT

MODEL = "gpuledger/demo-char-gpt"


@pytest.mark.parametrize(("field", "value", "message"), [
    ("seq_len", 1e18, "seq_len: 1e+18 is too large (at most 1e+15)"),
    ("seq_len", 10**18, "seq_len: 1000000000000000000 is too large (at most 1e+15)"),
    ("micro_batch", MAX_COUNT + 1, "micro_batch: 1000000000000001 is too large (at most 1e+15)"),
    ("gpus", float("nan"), "gpus: must be a finite number (got nan)"),
    ("seq_len", float("inf"), "seq_len: must be a finite number (got inf)"),
    ("seq_len", True, "seq_len: expected a number, not true"),
    ("micro_batch", "4", "micro_batch: expected a number, not the text '4'"),
    ("grad_accum", 10**20, "grad_accum: 100000000000000000000 is too large (at most 1e+15)"),
    ("gpu_memory_gib", float("inf"), "gpu_memory_gib: must be a finite number (got inf)"),
    ("flash_attn", 1, "flash_attn: expected true or false (got 1)"),
    ("seq_len", -5, "seq_len: Input should be greater than or equal to 1"),
])
def test_the_python_api_refuses_a_number_no_estimate_means_naming_it(field, value, message):
    with pytest.raises(UserError) as err:
        Ledger().estimate(MODEL, method="lora", precision="fp32", **{field: value})
    assert str(err.value) == message


def test_the_api_the_cli_and_the_mcp_tool_share_one_limit(capsys):
    server = build_server(GpuledgerTools(None, True))

    def mcp(seq: int):
        return asyncio.run(server.call_tool("estimate", {"model": MODEL, "precision": "fp32", "seq": seq}))

    # at the limit: every face estimates
    assert Ledger().estimate(MODEL, precision="fp32", seq_len=MAX_COUNT).workload.seq_len == MAX_COUNT
    assert main(["estimate", MODEL, "--precision", "fp32", "--seq", "1e15", "--json"]) == 0
    capsys.readouterr()
    assert mcp(MAX_COUNT).structured_content["params_total"] > 0
    # one past it: every face refuses
    with pytest.raises(UserError, match=r"^seq_len: 1000000000000001 is too large \(at most 1e\+15\)$"):
        Ledger().estimate(MODEL, precision="fp32", seq_len=MAX_COUNT + 1)
    with pytest.raises(SystemExit) as exit_:
        main(["estimate", MODEL, "--precision", "fp32", "--seq", str(MAX_COUNT + 1)])
    assert exit_.value.code == 2 and "too large (at most 1e+15)" in capsys.readouterr().err
    with pytest.raises(ToolError, match="seq"):
        mcp(MAX_COUNT + 1)
