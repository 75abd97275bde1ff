"""Issue 31: files named by environment variables (GPULEDGER_MACHINE_FILE, GPULEDGER_PRICES) may name
anything. Such a file is read only when it is a small regular file, and replaced only when it is
gpuledger's own."""

from __future__ import annotations

import os
import time

import pytest

from gpuledger.errors import UserError
from gpuledger.inputs.machine import MachineSpeed, read_machine, store_machine

FACTS = MachineSpeed(hostname="h", cores=2, logical_cores=2, total_ram_gib=4.0, matmul_gflops_one_core=10.0,
                     method="m", measured_at="2026-11-26T00:00:00+00:00")


@pytest.mark.parametrize("name", ["/dev/zero", "/dev/null/x", "FIFO", "DIR"])
def test_a_machine_file_that_is_not_a_regular_file_is_refused_at_once(tmp_path, name):
    path = {"FIFO": tmp_path / "fifo", "DIR": tmp_path}.get(name, name)
    if name == "FIFO":
        os.mkfifo(path)
    started = time.monotonic()
    with pytest.raises(UserError, match="GPULEDGER_MACHINE_FILE") as info:
        read_machine(path)
    assert time.monotonic() - started < 2 and len(str(info.value).splitlines()) == 1
    with pytest.raises(UserError):
        store_machine(FACTS, path)


def test_a_file_that_is_not_a_machine_file_is_never_overwritten(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes, not JSON\n")
    with pytest.raises(UserError, match="not overwritten"):
        store_machine(FACTS, notes)
    assert notes.read_text() == "my notes, not JSON\n"
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (1024 * 1024))
    with pytest.raises(UserError, match="at most"):
        store_machine(FACTS, big)


def test_gpuledgers_own_machine_file_is_replaced(tmp_path):  # positive control
    path = tmp_path / "machine.json"
    store_machine(FACTS, path)
    store_machine(MachineSpeed(**{**FACTS.__dict__, "matmul_gflops_one_core": 20.0}), path)
    assert '"matmul_gflops_one_core": 20.0' in path.read_text()


@pytest.mark.parametrize("name", ["/dev/zero", "FIFO"])
def test_a_price_file_that_is_not_a_regular_file_is_refused_at_once(tmp_path, name):
    from gpuledger.catalog.offers import read_price_file

    path = tmp_path / "fifo" if name == "FIFO" else name
    if name == "FIFO":
        os.mkfifo(path)
    started = time.monotonic()
    with pytest.raises(UserError, match="GPULEDGER_PRICES") as info:
        read_price_file(path)
    assert time.monotonic() - started < 2 and "not a regular file" in str(info.value)
