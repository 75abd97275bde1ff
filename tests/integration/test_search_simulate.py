"""The replay (gpuledger.search.asha_replay) with Optuna's asynchronous pruner (`pruner="asha"`, whose
decisions the hand-made cases work out; the runtime's order-independent RungPruner: tests/unit/test_rungs.py):
hand-made curves whose pruning is worked out by hand in the comments, slots=1 against several slots, cut curves extended, and a replay of the learning curves of
a real ASHA sweep (local launcher, real trial subprocesses, real DuckDB) that prunes the same trials."""

from __future__ import annotations

import pytest
from helpers.adaptive_sweeps import run_sweep
from helpers.sweep_specs import sweep_spec, trial_script

from gpuledger.search.asha_replay import Curve, curves_from_points, simulate_asha


def _curve(tid: str, values, wall_s: float | None = None, complete: bool = True, dt: float = 1.0) -> Curve:
    times = tuple(dt * (i + 1) for i in range(len(values)))
    return Curve(tid, tuple(float(v) for v in values), times, wall_s if wall_s is not None else times[-1] + 0.5,
                 complete)


# four complete curves, values at t = 1, 2, 3, 4 s after their start, each ends at 4.5 s
HAND = [_curve("A", [5, 4, 3, 2]), _curve("B", [6, 5, 4, 3]), _curve("C", [4, 3, 2, 1]), _curve("D", [7, 6, 5, 4])]


def test_one_slot_prunes_what_successive_halving_says_by_hand():
    # min_steps 1, eta 2: rungs at the 1st, 2nd and 4th value; at a rung a trial goes on when its value is
    # <= the (n // 2)-th best of the n values seen there (the first ones: only when best).
    # A: alone at every rung -> completes (2.0) at 4.5 s.  B: rung 0 sees [5, 6]: 6 is not best -> pruned at
    # its 1st value (5.5 s).  C: rung 0 [5, 6, 4] -> 4 best, rung 1 [4, 3] -> 3 best, rung 2 [2, 1] -> 1 best:
    # completes (1.0) at 5.5 + 4.5 = 10 s.  D: rung 0 [5, 6, 4, 7]: 7 > 2nd best 5 -> pruned at 11 s.
    sim = simulate_asha(HAND, slots=1, min_steps=1, reduction_factor=2, goal="minimize", pruner="asha")
    assert [(t.trial_id, t.status, t.values_reported) for t in sim.trials] == [
        ("A", "completed", 4), ("B", "pruned", 1), ("C", "completed", 4), ("D", "pruned", 1)]
    assert (sim.pruned, sim.completed, sim.extrapolated) == (2, 2, 0)
    assert sim.trial_seconds == pytest.approx(4.5 + 1 + 4.5 + 1)
    assert sim.makespan_s == pytest.approx(11.0)
    assert (sim.best_trial_id, sim.best_value, sim.time_to_best_s) == ("C", 1.0, pytest.approx(10.0))
    # per trial end: time, best so far, trial-seconds spent by then
    assert sim.timeline == ((4.5, 2.0, 4.5), (5.5, 2.0, 5.5), (10.0, 1.0, 10.0), (11.0, 1.0, 11.0))
    # maximize: the same curves negated prune the same trials
    neg = [Curve(c.trial_id, tuple(-v for v in c.values), c.times_s, c.wall_s, c.complete) for c in HAND]
    sim_max = simulate_asha(neg, slots=1, min_steps=1, reduction_factor=2, goal="maximize", pruner="asha")
    assert [t.status for t in sim_max.trials] == [t.status for t in sim.trials] and sim_max.best_value == -1.0


def test_more_slots_finish_sooner_and_can_promote_a_trial_one_slot_would_prune():
    # two slots on HAND: A and B start at 0; B's 6 meets A's 5 at rung 0 (t = 1) -> pruned, C starts at 1;
    # A ends at 4.5 and D starts; D's 7 is pruned at 5.5, C ends at 5.5: the same trials pruned, in half the time.
    sim2 = simulate_asha(HAND, slots=2, min_steps=1, reduction_factor=2, goal="minimize", pruner="asha")
    assert [t.status for t in sim2.trials] == ["completed", "pruned", "completed", "pruned"]
    assert sim2.makespan_s == pytest.approx(5.5) and sim2.trial_seconds == pytest.approx(11.0)
    assert sim2.time_to_best_s == pytest.approx(5.5)
    # Y (worse) reports its first value at 0.5 s, X (better) at 1 s.  One slot, X first: Y meets X's 3 at
    # rung 0 -> pruned.  Two slots: Y is alone at rung 0 at 0.5 s -> promoted before the best is known,
    # and runs to its end: more trial-seconds.
    x = _curve("X", [3, 2, 1, 0.5])
    y = Curve("Y", (4.0, 3.5, 3.0, 2.5), (0.5, 1.5, 2.5, 3.5), 4.0, True)
    one = simulate_asha([x, y], slots=1, min_steps=1, reduction_factor=2, goal="minimize", pruner="asha")
    two = simulate_asha([x, y], slots=2, min_steps=1, reduction_factor=2, goal="minimize", pruner="asha")
    assert [t.status for t in one.trials] == ["completed", "pruned"]
    assert [t.status for t in two.trials] == ["completed", "completed"]
    assert two.trial_seconds == 4.5 + 4.0 and one.trial_seconds == 4.5 + 0.5
    assert one.best_trial_id == two.best_trial_id == "X"
    # launch order is an argument: Y first on one slot is alone at every rung (promoted), then X beats it
    rev = simulate_asha([x, y], slots=1, min_steps=1, reduction_factor=2, goal="minimize", pruner="asha", order=["Y", "X"])
    assert [t.trial_id for t in rev.trials] == ["Y", "X"] and rev.pruned == 0 and rev.time_to_best_s == 8.5


def test_a_cut_curve_promoted_past_its_end_is_extended_at_its_own_pace_holding_its_last_value():
    # X ran to its end (4 values, 1 s apart, ends at 4.5 s: a 0.5 s tail). Y was pruned for real after one
    # value at 1 s (ended at 1.2 s). Y first on one slot is alone at each rung: promoted, so it is extended
    # to 4 values at 1 s per value holding 4.0, and ends after the complete curves' mean tail (0.5 s).
    x = _curve("X", [3, 2, 1, 0.5])
    y = Curve("Y", (4.0,), (1.0,), 1.2, False)
    sim = simulate_asha([y, x], slots=1, min_steps=1, reduction_factor=2, goal="minimize", pruner="asha")
    assert sim.extrapolated == 1 and sim.trial("Y").extrapolated and sim.trial("Y").values_reported == 4
    assert sim.trial("Y").end_s == pytest.approx(4.5) and sim.trial("Y").final_value == 4.0
    assert sim.trial("X").status == "completed" and sim.best_trial_id == "X"
    # X first: Y's 4 meets X's 3 at rung 0, the last rung Y's one value reaches (where it was really
    # stopped) -> pruned there, it ends at its measured 1.2 s
    sim = simulate_asha([x, y], slots=1, min_steps=1, reduction_factor=2, goal="minimize", pruner="asha")
    assert sim.extrapolated == 0 and sim.trial("Y").status == "pruned"
    assert sim.trial_seconds == pytest.approx(4.5 + 1.2)
    # setup_s is paid by every trial before its first value; cancel_s after a prune decision
    sim = simulate_asha([x, y], slots=1, min_steps=1, reduction_factor=2, goal="minimize", pruner="asha", setup_s=10.0)
    assert sim.trial_seconds == pytest.approx(14.5 + 11.2)
    sim = simulate_asha(HAND, slots=1, min_steps=1, reduction_factor=2, goal="minimize", pruner="asha", cancel_s=0.25)
    assert sim.trial_seconds == pytest.approx(4.5 + 1.25 + 4.5 + 1.25)


def test_failures_and_bad_arguments():
    nan = Curve("N", (float("nan"),), (1.0,), 2.0, True)
    failed = Curve("F", (9.0, 9.0), (1.0, 2.0), 2.5, True, failed=True)  # its values stay at its rungs
    empty = Curve("E", (), (), 0.7, True)
    sim = simulate_asha([nan, failed, empty, *HAND[:1]], slots=2, min_steps=1, reduction_factor=2, goal="minimize", pruner="asha")
    assert sim.trial("N").status == "pruned"  # Optuna prunes a NaN at a rung
    assert sim.trial("F").status == "failed" and sim.trial("E").status == "failed" and sim.failed == 2
    assert sim.best_trial_id == "A"
    with pytest.raises(ValueError, match="slots"):
        simulate_asha(HAND, slots=0, min_steps=1, reduction_factor=2, goal="minimize", pruner="asha")
    with pytest.raises(ValueError, match="without a curve: Z"):
        simulate_asha(HAND, slots=1, min_steps=1, reduction_factor=2, goal="minimize", pruner="asha", order=["A", "Z"])
    with pytest.raises(ValueError, match="2 values but 1 times"):
        Curve("bad", (1.0, 2.0), (1.0,), 1.0, True)
    # deterministic: the same inputs give the same result
    assert simulate_asha(HAND, slots=3, min_steps=1, reduction_factor=2, goal="minimize", pruner="asha") == simulate_asha(
        HAND, slots=3, min_steps=1, reduction_factor=2, goal="minimize", pruner="asha")
    with pytest.raises(ValueError, match="pruner must be"):
        simulate_asha(HAND, slots=1, min_steps=1, reduction_factor=2, goal="minimize", pruner="median")


def test_curves_from_points_keeps_what_the_runtime_reports():
    rows = [  # a step not above the highest seen is skipped (the trainer logs its last value again at the same
        # step), a step-less point counts, as in the runtime's watch; a retried trial keeps its last run
        {"run_id": "r1", "trial_id": "t1", "seq": 0, "step": 0, "t_s": 1.0, "value": 3.0, "wall_s": 5.0, "status": "succeeded"},
        {"run_id": "r1", "trial_id": "t1", "seq": 1, "step": 10, "t_s": 2.0, "value": 2.0, "wall_s": 5.0, "status": "succeeded"},
        {"run_id": "r1", "trial_id": "t1", "seq": 2, "step": 10, "t_s": 2.1, "value": 2.0, "wall_s": 5.0, "status": "succeeded"},
        {"run_id": "r1", "trial_id": "t1", "seq": 3, "step": 5, "t_s": 2.2, "value": 9.0, "wall_s": 5.0, "status": "succeeded"},
        {"run_id": "r1", "trial_id": "t1", "seq": 4, "step": None, "t_s": 2.5, "value": 1.5, "wall_s": 5.0, "status": "succeeded"},
        {"run_id": "r2", "trial_id": "t2", "seq": None, "step": None, "t_s": None, "value": None, "wall_s": 0.5, "status": "failed"},
        {"run_id": "r3", "trial_id": "t2", "seq": 0, "step": 0, "t_s": 1.5, "value": 4.0, "wall_s": 1.9, "status": "cancelled"},
    ]
    c1, c2 = curves_from_points(rows)
    assert c1 == Curve("t1", (3.0, 2.0, 1.5), (1.0, 2.0, 2.5), 5.0, True)
    assert c2 == Curve("t2", (4.0,), (1.5,), 1.9, False)


# eval_loss = (|x - 0.3| + 1) + 0.001 / step, the |x - 0.3| at least 0.02 apart: the trials' order is
# the same at every step, so where the runtime judges a rung on a later step's value (it reads new values
# every 0.5 s and asks the pruner once per batch), it decides as the replay does (which asks at each value).
TRIAL = trial_script("""
    for step in range(1, 6):
        log(step=step, eval_loss=abs(a.x - 0.3) + 1.0 + 0.001 / step)
        time.sleep(0.25)
""")


@pytest.mark.slow
def test_replaying_a_real_asha_sweep_prunes_the_same_trials(tmp_path, monkeypatch):
    from gpuledger.spec import expand_trials, load_spec
    from gpuledger.warehouse import Warehouse

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GPULEDGER_WAREHOUSE", str(tmp_path / "wh" / "ledger.duckdb"))
    spec_path = sweep_spec(tmp_path, name="replay-asha", params="{x: [0.7, 0.57, 0.3, 0.2, 0.42, 0.05]}", trial=TRIAL,
                           search="strategy: asha\nseed: 2\npruning: {min_steps: 1, reduction_factor: 2}")
    summary = run_sweep(spec_path, cap=1)
    sweep_id = summary.sweep_id
    assert summary.pruned >= 3 and summary.succeeded + summary.pruned == 6
    with Warehouse.open(read_only=True) as wh:
        rows = wh.query_named("learning_curves", {"sweep_id": sweep_id, "model": None, "method": None,
                                                  "metric": None}).to_dicts()
        status = {r["trial_id"]: r["status"] for r in wh.query(
            "select trial_id, status from v_trial_results").to_dicts()}
        wall = {r["trial_id"]: r["wall_s"] for r in wh.query("select trial_id, wall_s from v_runs").to_dicts()}
    curves = curves_from_points(rows)
    assert [c.trial_id for c in curves] == [r["trial_id"] for r in sorted(
        {r["run_id"]: r for r in rows}.values(), key=lambda r: r["started_at"])]  # launch order
    sim = simulate_asha(curves, slots=1, min_steps=1, reduction_factor=2, goal="minimize")
    assert {t.trial_id: t.status for t in sim.trials} == {
        tid: {"pruned": "pruned", "succeeded": "completed"}[s] for tid, s in status.items()}
    assert sim.extrapolated == 0
    # a completed trial takes its measured wall-clock; a pruned one too when its cut curve ends within the
    # rung it was stopped at, else (a loaded machine: it reported past the next rung before the cancel took
    # effect) it ends at the value that pruned it: the replay's seconds are the run's, less those cancel lags
    by_id = {c.trial_id: c for c in curves}
    for t in sim.trials:
        if t.status == "completed":
            assert t.seconds == pytest.approx(wall[t.trial_id], abs=1e-9)
        else:
            assert by_id[t.trial_id].times_s[t.values_reported - 1] - 1e-9 <= t.seconds <= wall[t.trial_id] + 1e-9
    assert sim.trial_seconds <= sum(wall.values()) + 1e-9
    best = next(t.trial_id for t in expand_trials(load_spec(spec_path)) if t.params["x"] == 0.3)
    assert sim.best_trial_id == best and sim.best_value == pytest.approx(1.0002)
