"""Expected improvement per dollar (`search.acquisition: ei_per_usd`, strategy tpe): the next point is the
planned candidate with the most expected improvement per estimated dollar, so cheap informative points
come first (cost-aware Bayesian optimisation: EI per unit cost, Snoek et al. 2012; Lee et al. 2020).

    tid = next_point(candidates, told, space, goal="minimize", seed=0)
    # candidates: [(trial_id, params, est_cost_usd)] not yet asked; told: [(params, value)] finished

The surrogate is a Gaussian process over the points' encodings (each parameter scaled to [0, 1]: a list
by its values, log-spaced when every value is positive and numeric, else by rank; a range by its bounds,
on a log scale where `log`), a squared-exponential kernel of length scale `LENGTH` and noise `NOISE` on
the standardised values. EI = E[max(0, best − Y)] (minimize; the mirror for maximize) under the
posterior N(mean, sd²); the score is EI / est_cost_usd^α (the planner's estimate of that point's shape:
its rank, sequence length, GPU), with cost cooling (Lee et al. 2020, "Cost-aware Bayesian optimization"):
α = the share of `n_trials` still to ask, so cost weighs most on the first points and not at all on the
last (pure EI per dollar kept the demo grid's recipe, its dearest shape, in 35% of 40 replayed seeds;
with cooling 70%, beside TPE's 60% at the same spend: docs/search.md). Before `N_STARTUP` points have
values there is no surrogate: the first points are drawn at random (seeded). Pure (numpy only).
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from typing import Any

#: the points told before the surrogate is used
N_STARTUP = 3
#: the kernel's length scale on the [0, 1] encodings, and the noise variance on standardised values
LENGTH = 0.6
NOISE = 1e-4


def _axis(values: Sequence[Any]) -> dict[Any, float]:
    vals = list(dict.fromkeys(values))
    numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in vals)
    if numeric:
        logs = all(v > 0 for v in vals)
        keyed = sorted(vals)
        xs = [math.log(v) if logs else float(v) for v in keyed]
        lo, hi = min(xs), max(xs)
        return {v: (x - lo) / (hi - lo) if hi > lo else 0.0 for v, x in zip(keyed, xs, strict=True)}
    return {v: i / max(1, len(vals) - 1) for i, v in enumerate(vals)}


def encoder(space: Mapping[str, Any], points: Sequence[Mapping[str, Any]]):
    """Returns a function params -> [0, 1]^d for the parameters of `space` (lists and ranges)."""
    names = sorted(space)
    axes: dict[str, Any] = {}
    for n in names:
        sp = space[n]
        if isinstance(sp, list):
            axes[n] = _axis([*sp, *(p[n] for p in points if n in p)])
        else:
            lo, hi, log = float(sp.low), float(sp.high), bool(getattr(sp, "log", False))
            axes[n] = (math.log(lo), math.log(hi)) if log else (lo, hi)
            axes[n] = (*axes[n], log)

    def enc(params: Mapping[str, Any]) -> list[float]:
        out = []
        for n in names:
            a, v = axes[n], params.get(n)
            if isinstance(a, dict):
                out.append(a.get(v, 0.5))
            else:
                lo, hi, log = a
                x = math.log(float(v)) if log else float(v)
                out.append((x - lo) / (hi - lo) if hi > lo else 0.0)
        return out

    return enc


def posterior(X: Sequence[Sequence[float]], y: Sequence[float], Xs: Sequence[Sequence[float]]):
    """Returns (mean, sd) of the GP posterior at `Xs` (y standardised inside, returned in y's units)."""
    import numpy as np

    X, Xs, y = np.asarray(X, float), np.asarray(Xs, float), np.asarray(y, float)
    mu, sigma = float(y.mean()), float(y.std()) or 1.0
    z = (y - mu) / sigma

    def k(a, b):
        d = ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1)
        return np.exp(-d / (2 * LENGTH ** 2))

    K = k(X, X) + NOISE * np.eye(len(X))
    L = np.linalg.cholesky(K)
    alpha = np.linalg.solve(L.T, np.linalg.solve(L, z))
    Ks = k(X, Xs)
    mean = Ks.T @ alpha
    v = np.linalg.solve(L, Ks)
    var = np.clip(1.0 - (v ** 2).sum(0), 1e-12, None)
    return mean * sigma + mu, np.sqrt(var) * sigma


def expected_improvement(mean: float, sd: float, best: float, goal: str) -> float:
    """Returns E[max(0, improvement over `best`)] under N(mean, sd²) (minimize: best − Y)."""
    imp = (best - mean) if goal == "minimize" else (mean - best)
    if sd <= 0:
        return max(0.0, imp)
    u = imp / sd
    pdf = math.exp(-0.5 * u * u) / math.sqrt(2 * math.pi)
    cdf = 0.5 * (1 + math.erf(u / math.sqrt(2)))
    return imp * cdf + sd * pdf


def next_point(candidates: Sequence[tuple[str, Mapping[str, Any], float]], told: Sequence[tuple[Mapping[str, Any], float]],
               space: Mapping[str, Any], *, goal: str, seed: int = 0, n_trials: int | None = None) -> str | None:
    """Returns the trial id of the candidate with the most EI per dollar (see the module's docstring)."""
    if not candidates:
        return None
    cands = sorted(candidates, key=lambda c: c[0])
    told = [(p, float(v)) for p, v in told if v is not None and math.isfinite(float(v))]
    if len(told) < N_STARTUP:
        return random.Random(seed * 7919 + len(told)).choice(cands)[0]
    enc = encoder(space, [p for p, _ in told] + [c[1] for c in cands])
    mean, sd = posterior([enc(p) for p, _ in told], [v for _, v in told], [enc(c[1]) for c in cands])
    best = min(v for _, v in told) if goal == "minimize" else max(v for _, v in told)
    alpha = max(0.0, (n_trials - len(told)) / n_trials) if n_trials else 1.0
    scores = [expected_improvement(float(m), float(s), best, goal) / max(float(c[2] or 0.0), 1e-12) ** alpha
              for c, m, s in zip(cands, mean, sd, strict=True)]
    i = max(range(len(cands)), key=lambda j: (scores[j], -j))
    return cands[i][0]
