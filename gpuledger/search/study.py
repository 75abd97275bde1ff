"""One sweep's Optuna study: which trial to launch next, and whether a running one is pruned.

The candidates are the sweep's planned trials, each with a plan row, a price and a stable trial id:
over lists, every point of the lists' grid; with a range (`{low, high, log, type}`), the `n_trials`
points `gpuledger.search.space.sample_points` draws with the seed. The suggest calls are
`gpuledger.search.space.suggest`'s (lists categorical, ranges numeric, log scale where `log`).

- `asha`: every point of the grid once, in an order shuffled by `search.seed`; with a range, the
  drawn points in the order drawn, so the plan prices exactly what runs (each next point is
  enqueued in the study, `Study.enqueue_trial`, then asked; Optuna's `GridSampler` is not used: in
  ask/tell mode it calls `Study.stop`, which raises outside `optimize`), pruned by
  `gpuledger.search.rungs.RungPruner`: a trial's resource is the number of objective values it has
  reported (k = 1, 2, ...); at rung i (k = min_steps * reduction_factor**i) trials are compared at
  equal steps and a trial is pruned only once the outcome of synchronous successive halving over the
  bracket's n_trials says so (keep the best n // reduction_factor**(i+1) at rung i), whatever order
  the values arrive in. Trials never wait for a rung to fill, so `max_parallel` slots stay busy: a trial
  whose fate there is not decided yet runs on or, while points are still to start and waiting pays, is
  suspended (its attempt stopped, its slot freed) and relaunched from its start once the rung confirms
  it, or dropped when the rung drops it (`gpuledger.search.suspension`, the replay's rule too). Optuna's
  asynchronous `SuccessiveHalvingPruner` (ASHA, Li et al. 2020) judged a trial against whatever had
  reached its rung first, so timing decided the recipe.
- `tpe`: Optuna's `TPESampler(seed, multivariate, constant_liar=True)`: a trial still running counts
  as if it had the worst value seen, so parallel slots do not ask for the same region twice (the
  constant liar of Ginsbourger et al.). The first `n_startup` trials are drawn at random. A point
  TPE asks for again gets the value it already has (told at once) and TPE is asked again. Pruning
  only when `search.pruning` is set (the same pruner as asha). With a range TPE asks points no plan
  foresaw: `ask` returns them as new trials (`Trial.index` = the study's trial number, the id the
  expansion's hash of the params), and the runtime plans and registers each before launching it
  (`gpuledger.runtime.admit`).

The study is Optuna's own `JournalStorage` in `studies/<sweep_id>.journal` beside the warehouse
file: a killed sweep's next run opens the same study (trials it left running are told failed, since
the sweep's lease guarantees nobody else runs them), and the trials already asked are never asked
again (ids are the hash of the params, so they stay the same). `n_trials` (default: every
candidate; required with a range) counts trials asked over all runs of the sweep.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuledger.search.rungs import TRIAL_ID_ATTR, RungPruner, make_pruner
from gpuledger.search.space import suggest
from gpuledger.search.suspension import DROP, WAIT, relaunch_action, should_suspend, spec_suspends
from gpuledger.spec.exclusions import excluded
from gpuledger.spec.expand import has_ranges, trial_for

#: The folder (beside the warehouse file) that holds the studies.
STUDY_DIR = "studies"
#: The user attribute of a study trial stopped at an undecided rung to be relaunched (its values so far).
SUSPENDED_ATTR = "gpuledger_suspended"
#: How many times one ask may land on a point already asked before the search counts as exhausted.
MAX_REPEATS = 64


def is_adaptive(spec: Any) -> bool:
    """True when the spec's strategy asks an Optuna study for its trials (tpe, asha)."""
    return getattr(getattr(spec, "search", None), "strategy", None) in ("tpe", "asha")


def prunes(spec: Any) -> bool:
    """True when the sweep's running trials can be pruned: asha always, tpe with `search.pruning`."""
    search = getattr(spec, "search", None)
    strategy = getattr(search, "strategy", None)
    return strategy == "asha" or (strategy == "tpe" and getattr(search, "pruning", None) is not None)


def study_path_for(sweep_id: str) -> Path:
    """Returns the study's journal file: `studies/SWEEP_ID.journal` beside the warehouse file
    (`gpuledger.settings.Settings.studies_dir`)."""
    from gpuledger import settings

    return settings.current().studies_dir / f"{sweep_id}.journal"


def asks_new_points(spec: Any) -> bool:
    """True when the study may ask points that no plan foresaw (tpe over a range, unless its acquisition
    is ei_per_usd, which picks among the planned points): each is planned and registered when asked,
    not at the sweep's start."""
    s = getattr(spec, "search", None)
    return (getattr(s, "strategy", None) == "tpe" and getattr(s, "acquisition", "tpe") != "ei_per_usd"
            and has_ranges(spec))


def launch_order(trial_ids: list[str], seed: int, ranged: bool = False) -> list[str]:
    """asha: the order the candidates are tried in: over lists the sorted ids shuffled by `search.seed`;
    with a range the drawn points in the order drawn (`ranged`). The planner's replay
    (gpuledger.plan.pruning) uses the same order."""
    import random

    if ranged:
        return list(trial_ids)
    order = sorted(trial_ids)
    random.Random(seed).shuffle(order)
    return order


def _key(params: dict[str, Any]) -> tuple:
    return tuple(sorted((k, repr(v)) for k, v in params.items()))


@dataclass
class AdaptiveSearch:
    """The ask/tell interface the sweep runtime uses (thread-safe: trials report from their threads)."""

    study: Any
    candidates: dict[tuple, Any]
    space: dict[str, Any]  # name -> list of values (categorical) or RandomRange (numeric)
    n_trials: int
    metric: str
    prunes: bool
    asked: set[str] = field(default_factory=set)
    live: dict[str, Any] = field(default_factory=dict)  # trial_id -> optuna Trial (asked, not told)
    reported: dict[str, int] = field(default_factory=dict)  # trial_id -> values reported so far
    path: Path | None = None
    order: list[Any] = field(default_factory=list)  # asha: the candidates in the order they are tried
    spec: Any = None  # tpe over a range: makes the trials of points no plan foresaw
    #: `search.stopping: cost`: the cost-aware rule (gpuledger.search.extrapolate.CostStopper), each trial's
    #: planned cost and the values a full trial reports (its dollars left = cost x (1 - k / values))
    stopper: Any = None
    cost_usd: dict[str, float] = field(default_factory=dict)
    values_per_trial: int | None = None
    values: dict[str, list[float]] = field(default_factory=dict)  # trial_id -> its objective values so far
    why: dict[str, tuple[str, str]] = field(default_factory=dict)  # trial_id -> (rule: rung | curve, reason)
    per_usd: bool = False  # search.acquisition: ei_per_usd (tpe over the planned candidates)
    spec_seed: int = 0
    #: suspension at undecided rungs (asha with `RungPruner`; `gpuledger.search.suspension`): trial_id ->
    #: (its candidate, its suspended study trial's storage id), in suspension order; `dropped`: suspended
    #: trials their rung dropped since the last `take_dropped` (id, why)
    suspend: bool = False
    suspended: dict[str, tuple[Any, int]] = field(default_factory=dict)
    dropped: list[tuple[str, str]] = field(default_factory=list)
    #: the plan's estimates per trial (`gpuledger.plan.model.PlannedTrial`): the prior of a trial's seconds
    #: and dollars left while no measured curve says how many values a trial reports
    planned: dict[str, Any] = field(default_factory=dict)
    started: dict[str, float] = field(default_factory=dict)  # trial_id -> monotonic start of its attempt
    times: dict[str, list[float]] = field(default_factory=dict)  # trial_id -> seconds into it of each value
    own_times: dict[str, list[float | None]] = field(default_factory=dict)  # ... on the trial's own clock (t_s)
    ended_lengths: list[int] = field(default_factory=list)  # values of the sweep's trials that ran to their end
    cands: dict[str, Any] = field(default_factory=dict)  # trial_id -> the candidate asked
    clock: Any = time.monotonic  # seconds (a replay of recorded curves passes its own)
    _skip: set[str] = field(default_factory=set)
    _lock: threading.RLock = field(default_factory=threading.RLock)

    @classmethod
    def open(cls, spec: Any, sweep_id: str, candidates: list[Any], path: Path | None = None,
             stopper: Any = None, cost_usd: dict[str, float] | None = None,
             planned: dict[str, Any] | None = None) -> AdaptiveSearch:
        """Opens (creating or resuming) the study of `sweep_id` over `candidates` (planned trials).
        `stopper`: the cost-aware rule (`search.stopping: cost`, `cost_stopper_for`); `cost_usd`: each
        trial's planned cost (its dollars left); `planned`: {trial_id: PlannedTrial}, the plan's estimates
        (cost, wall-clock and their bands; `cost_usd` defaults to their est_cost_usd)."""
        import optuna
        from optuna.storages import JournalStorage
        from optuna.storages.journal import JournalFileBackend
        from optuna.trial import TrialState

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        s = spec.search
        space: dict[str, Any] = dict(s.params)
        ranged = has_ranges(spec)
        path = path or study_path_for(sweep_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        storage = JournalStorage(JournalFileBackend(str(path)))
        # over lists at most every candidate; a tpe range asks beyond the planned (representative) points
        n_trials = s.n_trials if ranged and s.strategy == "tpe" else min(s.n_trials or len(candidates), len(candidates))
        pruning = s.pruning
        if prunes(spec) and pruning is None:  # asha without settings: the defaults
            from gpuledger.spec.models import Pruning

            pruning = Pruning()
        if pruning is not None:
            pruner: Any = make_pruner("rungs", pruning.min_steps, pruning.reduction_factor, n_trials)
        else:
            pruner = optuna.pruners.NopPruner()
        order: list[Any] = []
        if s.strategy == "asha":
            sampler: Any = optuna.samplers.RandomSampler(seed=s.seed)  # never asked: each point is enqueued
            by_id = {t.trial_id: t for t in candidates}
            order = [by_id[tid] for tid in launch_order(list(by_id), s.seed, ranged=ranged)]
        else:
            sampler = optuna.samplers.TPESampler(seed=s.seed, multivariate=True, constant_liar=True,
                                                 n_startup_trials=max(2, min(10, n_trials // 3)))
        direction = "minimize" if s.objective.goal == "minimize" else "maximize"
        study = optuna.create_study(study_name=sweep_id, storage=storage, sampler=sampler, pruner=pruner,
                                    direction=direction, load_if_exists=True)
        self = cls(study=study, candidates={_key(t.params): t for t in candidates}, space=space, n_trials=n_trials,
                   metric=s.objective.metric, prunes=pruning is not None, path=path, order=order,
                   spec=spec if asks_new_points(spec) else None, stopper=stopper, planned=dict(planned or {}),
                   cost_usd=dict(cost_usd if cost_usd is not None else
                                 {t: float(r.est_cost_usd) for t, r in (planned or {}).items() if r.est_cost_usd}))
        self.suspend = bool(order) and isinstance(pruner, RungPruner) and spec_suspends(spec)
        if s.strategy == "tpe" and getattr(s, "acquisition", "tpe") == "ei_per_usd" and candidates:
            self.per_usd, self.spec_seed = True, s.seed
        if stopper is not None and stopper.references:
            lengths = sorted(len(r) for r in stopper.references)
            self.values_per_trial = lengths[len(lengths) // 2]
        elif pruning is not None and pruning.values_per_trial:  # the spec's word, until curves are measured
            self.values_per_trial = int(pruning.values_per_trial)
        by_id = {t.trial_id: t for t in candidates}
        for ft in study.get_trials(deepcopy=False):
            tid = ft.user_attrs.get(TRIAL_ID_ATTR)
            if ft.state == TrialState.RUNNING:  # left by a killed run of this sweep (we hold its lease)
                study.tell(ft.number, state=TrialState.FAIL)
                continue
            if tid and ft.state in (TrialState.COMPLETE, TrialState.PRUNED):
                self.asked.add(tid)
                self.suspended.pop(tid, None)  # a later attempt decides
                if self.suspend and ft.user_attrs.get(SUSPENDED_ATTR) and tid in by_id:  # suspended by a killed run
                    self.suspended[tid] = (by_id[tid], ft._trial_id)
        pruner.suspended.update(self.suspended) if self.suspend else None
        return self

    # -- ask ----------------------------------------------------------------------------------

    def ask(self, skip: set[str] | None = None) -> Any | None:
        """Returns the next candidate to launch, or None when the search is done (n_trials asked,
        or the sampler keeps returning points already asked). `skip`: ids not to launch (already
        succeeded in the warehouse, or not feasible): told failed to the study, asked again."""
        from optuna.trial import TrialState

        skip = skip or set()
        with self._lock:
            self._skip = skip
            again = self._relaunch(skip)
            if again is not None:
                return again
            for _ in range(MAX_REPEATS):
                if len(self.asked) >= self.n_trials:
                    return None
                if self.order:
                    nxt = next((t for t in self.order if t.trial_id not in self.asked and t.trial_id not in self.live
                                and t.trial_id not in skip), None)
                    if nxt is None:
                        return None
                    self.study.enqueue_trial(nxt.params, skip_if_exists=False)
                elif self.per_usd:
                    nxt = self._ei_per_usd(skip)
                    if nxt is None:
                        return None
                    self.study.enqueue_trial(nxt.params, skip_if_exists=False)
                trial = self.study.ask()
                params = suggest(trial, self.space)
                cand = self.candidates.get(_key(params))
                if cand is None and self.spec is not None and not excluded(params, self.spec.search.exclude):
                    cand = trial_for(self.spec, params, trial.number)  # a point no plan foresaw (tpe range)
                if cand is None:  # excluded by search.exclude: never run
                    self.study.tell(trial, state=TrialState.FAIL)
                    continue
                tid = cand.trial_id
                if tid in self.asked or tid in self.live or tid in skip:
                    self._tell_repeat(trial, tid)
                    if tid in skip:
                        self.asked.add(tid)
                    continue
                trial.set_user_attr(TRIAL_ID_ATTR, tid)
                self.asked.add(tid)
                self._started(tid, trial, cand)
                return cand
            return None

    def _started(self, tid: str, trial: Any, cand: Any) -> None:
        self.live[tid], self.cands[tid] = trial, cand
        self.reported[tid], self.values[tid], self.times[tid], self.own_times[tid] = 0, [], [], []
        self.started[tid] = self.clock()

    def _points_left(self, skip: set[str]) -> bool:
        """True while some candidate is still to be asked for the first time (asha's order)."""
        return len(self.asked) < self.n_trials and any(
            t.trial_id not in self.asked and t.trial_id not in self.live and t.trial_id not in skip for t in self.order)

    def _relaunch(self, skip: set[str]) -> Any | None:
        """A suspended trial to launch again now (`gpuledger.search.suspension.relaunch_action`: confirmed past
        its rung, or undecided with no point left), as a new study trial of the same trial id, else None;
        the ones their rung dropped meanwhile go to `dropped`."""
        pruner = self.study.pruner
        left = self._points_left(skip)
        for tid, (cand, storage_id) in list(self.suspended.items()):
            ft = self.study._storage.get_trial(storage_id)
            fate, rung = pruner.fate(self.study, ft)
            act = relaunch_action(fate, left)
            if act == WAIT:
                continue
            del self.suspended[tid]
            pruner.suspended.discard(tid)
            if act == DROP:
                self.dropped.append((tid, f"pruned by successive halving at rung {rung + 1} while suspended there, "
                                          f"after {len(ft.intermediate_values)} value(s) of {self.metric}"))
                continue
            self.study.enqueue_trial(cand.params, skip_if_exists=False)
            trial = self.study.ask()
            suggest(trial, self.space)
            trial.set_user_attr(TRIAL_ID_ATTR, tid)
            self.why.pop(tid, None)
            self._started(tid, trial, cand)
            return cand
        return None

    def take_dropped(self) -> list[tuple[str, str]]:
        """Returns (and forgets) the suspended trials their rung dropped: (trial_id, why)."""
        with self._lock:
            out, self.dropped = self.dropped, []
            return out

    def _ei_per_usd(self, skip: set[str]) -> Any | None:
        """`search.acquisition: ei_per_usd`: the planned candidate with the most expected improvement per
        estimated dollar (`gpuledger.search.acquisition.next_point`); a running trial counts as not told."""
        from optuna.trial import TrialState

        from gpuledger.search.acquisition import next_point

        free = [t for t in self.candidates.values() if t.trial_id not in self.asked and t.trial_id not in self.live
                and t.trial_id not in skip]
        told = [(ft.params, ft.value) for ft in self.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))]
        by_id = {t.trial_id: t for t in free}
        tid = next_point([(t.trial_id, t.params, self.cost_usd.get(t.trial_id, 1.0)) for t in free], told, self.space,
                         goal="minimize" if self.study.direction.name == "MINIMIZE" else "maximize",
                         seed=self.spec_seed, n_trials=self.n_trials)
        return by_id.get(tid) if tid else None

    def _tell_repeat(self, trial: Any, tid: str) -> None:
        """A point asked again: told the value it already has, else failed (it runs, or did not finish)."""
        from optuna.trial import TrialState

        for ft in self.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
            if ft.user_attrs.get(TRIAL_ID_ATTR) == tid and ft.value is not None:
                self.study.tell(trial, ft.value)
                return
        self.study.tell(trial, state=TrialState.FAIL)

    # -- intermediate values and pruning ------------------------------------------------------

    def report(self, trial_id: str, values: list[float], times_s: list[Any] | None = None) -> bool:
        """Reports the trial's objective values seen since the last call (in order); returns True
        when the pruner stops the trial. `times_s`: each value's time on the trial's own clock (the
        metric point's `t_s`: seconds since its start), None where not known; the trial's pace per value
        is taken from them when every value has one (the runtime's arrival times carry the launcher's
        polling jitter), the seconds it has run from the runtime's clock (start-up included: a relaunch
        pays it again), at least its own clock's."""
        with self._lock:
            trial = self.live.get(trial_id)
            if trial is None or not values:
                return False
            mine = self.values.setdefault(trial_id, [])
            now = self.clock()
            at = now - self.started.get(trial_id, now)
            own = self.own_times.setdefault(trial_id, [])
            for i, v in enumerate(values):
                self.reported[trial_id] += 1
                mine.append(float(v))
                self.times.setdefault(trial_id, []).append(at)
                t = times_s[i] if times_s is not None and i < len(times_s) else None
                own.append(float(t) if isinstance(t, int | float) and not isinstance(t, bool) else None)
                trial.report(float(v), step=self.reported[trial_id])
            if self.prunes and trial.should_prune():
                self.why[trial_id] = ("rung", f"pruned by successive halving after {len(mine)} value(s) of "
                                      f"{self.metric} (last {mine[-1]:.4g})")
                return True
            if self._suspends(trial_id, trial, len(mine)):
                return True
            return self._curve_stops(trial_id, mine)

    def full_values(self) -> tuple[int | None, str]:
        """The values a full trial reports, and from where: the measured curves' median or the spec's
        `search.pruning.values_per_trial`, else the median of this sweep's trials that ran to their end,
        else (None, ""): not known yet."""
        if self.values_per_trial:
            return self.values_per_trial, "measured curves or search.pruning.values_per_trial"
        if self.ended_lengths:
            lengths = sorted(self.ended_lengths)
            return lengths[len(lengths) // 2], f"this sweep's {len(lengths)} trial(s) that ran to their end"
        return None, ""

    def _seconds_left(self, trial_id: str, elapsed_s: float, col: str = "est_wall_s") -> float | None:
        row = self.planned.get(trial_id)
        wall = getattr(row, col, None) if row is not None else None
        return max(0.0, float(wall) - elapsed_s) if wall else None

    def _suspends(self, trial_id: str, trial: Any, k: int) -> bool:
        """Suspension at an undecided rung (`gpuledger.search.suspension.should_suspend`): True when the trial
        stops now, to be relaunched once its rung is decided (`why` says so; `tell_pruned` suspends it)."""
        if not self.suspend:
            return False
        n_values, _ = self.full_values()
        ts = self.times.get(trial_id, [])
        elapsed = ts[-1] if ts else 0.0
        own = self.own_times.get(trial_id, [])
        pace = own if own and len(own) == len(ts) and all(t is not None for t in own) else ts
        elapsed = max(elapsed, pace[-1] if pace else 0.0)  # it has run at least what its own clock says
        pruner = self.study.pruner
        if not should_suspend(k, n_values=n_values, points_left=self._points_left(self._skip), elapsed_s=elapsed,
                              times_s=pace, min_steps=pruner.min_steps, reduction_factor=pruner.reduction_factor,
                              n_trials=pruner.n_trials, left_s=self._seconds_left(trial_id, elapsed),
                              fate=lambda: pruner.fate(self.study, self.study._storage.get_trial(trial._trial_id))[0]):
            return False
        self.why[trial_id] = ("suspend", f"suspended at its rung after {k} value(s) of {self.metric}: its place "
                              "there waits on points not started yet; relaunched from its start once the rung is "
                              "decided (the launcher resumes no checkpoint)")
        return True

    def usd_left(self, trial_id: str, k: int) -> tuple[float, str] | None:
        """The trial's dollars left after k values, and a note on their source: its planned cost × (1 − k /
        values per full trial) when that is known (`full_values`), else the prior from the plan's estimate:
        its planned $/s × the estimated seconds left, taken at the P10 wall-clock (the low end of the band,
        so the rule stops no sooner than the estimate allows) with P50 and P90 beside. None: not known."""
        cost = self.cost_usd.get(trial_id)
        if cost is None:
            return None
        n_values, where = self.full_values()
        if n_values:
            return cost * max(0.0, 1.0 - k / n_values), "" if self.values_per_trial else f" (values per trial: {where})"
        row = self.planned.get(trial_id)
        wall = float(getattr(row, "est_wall_s", None) or 0.0)
        ts = self.times.get(trial_id, [])
        if wall <= 0 or not ts:
            return None
        rate = cost / wall
        lo, mid, hi = (self._seconds_left(trial_id, ts[-1], c) for c in ("est_wall_s_p10", "est_wall_s", "est_wall_s_p90"))
        lo = mid if lo is None else lo
        note = (f"; no measured curves of this kind: dollars left from the plan's estimate, ${rate * lo:.4g} at its "
                f"P10 wall-clock (P50 ${rate * mid:.4g}" + (f", P90 ${rate * hi:.4g}" if hi is not None else "") + ")")
        return rate * lo, note

    def _curve_stops(self, trial_id: str, mine: list[float]) -> bool:
        """`search.stopping: cost`: True when the trial's forecast is worth less than its dollars left
        (`usd_left`: measured or, in a fresh project, the plan's estimate; the reason says which)."""
        left = self.usd_left(trial_id, len(mine)) if self.stopper is not None else None
        if left is None:
            return False
        d = self.stopper.decide(mine, self.best_value(), left[0])
        if d is None or not d.stop:
            return False
        self.why[trial_id] = ("curve", d.reason + left[1])
        return True

    def best_value(self) -> float | None:
        """The best final objective value told so far (None before any)."""
        from optuna.trial import TrialState

        done = [t.value for t in self.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
                if t.value is not None]
        if not done:
            return None
        return min(done) if self.study.direction.name == "MINIMIZE" else max(done)

    # -- tell ---------------------------------------------------------------------------------

    def tell(self, trial_id: str, value: float | None) -> None:
        """The trial ended: its final objective value (None: it failed or has no value)."""
        from optuna.trial import TrialState

        with self._lock:
            trial = self.live.pop(trial_id, None)
            if trial is None:
                return
            if value is None:
                self.study.tell(trial, state=TrialState.FAIL)
            else:
                self.study.tell(trial, float(value))
                if self.values.get(trial_id):
                    self.ended_lengths.append(len(self.values[trial_id]))
                if self.stopper is not None and self.values.get(trial_id):  # ran to its end: a reference now
                    self.stopper.add(self.values[trial_id])

    def tell_pruned(self, trial_id: str) -> None:
        """The trial was stopped: pruned, or suspended at its rung when `why` says so (kept in the study as
        pruned, marked suspended, relaunched by `ask` once its rung is decided)."""
        from optuna.trial import TrialState

        with self._lock:
            trial = self.live.pop(trial_id, None)
            if trial is None:
                return
            if self.why.get(trial_id, ("",))[0] == "suspend":
                trial.set_user_attr(SUSPENDED_ATTR, self.reported.get(trial_id, 0))
                self.suspended[trial_id] = (self.cands.get(trial_id), trial._trial_id)
                self.study.pruner.suspended.add(trial_id)
            self.study.tell(trial, state=TrialState.PRUNED)

    def is_suspended(self, trial_id: str) -> bool:
        """True while the trial is suspended at a rung (to be relaunched or dropped there)."""
        return trial_id in self.suspended

    def rungs_of(self, trial_id: str) -> int:
        """How many objective values the trial reported (its resource)."""
        return self.reported.get(trial_id, 0)
