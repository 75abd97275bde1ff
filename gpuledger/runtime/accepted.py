"""An accepted sweep: what the runtime is handed once a spec is planned (and, by the caller,
guarded): the spec, its trials, the plan, the sweep id, the parallelism cap and the launcher.

    sweep = prepare("specs/lora-grid.yaml", launcher="local")   # load, expand, plan (no warehouse write)
    budget_guard(sweep.plan)                                     # the caller decides
    execute(SweepRun(sweep, summary=sweep.new_summary()), hooks)

`prepare` is the one place a sweep is set up: the Prefect flow, `gpuledger plan` and the tests call
it. Planning inputs come from `gpuledger.inputs.ledger.planning_inputs` unless `inputs` is given.
Nothing here writes anything or launches anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gpuledger.errors import UserError
from gpuledger.launch import known_launchers, plans_as
from gpuledger.plan.model import Plan, PlanningInputs
from gpuledger.runtime.summary import SweepSummary
from gpuledger.spec.expand import Trial
from gpuledger.spec.models import SweepSpec


@dataclass(frozen=True)
class AcceptedSweep:
    """A planned sweep the runtime may run. `launcher` is the one that runs it (`plan.launcher` the
    one it was planned for: the same, or `local` for a launcher registered as planned like it);
    `cap` is at most this many trials at once."""

    spec: SweepSpec
    spec_path: Path
    sweep_id: str
    trials: tuple[Trial, ...]
    plan: Plan
    cap: int
    launcher: str
    #: why this sweep id (`gpuledger.runtime.ids.sweep_to_run`: the spec's first, continued, fresh)
    chosen: str = ""
    #: {params key: Curve} the plan read (measured learning curves of the spec's kind): the cost-aware
    #: stopping rule's references (`search.stopping: cost`)
    curves: dict | None = None
    #: packed trials: trials side by side per slot (`resources.trials_per_gpu`, `choose_pack`); the
    #: launcher runs `cap` slots of `pack` trials each
    pack: int = 1

    def new_summary(self, *, dry_run: bool = False) -> SweepSummary:
        """Returns the summary a run of this sweep fills in (counts zero, status not yet known)."""
        return SweepSummary(sweep_id=self.sweep_id, name=self.spec.name, dry_run=dry_run, trials=len(self.trials),
                            max_parallel=self.cap, budget_usd=float(self.spec.budget.max_usd))


def prepare(spec_path: str | Path, *, launcher: str | None = None, max_parallel: int | None = None,
            new: bool = False, inputs: PlanningInputs | None = None, sweep_id: str | None = None,
            resume: bool | None = True) -> AcceptedSweep:
    """Loads, expands and plans the sweep spec at `spec_path`; returns what the runtime runs.

    `launcher`: instead of the spec's; `max_parallel`: at most this many at once (the plan may cap
    it lower); `resume` (`gpuledger.runtime.ids.sweep_to_run`): True continues the spec's latest sweep
    (the spec's own id when it has none), None continues it only while unfinished, else a fresh one;
    `new`: a fresh sweep id (`gpuledger.runtime.ids.new_sweep_id`), as `resume=False`; `sweep_id`: this one (a sweep planned again, after its probes); `inputs`: planning
    inputs to use instead of reading this machine and the warehouse.
    Raises `UserError` for a capacity spec or an unknown launcher (one line, naming the file)."""
    from gpuledger.plan import plan_sweep
    from gpuledger.spec import expand_trials, load_spec

    path = Path(spec_path)
    spec = load_spec(path)
    if not isinstance(spec, SweepSpec):
        raise UserError(f"{path} is a capacity spec (kind: {spec.kind}); sweeps and plans take `kind: sweep` "
                        f"specs. Use `gpuledger capacity {path}` for GPUs and $/month to serve it.")
    name = launcher or spec.launcher
    if name not in known_launchers():
        raise UserError(f"{path}: unknown launcher {name!r}: use {' or '.join(known_launchers())}")
    if inputs is None:
        from gpuledger.inputs.ledger import planning_inputs

        inputs = planning_inputs(spec, plans_as(name))
    chosen = ""
    if sweep_id is None:
        from gpuledger.runtime.ids import sweep_to_run

        sweep_id, chosen = sweep_to_run(spec, False if new else resume)
    trials = tuple(expand_trials(spec))
    plan = plan_sweep(spec, list(trials), max_parallel=max_parallel, launcher=plans_as(name), inputs=inputs)
    cap = int(plan.max_parallel or max_parallel or spec.resources.max_parallel or 1)
    cap = max(1, min(cap, max_parallel or cap))
    from gpuledger.search.safety import with_chosen_pruning

    spec = with_chosen_pruning(spec, plan.pruning.settings if plan.pruning is not None else None)  # as planned
    pack, plan = choose_pack(spec, plan, path, name)
    return AcceptedSweep(spec=spec, spec_path=path, sweep_id=sweep_id, trials=trials, plan=plan, cap=cap,
                         launcher=name, chosen=chosen, curves=inputs.curves, pack=pack)


#: the launchers that run packed slots (k agents in one job); the others run one trial per slot
PACKING_LAUNCHERS = ("local", "skypilot")


def choose_pack(spec: SweepSpec, plan: Plan, path: Path, launcher: str = "local") -> tuple[int, Plan]:
    """Returns (trials per slot, the plan with `packing.chosen` and `packing.chosen_why`) for
    `resources.trials_per_gpu`: auto takes the plan's recommended k (1 without a packing option, or on a
    launcher that does not pack); an explicit k the plan's packing option says does not fit (memory), or on
    a launcher that does not pack, is refused, naming the setting. A k the plan prices (an option with each
    trial's share) re-prices the plan as packed (`gpuledger.plan.packing.with_packed_prices`), so the budget
    guard and the sweep's budget meter charge each trial its share of the job, not a GPU of its own."""
    from dataclasses import replace

    want = spec.resources.trials_per_gpu
    pk = plan.packing
    if want == "auto":
        k = int(pk.recommended or 1) if pk else 1
        why = (f"trials_per_gpu auto: {pk.why}" if pk else
               "trials_per_gpu auto: 1 (the plan offers no packing: fewer than 2 one-GPU trials with estimates)")
        if k > 1 and launcher not in PACKING_LAUNCHERS:
            k, why = 1, (f"trials_per_gpu auto: 1, not the plan's {k}: the {launcher} launcher runs "
                         "one trial per GPU (packed jobs run on local and skypilot)")
    elif int(want) > 1 and launcher not in PACKING_LAUNCHERS:
        raise UserError(f"{path}: resources.trials_per_gpu {want}: the {launcher} launcher runs one trial per GPU "
                        f"(packed jobs run on {', '.join(PACKING_LAUNCHERS)} only); use 1 or auto")
    else:
        k = int(want)
        row = next((o for o in (pk.options if pk else ()) if o.k == k), None)
        if row is not None and not row.fits:
            raise UserError(f"{path}: resources.trials_per_gpu {k}: {row.reason}; use a smaller k or auto")
        why = (f"trials_per_gpu {k} (spec)" + (f": ${row.cost_usd:.4g}, {(row.makespan_s or 0) / 60:.1f} min planned"
                                               if row else ": not among the plan's packing options, unchecked"))
    if pk is None and k == 1:
        return 1, plan
    from gpuledger.plan.packing import with_packed_prices
    from gpuledger.plan.sections import PackingPlan

    packing = replace(pk or PackingPlan(options=(), recommended=None, basis="", why=""), chosen=k, chosen_why=why)
    chosen = replace(plan, packing=packing, assumptions=[*plan.assumptions, why] if k > 1 else plan.assumptions)
    return k, with_packed_prices(chosen)  # the budget guard and meter price what the pack rents
