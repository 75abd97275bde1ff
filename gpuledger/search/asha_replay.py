"""ASHA replayed over learning curves: what a sweep would have done with other slots (or none pruned).

    curves = curves_from_points(rows, metric="eval_loss")   # rows of gpuledger/warehouse/sql/queries/learning_curves.sql
    sim = simulate_asha(curves, slots=4, min_steps=2, reduction_factor=3, goal="minimize")
    sim.trial_seconds, sim.makespan_s, sim.pruned, sim.best_value, sim.timeline

A discrete-event replay of the sweep runtime (`gpuledger.runtime.engine`) under `strategy: asha`: the
trials start in `order` on `slots` parallel slots (a freed slot takes the next trial at once), each
reports its curve's values at its curve's times, and every value goes to the runtime's pruner in an
in-memory study with the runtime's settings (`make_pruner`: `gpuledger.search.rungs.RungPruner` by
default, whose decisions do not depend on the arrival order; `pruner="asha"` for Optuna's asynchronous
`SuccessiveHalvingPruner`, min_resource=min_steps, reduction_factor, min_early_stopping_rate=0; the k-th
value is step k, see `gpuledger.search.study`), so a prune decision is exactly the one the runtime's
study makes given the same reports in the same order. Pure and deterministic: same curves and arguments, same result (simultaneous events are taken
in launch order; nothing is timed, nothing is read or written).

Assumptions (each one a choice the measured curves cannot settle, said here and in docs/CONTRACTS.md):
- the simulation asks the pruner after every value; the runtime reads a trial's new values every 0.5 s
  and asks once per batch (a batch of several values is judged on its last one, so a rung's value may
  be a later step's; with values seconds apart, as on the demo, batches are single values);
- a trial pruned at its k-th value ends `cancel_s` (default 0) after that value, except a cut curve
  pruned at the last rung its values reach (where the real run was stopped: it reports on while its
  cancel takes effect), which ends at its measured `wall_s` (the real cancel included);
- a cut curve (a trial pruned or cancelled for real) that the replay promotes past its end is
  extended to `full_length` values (default: the longest complete curve's length) at its own measured
  seconds per value, holding its last value, and then ends after the mean tail (wall_s after the last
  value) of the complete curves; such trials are counted in `SimResult.extrapolated`;
- a complete curve's final objective is its last value; a curve without values ends at its `wall_s`
  as a failed trial;
- `setup_s` is added before every trial's first value and paid in full (the measured times already
  hold the measured setup; pass it only for curves whose times start after setup).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

PRUNED = "pruned"
SUSPENDED = "suspended"  # an attempt stopped at an undecided rung (`simulate_asha(suspend=True)`)
COMPLETED = "completed"
FAILED = "failed"
#: The most learning curves a replay is run over (the report's what-if, the planner's measured source):
#: Optuna's pruner reads every trial of its study at each value, so a replay grows with the square of
#: the trials (measured on the 2-core dev VM, 17 values a trial, one slot count: 1,000 trials 3.8 s,
#: 10,000 trials 141 s). Beyond it the callers say why they did not replay.
MAX_REPLAY_CURVES = 1_000


@dataclass(frozen=True)
class Curve:
    """One run's learning curve of the objective."""

    trial_id: str
    values: tuple[float, ...]  # the objective's values in the order reported
    times_s: tuple[float, ...]  # seconds from the trial's start at which each was reported
    wall_s: float  # the run's measured wall-clock (to its end, or to where it was pruned)
    complete: bool  # True: ran to its end; False: cut (pruned/cancelled) after these values
    failed: bool = False  # ran to its end but failed (no objective told to the study, never the best)

    def __post_init__(self) -> None:
        if len(self.values) != len(self.times_s):
            raise ValueError(f"curve {self.trial_id}: {len(self.values)} values but {len(self.times_s)} times")


@dataclass(frozen=True)
class SimTrial:
    """How one trial went in the replay."""

    trial_id: str
    start_s: float
    end_s: float
    values_reported: int
    status: str  # completed | pruned | failed
    extrapolated: bool
    final_value: float | None
    stopped_by: str | None = None  # pruned: "rung" (the pruner) or "curve" (the `stopper`, cost-aware rule)

    @property
    def seconds(self) -> float:
        return self.end_s - self.start_s


@dataclass(frozen=True)
class SimResult:
    slots: int
    trial_seconds: float  # sum over trials of (end - start), setup included
    makespan_s: float  # the last trial's end
    pruned: int
    completed: int
    best_trial_id: str | None
    best_value: float | None
    time_to_best_s: float | None  # when the best trial ended
    extrapolated: int  # trials promoted past the end of a cut curve
    timeline: tuple[tuple[float, float | None, float], ...]  # per trial end: (time_s, best so far, trial-seconds spent by then)
    trials: tuple[SimTrial, ...] = ()  # in launch order
    failed: int = 0

    def trial(self, trial_id: str) -> SimTrial | None:
        """The trial's first attempt (with suspension a trial may have several: `attempts`)."""
        return next((t for t in self.trials if t.trial_id == trial_id), None)

    def attempts(self, trial_id: str) -> list[SimTrial]:
        """Every attempt of the trial, in order (more than one when it was suspended and relaunched)."""
        return [t for t in self.trials if t.trial_id == trial_id]

    def seconds_of(self, trial_id: str) -> float:
        """The trial's seconds over all its attempts (each is paid: a relaunch pays its first values again)."""
        return sum(t.seconds for t in self.attempts(trial_id))


@dataclass
class _Running:
    curve: Curve
    start_s: float
    values: list[float]
    times_s: list[float]
    end_tail_s: float  # seconds after the last value until the trial's end when not pruned
    trial: Any = None
    k: int = 0  # values reported
    extrapolated: bool = False
    stopped_by: str | None = None


def _seconds_per_value(c: Curve) -> float:
    if len(c.times_s) >= 2:
        return max(0.0, (c.times_s[-1] - c.times_s[0]) / (len(c.times_s) - 1))
    return max(0.0, c.times_s[0]) if c.times_s else 0.0


def _last_rung_step(n_values: int, min_steps: int, reduction_factor: int) -> int | None:
    """The highest rung step (min_steps * reduction_factor**i) a curve of `n_values` values reaches."""
    step, last = min_steps, None
    while step <= n_values:
        last, step = step, step * reduction_factor
    return last


def simulate_asha(curves: Sequence[Curve], *, slots: int, min_steps: int, reduction_factor: int, goal: str,
                  order: Sequence[str] | None = None, full_length: int | None = None, setup_s: float = 0.0,
                  cancel_s: float = 0.0, pruner: str = "rungs", stopper: Callable[..., Any] | None = None,
                  suspend: bool = False) -> SimResult:
    """Replays ASHA over `curves` at `slots` parallel slots (see the module's docstring).

    `pruner`: rungs | asha | none (no rung pruning: only `stopper`). `stopper(trial_id, values, best,
    elapsed_s)`: asked after each value the pruner lets through (values: the trial's so far; best: the
    best final value of the trials ended so far, None before; elapsed_s: since the trial's start); a
    truthy answer stops the trial there (status pruned, `stopped_by` "curve"), as the runtime's
    cost-aware rule does (`gpuledger.search.extrapolate`).

    `suspend` (rungs only): a trial that reaches a rung whose outcome depends on trials not started yet
    is stopped there and relaunched from its start (its first values paid again: the launcher resumes no
    checkpoint) by the rule the runtime follows too (`gpuledger.search.suspension`: `should_suspend`,
    `relaunch_action`). Each attempt is one
    entry of `trials` (a suspended attempt's status `suspended`); the trial-seconds count every attempt."""
    import optuna
    from optuna.trial import TrialState

    from gpuledger.search.rungs import TRIAL_ID_ATTR, RungPruner, make_pruner
    from gpuledger.search.suspension import DROP, RELAUNCH, relaunch_action, should_suspend

    if slots < 1:
        raise ValueError(f"slots must be >= 1 (got {slots})")
    if goal not in ("minimize", "maximize"):
        raise ValueError(f"goal must be minimize or maximize (got {goal!r})")
    by_id = {c.trial_id: c for c in curves}
    if len(by_id) != len(curves):
        raise ValueError("two curves have the same trial_id")
    ids = list(order) if order is not None else [c.trial_id for c in curves]
    unknown = [t for t in ids if t not in by_id]
    if unknown:
        raise ValueError(f"order names trials without a curve: {', '.join(unknown[:5])}")
    complete = [c for c in curves if c.complete and c.values]
    if full_length is None:
        full_length = max((len(c.values) for c in complete), default=max((len(c.values) for c in curves), default=0))
    tails = [max(0.0, c.wall_s - c.times_s[-1]) for c in complete]
    mean_tail_s = sum(tails) / len(tails) if tails else 0.0

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(
        direction="minimize" if goal == "minimize" else "maximize",
        sampler=optuna.samplers.RandomSampler(seed=0),  # never asked for a value: the trials are given
        pruner=optuna.pruners.NopPruner() if pruner == "none" else make_pruner(pruner, min_steps, reduction_factor, len(ids)))
    rp = study.pruner if isinstance(study.pruner, RungPruner) else None
    better = (lambda a, b: a < b) if goal == "minimize" else (lambda a, b: a > b)
    best: list[float | None] = [None]

    events: list[tuple[float, int, str, str]] = []  # (time, seq, kind, trial_id); seq: launch order ties
    seq = [0]
    running: dict[str, _Running] = {}
    done: list[SimTrial] = []
    queue = list(reversed(ids))

    def push(t: float, kind: str, tid: str) -> None:
        heapq.heappush(events, (t, seq[0], kind, tid))
        seq[0] += 1

    suspended: dict[str, Any] = {}  # trial id -> its suspended attempt's storage id

    def relaunchable() -> list[str]:
        """Suspended trials to relaunch now (`gpuledger.search.suspension.relaunch_action`), in suspension
        order; the ones their rung dropped are pruned for good."""
        out = []
        for tid, num in list(suspended.items()):
            act = relaunch_action(rp.fate(study, study._storage.get_trial(num))[0], bool(queue))
            if act == DROP:
                del suspended[tid]
                rp.suspended.discard(tid)
            elif act == RELAUNCH:
                out.append(tid)
        return out

    def start(now: float) -> None:
        while len(running) < slots:
            again = relaunchable() if suspended else []
            if again:
                tid = again[0]
                del suspended[tid]
                rp.suspended.discard(tid)
            elif queue:
                tid = queue.pop()
            else:
                return
            c = by_id[tid]
            r = _Running(curve=c, start_s=now, values=list(c.values), times_s=list(c.times_s),
                         end_tail_s=max(0.0, c.wall_s - c.times_s[-1]) if c.times_s else max(0.0, c.wall_s),
                         trial=study.ask())
            r.trial.set_user_attr(TRIAL_ID_ATTR, tid)
            running[tid] = r
            if r.values:
                push(now + setup_s + r.times_s[0], "value", tid)
            else:
                push(now + setup_s + max(0.0, c.wall_s), "end", tid)

    def finish(tid: str, now: float, status: str) -> None:
        r = running.pop(tid)
        final = r.values[r.k - 1] if status == COMPLETED and r.k else None
        if status == COMPLETED and (final is None or math.isnan(final)):
            status = FAILED
        if status == COMPLETED:
            study.tell(r.trial, final)
            if best[0] is None or better(final, best[0]):
                best[0] = final
            ended = getattr(stopper, "ended", None)  # a rule that learns from the sweep's own ended trials
            if ended is not None:
                ended(tid, r.values[:r.k])
        else:
            study.tell(r.trial, state=TrialState.PRUNED if status == PRUNED else TrialState.FAIL)
        done.append(SimTrial(trial_id=tid, start_s=r.start_s, end_s=now, values_reported=r.k, status=status,
                             extrapolated=r.extrapolated, final_value=final if status == COMPLETED else None,
                             stopped_by=(r.stopped_by or "rung") if status == PRUNED else None))

    start(0.0)
    while events:
        now, _, kind, tid = heapq.heappop(events)
        r = running[tid]
        base = r.start_s + setup_s
        if kind in ("end", "pruned"):
            ok = r.values and not (r.curve.failed and not r.extrapolated)
            finish(tid, now, PRUNED if kind == "pruned" else (COMPLETED if ok else FAILED))
            start(now)
            continue
        r.trial.report(float(r.values[r.k]), step=r.k + 1)
        r.k += 1
        if r.trial.should_prune():
            cut_at_own_end = (not r.curve.complete and not r.extrapolated
                              and r.k == _last_rung_step(len(r.curve.values), min_steps, reduction_factor))
            push(max(now, base + r.curve.wall_s) if cut_at_own_end else now + cancel_s, "pruned", tid)
            continue
        if suspend and rp is not None and should_suspend(
                r.k, n_values=len(r.values), points_left=bool(queue), elapsed_s=now - r.start_s, times_s=r.times_s,
                min_steps=min_steps, reduction_factor=reduction_factor, n_trials=len(ids),
                fate=lambda r=r: rp.fate(study, study._storage.get_trial(r.trial._trial_id))[0]):
            running.pop(tid)
            study.tell(r.trial, state=TrialState.PRUNED)
            suspended[tid] = r.trial._trial_id
            rp.suspended.add(tid)
            done.append(SimTrial(trial_id=tid, start_s=r.start_s, end_s=now, values_reported=r.k,
                                 status=SUSPENDED, extrapolated=False, final_value=None, stopped_by="suspend"))
            start(now)
            continue
        if stopper is not None and r.k < len(r.values) and stopper(tid, r.values[:r.k], best[0], now - r.start_s):
            r.stopped_by = "curve"
            push(now + cancel_s, "pruned", tid)
            continue
        if r.k < len(r.values):
            push(base + r.times_s[r.k], "value", tid)
            continue
        if not r.curve.complete and len(r.values) < full_length:  # promoted past the end of a cut curve
            spv = _seconds_per_value(r.curve)
            last_t, last_v = r.times_s[-1], r.values[-1]
            n_more = full_length - len(r.values)
            r.values += [last_v] * n_more
            r.times_s += [last_t + spv * (i + 1) for i in range(n_more)]
            r.end_tail_s = mean_tail_s
            r.extrapolated = True
            push(base + r.times_s[r.k], "value", tid)
            continue
        end = base + max(r.times_s[-1] + r.end_tail_s, 0.0 if r.extrapolated else r.curve.wall_s)
        push(max(now, end), "end", tid)
    return _result(done, slots, goal, ids)


def _result(done: list[SimTrial], slots: int, goal: str, ids: Sequence[str]) -> SimResult:
    last = {t.trial_id: n for n, t in enumerate(done)}
    done = [replace(t, status=PRUNED) if t.status == SUSPENDED and last[t.trial_id] == n else t
            for n, t in enumerate(done)]
    better = (lambda a, b: a < b) if goal == "minimize" else (lambda a, b: a > b)
    order = {tid: i for i, tid in enumerate(ids)}
    by_end = sorted(done, key=lambda t: (t.end_s, order[t.trial_id]))
    timeline: list[tuple[float, float | None, float]] = []
    best: SimTrial | None = None
    best_at: float | None = None
    for t in by_end:
        if t.status == COMPLETED and t.final_value is not None and (best is None or better(t.final_value, best.final_value)):
            best, best_at = t, t.end_s
        spent = sum(min(o.end_s, t.end_s) - o.start_s for o in done if o.start_s < t.end_s)
        timeline.append((t.end_s, best.final_value if best else None, spent))
    trials = tuple(sorted(done, key=lambda t: (order[t.trial_id], t.start_s)))
    return SimResult(
        slots=slots, trial_seconds=sum(t.seconds for t in done), makespan_s=max((t.end_s for t in done), default=0.0),
        pruned=sum(t.status == PRUNED for t in done), completed=sum(t.status == COMPLETED for t in done),
        failed=sum(t.status == FAILED for t in done), best_trial_id=best.trial_id if best else None,
        best_value=best.final_value if best else None, time_to_best_s=best_at,
        extrapolated=sum(t.extrapolated for t in done), timeline=tuple(timeline), trials=trials)


def curves_from_points(rows: Iterable[Mapping[str, Any]]) -> list[Curve]:
    """Builds one curve per trial from the rows of `gpuledger/warehouse/sql/queries/learning_curves.sql` (one row per
    objective point, or one row without a point for a run that logged none; ordered by run start, run,
    seq). The values are the ones the runtime reports to the study (`gpuledger.search.values`:
    numeric, one per step, a step not above the highest already seen skipped, step-less points each
    counted). A trial with several runs (attempts) keeps its last run, except that a cut run does not
    replace a succeeded one (a later adaptive sweep's pruned run of a point a grid ran in full). `complete`: the run succeeded
    or failed by itself (`failed` then); pruned or cancelled runs are cut curves."""
    from gpuledger.search.values import objective_points

    runs: dict[str, dict[str, Any]] = {}
    for row in rows:
        run = runs.get(row["run_id"])
        if run is None:
            run = runs[row["run_id"]] = {"trial_id": row["trial_id"], "status": row["status"],
                                         "wall_s": float(row["wall_s"] or 0.0), "points": []}
        if row.get("seq") is not None:
            run["points"].append({"name": "objective", "value": row.get("value"), "step": row.get("step"),
                                  "t_s": row.get("t_s")})
    by_trial: dict[str, Curve] = {}
    for run in runs.values():
        kept, _ = objective_points(run["points"], "objective", float("-inf"))
        earlier = by_trial.get(run["trial_id"])
        if earlier is not None and earlier.complete and not earlier.failed and run["status"] not in ("succeeded", "failed"):
            continue  # a cut run (pruned, cancelled) does not hide a complete curve of the same point
        by_trial.pop(run["trial_id"], None)  # the last run of a trial, in the rows' order
        by_trial[run["trial_id"]] = Curve(
            trial_id=run["trial_id"], values=tuple(float(p["value"]) for p in kept),
            times_s=tuple(float(p["t_s"] or 0.0) for p in kept), wall_s=run["wall_s"],
            complete=run["status"] in ("succeeded", "failed"), failed=run["status"] == "failed")
    return list(by_trial.values())
