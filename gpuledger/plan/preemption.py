"""Preemption maths: Poisson CDF and quantile (vectorised), for the spot deadline test."""

from __future__ import annotations

import math

import numpy as np


def _erf(x: np.ndarray) -> np.ndarray:
    # Abramowitz & Stegun 7.1.26, |error| < 1.5e-7
    sign = np.sign(x)
    x = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * x)
    y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * np.exp(-x * x)
    return sign * y


def poisson_cdf(n: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """Returns P(N <= n) for N ~ Poisson(mu), elementwise; n < 0 gives 0.

    Exact sum for mu <= 30 (terms up to k = 100; beyond that the tail is < 1e-30); a normal
    approximation with continuity correction for mu > 30.
    """
    n = np.asarray(n, dtype=np.float64)
    mu = np.asarray(mu, dtype=np.float64)
    out = np.zeros(np.broadcast(n, mu).shape)
    n, mu = np.broadcast_to(n, out.shape), np.broadcast_to(mu, out.shape)
    small = mu <= 30
    if small.any():
        ns, ms = n[small], mu[small]
        kmax = int(min(100, max(0.0, float(np.nanmax(ns)) if ns.size else 0.0)))
        term = np.exp(-ms)
        cdf = np.where(ns >= 0, term, 0.0)
        for k in range(1, kmax + 1):
            term = term * ms / k
            cdf = cdf + np.where(ns >= k, term, 0.0)
        cdf = np.where(ns > 100, 1.0, cdf)
        out[small] = np.minimum(cdf, 1.0)
    big = ~small
    if big.any():
        z = (n[big] + 0.5 - mu[big]) / np.sqrt(mu[big])
        out[big] = np.where(n[big] < 0, 0.0, 0.5 * (1 + _erf(z / math.sqrt(2))))
    return out


def _normal_quantile(p: float) -> float:
    lo, hi = -10.0, 10.0
    for _ in range(80):
        mid = (lo + hi) / 2
        if 0.5 * (1 + math.erf(mid / math.sqrt(2))) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def poisson_quantile(mu: np.ndarray, confidence: float, *, cap: np.ndarray | None = None) -> np.ndarray:
    """Returns the smallest n with P(N <= n) >= confidence, N ~ Poisson(mu), elementwise (float;
    inf where it exceeds `cap`, when given — the caller only needs to know it is above the cap).

    Exact for mu <= 30 (iterating k over a shrinking set of unfinished rows, so the work is
    proportional to the quantiles, not to a fixed k range); normal approximation above.
    """
    mu = np.asarray(mu, dtype=np.float64)
    q = np.full(mu.shape, np.inf)
    small = np.flatnonzero(mu <= 30)
    big = np.flatnonzero(mu > 30)
    if big.size:
        z = _normal_quantile(confidence)
        q[big] = np.maximum(0.0, np.ceil(mu[big] + z * np.sqrt(mu[big]) - 0.5))
    if small.size:
        idx = small
        m = mu[idx]
        term = np.exp(-m)
        cdf = term.copy()
        limit = cap[idx] if cap is not None else np.full(idx.shape, 200.0)
        k = 0
        while idx.size:
            done = cdf >= confidence
            q[idx[done]] = k
            keep = ~done & (limit > k) & (k < 200)
            idx, m, term, cdf, limit = idx[keep], m[keep], term[keep], cdf[keep], limit[keep]
            k += 1
            term = term * m / k
            cdf = cdf + term
    if cap is not None:
        q = np.where(q > cap, np.inf, q)
    return q
