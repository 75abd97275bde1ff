"""Expansion of a sweep into trials (grid or random), and the stable ids of trials and sweeps."""

from __future__ import annotations

import itertools
import json
import math
import random
from dataclasses import dataclass
from typing import Any

from gpuledger.spec.ids import trial_id_for
from gpuledger.spec.models import RandomRange, SweepSpec
from gpuledger.spec.templates import render_command, template_values


@dataclass(frozen=True)
class Trial:
    """One point of the search: its stable id, parameters and rendered commands."""

    index: int
    trial_id: str
    params: dict[str, Any]
    run: str
    setup: str | None


def _excluded(params: dict[str, Any], rules: list[dict[str, Any]]) -> bool:
    for rule in rules:
        if all(params.get(k) in (v if isinstance(v, list) else [v]) for k, v in rule.items()):
            return True
    return False


def grid_size(spec: SweepSpec) -> int:
    """Returns the number of trials a grid spec expands to (product of values minus exclusions)."""
    return sum(1 for _ in _grid_points(spec))


def _grid_points(spec: SweepSpec):
    names = list(spec.search.params)
    lists = [spec.search.params[n] for n in names]
    for combo in itertools.product(*lists):
        params = dict(zip(names, combo, strict=True))
        if not _excluded(params, spec.search.exclude):
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
        if key in seen or _excluded(params, s.exclude):
            continue
        seen.add(key)
        yield params



def expand_trials(spec: SweepSpec) -> list[Trial]:
    """Returns the trials of a sweep spec, in a stable order, each with its rendered commands."""
    points = _grid_points(spec) if spec.search.strategy == "grid" else _random_points(spec)
    trials = []
    for index, params in enumerate(points):
        tid = trial_id_for(spec.name, params)
        values = template_values(spec, params, tid, index)
        trials.append(
            Trial(
                index=index,
                trial_id=tid,
                params=params,
                run=render_command(spec.task.run, values),
                setup=render_command(spec.task.setup, values) if spec.task.setup else None,
            )
        )
    return trials
