"""Step 1 of the plan: per-trial estimates and their compute time on each accelerator (the only
step that calls the estimator: time by `gpuledger.estimate.train_time_s`, the formula `estimate
--tokens` prints), and the accelerator table (memory, time factor) the scoring step prices them against."""

from __future__ import annotations

import json
from collections.abc import Sequence

import polars as pl

from gpuledger.plan.workloads import (  # noqa: F401  (their home; importable from here as before)
    PARAM_TO_WORKLOAD,
    SHARDING_RULE,
    TOKENS_NEEDED,
    estimate_rows,
    require_tokens,
    sharding_options,
    tokens_problem,
)

ESTIMATE_SCHEMA = {"trial_id": pl.String, "trial_index": pl.Int64, "gpus": pl.Int64, "sharding": pl.String,
                   "precision": pl.String, "est_memory_gib": pl.Float64, "flops_total": pl.Float64,
                   "est_error": pl.String, "workload": pl.String}

#: The accelerator table: per GPU kind and precision it runs, its memory and the factor its
#: estimated compute times are multiplied by (1, or calibrated on measured runs), with its source.
ACCEL_SCHEMA = {"accelerator": pl.String, "precision": pl.String, "memory_gib": pl.Float64,
                "time_factor": pl.Float64, "time_source": pl.String}

#: Compute seconds of each distinct workload (the estimates' `workload` column) on each accelerator,
#: before calibration.
TIMES_SCHEMA = {"workload": pl.String, "accelerator": pl.String, "compute_s": pl.Float64}


def trial_estimates(spec, trials, gpu_counts: Sequence[int] | None = None, *, device: str = "gpu") -> pl.DataFrame:
    """Returns one row per trial × GPU count × sharding: trial_id, trial_index, gpus, sharding,
    precision, est_memory_gib (per GPU, nvidia-smi level), flops_total, est_error (None or why the
    estimator refused), workload (the estimator's Workload and the trial's tokens as JSON text: what
    `compute_times` times; equal text = equal memory and time).

    Search params named in PARAM_TO_WORKLOAD (and `gpus_per_trial`) override the spec's train
    fields. Identical workloads are estimated once.
    """
    return pl.DataFrame(estimate_rows(spec, trials, gpu_counts, device=device), schema=ESTIMATE_SCHEMA)


def compute_times(estimates: pl.DataFrame, accelerators: Sequence[str], band_table=None) -> pl.DataFrame:
    """Returns workload, accelerator, compute_s for every distinct `workload` of `estimates` on every
    known GPU kind of `accelerators`: `gpuledger.estimate.train_time_s` of the workload's tokens on
    its GPU count, times the P50 of its cell's band (the measured median error of its kind of run,
    gpuledger/estimate/bands.py; `band_table`: default the public rows). A kind the model cannot time
    for a workload (no rate at its precision) is absent (no candidate there)."""
    from gpuledger.catalog import gpu_kinds
    from gpuledger.estimate import Workload, estimate, train_time_s
    from gpuledger.estimate.bands import band_for

    kinds = gpu_kinds()
    rows: dict[str, list] = {k: [] for k in TIMES_SCHEMA}
    for text in estimates["workload"].drop_nulls().unique(maintain_order=True).to_list():
        d = json.loads(text)
        est = estimate(Workload(**d["workload"]))
        for acc in dict.fromkeys(accelerators):
            if acc not in kinds:
                continue
            try:
                seconds = train_time_s(est, d["tokens"], acc)
            except ValueError:
                continue
            w = est.workload
            seconds *= band_for("time", w.framework, w.method, w.precision, w.gpus, acc, w.stack,
                                w.model, table=band_table).p50
            for col, value in (("workload", text), ("accelerator", acc), ("compute_s", seconds)):
                rows[col].append(value)
    return pl.DataFrame(rows, schema=TIMES_SCHEMA)


def accelerator_table(accelerators: Sequence[str], precisions: Sequence[str], method: str) -> pl.DataFrame:
    """Returns accelerator, precision, memory_gib (nvidia-smi), time_factor (1: the model's time),
    time_source for every known accelerator × precision it has a rate for."""
    from gpuledger.catalog import gpu_kinds
    from gpuledger.estimate import time_basis

    kinds = gpu_kinds()
    rows = []
    for acc in dict.fromkeys(accelerators):
        kind = kinds.get(acc)
        if kind is None:
            continue
        for p in dict.fromkeys(precisions):
            try:
                kind.peak_tflops(p)
            except ValueError:
                continue
            rows.append({"accelerator": acc, "precision": p, "memory_gib": kind.memory_gib, "time_factor": 1.0,
                         "time_source": time_basis(method)})
    return pl.DataFrame(rows, schema=ACCEL_SCHEMA)
