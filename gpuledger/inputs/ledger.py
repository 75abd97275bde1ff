"""What the planner is given from outside (the pure planner reads none of it itself):

- this machine's stored measured speed (`gpuledger.inputs.machine.local_machine`), for `launcher: local`;
- spot preemptions measured in the warehouse (`Warehouse.measured_preemption`);
- measured runs of the spec's model and method (named query `plan_measurements`), which calibrate
  the plan's times (gpuledger/plan/throughput_calibration.py).
- probes of the spec's model and method (named query `plan_probes` over `v_probes`): a trial placed
  where a probe of its shape ran is extrapolated from it (gpuledger/plan/probes.py);
- for a sweep that prunes (asha, tpe with pruning): the learning curves of the objective measured by
  earlier runs of the same model, method, metric and train settings (named query `learning_curves`),
  for the expected spend under pruning (gpuledger/plan/pruning.py).
- the rates learned from the FOCUS bill (view `v_billed_rates`, named query `billed_rates`) with the
  setting `prices.billed_min_gpu_hours`: offers backed by enough billed GPU-hours are priced at
  their billed rate (gpuledger/catalog/pricing.py `apply_billed`).

`planning_inputs(spec, launcher)` returns them as keyword arguments of `plan_sweep`; the plan
command and the sweep flow both use it. It never creates a warehouse; a busy warehouse, or one not
yet migrated to 004, means planning without measurements.
"""

from __future__ import annotations

import contextlib
from typing import Any

from gpuledger.plan.model import PlanningInputs


def same_train_settings(stored: str | None, spec) -> bool:
    """True when a stored `train` section (JSON text) is the spec's training settings
    (`gpuledger.spec.kinds.same_train_json`: a field added since takes its default)."""
    import json

    from gpuledger.spec.kinds import same_train_json

    return same_train_json(stored, json.dumps(spec.train.model_dump(mode="json")))


def measured_curves(wh, spec) -> dict[str, Any]:
    """Returns {params key: Curve} of the objective's learning curves earlier runs of the spec's model,
    method, objective metric and train settings measured (each point's latest run). The stored train
    section is read through today's spec model, so a train field added since (at its default) does
    not make a sweep of the same settings a different kind."""
    import json

    from gpuledger.plan.pruning import params_key
    from gpuledger.search.asha_replay import curves_from_points

    same_as: dict[str | None, bool] = {}

    def same_train(text: str | None) -> bool:
        if text not in same_as:
            same_as[text] = same_train_settings(text, spec)
        return same_as[text]

    rows = []
    for r in wh.query_named("learning_curves", {"sweep_id": None, "model": spec.model, "method": spec.method,
                                                "metric": spec.search.objective.metric}).iter_rows(named=True):
        try:
            same = same_train(r["train"])
            params = json.loads(r["params"]) if isinstance(r["params"], str) else r["params"]
        except (TypeError, ValueError):
            continue
        if same and isinstance(params, dict):
            rows.append({**r, "trial_id": params_key(params)})
    return {c.trial_id: c for c in curves_from_points(rows)}


def recorded_curves(wh, sweep: str) -> tuple[str, list[Any], dict[str, float], dict[str, Any]]:
    """Returns (sweep id, learning curves, {trial id: measured USD per second}, {goal, max_parallel,
    metric}) of the sweep with id `sweep`, else the latest sweep named `sweep` (named queries
    `report_latest_sweep_id`, `learning_curves`): what `gpuledger.search.replay` replays. Raises
    UserError when there is no such sweep or it has no runs."""
    from gpuledger.errors import UserError
    from gpuledger.search.asha_replay import curves_from_points

    rows = wh.query_named("learning_curves", {"sweep_id": sweep, "model": None, "method": None,
                                              "metric": None}).to_dicts()
    sweep_id = sweep
    if not rows:
        latest = wh.query_named("report_latest_sweep_id", {"name": sweep})
        if latest.height:
            sweep_id = latest["sweep_id"][0]
            rows = wh.query_named("learning_curves", {"sweep_id": sweep_id, "model": None, "method": None,
                                                      "metric": None}).to_dicts()
    if not rows:
        raise UserError(f"no runs of a sweep with id or name {sweep!r} in this warehouse (`gpuledger sql "
                        "\"select sweep_id, sweep_name from v_sweep_roi\"` lists them)")
    cost: dict[str, float] = {}
    wall: dict[str, float] = {}
    for r in {r["run_id"]: r for r in rows}.values():
        cost[r["trial_id"]] = cost.get(r["trial_id"], 0.0) + float(r["cost_usd"] or 0.0)
        wall[r["trial_id"]] = wall.get(r["trial_id"], 0.0) + float(r["wall_s"] or 0.0)
    rate = {t: cost[t] / wall[t] for t in cost if wall[t] > 0}
    import json

    params: dict[str, Any] = {}
    for r in rows:
        with contextlib.suppress(TypeError, ValueError):
            p = json.loads(r["params"]) if isinstance(r["params"], str) else r["params"]
            if isinstance(p, dict):
                params[r["trial_id"]] = p
    meta = {"goal": rows[0]["goal"] or "minimize", "max_parallel": int(rows[0]["max_parallel"] or 1),
            "metric": rows[0]["metric"], "params": params}
    return sweep_id, curves_from_points(rows), rate, meta


def billed_rates_of(wh) -> Any:
    """Returns the rates learned from the bill (`BilledRates`: the rows of `v_billed_rates` and the
    setting `prices.billed_min_gpu_hours`), None when the bill attributes nothing to runs."""
    from gpuledger.catalog.pricing import BilledRates
    from gpuledger.errors import UserError
    from gpuledger.settings import current

    try:
        rows = wh.query_named("billed_rates")
    except UserError:  # a warehouse of a gpuledger before the bill's views
        return None
    if rows.is_empty():
        return None
    return BilledRates(rows=rows, min_gpu_hours=float(current().get("prices.billed_min_gpu_hours")))


def billed_rates() -> Any:
    """Returns `billed_rates_of` the project's warehouse (None when there is none, or it is busy)."""
    from gpuledger.errors import UserError
    from gpuledger.settings import warehouse_if_any

    path = warehouse_if_any()  # none yet, or outside a project: plan with the catalog layers
    if path is None:
        return None
    from gpuledger.warehouse import Warehouse

    try:
        with Warehouse.open(path, read_only=True, lock_timeout_s=0.5) as wh:
            return billed_rates_of(wh)
    except UserError:  # busy (a running sweep holds it): plan with the catalog layers
        return None


def _probes(wh, spec) -> Any:
    """Returns the `plan_probes` rows of the spec's model and method (None before the probes migration)."""
    from gpuledger.errors import UserError

    try:
        return wh.query_named("plan_probes", {"model": spec.model, "method": spec.method})
    except UserError:  # a warehouse not yet migrated (no runs.purpose)
        return None


def _band_runs(wh) -> list[dict] | None:
    """Returns the team's succeeded runs with their estimates (named query `estimate_runs`), for the
    bands (gpuledger/estimate/bands.py); the framework of gpuledger's trainers (Transformers + PEFT)."""
    from gpuledger.errors import UserError
    from gpuledger.estimate.calibration import RUN_FRAMEWORK

    try:
        return [dict(r, framework=RUN_FRAMEWORK) for r in wh.query_named("estimate_runs").to_dicts()] or None
    except UserError:
        return None


def _measured(spec) -> tuple[dict | None, Any, dict | None, Any, Any, list | None]:
    from gpuledger.errors import UserError
    from gpuledger.settings import warehouse_if_any

    path = warehouse_if_any()  # none yet, or outside a project: plan with the defaults
    if path is None:
        return None, None, None, None, None, None
    from gpuledger.search import prunes
    from gpuledger.warehouse import Warehouse

    try:
        with Warehouse.open(path, read_only=True, lock_timeout_s=0.5) as wh:
            preemption = wh.measured_preemption() or None
            billed = billed_rates_of(wh)
            try:
                runs = wh.query_named("plan_measurements", {"model": spec.model, "method": spec.method})
            except UserError:  # a warehouse not yet migrated to 004 (no trials.est_flops)
                return preemption, None, None, billed, None, None
            curves = measured_curves(wh, spec) if prunes(spec) else None
            return preemption, runs, curves, billed, _probes(wh, spec), _band_runs(wh)
    except UserError:  # busy (a running sweep holds it): plan with the defaults
        return None, None, None, None, None, None


def _slots(spec) -> int:
    """Returns how many trials a local plan of `spec` runs at once at most (before its memory cap):
    max_parallel (all cores for `auto`), the cores, the trials."""
    import psutil

    from gpuledger.spec import expand_trials

    cores = int(psutil.cpu_count(logical=False) or psutil.cpu_count() or 1)
    wanted = spec.resources.max_parallel
    wanted = cores if not isinstance(wanted, int) else wanted
    try:
        n = len(expand_trials(spec))
    except Exception:  # noqa: BLE001 - the planner says what is wrong with the spec; this is only a probe's size
        n = wanted
    return max(1, min(wanted, cores, n))


def planning_inputs(spec, launcher: str | None = None) -> PlanningInputs:
    """Returns what `plan_sweep(spec, inputs=...)` learns from outside: this machine's speed (for
    `launch: local`), measured preemptions, measurements, learning curves and billed rates."""
    launcher = launcher or spec.launcher
    machine = None
    if launcher == "local":
        from gpuledger.inputs.machine import local_machine

        # how busy it is now, probed with as many processes as trials will run at once: the first plan on a
        # busy machine plans for it (issue 38)
        machine = local_machine(load=True, probe_k=_slots(spec))
    preemption, runs, curves, billed, probes, band_runs = _measured(spec)
    return PlanningInputs(machine=machine, measured_preemption=preemption, measurements=runs, curves=curves,
                          billed_rates=billed, probes=probes, band_runs=band_runs)
