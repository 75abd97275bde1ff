"""What the planner is given from outside (the pure planner reads none of it itself):

- this machine's stored measured speed (`gpuledger.machine.local_machine`), for `launcher: local`;
- spot preemptions measured in the warehouse (`Warehouse.measured_preemption`);
- measured runs of the spec's model and method (named query `plan_measurements`), which calibrate
  the plan's times (gpuledger/plan/calibration.py).

`planning_inputs(spec, launcher)` returns them as keyword arguments of `plan_sweep`; the plan
command and the sweep flow both use it. It never creates a warehouse; a busy warehouse, or one not
yet migrated to 004, means planning without measurements.
"""

from __future__ import annotations

from typing import Any


def _measured(spec) -> tuple[dict | None, Any]:
    from gpuledger.errors import UserError
    from gpuledger.paths import resolve_path

    path = resolve_path()
    if not path.exists():
        return None, None
    from gpuledger.warehouse import Warehouse

    try:
        with Warehouse.open(path, read_only=True, lock_timeout_s=0.5) as wh:
            preemption = wh.measured_preemption() or None
            try:
                runs = wh.query_named("plan_measurements", {"model": spec.model, "method": spec.method})
            except UserError:  # a warehouse not yet migrated to 004 (no trials.est_flops)
                return preemption, None
            return preemption, runs
    except UserError:  # busy (a running sweep holds it): plan with the defaults
        return None, None


def planning_inputs(spec, launcher: str | None = None) -> dict[str, Any]:
    """Returns {machine, measured_preemption, measurements} for `plan_sweep(spec, **inputs)`."""
    launcher = launcher or spec.launcher
    machine = None
    if launcher == "local":
        from gpuledger.machine import local_machine

        machine = local_machine()
    preemption, runs = _measured(spec)
    return {"machine": machine, "measured_preemption": preemption, "measurements": runs}
