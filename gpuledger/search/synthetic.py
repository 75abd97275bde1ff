"""Synthetic learning-curve families: the replay harness's check that a change to the search is not fitted
to the one recorded demo grid (`benchmarks/search_replay.py --synthetic FAMILY`).

    curves, usd_per_s, params = synthetic_curves("crossing", seed=3)

Each family is a grid of `n` trials (default 12) reporting `values` (default 17) objective values of a
minimised loss, the first at step 0 (the base model's value, the same for every trial, as the demo
trainer reports), then L_k = floor + (start − floor) × (1 + k / tau)^−rate + noise, k = 1..values−1.
A trial's shape sets its cost: its seconds per value are `sec_per_value` × its cost factor (1, 2 or 4: a
bigger rank or micro-batch), after a start-up of `setup_s`; its USD per second is one price (a 4x shape costs 4x). Families:
- `smooth`: curves that keep their order after the first few values (low noise, sigma 0.5% of the value);
- `noisy`: the same shapes with 4% noise per value (an eval on a small held-out set);
- `crossing`: half the trials fall fast and plateau high, half fall slowly and end low (the early
  leaders lose: what breaks an early rung);
- `late`: late bloomers: the best trial is flat (a warm-up) for the first third of its values and then
  falls below the others; one more trial of the kind does so less well;
- `mixed`: one grid holding a smooth, a crossing and a late-blooming third.
The floors, starts and rates are drawn from the seed, so each seed is another grid of the family. Pure.
"""

from __future__ import annotations

import math
import random
from typing import Any

from gpuledger.search.asha_replay import Curve

FAMILIES = ("smooth", "noisy", "crossing", "late", "mixed")
#: the demo trainer's loss at step 0 (every trial starts from the same base model)
START = 4.5


def _curve(rng: random.Random, kind: str, values: int, noise: float) -> list[float]:
    out = [START]
    if kind == "late":
        floor, flat_until, rate = rng.uniform(0.55, 0.75), values // 3, rng.uniform(1.4, 2.0)
        plateau = rng.uniform(2.6, 3.0)
        for k in range(1, values):
            base = plateau if k <= flat_until else floor + (plateau - floor) * (1 + (k - flat_until) / 1.5) ** -rate
            out.append(base * (1 + rng.gauss(0, noise)))
        return out
    if kind == "fast":  # falls fast, plateaus high
        floor, tau, rate = rng.uniform(1.2, 1.8), 0.4, rng.uniform(1.2, 1.6)
    elif kind == "slow":  # falls slowly, ends low
        floor, tau, rate = rng.uniform(0.5, 1.1), 4.0, rng.uniform(0.9, 1.2)
    else:
        floor, tau, rate = rng.uniform(0.6, 2.4), rng.uniform(0.8, 2.0), rng.uniform(0.8, 1.4)
    for k in range(1, values):
        base = floor + (START - floor) * (1 + k / tau) ** -rate
        out.append(base * (1 + rng.gauss(0, noise)))
    return out


def synthetic_curves(family: str, *, seed: int = 0, n: int = 12, values: int = 17, sec_per_value: float = 4.0,
                     setup_s: float = 8.0, usd_per_hour: float = 0.1) -> tuple[list[Curve], dict[str, float],
                                                                                  dict[str, dict[str, Any]]]:
    """Returns (curves, {trial id: USD per second}, {trial id: params}) of one grid of `family`."""
    if family not in FAMILIES:
        raise ValueError(f"unknown curve family {family!r}: use one of {', '.join(FAMILIES)}")
    if n < 3 or values < 4:
        raise ValueError("a synthetic grid needs n >= 3 trials and values >= 4")
    rng = random.Random(f"{family}:{seed}")
    kinds: list[str]
    if family in ("smooth", "noisy"):
        kinds = ["smooth"] * n
    elif family == "crossing":
        kinds = ["fast" if i % 2 == 0 else "slow" for i in range(n)]
    elif family == "late":
        kinds = ["late", "late"] + ["smooth"] * (n - 2)
    else:
        kinds = [("smooth", "fast", "slow", "late")[i % 4] for i in range(n)]
    noise = 0.04 if family == "noisy" else 0.005
    curves, rate, params = [], {}, {}
    for i, kind in enumerate(kinds):
        factor = (1, 2, 4)[i % 3]
        vals = _curve(rng, kind, values, noise)
        if kind != "late" and family == "late":  # the smooth ones stay above the bloomers' floor
            vals = [vals[0]] + [max(v, 0.85) for v in vals[1:]]
        per = sec_per_value * factor * math.exp(rng.gauss(0, 0.1))
        times = tuple(round(setup_s + per * (k + 1), 3) for k in range(values))
        tid = f"{family}-{seed}-{i:02d}"
        curves.append(Curve(tid, tuple(round(v, 6) for v in vals), times, round(times[-1] + 1.0, 3), True))
        rate[tid] = usd_per_hour / 3600.0  # one GPU price: a bigger shape costs more by its seconds
        params[tid] = {"shape": factor, "point": i}
    return curves, rate, params
