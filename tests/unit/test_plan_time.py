"""The planner prices a trial's compute with the one time formula of `gpuledger estimate --tokens`
(gpuledger.estimate.train_time_s, the training-step model), and calibrates it on measured runs."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from gpuledger.estimate import Workload, bands, estimate, train_time_s
from gpuledger.plan import plan_sweep
from gpuledger.spec import expand_trials, load_spec

ROOT = Path(__file__).resolve().parents[2]
SPEC = load_spec(ROOT / "specs" / "llama3-8b-lora-cloud.yaml")
TRIALS = expand_trials(SPEC)[:3]


def _measurements(rows):
    return pl.DataFrame(rows, schema={"trial_id": pl.String, "accelerator": pl.String, "gpus": pl.Int64,
                                      "hostname": pl.String, "wall_s": pl.Float64, "runs": pl.Int64,
                                      "est_flops": pl.Float64}, orient="row")


def _model_s(trial_row) -> float:
    """The trial's compute seconds by train_time_s times its cell's band P50 (the measured median error
    of its kind of run, gpuledger/estimate/bands.py), rebuilt from the spec (not from the plan)."""
    t = SPEC.train
    w = Workload(model=SPEC.model, method=SPEC.method, precision=SPEC.precision, optimizer=t.optimizer,
                 micro_batch=trial_row["params"]["micro_batch"], seq_len=t.seq_len, grad_ckpt=t.grad_checkpointing,
                 flash_attn=t.flash_attention, lora_r=trial_row["params"]["lora_r"], lora_targets=t.lora_targets,
                 gpus=trial_row["gpus"], sharding=trial_row["sharding"])
    p50 = bands.band_for("time", w.framework, w.method, w.precision, w.gpus, trial_row["accelerator"]).p50
    return train_time_s(estimate(w), t.tokens_per_trial, trial_row["accelerator"]) * p50


def test_plan_compute_time_is_the_estimate_time_formula():
    plan = plan_sweep(SPEC, TRIALS)
    for t in plan.trials:
        assert t["feasible"] and t["est_basis"] == "estimate"
        assert t["compute_s"] == pytest.approx(_model_s(t), rel=1e-4)
    assert any("training-step model" in a for a in plan.assumptions)
    assert not any("MFU" in a for a in plan.assumptions)


#: one GPU kind and count, so that a calibrated accelerator stays the choice whatever the catalog's prices
ONE = SPEC.model_copy(update={"resources": SPEC.resources.model_copy(update={"accelerators": ["H100"],
                                                                              "gpus_per_trial": 1})})


def test_measured_runs_calibrate_the_model_per_accelerator():
    SPEC, TRIALS = ONE, expand_trials(ONE)[:3]  # the module's names, narrowed to one GPU kind
    before = plan_sweep(SPEC, TRIALS)
    acc, gpus = before.trials[0]["accelerator"], before.trials[0]["gpus"]
    overhead = 600.0  # cloud provisioning 5 min + set-up 5 min (plan/settings.py)
    # two trials of this spec measured 1.4x slower than the model on the chosen accelerator
    rows = [(t["trial_id"], acc, gpus, None, overhead + 1.4 * _model_s({**t, "accelerator": acc, "gpus": gpus}), 1,
             t["flops_total"]) for t in before.trials[:2]]
    after = plan_sweep(SPEC, TRIALS, measurements=_measurements(rows))
    assert any(f"{acc}: compute times × 1.400, calibrated on 2 measured trial(s)" in a for a in after.assumptions)
    walls = {r[0]: r[4] for r in rows}
    on_acc = [t for t in after.trials if t["accelerator"] == acc]
    assert on_acc, "the calibrated accelerator is still chosen for some trial"
    for t in on_acc:
        if t["trial_id"] in walls and t["gpus"] == gpus:
            wall = walls[t["trial_id"]]
            if t["spot"]:  # the measured T0 plus spot rework (restart + half the compute per preemption)
                wall *= 1 + t["preemptions_per_hour"] / 3600 * (overhead + (wall - overhead) / 2)
            assert t["est_basis"] == "measured" and t["est_wall_s"] == pytest.approx(wall, abs=1e-2)
        else:
            assert t["est_basis"] == "calibrated on 2 runs"
            assert t["compute_s"] == pytest.approx(1.4 * _model_s(t), rel=1e-3)
    # trials of another sweep (other ids): their stored FLOPs at this plan's seconds per FLOP
    others = [(f"elsewhere-{i}", acc, gpus, None, r[4], 1, r[6]) for i, r in enumerate(rows)]
    note = next(a for a in plan_sweep(SPEC, TRIALS, measurements=_measurements(others)).assumptions
                if a.startswith(f"{acc}: compute times"))
    assert 1.3 < float(note.split("× ")[1].split(",")[0]) < 1.5
    # one run is not enough to calibrate
    one = plan_sweep(SPEC, TRIALS, measurements=_measurements([("elsewhere-0", *rows[0][1:])]))
    assert json.dumps(one.trials, default=str) == json.dumps(before.trials, default=str)
