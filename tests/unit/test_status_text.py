"""`gpuledger status`'s text: a sweep that ended states its final numbers, a running one its spend so far
(a real warehouse at GPULEDGER_WAREHOUSE, the CLI's own entry point)."""

from __future__ import annotations

import os

from helpers.billing_fixtures import billed_runs

from gpuledger.cli import main
from gpuledger.warehouse import Warehouse


def _status(capsys, *args: str) -> str:
    capsys.readouterr()
    assert main(["status", *args]) == 0
    return capsys.readouterr().out


def test_a_finished_sweep_states_its_final_numbers_not_so_far(capsys):
    # a succeeded sweep read "lora-grid-12345678: succeeded, spent so far $27.7583 (measured $27.7583 + 0 running
    # trial(s) $0.0000 at $0.00/h)": the wording of a running sweep, for money that will not change
    with Warehouse.open(os.environ["GPULEDGER_WAREHOUSE"]) as wh:
        billed_runs(wh)  # run-a 8 x A100 $32.77/h for 3000 s, run-b A10G $0.45/h for 3600 s
        wh.finish_sweep("lora-grid-12345678", "succeeded", "2026-02-02T13:00:00")
    out = _status(capsys, "lora-grid")
    total = 32.77 * 3000 / 3600 + 0.45
    assert out.splitlines()[0] == (f"lora-grid-12345678: succeeded, ended 2026-02-02 13:00 UTC; spent ${total:.4f} "
                                   f"in total (measured, 2 runs)")
    assert "so far" not in out and "running trial" not in out


def test_a_running_sweep_still_says_so_far(capsys):
    with Warehouse.open(os.environ["GPULEDGER_WAREHOUSE"]) as wh:
        billed_runs(wh)  # registered 'running', never finished
    out = _status(capsys, "lora-grid")
    assert out.startswith("lora-grid-12345678: running, spent so far $27.7583 (measured $27.7583 + 0 running trial(s)")


def test_the_mcp_status_of_a_finished_sweep_says_final_not_so_far():
    # the MCP status tool said "spent $27.7583 (so far, running trials included: $27.7583)" of a succeeded sweep
    from gpuledger.mcp_server.server import GpuledgerTools

    with Warehouse.open(os.environ["GPULEDGER_WAREHOUSE"]) as wh:
        billed_runs(wh)
        wh.finish_sweep("lora-grid-12345678", "succeeded", "2026-02-02T13:00:00")
    text = GpuledgerTools(None, True).status("lora-grid").content[0].text
    assert text.splitlines()[0].startswith("lora-grid-12345678: succeeded, ")
    assert text.splitlines()[0].endswith("spent $27.7583 in total (final)") and "so far" not in text
