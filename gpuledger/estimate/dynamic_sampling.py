"""DAPO's dynamic sampling (group filtering) in an RL step: the one home of its spec words, their checks and
the expected number of generation batches a step takes (issue 40, docs/rl.md "Dynamic sampling").

What it is (DAPO, Yu et al. 2025, arXiv:2503.14476, section 3.2 "Dynamic Sampling"; verl's DAPO recipe,
`recipe/dapo/dapo_ray_trainer.py`, config `algorithm.filter_groups.{enable, metric, max_num_gen_batches}` and
`data.gen_batch_size`): a group whose G rewards are all equal (every response correct, or every one wrong) has
zero advantage and no gradient, so it is dropped; the trainer keeps generating batches of `gen_batch_size`
prompts x G responses, scoring each and keeping the groups whose reward varies, until it holds
`train_batch_size` informative groups (verl's `prompts_per_step`), then trims to exactly that many and trains.
verl stops the run (`ValueError: ... Generated too many`) when a step still lacks groups after
`max_num_gen_batches` generation batches (0: no cap, verl's default).

What it costs, as verl's trainer runs it: every generation batch is a rollout (a `generate_sequences` call,
which in verl's colocated hybrid engine also reshards the weights into vLLM) and is scored (the reward); the
old-policy and reference log-probs, the critic and the update run on the kept `train_batch_size` groups only,
after the filter. So rollout and reward scale by the generation batches a step takes, and colocated the sync
too; the trainer's phases do not.

A group is degenerate with probability p^G + (1 - p)^G at per-prompt pass rate p (each response correct with
probability p, independently); kept: q = 1 - p^G - (1 - p)^G. One pass rate for every prompt understates the
filter on a data set of mixed difficulty (by convexity the mean of p^G + (1-p)^G over prompts is at least its
value at the mean p), so `kept_fraction` (q measured, e.g. from a run's `train/num_gen_batches`) is the better
input when known. The generation batches K a step takes: the first k with Binomial(k x gen_batch_size, q) >=
train_batch_size; E[K] = sum over k >= 0 of P(K > k), capped at `max_num_gen_batches`.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field, model_validator

#: Above this many trials a binomial's CDF is taken from its normal approximation (continuity-corrected);
#: at or below it, summed exactly in log space.
EXACT_BINOMIAL_MAX_N = 200_000
#: The most generation batches summed for an uncapped step (E[K] converges long before: P(K > k) falls
#: geometrically once k x gen_batch_size x q passes the prompts needed).
MAX_BATCHES_SUMMED = 100_000


class DynamicSampling(BaseModel):
    """`train.dynamic_sampling` of a GRPO spec (and `Workload.dynamic_sampling`): DAPO's group filter with the
    expected share of groups kept, from a per-prompt pass rate or stated directly."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pass_rate: float | None = Field(None, gt=0, lt=1, description=(
        "expected share of a prompt's responses the reward marks correct (0 < p < 1): a group of G is dropped "
        "with probability p^G + (1-p)^G; give this or kept_fraction"))
    kept_fraction: float | None = Field(None, gt=0, le=1, description=(
        "share of generated groups kept (not all-equal rewards), measured or expected; give this or pass_rate"))
    gen_batch_size: int | None = Field(None, ge=1, le=1_000_000, description=(
        "prompts per generation batch (verl data.gen_batch_size); null = prompts_per_step (verl's "
        "train_batch_size)"))
    max_num_gen_batches: int = Field(0, ge=0, le=10_000, description=(
        "generation batches a step may take before verl stops the run (algorithm.filter_groups."
        "max_num_gen_batches); 0 = no cap"))

    @model_validator(mode="after")
    def _one_rate(self) -> DynamicSampling:
        if (self.pass_rate is None) == (self.kept_fraction is None):
            raise ValueError("give one of pass_rate (per-prompt share of correct responses, 0 < p < 1) or "
                             "kept_fraction (share of groups kept, 0 < q <= 1)"
                             + (", not both" if self.pass_rate is not None else ""))
        return self


def parse_option(text: str) -> dict[str, str]:
    """Returns the fields of `estimate --dynamic-sampling pass_rate=0.7,gen_batch_size=512,max_num_gen_batches=10`
    (checked by `DynamicSampling` itself); ValueError naming a malformed item."""
    out: dict[str, str] = {}
    for item in (part.strip() for part in text.split(",")):
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise ValueError(f"{item!r}: expected KEY=VALUE, KEY one of {', '.join(DynamicSampling.model_fields)}")
        out[key.strip()] = value.strip()
    return out


def degenerate_fraction(pass_rate: float, group_size: int) -> float:
    """Returns the probability that a group of `group_size` responses at pass rate p is all correct or all
    wrong: p^G + (1 - p)^G."""
    return pass_rate ** group_size + (1.0 - pass_rate) ** group_size


def kept_fraction(ds: DynamicSampling, group_size: int) -> float:
    """Returns the share of groups the filter keeps: `kept_fraction`, else 1 - p^G - (1-p)^G."""
    if ds.kept_fraction is not None:
        return float(ds.kept_fraction)
    return 1.0 - degenerate_fraction(float(ds.pass_rate), group_size)


def _binom_below(n: int, q: float, t: int) -> float:
    """P(Binomial(n, q) < t)."""
    if t <= 0:
        return 0.0
    if t > n:
        return 1.0
    if q >= 1.0:
        return 0.0
    if n > EXACT_BINOMIAL_MAX_N:
        sd = math.sqrt(n * q * (1 - q))
        return 0.5 * math.erfc(-((t - 0.5) - n * q) / (sd * math.sqrt(2)))
    lq, l1q, lgn = math.log(q), math.log1p(-q), math.lgamma(n + 1)
    logs = [lgn - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * lq + (n - i) * l1q for i in range(t)]
    top = max(logs)
    return min(1.0, math.exp(top) * sum(math.exp(v - top) for v in logs))


def generation_batches(kept: float, needed: int, per_batch: int, cap: int = 0) -> tuple[float, float]:
    """Returns (E[min(K, cap)], P(K > cap)) for the generation batches K a step takes: batches of `per_batch`
    prompts, each group kept with probability `kept`, until `needed` are kept (cap 0: no cap; P then 0).
    ValueError when `kept` is not in (0, 1]."""
    if not 0.0 < kept <= 1.0:
        raise ValueError(f"dynamic sampling keeps {kept:.3g} of the groups: it must be above 0 (no step could fill)")
    limit = cap if cap > 0 else MAX_BATCHES_SUMMED
    mean, over = 1.0, 1.0  # P(K > 0) = 1
    for k in range(1, limit + 1):
        over = _binom_below(k * per_batch, kept, needed)
        if k < limit:
            mean += over
        if over < 1e-12:
            over = 0.0
            break
    return mean, (over if cap > 0 else 0.0)


def rollout_note(ds: DynamicSampling, group_size: int, needed: int, time_factor: float, generated: float,
                 batches: float, per_batch: int, over_cap: float) -> str:
    """Returns the plan's sentence for the rollout's scaling, e.g. "rollout x2.00 for dynamic sampling: 38% of
    groups expected degenerate at pass rate 0.7, G=8 (2.00 generation batches of 64 prompts for 64 kept, 2.00x the
    prompts generated and scored; no cap)"."""
    q = kept_fraction(ds, group_size)
    why = (f"{1 - q:.1%} of groups expected degenerate at pass rate {ds.pass_rate:g}, G={group_size}"
           if ds.pass_rate is not None else f"{q:.1%} of groups kept (stated), G={group_size}")
    cap = ds.max_num_gen_batches
    capped = (f"cap {cap} batches: a step needs more with probability {over_cap:.1%} (verl then stops the run)"
              if cap else "no cap")
    return (f"rollout x{time_factor:.2f} for dynamic sampling: {why} ({batches:.2f} generation batches of "
            f"{per_batch} prompts for {needed} kept, {generated:.2f}x the prompts generated and scored; {capped})")


def step_batches(s) -> dict | None:
    """Returns what DAPO's group filter makes of the RL step of `s` (a `gpuledger.estimate.rl.RLSetup`): its generation
    batches' size and expected count and the generated prompts over the kept (rl_step adds the rollout's factor
    and the plan's sentence); None without it. ValueError when a step would need more batches than the cap allows at least
    half the time (verl stops the run there)."""
    ds = s.dynamic_sampling
    if ds is None:
        return None
    per = int(ds.gen_batch_size or s.prompts_per_step)
    q = kept_fraction(ds, s.group_size)
    batches, over = generation_batches(q, s.prompts_per_step, per, ds.max_num_gen_batches)
    if ds.max_num_gen_batches and over >= 0.5:
        raise ValueError(f"dynamic_sampling: keeping {s.prompts_per_step} of batches of {per} prompts at "
                         f"{q:.0%} kept needs more than max_num_gen_batches {ds.max_num_gen_batches} generation "
                         f"batches with probability {over:.0%} (verl then stops the run): raise the cap or "
                         "gen_batch_size")
    return {"kept_fraction": round(q, 4), "gen_batch_size": per, "generation_batches": round(batches, 4),
            "generated_over_kept": round(batches * per / s.prompts_per_step, 4),
            "max_num_gen_batches": ds.max_num_gen_batches, "p_over_cap": round(over, 4),
            **({"pass_rate": ds.pass_rate} if ds.pass_rate is not None else {})}
