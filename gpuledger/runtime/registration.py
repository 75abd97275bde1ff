"""Step 1 of a run of a sweep (`gpuledger.runtime.engine`): the sweep's lease, its registration in the
warehouse, the records an earlier run left, what is still to run and the budget meter that starts
from what the sweep spent.

    todo, meter = register(run, hooks, landing_dir)      # holds the lease; raises SweepBusy when another run does
"""

from __future__ import annotations

import os
import secrets
import socket
from pathlib import Path
from typing import Any

from gpuledger import vocabulary
from gpuledger.runtime import landing
from gpuledger.runtime.budget import BudgetMeter
from gpuledger.search import asks_new_points

#: The sweep's lease (one run of a sweep at a time) lasts this long unless renewed; the writer
#: renews it with every batch and at least every third of it.
LEASE_TTL_S = 120.0


def lease_holder() -> str:
    """Returns a name for this run as a lease holder: host, pid and a random tag."""
    return f"gpuledger sweep on {socket.gethostname()} pid {os.getpid()} run {secrets.token_hex(4)}"


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return None


def sweep_fields(spec, spec_path: Path, plan_json: dict[str, Any], *, sweep_id: str, launcher: str,
                 cap: int) -> dict[str, Any]:
    """Returns the `Warehouse.register_sweep` fields of a sweep of `spec` planned as `plan_json` (the
    sweep itself and the probes that register it first share them)."""
    from gpuledger.plan import prices_used

    return dict(
        sweep_id=sweep_id, name=spec.name, project=spec.project, owner=spec.owner, kind="sweep",
        method=spec.method, model=spec.model, launcher=launcher,
        objective_metric=spec.search.objective.metric, objective_goal=spec.search.objective.goal,
        objective_target=spec.search.objective.target, budget_usd=float(spec.budget.max_usd),
        deadline_s=spec.budget.deadline_s, max_parallel=cap, spec_path=str(spec_path),
        spec_yaml=_read_text(Path(spec_path)), spec_json=spec.model_dump(mode="json"),
        plan_json=plan_json, prices=prices_used(plan_json),
    )


def register(run: Any, hooks: Any, landing_dir: Path) -> tuple[list[Any], BudgetMeter]:
    """Step 1: registers the sweep and its trials, stores leftovers; returns (trials to run, meter). A probe
    run (`run.probes`) registers the sweep only when it is new (status `planned`: the probes come first)
    and all its planned trials (a probe is stored as a run of the trial it ran), and returns its probes;
    its caller checked their estimate against the budget before (`gpuledger.runtime.probe`), as the
    sweep's own guard does before a sweep."""
    from gpuledger.plan import warehouse_trial_rows
    from gpuledger.warehouse import Warehouse

    sp, summary = run.spec, run.summary
    plan_json = run.plan.to_json()  # the warehouse edge: the plan as stored
    with Warehouse.open() as wh:
        summary.warehouse = str(wh.path)
        # a second run of the same sweep meanwhile refuses here (SweepBusy, exit 4, naming this holder)
        wh.acquire_lease(run.sweep_id, run.holder, run.lease_ttl_s)
        fields = sweep_fields(sp, run.spec_path, plan_json, sweep_id=run.sweep_id, launcher=run.launcher, cap=run.cap)
        if run.probes is None:
            wh.register_sweep(**fields, forced=summary.forced)
        elif wh.query_named("sweeps_known", {"sweep_ids": [run.sweep_id]}).is_empty():
            wh.register_sweep(**fields, status=vocabulary.SWEEP_PLANNED)
        # tpe over a range: each one registered when asked (a probe run: the plan's points)
        planned = [] if asks_new_points(sp) and run.probes is None else run.trials
        wh.upsert_trials(run.sweep_id, [{**r, "status": vocabulary.PENDING} for r in warehouse_trial_rows(plan_json, planned)])
        try:
            refused = landing.quarantine_unsigned(landing_dir)
        except OSError as err:  # a full disk: the key cannot be made; nothing unchecked is stored
            refused = None
            hooks.log.warning("Cannot check the records in %s (%s); leaving them for the next run", landing_dir,
                              err.strerror or err)
        if refused:
            hooks.log.warning("%d file(s) in %s were not written by gpuledger's launcher (unsigned); moved to %s, "
                              "not stored: %s", len(refused), landing_dir, landing_dir / landing.REJECTED, ", ".join(refused[:10]))
        if refused is not None and landing.waiting(landing_dir):
            recovered = wh.ingest_landing(landing_dir)
            hooks.log.info("Stored the result records an earlier run left in %s: %s", landing_dir, recovered.summary())
        done_ids = wh.succeeded_trial_ids(run.sweep_id)
        spent = float(wh.query_named("sweep_spent", {"sweep_id": run.sweep_id})["spent_usd"][0] or 0.0)
        measured = [float(c) for c in wh.query_named("runs_measured_costs", {"sweep_id": run.sweep_id})["cost_usd"]]
    summary.spent_usd = spent
    if run.probes is not None:
        return list(run.probes.launches), BudgetMeter.for_plan(float(sp.budget.max_usd), run.rows, spent_usd=spent,
                                                               measured_usd=measured, forced=True)
    todo = []
    for t in planned:
        row = run.rows.get(t.trial_id)
        if t.trial_id in done_ids:
            summary.skipped_done += 1
        elif row is not None and not row.feasible:
            summary.not_feasible += 1
            hooks.log.warning("Trial %s is not launched: %s", t.trial_id, row.reason or "no offer fits")
        else:
            todo.append(t)
    if summary.skipped_done:
        hooks.log.info("%d trial(s) already succeeded in an earlier run of %s; skipping them.",
                       summary.skipped_done, run.sweep_id)
    meter = BudgetMeter.for_plan(float(sp.budget.max_usd), run.rows, spent_usd=spent, measured_usd=measured,
                                 forced=summary.forced)
    return todo, meter
