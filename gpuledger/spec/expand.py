"""Expansion of a sweep into trials (grid or random), and the stable ids of trials and sweeps."""

from __future__ import annotations

import itertools
import json
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from gpuledger.errors import UserError
from gpuledger.spec.exclusions import excluded
from gpuledger.spec.ids import trial_id_for
from gpuledger.spec.models import RandomRange, SweepSpec
from gpuledger.spec.templates import render_command, template_values
from gpuledger.spec.types import MAX_TRIALS


@dataclass(frozen=True)
class Trial:
    """One point of the search: its stable id, parameters and rendered commands."""

    index: int
    trial_id: str
    params: dict[str, Any]
    run: str
    setup: str | None
    rollout_run: str | None = None  # task.rollout_run rendered (train.rollout_gpu: the rollouts' own task)


def grid_points_total(lists: list[list[Any]]) -> int:
    """Returns the number of points of a grid (the product of its lists' lengths), before exclusions."""
    return math.prod(len(values) for values in lists)


def grid_too_large(lists: list[list[Any]]) -> str | None:
    """Returns why a grid is refused (over MAX_TRIALS points), or None."""
    total = grid_points_total(lists)
    if total <= MAX_TRIALS:
        return None
    sizes = " x ".join(str(len(v)) for v in lists)
    return (f"the grid has {total:,} points ({sizes}); a sweep may have at most {MAX_TRIALS:,} trials: "
            f"use fewer values, or strategy: random with n_trials")


def grid_size(spec: SweepSpec) -> int:
    """Returns the number of trials a grid spec expands to (product of values minus exclusions)."""
    return sum(1 for _ in _grid_points(spec))


def _grid_points(spec: SweepSpec):
    names = list(spec.search.params)
    lists = [spec.search.params[n] for n in names]
    refused = grid_too_large(lists)
    if refused:  # a spec built in code skips parse_spec's check: never expand what is refused
        raise UserError(f"{spec.name}: search.params: {refused}")
    for combo in itertools.product(*lists):
        params = dict(zip(names, combo, strict=True))
        if not excluded(params, spec.search.exclude):
            yield params


def _random_points(spec: SweepSpec):
    s = spec.search
    rng = random.Random(s.seed)
    seen: set[str] = set()
    n = s.n_trials or 0
    attempts = 0
    while len(seen) < n and attempts < n * 50:
        attempts += 1
        params: dict[str, Any] = {}
        for name, values in s.params.items():
            if isinstance(values, RandomRange):
                lo, hi = values.low, values.high
                x = math.exp(rng.uniform(math.log(lo), math.log(hi))) if values.log else rng.uniform(lo, hi)
                params[name] = int(round(x)) if values.type == "int" else float(f"{x:.6g}")
            else:
                params[name] = rng.choice(values)
        key = json.dumps(params, sort_keys=True, default=str)
        if key in seen or excluded(params, s.exclude):
            continue
        seen.add(key)
        yield params



def has_ranges(spec: SweepSpec) -> bool:
    """True when a search parameter is a range `{low, high, ...}` (numeric), not a list (categorical)."""
    return any(isinstance(values, RandomRange) for values in spec.search.params.values())


def trial_for(spec: SweepSpec, params: dict[str, Any], index: int) -> Trial:
    """Returns the trial of `params` (its stable id, rendered commands); `index` is its position."""
    tid = trial_id_for(spec.name, params)
    values = template_values(spec, params, tid, index)
    return Trial(index=index, trial_id=tid, params=params, run=render_command(spec.task.run, values),
                 setup=render_command(spec.task.setup, values) if spec.task.setup else None,
                 rollout_run=render_command(spec.task.rollout_run, values) if spec.task.rollout_run else None)


def iter_trials(spec: SweepSpec) -> Iterator[Trial]:
    """Yields the trials of a sweep spec one at a time, in a stable order, with rendered commands.

    grid: every point of the lists; random: n_trials points drawn with the seed; tpe/asha over lists:
    every point the search may ask for (it launches at most n_trials of them, in its order); tpe/asha
    with a range: n_trials points drawn from the ranges with the seed by Optuna's RandomSampler
    (`gpuledger.search.space.sample_points`): the points asha runs, in its order; for tpe the
    representative points its plan and budget guard price (tpe asks its own, each planned then)."""
    if spec.search.strategy == "random":
        points: Any = _random_points(spec)
    elif has_ranges(spec):
        from gpuledger.search.space import sample_points

        points = sample_points(spec)
    else:
        points = _grid_points(spec)
    for index, params in enumerate(points):
        yield trial_for(spec, params, index)


def expand_trials(spec: SweepSpec) -> list[Trial]:
    """Returns the trials of a sweep spec (at most MAX_TRIALS), in a stable order."""
    return list(iter_trials(spec))
