"""The planner replays the search that runs: with suspension at undecided rungs when the spec's
`search.pruning.suspend` is true (the default), without when false, read in one place
(`gpuledger.search.suspension.suspends`) by the runtime's study, the plan's spend, its safety checks and the
report. Over the demo grid's recorded curves (tests/data/demo_grid_curves.json: a real `gpuledger sweep
specs/lora-grid.yaml`), the demo spec as `strategy: asha`: the plan's spend is the replay of the runtime's rule,
and the two settings give the two replays."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from gpuledger.plan.pruning import PLAN_ORDERS, _cost_at, _replayed_orders, params_key, pruned_spend
from gpuledger.search import AdaptiveSearch, launch_order
from gpuledger.search.asha_replay import Curve, simulate_asha
from gpuledger.search.replay import cost_stopper
from gpuledger.search.suspension import spec_suspends, suspends
from gpuledger.spec import expand_trials, load_spec

REPO = Path(__file__).resolve().parents[2]
DATA = json.loads((REPO / "tests" / "data" / "demo_grid_curves.json").read_text())
OVERHEAD_S = 3.0


def _spec(folder: Path, search_extra: str = ""):
    """specs/lora-grid.yaml as `strategy: asha`, plus `search_extra` lines under `search:`."""
    text = (REPO / "specs" / "lora-grid.yaml").read_text().replace("strategy: grid", "strategy: asha" + search_extra, 1)
    path = folder / f"asha-{len(list(folder.glob('asha-*.yaml')))}.yaml"
    path.write_text(text)
    return load_spec(path)


def _inputs(spec):
    """The plan's trial rows (each point at its recorded wall-clock and dollars) and the warehouse's curves."""
    by_key = {params_key(c["params"]): c for c in DATA["curves"]}
    trials = expand_trials(spec)
    rows = [{"trial_id": t.trial_id, "trial_index": t.index, "params": t.params, "feasible": True,
             "est_wall_s": by_key[params_key(t.params)]["wall_s"],
             "est_cost_usd": by_key[params_key(t.params)]["wall_s"] * by_key[params_key(t.params)]["usd_per_s"]}
            for t in trials]
    curves = {k: Curve(c["trial_id"], tuple(c["values"]), tuple(c["times_s"]), c["wall_s"], True)
              for k, c in by_key.items()}
    return rows, curves


def _by_hand(spec, rows, curves, suspend: bool) -> float:
    """The expected spend as the runtime's rule says: the chosen settings and level replayed in the launch
    order and over PLAN_ORDERS arrival orders, with or without suspension."""
    pr = pruned_spend(rows, spec, max_parallel=2, overhead_s=OVERHEAD_S, curves=curves)
    st = pr.settings
    ids = [r["trial_id"] for r in rows]
    order = launch_order(ids, spec.search.seed)
    cs = [replace(curves[params_key(r["params"])], trial_id=r["trial_id"]) for r in rows]
    level = st.get("stopping_level")
    cost_on = st.get("stopping") == "cost"
    stop = cost_stopper(cs, {c.trial_id: 1.0 for c in cs}, "minimize", sum(c.wall_s for c in cs), level=level) \
        if cost_on else None
    sim = simulate_asha(cs, slots=2, min_steps=st["min_steps"], reduction_factor=st["reduction_factor"],
                        goal="minimize", order=order, stopper=stop, suspend=suspend)
    orders = _replayed_orders(cs, 2, st["min_steps"], st["reduction_factor"], "minimize",
                              (level or True) if cost_on else False, suspend=suspend)
    measured = sum(c.wall_s for c in cs)
    scale = orders["trial_s_median"] / (sim.trial_seconds / measured)
    by_id = {c.trial_id: c for c in cs}
    assert pr.run_fraction == pytest.approx(orders["trial_s_median"], abs=1e-9)
    total = 0.0
    for r in rows:  # every attempt of a trial is paid (a relaunch runs its first values again)
        raw = sum(t.seconds for t in sim.trials if t.trial_id == r["trial_id"]) / by_id[r["trial_id"]].wall_s
        total += _cost_at(r, min(max(1.0, raw), raw * scale) if suspend else min(1.0, raw * scale), OVERHEAD_S)
    if suspend:  # the recipe is suspended at its rung in the launch order and relaunched: both attempts counted
        assert max(len(sim.attempts(r["trial_id"])) for r in rows) == 2
    return total


def test_one_rule_says_who_suspends_and_the_runtime_reads_it(tmp_path):
    bare, off = _spec(tmp_path), _spec(tmp_path, "\n  pruning: {suspend: false}")
    assert spec_suspends(bare) is True and spec_suspends(off) is False
    assert suspends("asha", None) and suspends("asha", {"suspend": None}) and not suspends("asha", {"suspend": False})
    assert not suspends("tpe", {"suspend": True}) and not suspends("grid")  # tpe's study does not suspend
    for spec in (bare, off):  # the runtime's study suspends exactly when the rule says
        search = AdaptiveSearch.open(spec, "s", expand_trials(spec), path=tmp_path / f"{spec.name}.journal")
        assert search.suspend is spec_suspends(spec)


@pytest.mark.slow  # over ~1 s (a whole report, replay, plan or warehouse): make test runs it, make test-fast does not
def test_the_plans_spend_and_checks_replay_suspension_as_the_spec_asks(tmp_path):
    bare, off = _spec(tmp_path), _spec(tmp_path, "\n  pruning: {suspend: false}")
    rows, curves = _inputs(bare)
    on = pruned_spend(rows, bare, max_parallel=2, overhead_s=OVERHEAD_S, curves=curves)
    no = pruned_spend(rows, off, max_parallel=2, overhead_s=OVERHEAD_S, curves=curves)
    assert on.source == no.source == "measured" and on.curves == no.curves == 12
    assert on.suspend is True and no.suspend is False
    assert on.to_json()["suspend"] is True and on.settings["suspend"] is True and no.settings["suspend"] is False
    # the plan's text says which search it replayed
    assert "with suspension at undecided rungs" in on.basis and "without suspension" in no.basis
    assert "replayed with suspension" in on.settings["why"] and "replayed without suspension" in no.settings["why"]
    assert "with suspension at undecided rungs" in on.settings["stopping_why"]
    assert "without suspension" in no.settings["stopping_why"]
    # the decided spend is the replay of the runtime's rule, each with its own suspension
    assert on.expected_usd == pytest.approx(_by_hand(bare, rows, curves, True), rel=1e-9)
    assert no.expected_usd == pytest.approx(_by_hand(off, rows, curves, False), rel=1e-9)
    # and the two differ as the simulator says (with the cost rule at its checked level on every point's own
    # curve, suspension's relaunches cost about what its freed slots save here)
    assert on.expected_usd != pytest.approx(no.expected_usd, rel=1e-3)
    assert f"over {PLAN_ORDERS} arrival orders" in on.basis


@pytest.mark.slow  # over ~0.5 s alone (a report, warehouse, plan or subprocess): make test runs it, make test-fast does not
def test_by_the_rungs_alone_suspension_makes_the_planned_spend_smaller(tmp_path):
    bare = _spec(tmp_path, "\n  stopping: rungs")
    off = _spec(tmp_path, "\n  stopping: rungs\n  pruning: {suspend: false}")
    rows, curves = _inputs(bare)
    on = pruned_spend(rows, bare, max_parallel=2, overhead_s=OVERHEAD_S, curves=curves)
    no = pruned_spend(rows, off, max_parallel=2, overhead_s=OVERHEAD_S, curves=curves)
    assert on.expected_usd == pytest.approx(_by_hand(bare, rows, curves, True), rel=1e-9)
    assert no.expected_usd == pytest.approx(_by_hand(off, rows, curves, False), rel=1e-9)
    # the first trials wait at their 2nd value instead of running on undecided (docs/search.md: 49% -> 33%)
    assert on.run_fraction < 0.75 * no.run_fraction and on.expected_usd < no.expected_usd
    assert on.makespan_fraction <= 1.0 and no.makespan_fraction <= 1.0


def test_without_curves_the_formula_says_whether_the_sweep_suspends(tmp_path):
    spec = _spec(tmp_path, "\n  pruning: {values_per_trial: 17}")
    rows, _ = _inputs(spec)
    on = pruned_spend(rows, spec, max_parallel=2, overhead_s=OVERHEAD_S, curves=None)
    assert on.source == "formula" and on.suspend is True and "suspension at undecided rungs" in on.basis
    off = pruned_spend(rows, _spec(tmp_path, "\n  pruning: {values_per_trial: 17, suspend: false}"), max_parallel=2,
                       overhead_s=OVERHEAD_S, curves=None)
    assert off.suspend is False and "suspend: false" in off.basis
    assert on.expected_usd == pytest.approx(off.expected_usd)  # the formula is synchronous halving either way
