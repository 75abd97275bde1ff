"""Request-length mixes: `traffic.prompt_tokens` / `output_tokens` as a number or a distribution.

A distribution is a mean with a spread (`cv` = standard deviation / mean, drawn log-normally, the
usual shape of chat lengths: positive, right-skewed), a histogram of (tokens, weight) pairs, or a
named dataset with its published moments (`DATASETS`). The simulation draws each request's lengths
from the mix (`LengthMix.sample`, deterministic per seed), so long prompts in a mix interrupt the
decode of the others through chunked prefill, as in a real service.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from gpuledger.spec.datasets import DATASET_SOURCE, DATASETS

#: Draws are clipped to [1, CLIP_MULTIPLE × mean] so one draw cannot exceed any KV cache.
CLIP_MULTIPLE = 8.0


@dataclass(frozen=True)
class LengthMix:
    """A distribution of one request length (prompt or output tokens)."""

    mean: float
    cv: float = 0.0
    histogram: tuple[tuple[int, float], ...] | None = None
    source: str = "spec"

    def sample(self, n: int, seed: int | list[int]) -> np.ndarray:
        """Returns `n` integer lengths (>= 1) drawn with `numpy.random.default_rng(seed)`."""
        rng = np.random.default_rng(seed)
        if self.histogram:
            tokens = np.array([t for t, _ in self.histogram], dtype=np.int64)
            w = np.array([w for _, w in self.histogram], dtype=float)
            return rng.choice(tokens, size=n, p=w / w.sum())
        if self.cv <= 0:
            return np.full(n, max(1, round(self.mean)), dtype=np.int64)
        sigma = math.sqrt(math.log1p(self.cv**2))
        mu = math.log(self.mean) - sigma**2 / 2  # so the draws' mean is self.mean
        x = rng.lognormal(mu, sigma, n)
        return np.clip(np.rint(x), 1, self.longest).astype(np.int64)

    @property
    def longest(self) -> int:
        """Returns the longest length a draw can take (the histogram's largest, else the clip)."""
        if self.histogram:
            return max(t for t, _ in self.histogram)
        return max(1, round(self.mean * (CLIP_MULTIPLE if self.cv > 0 else 1.0)))

    def describe(self) -> str:
        if self.histogram:
            return f"histogram of {len(self.histogram)} lengths, mean {self.mean:,.0f} ({self.source})"
        if self.cv > 0:
            return f"mean {self.mean:,.0f}, cv {self.cv:g}, log-normal ({self.source})"
        return f"{self.mean:,.0f} each ({self.source})"


def mix_from(dist, kind: str) -> LengthMix | None:
    """Returns the `LengthMix` of a spec's length distribution (`gpuledger.spec.capacity_models.LengthDist`),
    or None for a plain number. `kind`: "prompt" or "output" (a dataset's moments)."""
    if dist is None:
        return None
    if dist.dataset:
        mean, cv = DATASETS[dist.dataset][kind]
        return LengthMix(mean=mean, cv=dist.cv if dist.cv is not None else cv,
                         source=f"{dist.dataset}: {DATASET_SOURCE}")
    if dist.histogram:
        pairs = tuple((int(t), float(w)) for t, w in dist.histogram)
        mean = sum(t * w for t, w in pairs) / sum(w for _, w in pairs)
        return LengthMix(mean=mean, histogram=pairs, source="spec histogram")
    return LengthMix(mean=float(dist.mean), cv=float(dist.cv or 0.0), source="spec mean and cv")


def mixes(spec) -> tuple[LengthMix | None, LengthMix | None]:
    """Returns the (prompt, output) length mixes of the spec's traffic (None: a plain number)."""
    t = spec.traffic
    return (mix_from(getattr(t, "prompt_tokens_dist", None), "prompt"),
            mix_from(getattr(t, "output_tokens_dist", None), "output"))
