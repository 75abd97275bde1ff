"""What the planner needs of a sweep spec beyond its schema, as located problems.

`gpuledger validate` reports these with the schema's own problems, so that a spec `validate` calls
fine is one `plan` and `sweep` accept: the same functions raise in the planner
(`gpuledger.plan.workloads.require_tokens`) and list here (`planning_problems`). Pure: reads the spec and the bundled model
registry (or the model's config.json), estimates, writes nothing.
"""

from __future__ import annotations

from gpuledger.errors import UserError
from gpuledger.plan.workloads import estimate_rows, rl_problem, rollout_run_problem, tokens_problem
from gpuledger.spec.problems import Problem


def planning_problems(spec, trials=None) -> list[Problem]:
    """Returns every problem the planner would refuse `spec` on (empty when it plans): the tokens a
    training trial needs, then what the estimator refuses for the whole sweep (an unknown model or
    reward model, a config.json that is not one), located at the spec's `model`. Per-trial estimator
    refusals (a trial that does not fit) are not problems: the plan marks those trials infeasible."""
    from gpuledger.spec import SweepSpec, expand_trials

    if not isinstance(spec, SweepSpec):
        return []
    problem = tokens_problem(spec) or rl_problem(spec)
    if problem is not None:
        return [problem]  # the estimator step needs the tokens (and a placement that can run) first
    try:
        estimate_rows(spec, trials if trials is not None else expand_trials(spec))  # the planner's own loop, unframed
    except UserError as err:
        file, line, col = spec.position("model")
        return [Problem(file, line, col, "model", str(err).splitlines()[0] if str(err) else type(err).__name__)]
    return []


def check_spec(path) -> dict:
    """Returns {path, ok, kind, name, trials, problems} of one spec file: what `gpuledger validate`
    says of it (the schema and the spec's own checks, then `planning_problems` for a sweep)."""
    from gpuledger.spec import SpecError, expand_trials, load_spec

    out: dict = {"path": str(path), "ok": False, "kind": None, "name": None, "trials": None, "problems": []}
    try:
        spec = load_spec(path)
    except SpecError as err:
        out["problems"] = [str(p) for p in err.problems]
        return out
    out.update(kind=spec.kind, name=spec.name)
    if spec.kind == "sweep":
        trials = expand_trials(spec)
        out["trials"] = len(trials)
        problems = planning_problems(spec, trials)
        launch = rollout_run_problem(spec) if not problems else None  # what the launch needs beyond the plan
        out["problems"] = [str(p) for p in [*problems, *([launch] if launch else [])]]
    out["ok"] = not out["problems"]
    return out
