"""The first plan on a busy machine plans for it (issue 38 item 5): the local plan measures the load
average at plan time and divides the model's CPU time by the share of a core each trial can expect
beside it, says so in its assumptions and `machine_load` of the JSON; a quiet machine's plan is the
model's time as it is. The machine's stored speed never carries the load (it is of the moment)."""

from __future__ import annotations

import json
import socket
from dataclasses import replace
from pathlib import Path

import psutil
import pytest

from gpuledger.inputs.machine import (
    MachineLoad,
    MachineSpeed,
    local_machine,
    machine_file,
    measure_cpu_share,
    measure_load,
)
from gpuledger.plan import plan_sweep
from gpuledger.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
MACHINE = MachineSpeed(hostname=socket.gethostname(), cores=int(psutil.cpu_count(logical=False) or psutil.cpu_count() or 1),
                       logical_cores=int(psutil.cpu_count() or 1),
                       total_ram_gib=round(psutil.virtual_memory().total / 2**30, 3), matmul_gflops_one_core=80.0,
                       method="literal (test)", measured_at="2026-11-01T00:00:00+00:00")


def _load(load_1m: float, cpus: int = 2) -> MachineLoad:
    return MachineLoad(load_1m=load_1m, load_5m=load_1m, logical_cores=cpus, measured_at="2026-12-02T01:00:00+00:00")


@pytest.mark.parametrize("load_1m, parallel, share", [(0.0, 2, 1.0), (0.5, 1, 1.0), (6.0, 2, 0.25), (9.0, 2, 2 / 11),
                                                      (1000.0, 2, 0.02)])
def test_cpu_share(load_1m, parallel, share):
    assert _load(load_1m).cpu_share(parallel) == pytest.approx(share)


@pytest.mark.slow  # over ~0.5 s alone (a report, warehouse, plan or subprocess): make test runs it, make test-fast does not
def test_a_busy_machine_plans_longer_trials_and_says_why():
    spec = load_spec(ROOT / "specs/lora-grid.yaml")
    quiet = plan_sweep(spec, machine=replace(MACHINE, load=_load(0.0, max(2, MACHINE.logical_cores))))
    bare = plan_sweep(spec, machine=MACHINE)
    busy = plan_sweep(spec, machine=replace(MACHINE, load=_load(6.0, 2)))
    slots = busy.max_parallel
    share = 2 / (6.0 + slots)
    setup = {t["trial_id"]: t["est_wall_s"] - t["est_compute_s"] for t in bare.trials if "est_compute_s" in t}
    for q, b, n in zip(quiet.trials, bare.trials, busy.trials, strict=True):
        assert q["est_wall_s"] == pytest.approx(b["est_wall_s"])  # a quiet machine: the model as it is
        if setup:
            assert n["est_compute_s"] == pytest.approx(b["est_compute_s"] / share, rel=1e-6)
        assert n["est_wall_s"] > b["est_wall_s"] * 1.5 and n["est_cost_usd"] > b["est_cost_usd"]
    assert busy.makespan_s > bare.makespan_s * 1.5
    said = [a for a in busy.assumptions if a.startswith("machine busy")]
    assert said and "load average 6.0" in said[0] and f"{share:.2f} of a core" in said[0]
    doc = json.loads(busy.to_json_text())
    assert doc["machine_load"]["load_1m"] == 6.0 and doc["machine_load"]["cpu_share"] == pytest.approx(share, abs=1e-3)
    assert doc["machine_load"]["parallel"] == slots
    assert "machine_load" not in json.loads(bare.to_json_text())
    assert not any(a.startswith("machine busy") for a in quiet.assumptions)


@pytest.mark.slow  # over ~1 s (a whole report, replay, plan or warehouse): make test runs it, make test-fast does not
def test_the_load_is_measured_again_after_a_moment_and_never_stored_with_the_machine(tmp_path, monkeypatch):
    from gpuledger.inputs.machine import LOAD_REUSE_S, load_file

    monkeypatch.setenv("GPULEDGER_MACHINE_FILE", str(tmp_path / "machine.json"))
    monkeypatch.delenv("GPULEDGER_MACHINE_LOAD", raising=False)  # the suite plans as if quiet (conftest.py)
    m = local_machine(load=True)
    assert m.load is not None and m.load.logical_cores >= 1 and m.load.load_1m >= 0
    assert "load" not in json.loads(machine_file().read_text())
    assert local_machine().load is None and local_machine(load=True).load is not None
    # within LOAD_REUSE_S the next plan takes the same measurement (the API's plan and `plan --json` agree)
    assert measure_load() == m.load and load_file().parent == tmp_path
    kept = json.loads(load_file().read_text())
    load_file().write_text(json.dumps({**kept, "at": kept["at"] - LOAD_REUSE_S - 1}))  # older: measured again
    monkeypatch.setattr("os.getloadavg", lambda: (7.0, 6.0, 5.0))
    again = measure_load()
    assert again.load_1m == 7.0 and again.measured_at >= m.load.measured_at
    assert measure_load(probe_k=1).probe_k in (0, 1)  # another probe: not the kept one


def test_the_load_to_plan_for_can_be_set(monkeypatch):
    from gpuledger.errors import UserError

    monkeypatch.setenv("GPULEDGER_MACHINE_LOAD", "3.5")
    assert measure_load().load_1m == 3.5 and "GPULEDGER_MACHINE_LOAD" in measure_load().measured_at
    for bad in ("busy", "-1", "nan"):
        monkeypatch.setenv("GPULEDGER_MACHINE_LOAD", bad)
        with pytest.raises(UserError, match="GPULEDGER_MACHINE_LOAD"):
            measure_load()


def test_the_probed_share_is_what_k_new_processes_got():
    """The probe: k child Pythons spinning side by side, CPU time / wall time; the plan uses it for k trials."""
    share = measure_cpu_share(2, seconds=0.2)
    assert share is not None and 0.0 < share <= 1.05
    probed = replace(_load(0.0, 2), probed_share=0.3, probe_k=2)
    assert probed.cpu_share(2) == pytest.approx(0.3)  # measured beats the load formula (1.0 here)
    assert probed.cpu_share(1) == pytest.approx(1.0)  # another k: the formula
    assert "measured: 2 process(es) spinning" in probed.describe(2) and probed.to_json(2)["probed_share"] == 0.3
