"""Estimates that learn: measured runs calibrate the rate of similar trials, and a trial that was
measured takes its own measured wall-clock (pure: the caller passes the measurements in).

`measurements` is the warehouse's `plan_measurements` named query (gpuledger/warehouse/sql/queries/
plan_measurements.sql) for the spec's model and method: trial_id, accelerator ('CPU' for the local
launcher), gpus, hostname, wall_s (median of the trial's succeeded runs there), runs, est_flops
(the trial's FLOPs as planned, NULL for sweeps planned before it was stored).

- Calibrated rate, per accelerator: MFU_i = FLOPs_i / ((wall_s_i − overhead) × gpus × peak ×
  multi-GPU efficiency) for each measured trial; the median replaces the table's MFU (at least
  `MIN_CALIBRATION_RUNS` trials). FLOPs_i come from the stored plan, else from this plan's estimate
  of the same trial id.
- A trial measured on the accelerator and GPU count the plan chooses: its median measured
  wall-clock (est_basis "measured").
"""

from __future__ import annotations

import polars as pl

from gpuledger.plan.settings import SCALING_EFFICIENCY, PlanSettings

#: Measured trials needed before their median rate replaces the MFU table for an accelerator.
MIN_CALIBRATION_RUNS = 2

MEASUREMENT_SCHEMA = {"trial_id": pl.String, "accelerator": pl.String, "gpus": pl.Int64, "hostname": pl.String,
                      "wall_s": pl.Float64, "runs": pl.Int64, "est_flops": pl.Float64}


def empty_measurements() -> pl.DataFrame:
    return pl.DataFrame(schema=MEASUREMENT_SCHEMA)


def calibrate(accel: pl.DataFrame, est: pl.DataFrame, measurements: pl.DataFrame | None, s: PlanSettings,
              *, model: str, hostname: str | None = None) -> tuple[pl.DataFrame, pl.DataFrame | None, list[str]]:
    """Returns (accelerator table with calibrated MFU and a `basis` column, per-trial measured
    wall-clock for `apply_measured`, notes for the plan's assumptions).

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
    planned = est.select("trial_id", pl.col("gpus").cast(pl.Int64), pl.col("flops_total").alias("_plan_flops"))
    m = m.join(planned, on=["trial_id", "gpus"], how="left").with_columns(
        flops=pl.coalesce("est_flops", "_plan_flops"),
        compute_s=pl.col("wall_s") - s.overhead_s,
        eff=pl.when(pl.col("gpus") > 1).then(pl.lit(SCALING_EFFICIENCY["fsdp"])).otherwise(pl.lit(1.0)),
    )
    peaks = accel.group_by("accelerator", maintain_order=True).agg(pl.col("peak_tflops").first())
    fit = (
        m.filter(pl.col("flops").is_not_null() & (pl.col("compute_s") > 0))
        .join(peaks, on="accelerator", how="inner")
        .with_columns(mfu_i=pl.col("flops") / (pl.col("compute_s") * pl.col("gpus").clip(1) * pl.col("peak_tflops") * 1e12 * pl.col("eff")))
        .group_by("accelerator").agg(pl.col("mfu_i").median().alias("mfu_cal"), pl.len().alias("n"))
        .filter(pl.col("n") >= MIN_CALIBRATION_RUNS)
        .sort("accelerator")
    )
    notes = []
    if fit.height:
        accel = accel.join(fit, on="accelerator", how="left").with_columns(
            mfu=pl.coalesce("mfu_cal", "mfu"),
            mfu_source=pl.when(pl.col("mfu_cal").is_not_null()).then(
                pl.format("calibrated on {} measured trials of {}/{} (median achieved FLOP/s / peak)", "n",
                          pl.lit(model), pl.lit(s.method))).otherwise(pl.col("mfu_source")),
            basis=pl.when(pl.col("mfu_cal").is_not_null()).then(pl.format("calibrated on {} runs", "n")).otherwise(pl.col("basis")),
        ).drop("mfu_cal", "n")
        for r in fit.iter_rows(named=True):
            notes.append(f"{r['accelerator']}: utilisation {r['mfu_cal']:.4f} calibrated on {r['n']} measured trial(s) of "
                         f"{model}/{s.method} (median of FLOPs / ((wall-clock − {s.overhead_s:g} s overhead) × peak)), "
                         "replacing the table's value")
    measured = m.filter(pl.col("trial_id").is_in(est["trial_id"].implode())).select("trial_id", "accelerator", "gpus", "wall_s")
    if measured.height:
        notes.append(f"{measured['trial_id'].n_unique()} trial(s) of this spec were measured before: where the plan "
                     "places them as measured, they take their median measured wall-clock (basis 'measured')")
    return accel, measured, notes
