"""The search's safety, learning-curve forecast and replay harness on the demo grid's recorded curves
(tests/data/demo_grid_curves.json: a real `gpuledger sweep specs/lora-grid.yaml`; its recipe, lr 3e-2 /
r 16 / micro-batch 8, is second from its 4th value to its 14th)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuledger.search.asha_replay import Curve, simulate_asha
from gpuledger.search.comparison import replay_strategies
from gpuledger.search.extrapolate import CostStopper, forecast
from gpuledger.search.replay import (
    COST_AWARE_STRATEGY,
    DEFAULT_STRATEGY,
    PLAIN_STRATEGY,
    replay_settings,
)
from gpuledger.search.safety import (
    COLD_DEFAULT,
    CORRECTED,
    DEFAULT,
    SPEC,
    UNSAFE_KEPT,
    choose_pruning_for_curves,
)

DATA = json.loads((Path(__file__).resolve().parents[1] / "data" / "demo_grid_curves.json").read_text())
CURVES = [Curve(c["trial_id"], tuple(c["values"]), tuple(c["times_s"]), c["wall_s"], True) for c in DATA["curves"]]
RATE = {c["trial_id"]: c["usd_per_s"] for c in DATA["curves"]}
BEST = min(CURVES, key=lambda c: c.values[-1])


def test_the_recorded_recipe_is_second_for_most_of_its_run():
    # what makes settings that keep one trial after its 4th value unsafe: another one is better there
    second = sorted(CURVES, key=lambda c: c.values[5])
    assert second[0].trial_id != BEST.trial_id and second[1].trial_id == BEST.trial_id


def test_the_default_is_checked_on_measured_curves_and_kept():
    choice = choose_pruning_for_curves(CURVES, goal="minimize", slots=2, suspend=False)
    assert (choice.min_steps, choice.reduction_factor) == (COLD_DEFAULT.min_steps, COLD_DEFAULT.reduction_factor)
    assert choice.source == DEFAULT and choice.kept is True and choice.checked_curves == 12
    assert "keep the best of 12" in choice.why


def test_unsafe_settings_are_corrected_and_say_why_or_kept_when_asked():
    fixed = choose_pruning_for_curves(CURVES, goal="minimize", slots=2, suspend=False, requested=(4, 3), explicit=True)
    assert fixed.source == CORRECTED and fixed.kept is False and fixed.changed
    assert "would drop" in fixed.why and "corrected to" in fixed.why
    # the corrected setting keeps the recipe: synchronous successive halving (any arrival order) agrees
    again = choose_pruning_for_curves(CURVES, goal="minimize", slots=2, suspend=False,
                                      requested=(fixed.min_steps, fixed.reduction_factor), explicit=True)
    assert again.source == SPEC and again.kept is True
    kept = choose_pruning_for_curves(CURVES, goal="minimize", slots=2, suspend=False, requested=(4, 3), explicit=True,
                                     unsafe="keep")
    assert kept.source == UNSAFE_KEPT and (kept.min_steps, kept.reduction_factor) == (4, 3)


def test_without_curves_the_settings_are_unchecked():
    choice = choose_pruning_for_curves([], goal="minimize", slots=2, suspend=False)
    assert choice.kept is None and choice.checked_curves == 0 and "unchecked" in choice.why


def test_forecast_from_references_and_the_cost_rule():
    refs = [(4.0, 2.0, 1.0), (4.0, 3.0, 2.0), (4.0, 2.5, 1.5)]
    # at 3.0 after one value: the references fall to 1/4, 1/2, 3/8 of their first: finals 0.75, 1.5, 1.125
    f = forecast([3.0], best=1.0, references=refs, goal="minimize")
    assert f.references == 3 and f.predicted == pytest.approx(1.125)
    assert f.p_beat == pytest.approx((1 + 0.5) / 4)  # only 0.75 beats 1.0 made 2% worse
    stopper = CostStopper([(5.0, 4.0, 3.0, 2.0), (5.0, 3.0, 2.0, 1.0), (5.0, 3.5, 2.5, 1.5), (5.0, 4.5, 4.0, 3.5)],
                          "minimize", value_usd=1.0, min_values=2)
    assert stopper.decide([5.0], best=1.0, usd_left=0.5) is None  # too few values
    assert stopper.decide([5.0, 3.0], best=1.0, usd_left=0.5) is None  # in the better half at its step
    d = stopper.decide([5.0, 4.6], best=1.0, usd_left=0.5)  # worse than every reference, forecast > 2.5
    assert d.stop and d.p_beat == pytest.approx(0.5 / 5) and "stopped by its learning curve" in d.reason
    assert not stopper.decide([5.0, 4.6], best=1.0, usd_left=0.05).stop  # cheap to finish: worth running on


def test_the_cost_rule_in_the_replay_stops_by_curve():
    from gpuledger.search.replay import cost_stopper

    stop = cost_stopper(CURVES, RATE, "minimize", value_usd=sum(c.wall_s * RATE[c.trial_id] for c in CURVES))
    sim = simulate_asha(CURVES, slots=2, min_steps=2, reduction_factor=5, goal="minimize", stopper=stop)
    assert sim.best_trial_id == BEST.trial_id
    assert {t.stopped_by for t in sim.trials if t.status == "pruned"} <= {"rung", "curve"}
    assert any(t.stopped_by == "curve" for t in sim.trials)


def test_replay_over_orders_default_keeps_the_recipe_for_less_than_the_grid():
    rep = replay_strategies(CURVES, RATE, slots=2, goal="minimize", orders=4,
                            strategies=("grid", "asha-optuna", PLAIN_STRATEGY, DEFAULT_STRATEGY))
    out = rep.to_json()
    assert out["default"] == DEFAULT_STRATEGY == COST_AWARE_STRATEGY == out["cost_aware"]
    assert set(out["strategies"]) == {"grid", "asha-optuna", "asha-rungs", "asha"} and out["plain"] == PLAIN_STRATEGY
    grid = out["strategies"]["grid"]
    assert grid["recipe_kept"] == 1.0 and grid["cost_vs_grid"] == 1.0
    for name in (PLAIN_STRATEGY, DEFAULT_STRATEGY):
        s = out["strategies"][name]
        assert s["recipe_kept"] == 1.0 and s["replays"] == 4
        lo, hi = s["cost_vs_grid_range"]
        assert lo <= s["cost_vs_grid"] <= hi < 1.0
    assert out["strategies"]["asha"]["cost_vs_grid"] <= out["strategies"]["asha-rungs"]["cost_vs_grid"]
    # same seeds, same replays: plain and the default suspend at undecided rungs, as the runtime by default
    assert out["strategies"]["asha-rungs"]["settings"]["suspend"] is out["strategies"]["asha"]["settings"]["suspend"] is True
    one = replay_settings(CURVES, RATE, slots=2, goal="minimize", min_steps=2, reduction_factor=5, orders=4, suspend=True)
    assert one.to_json()["cost_vs_grid"] == out["strategies"]["asha-rungs"]["cost_vs_grid"]
    both = replay_settings(CURVES, RATE, slots=2, goal="minimize", min_steps=2, reduction_factor=5, orders=4,
                           suspend=True, cost_stopping=out["strategies"]["asha"]["settings"]["stopping_level"])
    assert both.to_json()["cost_vs_grid"] == out["strategies"]["asha"]["cost_vs_grid"]


def test_the_rung_pruners_fate_is_undecided_while_peers_have_not_started():
    import optuna

    from gpuledger.search.rungs import CONFIRMED, PRUNED_AT, TRIAL_ID_ATTR, UNDECIDED, RungPruner

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    pr = RungPruner(1, 2, 4)  # rung 0 at step 1 keeps 2 of 4
    study = optuna.create_study(pruner=pr)
    live = []
    for i, v in enumerate((1.0, 2.0)):
        t = study.ask()
        t.set_user_attr(TRIAL_ID_ATTR, f"t{i}")
        t.report(v, step=1)
        live.append(t)
    frozen = [study._storage.get_trial(t._trial_id) for t in live]
    assert pr.fate(study, frozen[0]) == (UNDECIDED, 0)  # two trials not started yet may both be better
    for i, v in enumerate((3.0, 4.0), start=2):
        t = study.ask()
        t.set_user_attr(TRIAL_ID_ATTR, f"t{i}")
        t.report(v, step=1)
        live.append(t)
    assert pr.fate(study, study._storage.get_trial(live[0]._trial_id)) == (CONFIRMED, 1)
    assert pr.fate(study, study._storage.get_trial(live[3]._trial_id)) == (PRUNED_AT, 0)
    # a suspended trial keeps its later rungs open: counted as a value still to come
    study.tell(live[1], state=optuna.trial.TrialState.PRUNED)
    pr.suspended.add("t1")
    live[0].report(0.5, step=2)
    assert pr.fate(study, study._storage.get_trial(live[0]._trial_id)) == (UNDECIDED, 1)


def test_suspension_at_undecided_rungs_keeps_the_recipe_for_fewer_seconds_and_pays_the_relaunch():
    import random

    from gpuledger.search.suspension import suspend_pays

    # rung 0 of 12 at eta 5 keeps 2: p = 1/6; 2 values in 10 s, the next rung 8 values on at 4 s a value
    assert suspend_pays(2, 10.0, (2.0, 6.0), 17, 2, 5, 12)  # 1/6 x 10 < 5/6 x 32
    assert not suspend_pays(2, 200.0, (2.0, 6.0), 17, 2, 5, 12)  # a long start-up: cheaper to run on
    assert not suspend_pays(3, 10.0, (2.0, 6.0, 10.0), 17, 2, 5, 12)  # not a rung
    rep = replay_strategies(CURVES, RATE, slots=2, goal="minimize", orders=6,
                            strategies=("grid", "asha-cold-no-suspend", "asha-cold")).to_json()["strategies"]
    cold, sus = rep["asha-cold-no-suspend"], rep["asha-cold"]  # a bare asha in a fresh project: suspends
    assert sus["recipe_kept"] == cold["recipe_kept"] == 1.0 and sus["settings"]["suspend"] is True
    assert cold["settings"]["suspend"] is False
    assert sus["trial_s_vs_grid"] < cold["trial_s_vs_grid"] and sus["trial_s_vs_grid_range"][1] < 0.5
    assert sus["over_half_grid_trial_s"] == 0.0 and sus["trial_s_vs_grid"] <= sus["trial_s_vs_grid_p90"] < 0.5
    assert cold["trial_s_vs_grid"] <= cold["trial_s_vs_grid_p90"] <= cold["trial_s_vs_grid_range"][1]
    order = sorted(c.trial_id for c in CURVES)
    random.Random(0).shuffle(order)  # the recipe starts before most of its rung's peers
    sim = simulate_asha(CURVES, slots=2, min_steps=2, reduction_factor=5, goal="minimize", order=order, suspend=True)
    attempts = [t for t in sim.trials if t.trial_id == BEST.trial_id]
    assert sim.best_trial_id == BEST.trial_id and [t.status for t in attempts] == ["suspended", "completed"]
    assert attempts[1].values_reported == len(BEST.values)  # relaunched from its start
    assert sim.trial_seconds == pytest.approx(sum(t.seconds for t in sim.trials))  # both attempts are paid
    assert sim.pruned == sum(1 for t in sim.trials if t.status == "pruned") == len(CURVES) - sim.completed


def test_replay_refuses_too_few_curves():
    with pytest.raises(ValueError, match="at least 2"):
        replay_strategies(CURVES[:1], RATE, slots=2, goal="minimize", orders=2)


def test_expected_improvement_per_dollar_prefers_the_cheaper_of_equals():
    from gpuledger.search.acquisition import expected_improvement, next_point

    assert expected_improvement(1.0, 0.0, 2.0, "minimize") == 1.0 and expected_improvement(3.0, 0.0, 2.0, "minimize") == 0
    assert expected_improvement(2.0, 1.0, 2.0, "minimize") == pytest.approx(1 / (2 * 3.141592653589793) ** 0.5)
    space = {"x": [0.0, 0.25, 0.5, 0.75, 1.0], "b": [8, 32]}
    told = [({"x": 0.0, "b": 8}, 3.0), ({"x": 1.0, "b": 8}, 3.0), ({"x": 0.5, "b": 8}, 1.0)]
    cands = [("cheap", {"x": 0.5, "b": 32}, 0.1), ("dear", {"x": 0.5, "b": 32}, 1.0), ("far", {"x": 0.0, "b": 32}, 0.1)]
    assert next_point(cands, told, space, goal="minimize", n_trials=10) == "cheap"  # same point, a tenth of the cost
    # the last point to ask weighs no cost (cooling): the dear twin is as good, ties to the first by id
    assert next_point(cands[:2], told, space, goal="minimize", n_trials=4) == "cheap"
    assert next_point(cands, told[:1], space, goal="minimize", seed=3) == next_point(cands, told[:1], space,
                                                                                     goal="minimize", seed=3)


def test_tpe_and_ei_per_dollar_replayed_over_seeds():
    from gpuledger.search.replay import replay_asks

    params = {c["trial_id"]: c["params"] for c in DATA["curves"]}
    out = replay_asks(CURVES, RATE, params, goal="minimize", orders=2)
    for name in ("tpe", "tpe-ei-per-usd"):
        s = out[name].to_json()
        assert s["replays"] == 2 and s["settings"]["n_trials"] == 6
        assert 0 < s["cost_vs_grid"] < 1.0 and 0 <= s["recipe_kept"] <= 1


def test_a_train_section_stored_before_a_field_was_added_is_the_same_kind(tmp_path):
    from gpuledger.inputs.ledger import same_train_settings
    from gpuledger.spec import load_spec

    spec = load_spec(Path(__file__).resolve().parents[2] / "gpuledger" / "scaffold" / "specs" / "lora-grid.yaml")
    stored = spec.train.model_dump(mode="json")
    assert same_train_settings(json.dumps(stored), spec)
    older = {k: v for k, v in stored.items() if k not in ("offload", "sequence_parallel", "expert_parallel")}
    assert same_train_settings(json.dumps(older), spec)  # fields added since take their defaults
    assert not same_train_settings(json.dumps({**stored, "seq_len": 128}), spec)
    assert not same_train_settings(None, spec) and not same_train_settings("{not json", spec)


@pytest.mark.slow  # over ~1 s (a whole report, replay, plan or warehouse): make test runs it, make test-fast does not
def test_cost_stopping_is_checked_on_the_curves_and_turned_off_where_it_loses_the_recipe():
    from gpuledger.search.safety import check_cost_stopping, with_checked_stopping
    from gpuledger.search.synthetic import FAMILIES, synthetic_curves

    ok, why = check_cost_stopping(CURVES, goal="minimize", slots=2, min_steps=2, reduction_factor=5, suspend=False)
    assert ok and "16 of 16" in why  # the demo grid: the rule keeps its recipe in every replayed order
    crossing, rate, _ = synthetic_curves("crossing", seed=0)  # early leaders plateau high: forecasts mislead
    choice = with_checked_stopping(choose_pruning_for_curves(crossing, goal="minimize", slots=2, suspend=False), crossing,
                                   goal="minimize", slots=2, suspend=False, stopping="cost")
    assert choice.stopping == "rungs" and "would lose the best" in choice.stopping_why
    assert choice.to_json()["stopping"] == "rungs"
    cold = with_checked_stopping(choose_pruning_for_curves([], goal="minimize", slots=2, suspend=False), [], goal="minimize",
                                 slots=2, suspend=False, stopping="cost")
    assert cold.stopping is None  # unchecked: the spec's rule runs on the sweep's own ended trials
    # the replayed default checks the same way, and keeps the recipe where the rule alone would not
    rep = replay_strategies(crossing, rate, slots=2, goal="minimize", orders=4,
                            strategies=("grid", PLAIN_STRATEGY, DEFAULT_STRATEGY)).to_json()
    assert rep["strategies"]["asha"]["recipe_kept"] == 1.0 and rep["strategies"]["asha"]["settings"]["cost_stopping"] is False
    assert set(FAMILIES) == {"smooth", "noisy", "crossing", "late", "mixed"}
    with pytest.raises(ValueError, match="unknown curve family"):
        synthetic_curves("wavy")


def test_the_plan_turning_the_rule_off_reaches_the_spec_the_sweep_runs():
    from gpuledger.search.safety import with_chosen_pruning
    from gpuledger.spec import load_spec

    spec = load_spec(Path(__file__).resolve().parents[2] / "gpuledger" / "scaffold" / "specs" / "lora-asha.yaml")
    assert spec.search.stopping == "cost"
    def chosen(stopping):  # Plan.pruning.settings: PruningChoice.to_json()
        return {"min_steps": 2, "reduction_factor": 5, "stopping": stopping}

    assert with_chosen_pruning(spec, chosen("rungs")).search.stopping == "rungs"
    assert with_chosen_pruning(spec, chosen("cost")).search.stopping == "cost"
