"""Suspension at undecided rungs: the one rule the sweep runtime (`gpuledger.search.study.AdaptiveSearch`) and
the replay (`gpuledger.search.asha_replay.simulate_asha(suspend=True)`) both follow.

With `RungPruner` (order-independent successive halving) a trial that reaches rung i while points of the
bracket have not started can be neither dropped nor confirmed there (any of them may be better), so without
suspension it runs on, paid, until enough values arrive. Suspension frees its slot instead:

- `should_suspend`: a trial at its k-th value stops there when k is a rung step, it is not its last value,
  some point is still to start, `suspend_pays` says waiting is expected to cost less than running on, and
  its fate there (`RungPruner.fate`) is undecided;
- `relaunch_action`: a suspended trial is relaunched (`RELAUNCH`) once the rung confirms it, or when no point
  is left to start while it is still undecided; dropped for good (`DROP`) when the rung drops it; else it
  waits (`WAIT`). While suspended it counts, at its later rungs, as a value still to come
  (`RungPruner.suspended`), so no other trial is confirmed past them in its absence.

A relaunched trial starts again from its first step: neither launcher resumes a checkpoint (the demo trainer
and the task scripts write none that a new attempt is handed), so its first values are paid again, and
`suspend_pays` counts that cost. Each attempt is billed on its own (the suspended one's record says
`cancelled`). Pure: nothing is read or written.

`suspends(strategy, pruning)` is the one place that says whether a sweep suspends (the runtime's study, the
planner's replays and checks, the report's replays, the replay harness's default all ask it): `strategy:
asha` (the rung pruner in launch order; tpe with `pruning:` does not) with `search.pruning.suspend`, whose
default (`spec.models.Pruning`) applies when the spec or the stored spec says nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

#: `relaunch_action`'s answers
RELAUNCH, DROP, WAIT = "relaunch", "drop", "wait"


def suspends(strategy: str | None, pruning: Any = None) -> bool:
    """True when a sweep of `strategy` with `search.pruning` = `pruning` suspends trials at undecided rungs:
    only `asha`, and then `pruning.suspend` (`pruning`: a `spec.models.Pruning`, its stored JSON as a mapping,
    or None; a missing or null `suspend`: the field's default)."""
    if strategy != "asha":
        return False
    value = pruning.get("suspend") if isinstance(pruning, Mapping) else getattr(pruning, "suspend", None)
    if value is None:
        from gpuledger.spec.models import Pruning

        value = Pruning.model_fields["suspend"].default
    return bool(value)


def spec_suspends(spec: Any) -> bool:
    """`suspends` of a spec's `search` (False for a spec without one)."""
    search = getattr(spec, "search", None)
    return suspends(getattr(search, "strategy", None), getattr(search, "pruning", None))


def seconds_per_value(times_s: Sequence[float], k: int) -> float:
    """The trial's own seconds per value over its first k values (`times_s`: seconds from its start at which
    each was reported; with one value, the time to it)."""
    if k < 1 or not times_s:
        return 0.0
    return (times_s[k - 1] - times_s[0]) / (k - 1) if k > 1 else float(times_s[0])


def suspend_pays(k: int, elapsed_s: float, times_s: Sequence[float], n_values: int | None, min_steps: int,
                 reduction_factor: int, n_trials: int, left_s: float | None = None) -> bool:
    """True when stopping a trial at its rung (its k-th value, `elapsed_s` into its run) until the rung is
    decided is expected to cost less than running on undecided: a trial survives a rung with probability
    p = keep_i / keep_(i-1) (the bracket's share, about 1 / reduction_factor); suspended, a survivor pays
    its run so far again (p × elapsed_s); run on, a trial the rung drops pays the seconds to its next
    rung, or to its end, (1 − p) × that, at its own seconds per value so far.

    `n_values`: the values a full trial reports; None (not known: no measured curves, no
    `search.pruning.values_per_trial`): the next rung is taken to exist, and the seconds to it are capped by
    `left_s`, the plan's estimate of the trial's seconds left, when given."""
    from gpuledger.search.rungs import keep_at, rung_steps

    rungs = rung_steps(min_steps, reduction_factor, n_values if n_values is not None else k * int(reduction_factor))
    if k not in rungs:
        return False
    i = rungs.index(k)
    before = n_trials if i == 0 else keep_at(n_trials, reduction_factor, i - 1)
    p = min(1.0, keep_at(n_trials, reduction_factor, i) / max(1, before))
    nxt = rungs[i + 1] if i + 1 < len(rungs) else (n_values if n_values is not None else k * int(reduction_factor))
    run_on_s = seconds_per_value(times_s, k) * (nxt - k)
    if n_values is None and left_s is not None:
        run_on_s = min(run_on_s, max(0.0, float(left_s)))
    return p * elapsed_s < (1.0 - p) * run_on_s


def should_suspend(k: int, *, n_values: int | None, points_left: bool, elapsed_s: float, times_s: Sequence[float],
                   min_steps: int, reduction_factor: int, n_trials: int, fate: Callable[[], str],
                   left_s: float | None = None) -> bool:
    """True when the trial at its k-th value is suspended (the module's docstring). `fate()`: its
    `RungPruner.fate(...)[0]` now (asked last: it reads the study)."""
    from gpuledger.search.rungs import UNDECIDED, rung_steps

    if not points_left or (n_values is not None and k >= n_values):
        return False
    if k not in rung_steps(min_steps, reduction_factor, k):
        return False
    if not suspend_pays(k, elapsed_s, times_s, n_values, min_steps, reduction_factor, n_trials, left_s=left_s):
        return False
    return fate() == UNDECIDED


def relaunch_action(fate: str, points_left: bool) -> str:
    """What to do with a suspended trial whose fate at its rungs is `fate` (`RungPruner.fate(...)[0]`):
    RELAUNCH when confirmed (or undecided with no point left to start), DROP when the rung dropped it, else
    WAIT."""
    from gpuledger.search.rungs import CONFIRMED, PRUNED_AT

    if fate == PRUNED_AT:
        return DROP
    if fate == CONFIRMED or not points_left:
        return RELAUNCH
    return WAIT
