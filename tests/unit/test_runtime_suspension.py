"""Suspension at undecided rungs in the runtime's study (gpuledger.search.study.AdaptiveSearch, the rule of
gpuledger/search/suspension.py shared with the replay), driven over the demo grid's recorded curves
(tests/data/demo_grid_curves.json: a real `gpuledger sweep specs/lora-grid.yaml`) on a clock of their own
times: the demo grid as a bare `strategy: asha` in a fresh project (no measured curves, no settings) spends at
most half the grid's trial-seconds and keeps its recipe; without suspension the same order spends more; the
runtime's study and the replay (`simulate_asha(suspend=True)`) take the same decisions on the same order."""

from __future__ import annotations

import heapq
import json
from pathlib import Path

import pytest

from gpuledger.plan.model import PlannedTrial
from gpuledger.search import AdaptiveSearch, launch_order
from gpuledger.search.asha_replay import Curve, simulate_asha
from gpuledger.search.extrapolate import cost_stopper_for
from gpuledger.search.recipe import RECIPE_MARGIN
from gpuledger.spec import expand_trials, load_spec
from gpuledger.spec.models import SweepSpec

REPO = Path(__file__).resolve().parents[2]
DATA = json.loads((REPO / "tests" / "data" / "demo_grid_curves.json").read_text())


def _bare_asha_spec(folder: Path) -> SweepSpec:
    """specs/lora-grid.yaml with one word changed: `strategy: asha` (no pruning settings)."""
    path = folder / "lora-grid-asha.yaml"
    path.write_text((REPO / "specs" / "lora-grid.yaml").read_text().replace("strategy: grid", "strategy: asha", 1))
    return load_spec(path)


def _key(params: dict) -> tuple:
    return tuple(sorted((k, repr(v)) for k, v in params.items()))


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def _run(tmp_path: Path, suspend: bool = True, planned_wall_s: float | None = None, slots: int = 2) -> dict:
    """Runs the study of the bare asha spec over the recorded curves, as the engine drives it: a freed slot
    asks, each value is reported at its recorded time, a stop (prune or suspension) ends the attempt there,
    a trial reporting its last value ends at its recorded wall-clock and is told its value."""
    spec = _bare_asha_spec(tmp_path)
    trials = expand_trials(spec)
    curves = {_key(c["params"]): c for c in DATA["curves"]}
    by_id = {t.trial_id: curves[_key(t.params)] for t in trials}
    planned = {}
    if planned_wall_s is not None:
        planned = {t.trial_id: PlannedTrial(trial_id=t.trial_id, trial_index=t.index, params=t.params, feasible=True,
                                            est_wall_s=planned_wall_s, est_wall_s_p10=planned_wall_s * 0.7,
                                            est_wall_s_p90=planned_wall_s * 1.5,
                                            est_cost_usd=planned_wall_s * by_id[t.trial_id]["usd_per_s"])
                   for t in trials}
    full_usd = sum(c["wall_s"] * c["usd_per_s"] for c in by_id.values())
    clock = Clock()
    journal = tmp_path / f"study-{len(list(tmp_path.glob('study-*')))}.journal"  # a fresh study each run
    search = AdaptiveSearch.open(spec, "demo-bare-asha", trials, path=journal,
                                 stopper=cost_stopper_for(spec, None, full_usd), planned=planned)
    search.clock = clock
    search.suspend = search.suspend and suspend
    events: list = []
    seq = [0]
    attempts: list[tuple[str, float, float, str]] = []  # (trial, start, end, how it ended)
    running: dict[str, tuple[float, int]] = {}

    def launch() -> None:
        while len(running) < slots:
            cand = search.ask()
            if cand is None:
                return
            running[cand.trial_id] = (clock.now, 0)
            heapq.heappush(events, (clock.now + by_id[cand.trial_id]["times_s"][0], seq[0], cand.trial_id))
            seq[0] += 1

    launch()
    while events:
        clock.now, _, tid = heapq.heappop(events)
        start, k = running[tid]
        c = by_id[tid]
        if k == len(c["values"]):  # its end
            search.tell(tid, c["values"][-1])
            attempts.append((tid, start, clock.now, "completed"))
            del running[tid]
        elif search.report(tid, [c["values"][k]]):
            how = "suspended" if search.why[tid][0] == "suspend" else "pruned"
            search.tell_pruned(tid)
            attempts.append((tid, start, clock.now, how))
            del running[tid]
        else:
            running[tid] = (start, k + 1)
            nxt = start + (c["times_s"][k + 1] if k + 1 < len(c["values"]) else c["wall_s"])
            heapq.heappush(events, (max(clock.now, nxt), seq[0], tid))
            seq[0] += 1
        launch()
    grid_s = sum(c["wall_s"] for c in by_id.values())
    best = {tid: c["values"][-1] for tid, c in by_id.items()}
    done = [a for a in attempts if a[3] == "completed"]
    found = min(best[a[0]] for a in done)
    return {"trial_s": sum(e - s for _, s, e, _ in attempts), "grid_s": grid_s, "found": found,
            "grid_best": min(best.values()), "attempts": attempts, "search": search, "by_id": by_id,
            "dropped": search.take_dropped(), "order": launch_order([t.trial_id for t in trials], spec.search.seed)}


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory) -> dict:
    """The bare asha study over the demo grid's curves, with the plan's wall-clock estimate as its prior (a
    deliberately rough 110 s for every point: the recorded walls are 94-126 s, 6-78 s for the pruned)."""
    return _run(tmp_path_factory.mktemp("demo-run"), planned_wall_s=110.0)


def test_bare_asha_on_the_demo_grid_suspends_and_spends_at_most_half_the_grids_seconds(demo_run, tmp_path):
    out = demo_run
    share = out["trial_s"] / out["grid_s"]
    assert out["found"] <= out["grid_best"] * (1 + RECIPE_MARGIN)  # the grid's recipe kept
    assert share <= 0.5, share
    kinds = [a[3] for a in out["attempts"]]
    assert "suspended" in kinds
    relaunched = {a[0] for a in out["attempts"] if a[3] == "suspended"} & {a[0] for a in out["attempts"]
                                                                             if a[3] == "completed"}
    assert relaunched  # a suspended trial confirmed at its rung ran again from its start and ended
    assert not out["search"].suspended  # none left waiting at the end
    # every trial ends once: completed, pruned, or dropped while suspended
    ended = [a[0] for a in out["attempts"] if a[3] != "suspended"] + [t for t, _ in out["dropped"]]
    assert sorted(ended) == sorted(out["by_id"])
    # without suspension the same order runs the undecided trials on: more seconds
    plain = _run(tmp_path, suspend=False)
    assert plain["found"] <= plain["grid_best"] * (1 + RECIPE_MARGIN)
    assert plain["trial_s"] > out["trial_s"] * 1.2, (plain["trial_s"], out["trial_s"])


def test_the_runtime_and_the_replay_take_the_same_suspensions(demo_run):
    out = demo_run
    curves = [Curve(trial_id=tid, values=tuple(c["values"]), times_s=tuple(c["times_s"]), wall_s=c["wall_s"],
                    complete=True) for tid, c in out["by_id"].items()]
    sim = simulate_asha(curves, slots=2, min_steps=2, reduction_factor=5, goal="minimize", order=out["order"],
                        suspend=True, pruner="rungs")
    dropped = {t for t, _ in out["dropped"]}
    last = {a[0]: n for n, a in enumerate(out["attempts"])}
    ran = [(tid, "pruned" if how == "suspended" and tid in dropped and last[tid] == n else how)
           for n, (tid, _, _, how) in enumerate(out["attempts"])]
    # the same attempts, trial by trial (the replay lists them in launch order; a trial's last suspended
    # attempt is `pruned` there when its rung dropped it)
    assert sorted((t.trial_id, t.status) for t in sim.trials) == sorted(ran)
    assert sim.trial_seconds == pytest.approx(out["trial_s"], rel=1e-6)  # the same rule, the same seconds


def test_a_fresh_project_prices_dollars_left_from_the_estimate_and_says_so(demo_run):
    """No measured curves and no values_per_trial: the cost rule's dollars left come from the plan's estimate
    (its wall-clock band), so it can decide from the first sweep, and its reason names that prior."""
    out = demo_run
    search = out["search"]
    tid = next(iter(out["by_id"]))
    search.values_per_trial, search.ended_lengths = None, []
    search.times[tid], search.cost_usd[tid] = [44.0], 110.0 * 2.7e-5
    left, note = search.usd_left(tid, 2)
    rate = 2.7e-5
    assert left == pytest.approx(rate * (110.0 * 0.7 - 44.0))  # the P10 wall-clock: the low end
    assert "plan's estimate" in note and "P10" in note and "P90" in note
    search.ended_lengths = [17, 17, 17]  # once trials of the sweep ran to their end, their length
    left, note = search.usd_left(tid, 2)
    assert left == pytest.approx(110.0 * rate * (1 - 2 / 17)) and "this sweep's 3 trial(s)" in note
    search.ended_lengths, search.planned = [], {}
    assert search.usd_left(tid, 2) is None  # no estimate either: no dollars left, no curve stop


@pytest.mark.parametrize("own_clock", [True, False])
def test_the_pace_per_value_is_the_trials_own_clock_not_the_polls(tmp_path, own_clock):
    """A launcher that reads its log every few seconds hands the study two values at once: on their arrival
    times the trial's pace is 0 s per value (nothing to save by suspending it); on the trial's own clock
    (each metric point's t_s) it is 5 s per value, and at the bare asha's first rung (2 values, 1 in 5 kept)
    suspension pays. The seconds it has run are the runtime's (10.5 s: start-up included)."""
    spec = _bare_asha_spec(tmp_path)
    search = AdaptiveSearch.open(spec, "own-clock", expand_trials(spec), path=tmp_path / "study.journal")
    clock = Clock()
    search.clock = clock
    cand = search.ask()
    clock.now = 10.5
    stopped = search.report(cand.trial_id, [2.0, 1.9], [5.0, 10.0] if own_clock else None)
    assert stopped is own_clock
    assert (search.why.get(cand.trial_id, ("",))[0] == "suspend") is own_clock


def test_search_pruning_suspend_false_runs_undecided_trials_on(tmp_path):
    """`search.pruning.suspend: false`: the same two values that suspend the trial above let it run on."""
    path = tmp_path / "no-suspend.yaml"
    text = (REPO / "specs" / "lora-grid.yaml").read_text().replace("strategy: grid", "strategy: asha", 1)
    path.write_text(text.replace("strategy: asha", "strategy: asha\n  pruning: {suspend: false}", 1))
    spec = load_spec(path)
    assert spec.search.pruning.suspend is False
    search = AdaptiveSearch.open(spec, "no-suspend", expand_trials(spec), path=tmp_path / "study.journal")
    assert search.suspend is False
    clock = Clock()
    search.clock = clock
    cand = search.ask()
    clock.now = 10.5
    assert search.report(cand.trial_id, [2.0, 1.9], [5.0, 10.0]) is False
