"""Estimates that learn: measured runs calibrate the rate of similar trials, and a trial that was
measured takes its own measured wall-clock (pure: the caller passes the measurements in).

`measurements` is the warehouse's `plan_measurements` named query (gpuledger/warehouse/sql/queries/
plan_measurements.sql) for the spec's model and method: trial_id, accelerator ('CPU' for the local
launcher), gpus, hostname, wall_s (median of the trial's succeeded runs there), runs, est_flops
(the trial's FLOPs as planned, NULL for sweeps planned before it was stored).

- Calibrated time, per accelerator: ratio_i = (wall_s_i − overhead) / model_s_i for each measured
  trial, where model_s_i is the time model's compute seconds of the trial (`gpuledger.estimate.
  train_time_s` via the plan's `times`; for a trial of another spec, its stored FLOPs × this plan's
  median seconds per FLOP on that accelerator and GPU count); the median ratio multiplies the
  model's times on that accelerator (at least `MIN_CALIBRATION_RUNS` trials).
- A trial measured on the accelerator and GPU count the plan chooses: its median measured
  wall-clock (est_basis "measured").
"""

from __future__ import annotations

import polars as pl

from gpuledger.plan.settings import PlanSettings

#: Measured trials needed before their median ratio calibrates the time model on an accelerator.
MIN_CALIBRATION_RUNS = 2

MEASUREMENT_SCHEMA = {"trial_id": pl.String, "accelerator": pl.String, "gpus": pl.Int64, "hostname": pl.String,
                      "wall_s": pl.Float64, "runs": pl.Int64, "est_flops": pl.Float64}


def empty_measurements() -> pl.DataFrame:
    return pl.DataFrame(schema=MEASUREMENT_SCHEMA)


def calibrate(accel: pl.DataFrame, est: pl.DataFrame, times: pl.DataFrame, measurements: pl.DataFrame | None,
              s: PlanSettings, *, model: str, hostname: str | None = None) -> tuple[pl.DataFrame, pl.DataFrame | None, list[str]]:
    """Returns (accelerator table with a calibrated `time_factor` and a `basis` column, per-trial
    measured wall-clock for `apply_measured`, notes for the plan's assumptions).

    `times`: the plan's workload × accelerator compute seconds (`estimates.compute_times`).
    `hostname`: for the local CPU, only runs of this machine count (another machine's CPU is not
    this one's)."""
    accel = accel.with_columns(basis=pl.lit("estimate"))
    if measurements is None or measurements.is_empty():
        return accel, None, []
    m = measurements.select(list(MEASUREMENT_SCHEMA)).cast(MEASUREMENT_SCHEMA)  # type: ignore[arg-type]
    if hostname is not None:
        m = m.filter((pl.col("accelerator") != "CPU") | (pl.col("hostname") == hostname))
    if m.is_empty():
        return accel, None, []
    timed = est.select("trial_id", pl.col("gpus").cast(pl.Int64), "workload", "flops_total").join(times, on="workload", how="inner")
    own = timed.group_by("trial_id", "gpus", "accelerator").agg(pl.col("compute_s").min().alias("_own_s"))
    per_flop = (timed.filter(pl.col("flops_total") > 0)
                .group_by("accelerator", "gpus").agg((pl.col("compute_s") / pl.col("flops_total")).median().alias("_s_per_flop")))
    fit = (
        m.join(own, on=["trial_id", "gpus", "accelerator"], how="left")
        .join(per_flop, on=["accelerator", "gpus"], how="left")
        .with_columns(model_s=pl.coalesce("_own_s", pl.col("est_flops") * pl.col("_s_per_flop")),
                      compute_s=pl.col("wall_s") - s.overhead_s)
        .filter((pl.col("model_s") > 0) & (pl.col("compute_s") > 0))
        .group_by("accelerator").agg((pl.col("compute_s") / pl.col("model_s")).median().alias("factor"), pl.len().alias("n"))
        .filter(pl.col("n") >= MIN_CALIBRATION_RUNS)
        .sort("accelerator")
    )
    notes = []
    if fit.height:
        accel = accel.join(fit, on="accelerator", how="left").with_columns(
            time_factor=pl.coalesce(pl.col("factor") * pl.col("time_factor"), "time_factor"),
            time_source=pl.when(pl.col("factor").is_not_null()).then(
                pl.format("{} × {} calibrated on {} measured trials of {}/{} (median measured / modelled compute time)",
                          "time_source", pl.col("factor").round(3), "n", pl.lit(model), pl.lit(s.method))).otherwise(pl.col("time_source")),
            basis=pl.when(pl.col("factor").is_not_null()).then(pl.format("calibrated on {} runs", "n")).otherwise(pl.col("basis")),
        ).drop("factor", "n")
        for r in fit.iter_rows(named=True):
            notes.append(f"{r['accelerator']}: compute times × {r['factor']:.3f}, calibrated on {r['n']} measured trial(s) of "
                         f"{model}/{s.method} (median of (wall-clock − {s.overhead_s:g} s overhead) / the model's compute time)")
    measured = m.filter(pl.col("trial_id").is_in(est["trial_id"].implode())).select("trial_id", "accelerator", "gpus", "wall_s")
    if measured.height:
        notes.append(f"{measured['trial_id'].n_unique()} trial(s) of this spec were measured before: where the plan "
                     "places them as measured, they take their median measured wall-clock (basis 'measured')")
    return accel, measured, notes
