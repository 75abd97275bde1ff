"""The search space of tpe/asha in Optuna's terms: the one place a spec's parameters become suggest calls.

- a list of values is categorical: `trial.suggest_categorical(name, values)`;
- a range `{low, high, log, type}` is numeric: `trial.suggest_float(name, low, high, log=log)`, or
  with `type: int` `trial.suggest_int(name, int(low), int(high), log=log)`.

`sample_points(spec)` draws a spec's `n_trials` points from its ranges with Optuna's `RandomSampler`
seeded by `search.seed`, making exactly these suggest calls in an in-memory study: the points asha
runs (in this order) and the representative points a tpe plan prices. A point drawn twice, or left
out by `search.exclude`, is drawn again (at most `DRAWS_PER_POINT` draws per point are tried).
"""

from __future__ import annotations

from typing import Any

#: How many draws per wanted point `sample_points` may make before it stops (repeats, exclusions).
DRAWS_PER_POINT = 50


def suggest(trial: Any, space: dict[str, Any]) -> dict[str, Any]:
    """Returns the trial's parameters, asked of `trial` (an Optuna trial) for each of `space`'s
    entries in order: a list (categorical) or a `RandomRange` (numeric)."""
    from gpuledger.spec.models import RandomRange

    params: dict[str, Any] = {}
    for name, values in space.items():
        if isinstance(values, RandomRange):
            if values.type == "int":
                params[name] = trial.suggest_int(name, int(values.low), int(values.high), log=values.log)
            else:
                params[name] = trial.suggest_float(name, float(values.low), float(values.high), log=values.log)
        else:
            params[name] = trial.suggest_categorical(name, list(values))
    return params


def sample_points(spec: Any, n: int | None = None) -> list[dict[str, Any]]:
    """Returns `n` (default `search.n_trials`) distinct points of the spec's space, drawn by Optuna's
    `RandomSampler(seed=search.seed)` in that order; fewer when the space runs out of new points."""
    import optuna

    from gpuledger.spec.exclusions import excluded
    from gpuledger.spec.ids import trial_id_for

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    s = spec.search
    n = s.n_trials if n is None else n
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=s.seed))
    points: list[dict[str, Any]] = []
    seen: set[str] = set()
    for _ in range((n or 0) * DRAWS_PER_POINT):
        if len(points) >= (n or 0):
            break
        trial = study.ask()
        params = suggest(trial, s.params)  # never told: the in-memory study is only a sampler's stream
        tid = trial_id_for(spec.name, params)
        if tid in seen or excluded(params, s.exclude):
            continue
        seen.add(tid)
        points.append(params)
    return points
