"""Successive halving whose decisions do not depend on which trial reports first (an Optuna pruner).

Optuna's `SuccessiveHalvingPruner` (asynchronous successive halving) judges a trial at a rung against
the values other trials happened to report there before it: the first trials at a rung go on when
they are the best so far, a trial reporting later faces more competitors. With two slots, which trial
reaches a rung first is a matter of timing, so the same grid on the same machine kept the best point
in some runs and pruned it in others (docs/pools.md, "Pruning that keeps the recipe").

`RungPruner` compares trials at equal steps and decides only what every arrival order agrees on: the
outcome of synchronous successive halving over all `n_trials` trials of the bracket (the rungs at
r_i = min_steps * reduction_factor**i values; at rung i the best keep_i = max(1, n // eta**(i+1)) of
the trials that survived rungs < i go on). A trial T reporting at step k is pruned at rung i <= k when
at least keep_i trials *confirmed* to have survived every earlier rung have a strictly better value at
r_i than T. A trial X is confirmed past rung i when it is confirmed to rung i and, counting every trial
still possibly at rung i (not yet eliminated, not ended short of it, or not yet started) as better when
its value there is not known yet, fewer than keep_i are better. Both tests only grow truer as values
arrive, so nothing is pruned that synchronous successive halving keeps, and a trial that it drops is
pruned at its first report after enough better values are known (or runs to its end if they come too
late: more seconds, the same recipe). Trials that never report a value at a rung (failed, or ended)
leave it. Ties keep both.

The value at step k is the k-th value the trial reported (`gpuledger.search.study.AdaptiveSearch.report`),
so a batch of values reported at once is judged value by value, not on its last one.
"""

from __future__ import annotations

import bisect
from typing import Any

#: The user attribute that names a study trial's gpuledger trial (a repeated ask is the same trial).
TRIAL_ID_ATTR = "gpuledger_trial_id"
#: `RungPruner.fate`: dropped at a rung, confirmed past every rung reached, or not decided yet
PRUNED_AT, CONFIRMED, UNDECIDED = "pruned", "confirmed", "undecided"


def rung_steps(min_steps: int, reduction_factor: int, up_to: int) -> list[int]:
    """Returns the rung steps min_steps * reduction_factor**i that are <= up_to."""
    out, r = [], int(min_steps)
    while r <= up_to:
        out.append(r)
        r *= int(reduction_factor)
    return out


def keep_at(n_trials: int, reduction_factor: int, rung: int) -> int:
    """Returns how many trials go on from rung `rung` (0-based) of a bracket of `n_trials`."""
    return max(1, int(n_trials) // int(reduction_factor) ** (rung + 1))


class RungPruner:
    """Order-independent successive halving (see the module's docstring): an Optuna pruner (Optuna calls
    `prune(study, trial)`; no base class, so that importing this module does not import Optuna)."""

    def __init__(self, min_steps: int, reduction_factor: int, n_trials: int):
        if min_steps < 1 or reduction_factor < 2 or n_trials < 1:
            raise ValueError("RungPruner needs min_steps >= 1, reduction_factor >= 2 and n_trials >= 1")
        self.min_steps, self.reduction_factor, self.n_trials = int(min_steps), int(reduction_factor), int(n_trials)
        #: trial keys stopped at a rung whose fate there was undecided, to be relaunched when they survive it
        #: (their later rungs stay open: counted as a value still to come)
        self.suspended: set[Any] = set()

    def prune(self, study: Any, trial: Any) -> bool:
        """Returns True when `trial` (an Optuna FrozenTrial) is dropped at one of the rungs it reached."""
        return self.fate(study, trial)[0] == PRUNED_AT

    def fate(self, study: Any, trial: Any) -> tuple[str, int]:
        """Returns `trial`'s fate at the rungs it reached: (PRUNED_AT, rung index) when dropped there,
        (CONFIRMED, n) when confirmed past every one of the n rungs it reached (every arrival order keeps
        it so far), else (UNDECIDED, i): not dropped, but its place at rung i depends on values not known yet
        (trials running, suspended or not started). (CONFIRMED, 0): no rung reached."""
        from optuna.study import StudyDirection

        step = trial.last_step
        if step is None:
            return CONFIRMED, 0
        rungs = rung_steps(self.min_steps, self.reduction_factor, step)
        if not rungs:
            return CONFIRMED, 0
        sign = 1.0 if study.direction == StudyDirection.MINIMIZE else -1.0
        me = _key(trial)
        from optuna.trial import TrialState

        others: dict[Any, Any] = {}
        for t in study.get_trials(deepcopy=False):
            if t.state == TrialState.FAIL and not t.intermediate_values:
                continue  # an excluded or repeated ask: never ran here
            k = _key(t)
            if k == me:
                continue
            prev = others.get(k)
            if prev is None or t.number > prev.number:  # a re-asked trial: its latest attempt
                others[k] = t
        trials = [trial, *others.values()]
        unstarted = max(0, self.n_trials - len(trials))
        confirmed = list(range(len(trials)))  # indices into trials; everyone is at rung 0
        possible = list(range(len(trials)))
        undecided_at: int | None = None
        for i, r in enumerate(rungs):
            keep = keep_at(self.n_trials, self.reduction_factor, i)
            values = {j: trials[j].intermediate_values.get(r) for j in possible}
            known_conf = sorted(sign * v for j in confirmed if (v := values.get(j)) is not None)
            mine = values.get(0)
            if mine is None:
                break
            if bisect.bisect_left(known_conf, sign * mine) >= keep:
                return PRUNED_AT, i
            known_poss = sorted(sign * v for v in values.values() if v is not None)
            unknown = unstarted + sum(1 for j in possible if values[j] is None and self._may_reach(trials[j], r))
            nxt_conf = [j for j in confirmed if values.get(j) is not None
                        and bisect.bisect_left(known_poss, sign * values[j]) + unknown < keep]
            nxt_poss = [j for j in possible
                        if (values[j] is None and self._may_reach(trials[j], r))
                        or (values[j] is not None and bisect.bisect_left(known_conf, sign * values[j]) < keep)]
            if undecided_at is None and 0 not in nxt_conf:
                undecided_at = i
            confirmed, possible = nxt_conf, nxt_poss
        return (UNDECIDED, undecided_at) if undecided_at is not None else (CONFIRMED, len(rungs))

    def _may_reach(self, t: Any, step: int) -> bool:
        """True when a trial without a value at `step` may still report one: it is running or waiting, or
        it was suspended (`suspended`: stopped at a rung to be relaunched if it survives it)."""
        return _may_reach(t, step) or _key(t) in self.suspended


def _key(t: Any) -> Any:
    return t.user_attrs.get(TRIAL_ID_ATTR, t.number)


def _may_reach(t: Any, step: int) -> bool:
    """True when a trial without a value at `step` may still report one (it is running or waiting)."""
    from optuna.trial import TrialState

    return t.state in (TrialState.RUNNING, TrialState.WAITING)


def synchronous_outcome(values: dict[str, list[float]], min_steps: int, reduction_factor: int, goal: str,
                        n_trials: int | None = None) -> dict[str, int | None]:
    """Returns, per trial, the rung step at which synchronous successive halving drops it (None: it
    runs to its end): the outcome `RungPruner` never contradicts, whatever the arrival order.
    `values`: each trial's objective values in the order reported (step k = the k-th)."""
    n = n_trials or len(values)
    sign = 1.0 if goal == "minimize" else -1.0
    out: dict[str, int | None] = {t: None for t in values}
    alive = list(values)
    longest = max((len(v) for v in values.values()), default=0)
    for i, r in enumerate(rung_steps(min_steps, reduction_factor, longest)):
        keep = keep_at(n, reduction_factor, i)
        at = [t for t in alive if len(values[t]) >= r]
        ranked = sorted(sign * values[t][r - 1] for t in at)
        for t in at:
            if bisect.bisect_left(ranked, sign * values[t][r - 1]) >= keep:
                out[t] = r
        alive = [t for t in at if out[t] is None]
    return out


def make_pruner(kind: str, min_steps: int, reduction_factor: int, n_trials: int) -> Any:
    """Returns the pruner the runtime's study uses: `rungs` (`gpuledger.search.rungs.RungPruner`, decisions
    independent of arrival order) or `asha` (Optuna's asynchronous `SuccessiveHalvingPruner`)."""
    import optuna

    if kind == "rungs":
        return RungPruner(min_steps, reduction_factor, n_trials)
    if kind == "asha":
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=min_steps, reduction_factor=reduction_factor,
                                                      min_early_stopping_rate=0)
    raise ValueError(f"pruner must be rungs or asha (got {kind!r})")
