"""What the planner needs of a sweep spec beyond its schema, as located problems.

`gpuledger validate` reports these with the schema's own problems, so that a spec `validate` calls
fine is one `plan` and `sweep` accept: the same functions raise in the planner
(`require_tokens`) and list here (`planning_problems`). Pure: reads the spec and the bundled model
registry (or the model's config.json), estimates, writes nothing.
"""

from __future__ import annotations

from gpuledger.errors import UserError
from gpuledger.spec.problems import Problem

TOKENS_NEEDED = "train.tokens_per_trial is needed to estimate time and cost (training tokens per trial, e.g. 20_000_000)"


def tokens_problem(spec) -> Problem | None:
    """Returns the problem of a training spec without `train.tokens_per_trial` (the planner prices
    a trial by its tokens), else None. A `method: inference` spec takes its tokens from `serve`."""
    if spec.method == "inference" or spec.train.tokens_per_trial is not None:
        return None
    file, line, col = spec.position("train")
    return Problem(file, line, col, "", TOKENS_NEEDED)


def require_tokens(spec) -> None:
    """Raises the planner's one-line UserError when `tokens_problem(spec)` finds one."""
    problem = tokens_problem(spec)
    if problem is not None:
        raise UserError(str(problem))


def planning_problems(spec, trials=None) -> list[Problem]:
    """Returns every problem the planner would refuse `spec` on (empty when it plans): the tokens a
    training trial needs, then what the estimator refuses for the whole sweep (an unknown model or
    reward model, a config.json that is not one), located at the spec's `model`. Per-trial estimator
    refusals (a trial that does not fit) are not problems: the plan marks those trials infeasible."""
    from gpuledger.spec import SweepSpec, expand_trials

    if not isinstance(spec, SweepSpec):
        return []
    problem = tokens_problem(spec)
    if problem is not None:
        return [problem]  # the estimator step needs the tokens first
    from gpuledger.plan.estimates import trial_estimates

    try:
        trial_estimates(spec, trials if trials is not None else expand_trials(spec))
    except UserError as err:
        file, line, col = spec.position("model")
        return [Problem(file, line, col, "model", str(err).splitlines()[0] if str(err) else type(err).__name__)]
    return []
