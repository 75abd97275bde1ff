"""The replay's stopping floor (the least a rule that must see a trial's values can spend keeping the recipe),
the cost-aware rule forecasting from another sweep's curves, its levels (the boldest the check keeps the recipe
with), and benchmarks/search_holdout.py's input checks."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from gpuledger.search.asha_replay import Curve, simulate_asha
from gpuledger.search.comparison import replay_strategies
from gpuledger.search.extrapolate import MIN_VALUES
from gpuledger.search.replay import _stretched, cost_stopper, stopping_floor
from gpuledger.search.synthetic import synthetic_curves

REPO = Path(__file__).resolve().parents[2]
DATA = json.loads((REPO / "tests" / "data" / "demo_grid_curves.json").read_text())
CURVES = [Curve(c["trial_id"], tuple(c["values"]), tuple(c["times_s"]), c["wall_s"], True) for c in DATA["curves"]]
RATE = {c["trial_id"]: c["usd_per_s"] for c in DATA["curves"]}
BEST = min(CURVES, key=lambda c: c.values[-1])


def test_the_floor_is_the_recipe_in_full_and_every_other_trial_to_its_second_value():
    secs, usd = stopping_floor(CURVES, RATE, BEST.trial_id, 2)
    want = BEST.wall_s + sum(c.times_s[1] for c in CURVES if c is not BEST)
    assert secs == pytest.approx(want)
    assert usd == pytest.approx(sum((c.wall_s if c is BEST else c.times_s[1]) * RATE[c.trial_id] for c in CURVES))
    # a curve too short to be stopped runs to its end
    short = Curve("short", (4.5,), (3.0,), 9.0, True)
    assert stopping_floor([*CURVES, short], RATE, BEST.trial_id, 2)[0] == pytest.approx(want + 9.0)


def test_no_replayed_strategy_that_keeps_the_recipe_spends_less_than_the_floor():
    grid_usd = sum(c.wall_s * RATE[c.trial_id] for c in CURVES)
    ids = sorted(c.trial_id for c in CURVES)
    for o in range(2):
        rng = random.Random(o)
        order = list(ids)
        rng.shuffle(order)
        run = _stretched(CURVES, rng, 0.25)
        floor_s, _ = stopping_floor(run, RATE, BEST.trial_id, MIN_VALUES)
        for stopper in (None, cost_stopper(run, RATE, "minimize", grid_usd)):
            sim = simulate_asha(run, slots=2, min_steps=2, reduction_factor=5, goal="minimize", order=order,
                                stopper=stopper)
            assert sim.best_trial_id == BEST.trial_id
            assert sim.trial_seconds >= floor_s - 1e-6


def test_the_report_states_the_floor_against_plain_asha():
    out = replay_strategies(CURVES, RATE, slots=2, goal="minimize", orders=3,
                            strategies=("grid", "asha-rungs", "asha")).to_json()
    fl = out["stopping_floor"]
    assert fl["min_values"] == MIN_VALUES and fl["cost_vs_grid_range"][0] <= fl["cost_vs_grid"]
    plain, default = out["strategies"]["asha-rungs"], out["strategies"]["asha"]
    assert fl["cost_vs_grid"] < default["cost_vs_grid"] <= plain["cost_vs_grid"]
    assert out["cost_aware_vs_plain"]["floor_vs_plain"] == pytest.approx(fl["cost_vs_grid"] / plain["cost_vs_grid"],
                                                                          abs=1e-3)
    # on the demo's curves no stopping rule reaches half of plain ASHA's dollars: the floor is above it
    assert fl["vs_plain"] > 0.5
    assert out["references"] == "leave-one-out"


def test_another_sweeps_references_choose_the_settings_and_grow_with_the_sweeps_own_ended_trials():
    curves, rate, _ = synthetic_curves("smooth", seed=10)
    other, _, _ = synthetic_curves("smooth", seed=110)
    rep = replay_strategies(curves, rate, slots=2, goal="minimize", orders=2, strategies=("grid", "asha"),
                            references=other).to_json()
    assert rep["references"] == "another sweep"
    assert any("12 curves of another sweep" in n for n in rep["notes"])
    bad = Curve("bad", (4.5, 4.4, 4.3, 4.2), (1.0, 2.0, 3.0, 4.0), 100.0, True)
    stop = cost_stopper([*curves, bad], {**rate, "bad": 1.0}, "minimize", 1e-9, references=other[:2])
    assert stop("bad", [4.5, 4.4], None, 2.0) is False  # 2 references: too few to forecast from
    stop.ended(curves[0].trial_id, list(curves[0].values))  # what simulate_asha calls when a sweep's trial ends
    assert stop("bad", [4.5, 4.4], None, 2.0) is True  # 3 now: a hopeless curve with $98 left is stopped
    with pytest.raises(ValueError, match="references"):
        replay_strategies(curves, rate, slots=2, goal="minimize", orders=1, strategies=("grid", "asha"),
                          references=other[:1])


def test_the_holdout_benchmark_refuses_bad_input():
    for args in (["--orders", "0"], ["--held-out-seeds", "1-3"], ["--held-out-seeds", "x"]):
        r = subprocess.run([sys.executable, "benchmarks/search_holdout.py", *args], cwd=REPO, capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 2 and r.stderr.startswith("search_holdout.py: ") and "Traceback" not in r.stderr


def test_a_bolder_level_stops_a_curve_the_median_guard_keeps():
    from gpuledger.search.extrapolate import LEVEL, LEVELS, UNCHECKED_LEVEL, CostStopper

    assert [lv.name for lv in LEVELS] == ["fifth", "third", "half"] and UNCHECKED_LEVEL == "half"
    assert [lv.guard for lv in LEVELS] == sorted(lv.guard for lv in LEVELS)  # boldest first
    # 10 references falling to 1.0-1.9; at its 2nd value the trial is worse than the best 4 (better third), not
    # than the best 5 (the median)
    # and falls no faster than any of them: no reference forecasts it beating 1.0
    refs = [(4.5, 2.0 + 0.1 * i, 1.5 + 0.1 * i, 1.0 + 0.1 * i) for i in range(10)]
    trial = [4.5, 2.35]
    half = CostStopper(list(refs), "minimize", 1.0, level="half").decide(trial, 1.0, 0.5)
    assert half is None  # as good as the references' median at its step: the guard keeps it
    third = CostStopper(list(refs), "minimize", 1.0, level="third").decide(trial, 1.0, 0.5)
    assert third is not None and third.stop and third.p_beat == pytest.approx(0.25 / (10 + 0.5))
    fifth = CostStopper(list(refs), "minimize", 1.0, level="fifth").decide(trial, 1.0, 0.5)
    assert fifth.stop and fifth.p_beat == pytest.approx(LEVEL["fifth"].prior / (10 + 2 * LEVEL["fifth"].prior))
    # worth more than it costs: kept at every level
    assert not CostStopper(list(refs), "minimize", 1.0, level="fifth").decide(trial, 1.0, 0.001).stop


def test_the_check_runs_the_boldest_level_that_keeps_the_recipe_and_the_sweep_runs_it():
    from gpuledger.search.extrapolate import LEVELS, cost_stopper_for
    from gpuledger.search.safety import (
        check_cost_stopping,
        choose_pruning_for_curves,
        with_checked_stopping,
        with_chosen_pruning,
    )
    from gpuledger.spec import load_spec

    # checked as the sweep runs it: suspending at undecided rungs (search.pruning.suspend's default)
    base = choose_pruning_for_curves(CURVES, goal="minimize", slots=2, suspend=True)
    choice = with_checked_stopping(base, CURVES, goal="minimize", slots=2, suspend=True, stopping="cost", every_point=True)
    names = [lv.name for lv in LEVELS]
    assert choice.stopping == "cost" and choice.stopping_level in names
    for name in names[:names.index(choice.stopping_level)]:  # every bolder level loses the recipe in a check order
        assert not check_cost_stopping(CURVES, goal="minimize", slots=2, min_steps=base.min_steps,
                                       reduction_factor=base.reduction_factor, level=name, suspend=True)[0]
    assert f"({choice.stopping_level}) kept the best measured curve in 16 of 16" in choice.stopping_why
    assert choice.to_json()["stopping_level"] == choice.stopping_level
    only = with_checked_stopping(base, CURVES, goal="minimize", slots=2, suspend=True, stopping="cost", level="half",
                                 every_point=True)
    assert only.stopping_level == "half"  # the spec's level: only it is checked
    # curves of the kind that are not every point of the sweep (another sweep's): the median guard alone
    other = with_checked_stopping(base, CURVES, goal="minimize", slots=2, suspend=True, stopping="cost")
    assert other.stopping_level == "half" and "(fifth)" not in other.stopping_why
    spec = load_spec(REPO / "gpuledger" / "scaffold" / "specs" / "lora-asha.yaml")
    assert spec.search.stopping_level is None
    ran = with_chosen_pruning(spec, choice.to_json())
    assert ran.search.stopping_level == choice.stopping_level  # the stored spec says what ran
    assert cost_stopper_for(ran, {}, 1.0).level == choice.stopping_level
    assert cost_stopper_for(spec, {}, 1.0).level == "half"  # unchecked (a cold project): the median guard


def test_the_plan_tries_the_bolder_levels_only_when_it_has_every_points_own_curve():
    from gpuledger.plan.pruning import params_key
    from gpuledger.search.safety import choose_pruning
    from gpuledger.spec import load_spec

    spec = load_spec(REPO / "gpuledger" / "scaffold" / "specs" / "lora-asha.yaml")
    curves = {params_key(c["params"]): cv for c, cv in zip(DATA["curves"], CURVES, strict=True)}
    every = {k: f"t{i}" for i, k in enumerate(curves)}
    full = choose_pruning(spec, curves, slots=2, order_of=every)
    assert full.stopping == "cost" and full.stopping_level != "half"  # the demo's 12 points: a bolder level
    part = dict(list(every.items())[:11]) | {"lr=9;r=1": "t99"}  # one point of the sweep has no curve
    assert choose_pruning(spec, curves, slots=2, order_of=part).stopping_level == "half"
