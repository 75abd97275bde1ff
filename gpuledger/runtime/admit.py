"""Trials the adaptive search asks for that no plan foresaw (tpe over a range): planned, registered, launched.

    admission = Admission.for_run(run, hooks)         # before the writer starts: reads the planning inputs
    admission.admit(trial, writer, meter, requests)   # -> True: it may launch

Over lists (and for asha with ranges) every trial the study can ask is planned and registered when
the sweep starts. TPE over a range asks new points as it learns; each one is, before it launches:
1. planned alone through the pure planner, `gpuledger.plan.plan_sweep(spec, [trial])`, with the
   sweep's plan settings (its launcher and `max_parallel`) and the planning inputs read once when the
   run starts (this machine's speed, measured spot preemptions, measured runs): its params change its
   memory, time and cost estimates as they change any planned trial's (e.g. `lora_r`, `micro_batch`);
2. given its planned trial (`PlannedTrial`): the launch request and the budget rule (its estimate)
   read it like any other;
3. registered: its warehouse `trials` row (params, placement, estimates) is written through the
   sweep's one writer, which this waits for, so the row is stored before the trial launches.
A trial the planner finds infeasible is registered with its reason and not launched; one the planner
or the warehouse could not take is not launched either. Both are said, and `admit` returns False
(the caller tells the study the trial failed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuledger.launch import plans_as
from gpuledger.plan.model import Plan, PlannedTrial, PlanningInputs
from gpuledger.runtime.requests import launch_requests


@dataclass
class Admission:
    run: Any  # gpuledger.runtime.engine.SweepRun
    hooks: Any
    inputs: PlanningInputs = field(default_factory=PlanningInputs)  # planning_inputs(spec, launcher)

    @classmethod
    def for_run(cls, run: Any, hooks: Any) -> Admission:
        """Reads the planning inputs once (the warehouse is opened read-only: call before the writer starts)."""
        from gpuledger.inputs.ledger import planning_inputs

        return cls(run, hooks, planning_inputs(run.spec, plans_as(run.launcher)))

    def plan(self, trial: Any) -> Plan:
        """Returns the plan of `trial` alone, with the sweep's settings."""
        from gpuledger.plan import plan_sweep

        return plan_sweep(self.run.spec, [trial], max_parallel=self.run.cap, launcher=plans_as(self.run.launcher),
                          inputs=self.inputs)

    def admit(self, trial: Any, writer: Any, meter: Any, requests: dict[str, Any]) -> bool:
        """Plans and registers `trial`, adds its plan row, budget estimate and launch request; returns
        True when it may launch."""
        from gpuledger.plan import warehouse_trial_rows

        run, log = self.run, self.hooks.log
        try:
            plan = self.plan(trial)
        except Exception as err:  # noqa: BLE001 - said; the trial is not launched, the sweep goes on
            why = " ".join(str(err).split())[:500]
            log.error("Trial %s %s: could not be planned, not launched: %s", trial.trial_id, trial.params, why)
            run.summary.failures.append(f"{trial.trial_id}: not planned: {why}")
            return False
        row = plan.planned(trial.trial_id) or PlannedTrial(trial.trial_id, trial.index, dict(trial.params), False,
                                                           reason="the planner returned no row for it")
        run.rows[trial.trial_id] = row
        meter.plan_costs_usd[trial.trial_id] = row.cost_usd
        if not writer.register(warehouse_trial_rows(plan.to_json(), [trial])):  # the warehouse edge
            log.error("Trial %s is not launched: its trials row could not be stored (%s)", trial.trial_id,
                      writer.last_error or "unknown error")
            run.summary.failures.append(f"{trial.trial_id}: not registered: {writer.last_error}")
            return False
        if not row.feasible:
            run.summary.not_feasible += 1
            log.warning("Trial %s is not launched: %s", trial.trial_id, row.reason or "no offer fits")
            return False
        requests.update(launch_requests(run.spec, [trial], run.rows, sweep_id=run.sweep_id, launcher=run.launcher))
        log.info("Trial %s %s asked by the search: planned (est. %s s, $%s) and registered.", trial.trial_id,
                 trial.params, _fmt(row.est_wall_s), _fmt(row.est_cost_usd))
        return True


def _fmt(value: Any) -> str:
    try:
        return f"{float(value):.4g}"
    except (TypeError, ValueError):
        return "unknown"
