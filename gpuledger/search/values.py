"""Which of a trial's metric points the pruner counts (one place: the runtime's pruning watch and the
replay's curves, `gpuledger.search.asha_replay.curves_from_points`, both use it)."""

from __future__ import annotations

from typing import Any


def objective_points(points: list[dict[str, Any]], metric: str, high_step: float) -> tuple[list[dict[str, Any]], float]:
    """Returns (the points of `metric` the pruner counts, the highest step seen): numeric values, one per
    step, so a point whose step is not above `high_step` (the highest already reported for this trial,
    over its attempts) is skipped: a trainer logging a step twice, or a launcher retry's new attempt
    starting its steps again, is counted once (as a SkyPilot recovery is). Points without a step each
    count (`progress` returns each line once)."""
    kept = []
    for p in points:
        v, step = p.get("value"), p.get("step")
        if p.get("name") != metric or not isinstance(v, int | float) or isinstance(v, bool):
            continue
        if isinstance(step, int | float) and not isinstance(step, bool):
            if step <= high_step:
                continue
            high_step = float(step)
        kept.append(p)
    return kept, high_step


def objective_values(points: list[dict[str, Any]], metric: str, high_step: float) -> tuple[list[float], float]:
    """`objective_points`' values (floats): what the runtime reports to the study."""
    kept, high_step = objective_points(points, metric, high_step)
    return [float(p["value"]) for p in kept], high_step
