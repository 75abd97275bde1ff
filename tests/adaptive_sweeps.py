"""A small ASHA sweep and the grid of the same points, run for real (local launcher, trial subprocesses
reporting intermediate values through gpuledger.track, a real DuckDB warehouse): the inputs of the
adaptive ROI report's tests.

The two specs are a smaller variant of specs/lora-asha.yaml and specs/lora-grid.yaml: the same model,
method, objective and training settings, 6 points of one parameter, and a trial script whose eval_loss
is known in closed form, (|x - 0.3| + 1) * (1 + 1/step), reported once per step (8 steps, 0.6 s apart:
more than the runtime's 0.5 s poll, so each value reaches the pruner alone), so ASHA (min_steps 2,
reduction_factor 2) prunes points far from 0.3 and the grid runs them all.
"""

from __future__ import annotations

from pathlib import Path

from sweep_specs import sweep_spec, trial_script, x_points

TRIAL = trial_script("""
    for step in range(1, 9):
        log(step=step, eval_loss=(abs(a.x - 0.3) + 1.0) * (1 + 1 / step))
        time.sleep(0.6)
    log(step=8, eval_loss=(abs(a.x - 0.3) + 1.0) * (1 + 1 / 8))
""")

XS = (0.6, 0.1, 0.5, 0.3, 0.9, 0.2)


def write_spec(folder: Path, strategy: str, max_parallel: int = 1, xs: tuple[float, ...] = XS,
               name: str | None = None) -> Path:
    """Writes the trial script and the spec `name` (default `tiny-<strategy>`; grid, asha, or tpe asking
    for 3 of the points, without pruning) under `folder`."""
    search = {"asha": "strategy: asha\nseed: 2\npruning: {min_steps: 2, reduction_factor: 2}",
              "tpe": "strategy: tpe\nn_trials: 3\nseed: 1"}.get(strategy, f"strategy: {strategy}")
    return sweep_spec(folder, name=name or f"tiny-{strategy}", search=search, params=x_points(xs), trial=TRIAL,
                      max_parallel=max_parallel)


def run_sweep(spec_path: Path, cap: int = 1):
    """Runs the sweep of `spec_path` into the warehouse of $GPULEDGER_WAREHOUSE; returns its summary."""
    from dataclasses import replace

    from gpuledger.runtime.accepted import prepare
    from gpuledger.runtime.engine import SweepRun, execute

    accepted = replace(prepare(spec_path, launcher="local"), cap=cap)
    summary = accepted.new_summary()
    execute(SweepRun(accepted, summary=summary))
    return summary
