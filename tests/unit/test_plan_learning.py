"""Estimates that learn and stay put: this machine measured once and stored; after a sweep the
re-plan uses what was measured (named query `plan_measurements` on a real DuckDB warehouse)."""

from __future__ import annotations

import json
import socket
import statistics
from dataclasses import replace
from pathlib import Path

import polars as pl
import psutil
import pytest

from gpuledger.inputs.ledger import planning_inputs
from gpuledger.inputs.machine import MachineSpeed, local_machine, machine_file, read_machine, store_machine
from gpuledger.plan import plan_sweep, warehouse_trial_rows
from gpuledger.spec import expand_trials, load_spec, sweep_id_for

ROOT = Path(__file__).resolve().parents[2]
HOST = socket.gethostname()
#: this host as it is (cores, RAM: a stored file of other values counts as another machine), at a literal speed
MACHINE = MachineSpeed(hostname=HOST, cores=int(psutil.cpu_count(logical=False) or psutil.cpu_count() or 1),
                       logical_cores=int(psutil.cpu_count() or 1),
                       total_ram_gib=round(psutil.virtual_memory().total / 2**30, 3), matmul_gflops_one_core=80.0,
                       method="literal (test)", measured_at="2026-11-01T00:00:00+00:00")


@pytest.fixture()
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("GPULEDGER_MACHINE_FILE", str(tmp_path / "machine.json"))
    monkeypatch.setenv("GPULEDGER_WAREHOUSE", str(tmp_path / "ledger.duckdb"))
    return tmp_path


@pytest.mark.slow  # over ~1 s (a whole report, replay, plan or warehouse): make test runs it, make test-fast does not
def test_machine_is_measured_once_then_read(isolated):
    assert read_machine() is None
    m = local_machine()
    assert machine_file().is_file() and m.matmul_gflops_one_core > 0 and m.cores >= 1
    assert local_machine() == m  # read back, not re-measured
    # a file of another host, or an unreadable one, is not trusted: measured again and replaced
    store_machine(MachineSpeed(**{**m.__dict__, "hostname": "elsewhere"}))
    assert read_machine() is None
    store_machine(MachineSpeed(**{**m.__dict__, "total_ram_gib": m.total_ram_gib * 2}))  # resized
    assert read_machine() is None
    again = local_machine()
    assert again.hostname == HOST and json.loads(machine_file().read_text())["hostname"] == HOST
    # a file that is not gpuledger's measurement is not trusted, and never overwritten (issue 31)
    machine_file().write_text("{not json")
    assert read_machine() is None
    from gpuledger.errors import UserError

    with pytest.raises(UserError, match="not overwritten"):
        local_machine()
    assert machine_file().read_text() == "{not json"


def _measurements(rows):
    return pl.DataFrame(rows, schema={"trial_id": pl.String, "accelerator": pl.String, "gpus": pl.Int64,
                                      "hostname": pl.String, "wall_s": pl.Float64, "runs": pl.Int64,
                                      "est_flops": pl.Float64}, orient="row")


@pytest.mark.slow  # over ~0.5 s alone (a report, warehouse, plan or subprocess): make test runs it, make test-fast does not
def test_measured_trials_take_their_time_others_a_calibrated_rate():
    spec = load_spec(ROOT / "specs" / "lora-grid.yaml")
    before = {t["trial_id"]: t for t in plan_sweep(spec, machine=MACHINE).trials}
    # the machine turned out 1.5x slower than the table says on the compute part
    measured_ids = [tid for tid, t in before.items() if t["params"]["lora_r"] == 4]
    rows = [(tid, "CPU", 1, HOST, 3.0 + before[tid]["compute_s"] * 1.5, 1, before[tid]["flops_total"]) for tid in measured_ids]
    rows.append(("other-host-trial", "CPU", 1, "elsewhere", 9999.0, 1, 1e12))  # another machine: ignored
    after = plan_sweep(spec, machine=MACHINE, measurements=_measurements(rows))
    for t in after.trials:
        tid = t["trial_id"]
        if tid in measured_ids:
            assert t["est_basis"] == "measured"
            assert t["est_wall_s"] == pytest.approx(3.0 + before[tid]["compute_s"] * 1.5, abs=1e-3)
        else:
            assert t["est_basis"] == "calibrated on 6 runs"
            assert t["compute_s"] == pytest.approx(before[tid]["compute_s"] * 1.5, rel=1e-3)
        assert t["est_cost_usd"] == pytest.approx(t["usd_per_hour"] * t["est_wall_s"] / 3600, rel=1e-3)
    assert any("calibrated on 6 measured trial(s)" in a for a in after.assumptions)
    # the same inputs, the same plan
    assert after.to_json_text() == plan_sweep(spec, machine=MACHINE, measurements=_measurements(rows)).to_json_text()


@pytest.mark.slow  # over ~1 s (a whole report, replay, plan or warehouse): make test runs it, make test-fast does not
def test_replan_after_a_sweep_reads_the_warehouse(isolated):
    """Real DuckDB: the plan's rows stored as the sweep stores them, runs ingested as records; the
    re-plan of the same spec comes within 35% (median) of each trial's measured wall-clock."""
    from helpers.record_fixtures import example_record

    from gpuledger.warehouse import Warehouse

    store_machine(MACHINE)
    spec = load_spec(ROOT / "specs" / "lora-grid.yaml")
    trials = expand_trials(spec)
    inputs = planning_inputs(spec)
    # no warehouse yet: none created; the machine as stored, with the load to plan for beside it (issue 38)
    assert inputs.measurements is None and replace(inputs.machine, load=None) == MACHINE
    assert inputs.machine.load is not None
    assert not (isolated / "ledger.duckdb").exists()
    plan = plan_sweep(spec, trials, inputs=inputs)
    sid = sweep_id_for(spec)
    walls = {t.trial_id: 17.0 + 0.5 * t.index for t in trials}  # what the machine really took
    with Warehouse.open() as wh:
        wh.register_sweep(sweep_id=sid, name=spec.name, method=spec.method, model=spec.model, launcher="local",
                          plan_json=plan.to_json())
        wh.upsert_trials(sid, warehouse_trial_rows(plan.to_json(), trials))
        wh.ingest_records([example_record(f"r{t.index}", t.trial_id, sweep_id=sid, wall_s=walls[t.trial_id],
                                          hostname=HOST, params=t.params) for t in trials])
        stored = wh.query("SELECT est_flops, est_basis, cloud_equiv_accelerator, cloud_equiv_usd FROM trials")
    assert stored["est_flops"].min() > 0 and set(stored["est_basis"]) == {"estimate"}
    assert stored["cloud_equiv_usd"].min() > 0 and stored["cloud_equiv_accelerator"].null_count() == 0
    replan = plan_sweep(spec, trials, inputs=planning_inputs(spec))
    errors = [abs(t["est_wall_s"] - walls[t["trial_id"]]) / walls[t["trial_id"]] for t in replan.trials]
    assert statistics.median(errors) <= 0.35
    assert all(t["est_basis"] == "measured" for t in replan.trials)
    assert replan.to_json_text() == plan_sweep(spec, trials, inputs=planning_inputs(spec)).to_json_text()
    # a new trial of the same family (another lora_r) is calibrated on the 12 measured ones
    wider = load_spec(ROOT / "specs" / "lora-grid.yaml")
    wider.search.params["lora_r"] = [4, 8, 16]
    new = [t for t in plan_sweep(wider, inputs=planning_inputs(wider)).trials if t["params"]["lora_r"] == 8]
    assert new and all(t["est_basis"] == "calibrated on 12 runs" for t in new)
    assert all(17.0 * 0.65 <= t["est_wall_s"] <= 22.5 * 1.35 for t in new)


def test_a_failed_measurement_is_one_clear_error(isolated, monkeypatch):
    import sys

    from gpuledger.errors import UserError

    monkeypatch.setattr(sys, "executable", str(isolated / "no-such-python"))
    with pytest.raises(UserError, match="could not measure this machine's matmul speed") as err:
        local_machine()
    assert "\n" not in str(err.value) and not machine_file().exists()
