"""Probe runs: a sweep's real trial command, run briefly, one per distinct shape (docs/probes.md).

    summary = run_probes(spec, spec_path, seconds=10.0)   # or steps=N, trial_ids=[...]

1. plans the sweep as `gpuledger plan` would (this machine or the chosen cloud offers) and groups its
   feasible trials by shape (`gpuledger.plan.probes.shapes_to_probe`: accelerator, GPU count,
   sharding, micro-batch, sequence length, same program); the first trial of each shape is probed;
2. refuses (BudgetExceeded, exit 3) when what the sweep spent + the probes' estimated cost would
   cross the sweep's budget: probe spend is the sweep's spend (`sweep_spent`, the runtime's meter);
3. runs them as trials with purpose `probe` through the sweep's one engine (`gpuledger.runtime.engine`
   with a `ProbeBatch`): the sweep's lease, its registration (status `planned` when new) and its planned
   trials, the launch loop on the sweep's launcher (local, or SkyPilot managed jobs on the planned
   placement), at most the plan's max_parallel at once, like the sweep's trials, and the writer; each
   probe runs under the measuring agent with `GPULEDGER_PURPOSE=probe`, the shape, and the stop rule that
   `gpuledger.track.log` honours (`GPULEDGER_PROBE_STEPS` / `GPULEDGER_PROBE_SECONDS`; the agent's
   timeout is the backstop). Records land in `landing/probes/SWEEP_ID/`, never the sweep's own
   landing folder; a probe's end never marks a trial nor finishes the sweep;
4. on the local launcher, runs each shape once more to its first step only (`ProbeBatch.then`, in the
   same run): this machine keeps what a first run cached (a model download, the demo's pretrained base,
   compiled kernels), so the start-up a trial pays is a warm one; the planner takes the least start-up
   of a shape's probes here (`plan_probes.warm_startup_s`);
5. the runs are stored with purpose 'probe'; returns what `v_probes` says they measured.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuledger import protocol, vocabulary
from gpuledger.errors import BudgetExceeded, UserError

if TYPE_CHECKING:
    from gpuledger.plan.model import Plan, PlannedTrial

#: Default steady state a probe measures (seconds after its first training step): long enough to
#: include a trainer's periodic work (the demo evaluates every 1/16 of its steps, ~1 s apart), short
#: next to a trial (the demo's are 15-60 s; a GPU fine-tune's hours).
DEFAULT_PROBE_SECONDS = 10.0
#: Start-up a probe may take before its limit counts (the agent's backstop timeout adds it): a cloud
#: job's set-up and model download, minutes (gpuledger/plan/settings.py CLOUD_SETUP_S is 5 min).
PROBE_STARTUP_ALLOWANCE_S = 600.0


@dataclass
class ProbeSummary:
    """What `run_probes` did: the sweep, one row per probe (v_probes columns), and the spend."""

    sweep_id: str
    shapes: int
    probes: list[dict[str, Any]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    est_cost_usd: float = 0.0
    cost_usd: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def probe_env(shape: dict[str, Any], *, steps: int | None, seconds: float | None) -> dict[str, str]:
    """Returns the environment a probe's job gets: its purpose, shape and stop rule."""
    env = {protocol.ENV_PURPOSE: vocabulary.PROBE_PURPOSE, protocol.ENV_PROBE_SHAPE: json.dumps(shape, sort_keys=True)}
    if steps is not None:
        env[protocol.ENV_PROBE_STEPS] = str(int(steps))
    if seconds is not None:
        env[protocol.ENV_PROBE_SECONDS] = f"{float(seconds):g}"
    return env


def probe_seconds_estimate(placed: PlannedTrial, spec, shape: dict[str, Any], *, steps: int | None,
                           seconds: float | None) -> float:
    """Returns the planned steady seconds of one probe of the trial `placed`: `seconds`, or `steps` at
    the plan's step time (compute_s / steps of the trial), at most the trial's compute_s (a trainer
    that ends first)."""
    compute_s = float(placed.compute_s or 0.0)
    if seconds is not None:
        return min(float(seconds), compute_s) if compute_s > 0 else float(seconds)
    tokens = float(spec.train.tokens_per_trial or 0)
    per_step = float(shape["micro_batch"] * shape["seq_len"] * max(1, int(shape.get("gpus") or 1)))
    trial_steps = tokens / per_step if per_step > 0 else 0.0
    if trial_steps <= 0 or compute_s <= 0:
        return 0.0
    return compute_s * min(1.0, float(steps or 0) / trial_steps)


def fill_slots(shapes: list[Any], slots: int) -> list[Any]:
    """Returns `shapes` repeated in turn until `slots` are filled (as they are when there are that many
    or more): on the local launcher the sweep runs `slots` trials at once on this machine's cores, so
    its probes run as many at once, each measuring its rate while sharing the cores as a trial will."""
    if not shapes or len(shapes) >= slots:
        return list(shapes)
    return [shapes[i % len(shapes)] for i in range(slots)]


def probe_cost_estimate_usd(placed: PlannedTrial, overhead_s: float, steady_s: float) -> float:
    """Returns the estimated cost of one probe of the trial `placed`: its planned rate x (the plan's
    start-up overhead + the steady seconds)."""
    rate = float(placed.usd_per_hour or 0.0)
    return rate * (overhead_s + steady_s) / 3600.0


def _timeout_s(spec, launcher: str, steady_s: float) -> float:
    """The agent's backstop: start-up allowance + 3 x the planned steady seconds (at least a minute),
    never beyond the trial's own timeout (local)."""
    backstop = PROBE_STARTUP_ALLOWANCE_S + max(60.0, 3.0 * steady_s)
    from gpuledger.launch import plans_as

    own = spec.local.trial_timeout if plans_as(launcher) == "local" else None
    return min(backstop, float(own)) if own else backstop


def plan_for_probes(spec, launcher: str, max_parallel: int | None = None) -> tuple[list[Any], Plan]:
    """Returns (trials, plan) of the spec as `gpuledger plan` makes it (ledger inputs included)."""
    from gpuledger.inputs.ledger import planning_inputs
    from gpuledger.launch import plans_as
    from gpuledger.plan import plan_sweep
    from gpuledger.spec import expand_trials

    trials = expand_trials(spec)
    plan = plan_sweep(spec, trials, max_parallel=max_parallel, launcher=plans_as(launcher),
                      inputs=planning_inputs(spec, plans_as(launcher)))
    return trials, plan


def auto_probe_trials(spec, plan: Plan) -> tuple[list[str], str]:
    """Returns (trial ids whose shapes `gpuledger sweep` probes first, why) under `search.probe`: auto
    probes the feasible trials planned on estimates alone (not measured, not probed) when the plan
    costs more than `search.probe_above_usd` and fits the budget; never (the default), or nothing left
    to learn, probes none."""
    s = spec.search
    total = float(plan.total_est_cost_usd or 0.0)
    if s.probe == "never":
        return [], "search.probe: never: planning on the estimates as they are"
    if spec.method == "inference" or not spec.train.tokens_per_trial:
        return [], "no probe: probes measure training steps against train.tokens_per_trial"
    if total <= s.probe_above_usd:
        return [], (f"no probe: the plan's ${total:.4f} is not above search.probe_above_usd ${s.probe_above_usd:g} "
                    "(`gpuledger probe` probes by hand)")
    if total > float(spec.budget.max_usd):
        return [], (f"no probe: the plan's ${total:.4f} is over the ${float(spec.budget.max_usd):.2f} budget "
                    "(the budget guard decides; probing would spend on a sweep that may not run)")
    ids = [t.trial_id for t in plan.planned_trials
           if t.feasible and t.est_basis != "measured" and not str(t.est_basis or "").startswith("probe ")]
    if not ids:
        return [], "no probe: every trial's time is measured or probed already"
    return ids, (f"search.probe auto: the plan's ${total:.4f} is above ${s.probe_above_usd:g}; probing the shapes of "
                 f"{len(ids)} trial(s) planned on estimates, then planning again")


def auto_probe(spec_path: Path, accepted: Any, log: Any, launcher_factory: Any = None) -> bool:
    """The sweep's `search.probe: auto` step: probes the trials `auto_probe_trials` names (through the
    sweep's launcher, for the sweep of `accepted`, a `gpuledger.runtime.accepted.AcceptedSweep`, on its
    plan) and logs what they measured; returns True when a probe was stored (the sweep plans again). A
    UserError (over budget, a launcher that cannot start them) is logged and the sweep goes on with its plan."""
    ids, why = auto_probe_trials(accepted.spec, accepted.plan)
    log.info("%s", why)
    if not ids:
        return False
    try:
        summary = run_probes(accepted.spec, spec_path, launcher=accepted.launcher, trial_ids=ids, say=log.info,
                             plan=(list(accepted.trials), accepted.plan), sweep_id=accepted.sweep_id,
                             launcher_factory=launcher_factory, log=log)
    except UserError as err:
        log.warning("Not probing: %s", err)
        return False
    for line in probe_lines(summary):
        log.info("%s", line)
    for line in summary.failures:
        log.warning("%s", line)
    return bool(summary.probes)


def run_probes(spec, spec_path: Path, *, launcher: str | None = None, trial_ids: list[str] | None = None,
               steps: int | None = None, seconds: float | None = None, max_parallel: int | None = None,
               say=print, launcher_factory=None, plan=None, sweep_id: str | None = None, log: Any = None) -> ProbeSummary:
    """Runs one probe per distinct shape of the sweep (or of the trials `trial_ids`); returns the summary.

    `plan`: (trials, Plan) when the caller planned already (the sweep's auto-probe);
    `sweep_id`: the sweep the probes belong to (default: the spec's, `sweep_id_for`); `log`: where the
    engine says each probe's start and end (default: logging's `gpuledger.probe`).
    Raises UserError for a spec that cannot be probed, BudgetExceeded when the probes would cross the
    budget."""
    from gpuledger.launch import known_launchers, plans_as
    from gpuledger.plan.probes import shapes_to_probe
    from gpuledger.plan.sweep import settings_for
    from gpuledger.runtime.launching import make_launcher
    from gpuledger.spec import sweep_id_for

    launcher = launcher or spec.launcher
    if launcher not in known_launchers():
        raise UserError(f"unknown launcher {launcher!r}: use local or skypilot")
    if spec.method == "inference":
        raise UserError(f"{spec_path}: method inference is a serving benchmark; probes measure training steps")
    if not spec.train.tokens_per_trial:
        raise UserError(f"{spec_path}: train.tokens_per_trial is needed to extrapolate a probe to a whole trial")
    if steps is None and seconds is None:
        seconds = DEFAULT_PROBE_SECONDS
    trials, planned = plan if plan is not None else plan_for_probes(spec, launcher, max_parallel)
    placed = {t.trial_id: t for t in planned.planned_trials}
    chosen = trials
    if trial_ids:
        unknown = [t for t in trial_ids if t not in {x.trial_id for x in trials}]
        if unknown:
            raise UserError(f"{spec_path}: no trial {unknown[0]!r} in this sweep (`gpuledger plan {spec_path}` lists them)")
        chosen = [t for t in trials if t.trial_id in trial_ids]
    shapes = shapes_to_probe(spec, chosen, placed)
    sweep_id = sweep_id or sweep_id_for(spec)
    summary = ProbeSummary(sweep_id=sweep_id, shapes=len(shapes))
    if not shapes:
        raise UserError(f"{spec_path}: no feasible trial to probe (see `gpuledger plan {spec_path}`)")
    cap = max(1, min(int(planned.max_parallel or 1), max_parallel or 10**6))
    if plans_as(launcher) == "local":  # the trials will share this machine's cores `cap` at a time: so do the probes
        shapes = fill_slots(shapes, cap)
    overhead_s = settings_for(spec, launcher=plans_as(launcher)).overhead_s
    steady = [probe_seconds_estimate(placed[t.trial_id], spec, shape, steps=steps, seconds=seconds) for shape, t in shapes]
    summary.est_cost_usd = sum(probe_cost_estimate_usd(placed[t.trial_id], overhead_s, s)
                               for (_, t), s in zip(shapes, steady, strict=True))
    spent, _ = sweep_spend_usd(sweep_id)
    budget = float(spec.budget.max_usd)
    if spent + summary.est_cost_usd > budget + 1e-9:
        raise BudgetExceeded(f"{len(shapes)} probe(s) of sweep {sweep_id} are estimated at ${summary.est_cost_usd:.4f}; "
                             f"with the ${spent:.4f} it spent they would cross its ${budget:.2f} budget; nothing was launched")
    from gpuledger.runtime import money
    from gpuledger.runtime.accepted import AcceptedSweep
    from gpuledger.runtime.engine import Hooks, ProbeBatch, ProbeLaunch, SweepRun, execute
    from gpuledger.runtime.envelopes import spender_for
    from gpuledger.runtime.requests import launch_requests

    reqs = launch_requests(spec, [t for _, t in shapes], placed, sweep_id=sweep_id, launcher=launcher)
    launches = [ProbeLaunch(t, dataclasses.replace(reqs[t.trial_id], probe_env=probe_env(shape, steps=steps, seconds=seconds),
                                                   timeout_s=_timeout_s(spec, launcher, s), echo_metrics=()), shape)
                for (shape, t), s in zip(shapes, steady, strict=True)]

    def warm(records: list[Any]) -> list[ProbeLaunch]:
        """The local launcher: each shape that ran once more to its first step only (this machine keeps what
        a first run cached: start-up again, warm)."""
        ok = {json.dumps(r.probe_shape, sort_keys=True) for r in records if r.status == vocabulary.SUCCEEDED}
        return [dataclasses.replace(p, request=dataclasses.replace(p.request, probe_env=probe_env(p.shape, steps=1, seconds=None)))
                for p in launches if json.dumps(p.shape, sort_keys=True) in ok]

    accepted = AcceptedSweep(spec=spec, spec_path=Path(spec_path), sweep_id=sweep_id, trials=tuple(trials), plan=planned,
                             cap=cap, launcher=launcher)
    run = SweepRun(accepted, summary=accepted.new_summary(), launcher_factory=launcher_factory or make_launcher,
                   probes=ProbeBatch(launches, then=warm if plans_as(launcher) == "local" else None))
    by_server = bool(os.environ.get(money.ENV_LAUNCH_ID))  # an agent's launch: the server reserved it
    if not by_server:  # the team's envelopes hold the probes' estimate while they run (docs/budgets.md)
        money.reserve(sweep_id, f"{len(shapes)} probe(s) of sweep {sweep_id}",
                      {"total_est_cost_usd": summary.est_cost_usd}, spender_for(spec))
    try:
        copies = f" ({len(shapes)} probes: copies fill the {cap} slots the trials will share)" if len(shapes) > summary.shapes else ""
        say(f"probing {summary.shapes} shape(s) of {sweep_id} ({len(trials)} trials){copies} through the {launcher} launcher, "
            f"at most {cap} at once; estimated ${summary.est_cost_usd:.4f}")
        # the one engine: the sweep's lease, registration, launch loop, writer and landing (`ProbeBatch`)
        done = execute(run, Hooks(log or logging.getLogger("gpuledger.probe")))
        summary.failures += done.failures
        if done.unrecorded:
            summary.failures.append(f"{done.unrecorded} probe record(s) not stored in the warehouse (kept in {done.landing})")
        records = run.records
        if records:
            from gpuledger.warehouse import Warehouse

            with Warehouse.open(read_only=True) as wh:
                summary.probes = wh.query_named("probes_of_runs", {"run_ids": [r.run_id for r in records]}).to_dicts()
        summary.cost_usd = sum(r.cost_usd for r in records)
        if done.interrupted and not any(f.startswith("lost the sweep's lease") for f in done.failures):
            # Ctrl-C: what finished is stored; the caller stops
            raise KeyboardInterrupt
        return summary
    finally:
        if not by_server:
            with contextlib.suppress(Exception):  # what the probes did not spend goes back
                money.release(sweep_id, "probes ended")


def sweep_spend_usd(sweep_id: str) -> tuple[float, float]:
    """Returns (what the sweep spent so far, all runs, probes included; of it, its probes' spend) in
    USD, (0, 0) without a warehouse (none created): the probes' budget check here, and the sweep's
    pre-launch budget guard, which adds the probes' part to the plan's trials (`budget_guard(plan,
    probes_usd=...)`)."""
    from gpuledger.settings import resolve_path
    from gpuledger.warehouse import Warehouse

    path = resolve_path()
    if not path.exists():
        return 0.0, 0.0
    with Warehouse.open(path, read_only=True) as wh:
        row = wh.query_named("sweep_spent", {"sweep_id": sweep_id}).row(0, named=True)
    return float(row["spent_usd"] or 0.0), float(row["probes_usd"] or 0.0)


def probe_lines(summary: ProbeSummary) -> list[str]:
    """Returns one line per probe: what it measured, for the CLI."""
    lines = []
    for p in summary.probes:
        shape = p.get("probe_shape")
        try:
            shape = json.loads(shape) if isinstance(shape, str) else (shape or {})
        except ValueError:
            shape = {}
        tps, start = p.get("tokens_per_s"), p.get("startup_s")
        if tps and start is not None:
            what = (f"{tps:,.1f} tokens/s ({p.get('tokens_source')}), step {p.get('step_s') or math.nan:.3f} s, "
                    f"start-up {start:.1f} s")
        elif start is not None and p.get("steps") == 1:
            what = f"start-up {start:.1f} s (run again to its first step: the warm start-up)"
        else:
            what = "no steady state measured (not usable)"
        mem = p.get("memory_gib")
        lines.append(f"probe {p['run_id']} {p['status']}: {shape.get('accelerator')} x{shape.get('gpus')} "
                     f"{shape.get('sharding')} micro_batch {shape.get('micro_batch')} seq_len {shape.get('seq_len')}: "
                     f"{what}; peak memory {'-' if mem is None else f'{mem:.3f} GiB'}; {p.get('steps')} steps in "
                     f"{p.get('wall_s') or 0:.1f} s, ${p.get('cost_usd') or 0:.4f}")
    return lines
