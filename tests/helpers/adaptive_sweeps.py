"""A small ASHA sweep and the grid of the same points, run by the sweep engine into a real DuckDB
warehouse: the inputs of the adaptive ROI report's tests.

The two specs are a smaller variant of specs/lora-asha.yaml and specs/lora-grid.yaml: the same model,
method, objective and training settings, 6 points of one parameter, and a trial whose eval_loss is
known in closed form, `loss(x, step)` = (|x - 0.3| + 1) * (1 + 1/step), reported once per step (8 steps,
0.6 s apart), so ASHA (min_steps 2, reduction_factor 2) prunes points far from 0.3 and the grid runs
them all. `run_sweep(..., curve=curve)` runs the trials on the fake launcher (tests/helpers/fake_launcher.py),
which reports that curve one value per poll: no trial process and no sleep; without `curve` they run
the trial script as real processes (local launcher).
"""

from __future__ import annotations

from pathlib import Path

from helpers.sweep_specs import sweep_spec, trial_script, x_points

STEPS = 8
STEP_S = 0.6  # the trial's seconds per step (its t_s)


def loss(x: float, step: int) -> float:
    """The trial's eval_loss at step `step`."""
    return (abs(x - 0.3) + 1.0) * (1 + 1 / step)


TRIAL = trial_script(f"""
    for step in range(1, {STEPS + 1}):
        log(step=step, eval_loss=(abs(a.x - 0.3) + 1.0) * (1 + 1 / step))
        time.sleep({STEP_S})
""")


def curve(request) -> list[dict]:
    """The points the trial of `request` reports: eval_loss at steps 1..STEPS, STEP_S seconds apart."""
    x = float(request.params["x"])
    return [{"name": "eval_loss", "value": loss(x, step), "step": step, "t_s": round(step * STEP_S, 6)}
            for step in range(1, STEPS + 1)]


XS = (0.6, 0.1, 0.5, 0.3, 0.9, 0.2)


def write_spec(folder: Path, strategy: str, max_parallel: int = 1, xs: tuple[float, ...] = XS,
               name: str | None = None) -> Path:
    """Writes the trial script and the spec `name` (default `tiny-<strategy>`; grid, asha, or tpe asking
    for 3 of the points, without pruning) under `folder`."""
    search = {"asha": "strategy: asha\nseed: 2\npruning: {min_steps: 2, reduction_factor: 2}",
              "tpe": "strategy: tpe\nn_trials: 3\nseed: 1"}.get(strategy, f"strategy: {strategy}")
    return sweep_spec(folder, name=name or f"tiny-{strategy}", search=search, params=x_points(xs), trial=TRIAL,
                      max_parallel=max_parallel)


def run_sweep(spec_path: Path, cap: int = 1, curve=None):
    """Runs the sweep of `spec_path` into the warehouse of $GPULEDGER_WAREHOUSE; returns its summary. With
    `curve` (e.g. `curve` above) the trials run on the fake launcher reporting that curve, else as real
    processes on the local launcher."""
    from dataclasses import replace

    from gpuledger.runtime.accepted import prepare
    from gpuledger.runtime.engine import SweepRun, execute
    from gpuledger.runtime.launching import make_launcher

    accepted = replace(prepare(spec_path, launcher="local"), cap=cap)
    summary = accepted.new_summary()
    factory = make_launcher
    if curve is not None:
        from helpers.fake_launcher import FakeLauncher

        def factory(name, spec, max_parallel, landing_dir):
            return FakeLauncher(landing_dir=landing_dir, curve=curve)

    execute(SweepRun(accepted, summary=summary, launcher_factory=factory))
    return summary
