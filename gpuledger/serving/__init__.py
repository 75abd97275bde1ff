"""Serving benchmarks: what an inference sweep's trial is (for the planner) and the operating
points its trials measured (for capacity plans and reports).

- `workload`: pure functions from a `method: inference` sweep spec and a trial's parameters to its
  serving settings, the estimator workload (weights + KV cache of `max_num_seqs` sequences) and the
  memory the engine takes (its memory fraction).
- `points`: the measured operating points of a sweep, read from the warehouse through the named
  query `gpuledger/warehouse/sql/queries/serving_points.sql`, and the choices made from them (per accelerator and
  tensor-parallel size: the highest throughput whose p95 TTFT and TPOT meet an SLO, else the
  closest point; the cheapest point per million output tokens that meets it).
- `capacity_from_sweep`: `measured: {from_sweep: NAME}` in a capacity spec, resolved into the
  capacity plan's measured points (`plan_capacity_measured`).

Neither imports DuckDB: `points` takes an open `Warehouse`.
"""

from gpuledger.serving.points import (
    OperatingPoint,
    PlacementChoice,
    SweepPoints,
    best_by_placement,
    cheapest_meeting,
    load_points,
    points_from_frame,
    sweep_points,
)
from gpuledger.serving.workload import (
    LOAD_FIELDS,
    SERVE_FIELDS,
    SERVING_METRICS,
    inference_workload,
    memory_fraction,
    serve_settings,
    serving_memory_gib,
    serving_tokens,
    step_tokens,
)

__all__ = [
    "LOAD_FIELDS", "SERVE_FIELDS", "SERVING_METRICS", "OperatingPoint", "PlacementChoice", "SweepPoints",
    "best_by_placement", "cheapest_meeting", "inference_workload", "load_points", "memory_fraction",
    "points_from_frame", "serve_settings", "serving_memory_gib", "serving_tokens", "step_tokens", "sweep_points",
]
