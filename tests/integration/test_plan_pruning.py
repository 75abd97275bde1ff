"""The planner's expected spend under pruning (gpuledger/plan/pruning.py): the successive-halving formula
worked out by hand, the unknown case, measured curves of a real grid replayed for an ASHA spec of the same
points, the budget guard on the expected spend, and the mid-sweep budget stop still holding the real budget
when the expected pruned spend fits but the trials do not get pruned (real subprocesses, real DuckDB)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from helpers.sweep_specs import sweep_spec, trial_script, x_points

from gpuledger.errors import BudgetExceeded
from gpuledger.plan import budget_guard, plan_sweep, render_plan
from gpuledger.plan.pruning import params_key
from gpuledger.search.asha_replay import Curve, simulate_asha
from gpuledger.search.recipe import successive_halving_fraction
from gpuledger.spec import expand_trials, load_spec, sweep_id_for

# reports eval_loss = |x - 0.3| + 1 + 0.001 / step five times (or the value the map gives x), SLEEP s apart
TRIAL = trial_script("""
    base = json.load(open(a.map))[repr(a.x)] if a.map else abs(a.x - 0.3) + 1.0
    for step in range(1, 6):
        log(step=step, eval_loss=base + 0.001 / step)
        time.sleep(a.sleep)
""", options="""
    p.add_argument("--sleep", type=float, default=0.2)
    p.add_argument("--map", default="")
""")


def _spec(folder: Path, *, name: str = "prune-plan", strategy: str = "asha", pruning: str = "", budget: float = 100.0,
          tokens: int = 20_000, run_extra: str = "", max_parallel: int = 2, xs=(0.7, 0.57, 0.3, 0.2, 0.42, 0.05),
          usd_per_hour: float = 36.0, n_trials: int | None = None) -> Path:
    search = "\n".join([f"strategy: {strategy}", *([f"pruning: {pruning}"] if pruning else []),
                         *([f"n_trials: {n_trials}"] if n_trials is not None else [])])
    return sweep_spec(folder, name=name, search=search,
                      params=x_points(xs), trial=TRIAL, run=f"python {folder / 'trial.py'} --x {{x}}{run_extra}",
                      tokens_per_trial=tokens, max_parallel=max_parallel, budget_usd=budget, usd_per_hour=usd_per_hour)


def _plan(spec_path: Path, curves=None):
    from gpuledger.inputs.ledger import planning_inputs

    sp = load_spec(spec_path)
    inputs = planning_inputs(sp, "local")
    if curves is not None:
        inputs = replace(inputs, curves=curves)
    return sp, plan_sweep(sp, launcher="local", inputs=inputs)


def _run(sp, spec_path: Path, plan):
    """Runs the sweep as `plan` planned it (the accepted sweep built around a plan made here)."""
    from gpuledger.runtime.accepted import AcceptedSweep
    from gpuledger.runtime.engine import SweepRun, execute

    accepted = AcceptedSweep(spec=sp, spec_path=spec_path, sweep_id=sweep_id_for(sp), trials=tuple(expand_trials(sp)),
                             plan=plan, cap=plan.max_parallel, launcher="local")
    summary = accepted.new_summary()
    execute(SweepRun(accepted, summary=summary))
    return summary


@pytest.fixture
def warehouse(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GPULEDGER_WAREHOUSE", str(tmp_path / "wh" / "ledger.duckdb"))
    return tmp_path / "wh" / "ledger.duckdb"


def test_successive_halving_fraction_worked_out_by_hand():
    # the demo: 17 values, min_steps 2, eta 3: rungs at 2 and 6 (18 > 17): every trial runs 2 values,
    # a third on to 6, a ninth on to 17: (2 + 4/3 + 11/9) / 17
    assert successive_halving_fraction(17, 2, 3) == pytest.approx((2 + 4 / 3 + 11 / 9) / 17)
    # 5 values, min_steps 1, eta 2: rungs 1, 2, 4: (1 + 1/2 + 2/4 + 1/8) / 5
    assert successive_halving_fraction(5, 1, 2) == pytest.approx((1 + 0.5 + 0.5 + 0.125) / 5)
    assert successive_halving_fraction(2, 2, 3) == 1.0  # judged only at its last value: it runs to its end


def test_formula_from_the_spec_and_unknown_without_it(tmp_path, warehouse):
    # no warehouse, no values_per_trial: unknown, the guard decides on the full spend
    sp, plan = _plan(_spec(tmp_path))
    assert plan.pruning.source == "unknown" and plan.pruning.expected_usd is None
    assert "values_per_trial" in plan.pruning.basis and "expected spend under pruning: unknown" in render_plan(plan)
    assert all(t["est_pruned_cost_usd"] is None for t in plan.trials)
    # values_per_trial given: the formula, set-up (3 s per local trial) paid in full
    sp, plan = _plan(_spec(tmp_path, pruning="{min_steps: 1, reduction_factor: 2, values_per_trial: 5}"))
    f = successive_halving_fraction(5, 1, 2)
    pr = plan.pruning
    assert pr.source == "formula" and pr.run_fraction == pytest.approx(f, abs=1e-6)
    assert "search.pruning.values_per_trial" in pr.basis
    expected = 0.0
    for t in plan.trials:
        run_share = (t["est_wall_s"] - 3.0) / t["est_wall_s"]
        assert t["est_pruned_cost_usd"] == pytest.approx(t["est_cost_usd"] * (1 - run_share * (1 - f)), rel=1e-4)
        expected += t["est_pruned_cost_usd"]
    assert pr.expected_usd == pytest.approx(expected, rel=1e-4)
    assert pr.full_usd == pytest.approx(plan.total_est_cost_usd, rel=1e-4) and expected < plan.total_est_cost_usd
    text = render_plan(plan)
    assert "expected spend under pruning" in text and "source formula" in text
    # grid: no pruning section
    _, grid = _plan(_spec(tmp_path, name="prune-grid", strategy="grid"))
    assert grid.pruning is None and "pruning" not in grid.to_json()
    # two plans in a row are byte-identical
    assert _plan(_spec(tmp_path, pruning="{min_steps: 1, reduction_factor: 2, values_per_trial: 5}"))[1] \
        .to_json_text() == plan.to_json_text()


def test_the_budget_guard_decides_on_the_expected_pruned_spend(tmp_path, warehouse):
    pruning = "{min_steps: 1, reduction_factor: 2, values_per_trial: 5}"
    _, plan = _plan(_spec(tmp_path, pruning=pruning))
    # the guard compares the expected spend at the plan's confidence (budget.confidence, default p90)
    expected, full = plan.decided_usd, plan.total_est_cost_usd
    assert plan.confidence == "p90" and expected > plan.pruning.expected_usd
    between = round((expected + full) / 2, 4)
    _, plan = _plan(_spec(tmp_path, pruning=pruning, budget=between))
    assert plan.within_budget and plan.total_est_cost_usd > between
    budget_guard(plan)  # expected fits: accepted although the full spend does not
    below = round(expected * 0.9, 4)
    _, plan = _plan(_spec(tmp_path, pruning=pruning, budget=below))
    with pytest.raises(BudgetExceeded) as err:
        budget_guard(plan)
    assert "expected spend under pruning" in str(err.value) and "formula" in str(err.value)
    assert "full, unpruned spend" in str(err.value)
    # unknown: the full spend decides
    _, plan = _plan(_spec(tmp_path, budget=between))
    assert not plan.within_budget
    with pytest.raises(BudgetExceeded, match="unknown: no earlier learning curves"):
        budget_guard(plan)


@pytest.mark.slow
def test_measured_curves_of_a_grid_are_replayed_for_an_asha_spec_of_the_same_points(tmp_path, warehouse):
    from gpuledger.warehouse import Warehouse

    grid_path = _spec(tmp_path, name="prune-grid", strategy="grid", run_extra=" --sleep 0.1")
    sp, plan = _plan(grid_path)
    assert _run(sp, grid_path, plan).succeeded == 6
    asha_path = _spec(tmp_path, name="prune-asha", pruning="{min_steps: 1, reduction_factor: 2}")
    sp, plan = _plan(asha_path)
    pr = plan.pruning
    assert pr.source == "measured" and pr.curves == 6 and "6 measured learning curve(s)" in pr.basis
    # the same numbers by hand: the grid's curves in the asha order, replayed at the plan's slots
    with Warehouse.open(read_only=True) as wh:
        grid_id = wh.query("select sweep_id from sweeps where name = 'prune-grid'")["sweep_id"][0]
        rows = wh.query_named("learning_curves", {"sweep_id": grid_id, "model": None, "method": None,
                                                  "metric": None}).to_dicts()
    by_point = {}
    for r in rows:
        by_point.setdefault(params_key(json.loads(r["params"])), []).append(r)
    from gpuledger.search import launch_order
    from gpuledger.search.asha_replay import curves_from_points

    ids = {t["trial_id"]: params_key(t["params"]) for t in plan.trials}
    curves = {tid: curves_from_points(by_point[key])[0] for tid, key in ids.items()}
    order = launch_order(list(ids), sp.search.seed)
    from gpuledger.plan.pruning import _replayed_orders
    from gpuledger.search.replay import cost_stopper

    cs = [Curve(tid, c.values, c.times_s, c.wall_s, c.complete) for tid, c in curves.items()]
    cost_on = pr.settings["stopping"] == "cost"  # checked on these 6 curves (safety.check_cost_stopping)
    level = pr.settings.get("stopping_level")  # the boldest level the check kept the recipe with
    stop = (cost_stopper(cs, {c.trial_id: 1.0 for c in cs}, "minimize", sum(c.wall_s for c in cs), level=level)
            if cost_on else None)
    # the spec says nothing of search.pruning.suspend: its default, suspension at undecided rungs, as the sweep
    assert pr.suspend is True and pr.to_json()["suspend"] is True and pr.settings["suspend"] is True
    assert "with suspension at undecided rungs" in pr.basis
    sim = simulate_asha(cs, slots=plan.max_parallel, min_steps=1, reduction_factor=2, goal="minimize", order=order,
                        stopper=stop, suspend=True)
    assert sim.pruned >= 1
    # the launch order's fractions scaled to the median of the replayed arrival orders
    orders = _replayed_orders(cs, plan.max_parallel, 1, 2, "minimize", (level or True) if cost_on else False,
                              suspend=True)
    scale = orders["trial_s_median"] / (sim.trial_seconds / sum(c.wall_s for c in cs))
    assert f"over {orders['orders']} arrival orders" in pr.basis
    assert pr.makespan_fraction >= orders["makespan_p90"] - 1e-4
    for t in plan.trials:
        # every attempt of the trial paid (suspended and relaunched: its first values twice, maybe above its wall)
        raw = sum(a.seconds for a in sim.attempts(t["trial_id"])) / curves[t["trial_id"]].wall_s
        f = min(max(1.0, raw), raw * scale)
        run_share = (t["est_wall_s"] - 3.0) / t["est_wall_s"]
        assert t["est_pruned_cost_usd"] == pytest.approx(t["est_cost_usd"] * (1 - run_share * (1 - f)), rel=1e-4)
    # two plans in a row are byte-identical
    assert _plan(asha_path)[1].to_json_text() == plan.to_json_text()
    # a different train section is not the same experiment: its curves are not used
    (tmp_path / "other").mkdir()
    _, other = _plan(_spec(tmp_path / "other", name="prune-asha", pruning="{min_steps: 1, reduction_factor: 2}",
                           tokens=30_000))
    assert other.pruning.source == "unknown"


@pytest.mark.slow
def test_the_mid_sweep_budget_stop_holds_when_the_expected_pruned_spend_fits_but_nothing_is_pruned(tmp_path, warehouse):
    from gpuledger import vocabulary
    from gpuledger.search import launch_order
    from gpuledger.warehouse import Warehouse

    xs = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6)
    # without suspension (search.pruning.suspend: false): a trial undecided at its rung runs on, so in the
    # order below nothing is pruned (suspended, the worse ones wait at their rung and are dropped there)
    pruning = "{min_steps: 1, reduction_factor: 2, values_per_trial: 5, suspend: false}"
    sp, plan = _plan(_spec(tmp_path, name="prune-stop", pruning=pruning, xs=xs, max_parallel=1))
    wall = max(t["est_wall_s"] for t in plan.trials)
    # every trial better than all before it in the launch order: ASHA promotes each one at every rung (one
    # slot: with two, a better trial started beside a worse one may reach a rung first and prune it)
    order = launch_order([t["trial_id"] for t in plan.trials], sp.search.seed)
    x_of = {t["trial_id"]: t["params"]["x"] for t in plan.trials}
    (tmp_path / "map.json").write_text(json.dumps({repr(x_of[tid]): 10.0 - i for i, tid in enumerate(order)}))
    # each trial runs about as long as the plan estimates (5 values, wall / 5 apart)
    extra = f" --map {tmp_path / 'map.json'} --sleep {min(wall, 15.0) / 5:.3f}"
    sp, plan = _plan(_spec(tmp_path, name="prune-stop", pruning=pruning, xs=xs, run_extra=extra, max_parallel=1))
    expected, full = plan.decided_usd, plan.total_est_cost_usd  # the expected spend at P90 (budget.confidence)
    budget = round((expected + full) / 2, 4)
    spec_path = _spec(tmp_path, name="prune-stop", pruning=pruning, xs=xs, run_extra=extra, budget=budget,
                      max_parallel=1)
    sp, plan = _plan(spec_path)
    assert plan.within_budget and expected <= budget < full
    budget_guard(plan)
    summary = _run(sp, spec_path, plan)
    assert summary.pruned == 0 and summary.budget_stopped and summary.skipped_budget >= 1
    assert summary.spent_usd <= budget
    with Warehouse.open(read_only=True) as wh:
        rows = wh.query("select status, cost_usd from v_trial_results").to_dicts()
        stored = wh.query("select sum(est_pruned_cost_usd) as e, sum(est_cost_usd) as f from v_trial_results").to_dicts()[0]
        plan_json = json.loads(wh.query("select plan_json from sweeps")["plan_json"][0])
    # the expected pruned spend is stored with the plan's estimates (trials.est_pruned_cost_usd, plan_json)
    p50 = plan.pruning.expected_usd
    assert stored["e"] == pytest.approx(p50, rel=1e-4) and stored["f"] == pytest.approx(full, rel=1e-4)
    assert plan_json["pruning"]["source"] == "formula" and plan_json["pruning"]["expected_usd"] == pytest.approx(p50, abs=1e-6)  # the JSON rounds to 6 places
    assert plan_json["decided_usd"] == pytest.approx(expected) and plan_json["confidence"] == "p90"
    ran = [r["cost_usd"] for r in rows if r["status"] == vocabulary.SUCCEEDED]
    assert sum(ran) <= budget and len(ran) == summary.launched < 6
    # what it spared: all six trials at the measured mean would have crossed the budget
    assert sum(ran) / len(ran) * 6 > budget
    # the trial asked when the stop came, and those the study never asked for, are skipped-budget
    assert {r["status"] for r in rows} == {vocabulary.SUCCEEDED, vocabulary.SKIPPED_BUDGET}


def test_pruned_spend_by_hand_measured_curves_missing_points_and_tpe(tmp_path):
    from gpuledger.plan.pruning import pruned_spend
    from gpuledger.search import launch_order

    sp = load_spec(_spec(tmp_path, xs=(0.1, 0.2, 0.3), pruning="{min_steps: 1, reduction_factor: 2}"))
    trials = expand_trials(sp)
    # each trial: $1.00 for 100 s, of which 10 s overhead (run share 0.9)
    rows = [{"trial_id": t.trial_id, "trial_index": t.index, "params": t.params, "feasible": True,
             "est_cost_usd": 1.0, "est_wall_s": 100.0} for t in trials]
    by_x = {t.params["x"]: t for t in trials}
    # curves for x = 0.1 and 0.3 only (4 values 1 s apart, 4.5 s each); x = 0.2 has none
    curves = {params_key({"x": 0.1}): _curve_of([3, 3, 3, 3]), params_key({"x": 0.3}): _curve_of([2, 2, 2, 2])}
    spend = pruned_spend(rows, sp, max_parallel=1, overhead_s=10.0, curves=curves)
    order = [tid for tid in launch_order([t.trial_id for t in trials], sp.search.seed)
             if tid in (by_x[0.1].trial_id, by_x[0.3].trial_id)]
    # one slot, eta 2, min_steps 1: whichever of the two runs second meets the first at rung 0
    first, second = order
    worse_second = second == by_x[0.1].trial_id  # 3 after 2: pruned after its 1st value (1 s of 4.5 s)
    f = {first: 1.0, second: (1.0 / 4.5) if worse_second else 1.0}
    mean = sum(f.values()) * 4.5 / 9.0
    assert spend.source == "measured" and spend.curves == 2 and spend.run_fraction == pytest.approx(mean)
    for tid, frac in [*f.items(), (by_x[0.2].trial_id, mean)]:  # the point without a curve: the mean
        assert spend.per_trial_usd[tid] == pytest.approx(1.0 - 0.9 * (1 - frac))
    assert spend.full_usd == 3.0 and spend.expected_usd == pytest.approx(sum(spend.per_trial_usd.values()))
    # tpe with pruning and n_trials 2 of 3: two trials at the mean expected cost, in plan order
    tpe = load_spec(_spec(tmp_path, name="prune-tpe", strategy="tpe", xs=(0.1, 0.2, 0.3),
                          pruning="{min_steps: 1, reduction_factor: 2, values_per_trial: 4}", n_trials=2))
    rows_tpe = [{**r, "trial_id": t.trial_id} for r, t in zip(rows, expand_trials(tpe), strict=True)]
    spend = pruned_spend(rows_tpe, tpe, max_parallel=1, overhead_s=10.0, curves=None)
    frac = successive_halving_fraction(4, 1, 2)
    assert spend.source == "formula" and spend.full_usd == pytest.approx(2.0)
    assert spend.expected_usd == pytest.approx(2 * (1.0 - 0.9 * (1 - frac)))


def _curve_of(values) -> Curve:
    return Curve("c", tuple(float(v) for v in values), tuple(float(i + 1) for i in range(len(values))),
                 len(values) + 0.5, True)


def test_more_matching_curves_than_a_replay_takes_fall_back_to_the_formula_over_their_length(tmp_path, monkeypatch):
    from gpuledger.plan.pruning import pruned_spend
    from gpuledger.search import asha_replay

    sp = load_spec(_spec(tmp_path, xs=(0.1, 0.2, 0.3), pruning="{min_steps: 1, reduction_factor: 2}"))
    rows = [{"trial_id": t.trial_id, "trial_index": t.index, "params": t.params, "feasible": True,
             "est_cost_usd": 1.0, "est_wall_s": 100.0} for t in expand_trials(sp)]
    curves = {params_key({"x": x}): _curve_of([3, 2, 2, 2]) for x in (0.1, 0.2, 0.3)}
    monkeypatch.setattr(asha_replay, "MAX_REPLAY_CURVES", 2)  # 3 matching curves: over the bound
    spend = pruned_spend(rows, sp, max_parallel=1, overhead_s=10.0, curves=curves)
    assert spend.source == "formula" and spend.values_per_trial == 4
    assert "more than the 2 a replay takes" in spend.basis
    assert spend.run_fraction == pytest.approx(successive_halving_fraction(4, 1, 2))


def test_max_parallel_auto_picks_the_least_replayed_cost_that_meets_the_deadline(tmp_path):
    from gpuledger.inputs.ledger import planning_inputs

    xs = (0.7, 0.57, 0.3, 0.2, 0.42, 0.05)
    path = _spec(tmp_path, name="auto-k", max_parallel="auto", pruning="{min_steps: 1, reduction_factor: 2}", xs=xs)
    # measured curves: the value falls to |x - 0.3| + 1 over 5 values, 20 s apart (what the replay at each K runs)
    curves = {params_key({"x": x}): Curve("c", tuple(abs(x - 0.3) + 1 + 0.5 / s for s in range(1, 6)),
                                          tuple(20.0 * s for s in range(1, 6)), 101.0, True) for x in xs}
    sp, plan = _plan(path, curves)
    par = plan.parallel
    assert par.auto and plan.max_parallel == par.chosen and len(par.curve) >= 1
    meets = [r for r in par.curve if r.meets_deadline]
    assert meets and par.chosen == min(meets, key=lambda r: (r.cost_usd, r.slots)).slots
    inputs = replace(planning_inputs(sp, "local"), curves=curves)
    for r in par.curve:  # each row is the plan at that K: its replayed spend under pruning
        at_k = plan_sweep(sp, launcher="local", inputs=inputs, max_parallel=r.slots)
        assert at_k.decided_usd == pytest.approx(r.cost_usd, abs=1e-6)
        assert at_k.pruning.source == "measured"
    assert par.why in plan.assumptions and "max_parallel auto" in par.why
    assert plan.to_json()["parallel"]["chosen"] == plan.max_parallel
    # K is chosen on the replay with the spec's suspension (the default: on); with suspend: false, without
    assert plan.pruning.suspend is True
    off_path = _spec(tmp_path, name="auto-k", max_parallel="auto", xs=xs,
                     pruning="{min_steps: 1, reduction_factor: 2, suspend: false}")
    off_sp, off = _plan(off_path, curves)
    assert off.pruning.suspend is False and "without suspension" in off.pruning.basis
    off_inputs = replace(planning_inputs(off_sp, "local"), curves=curves)
    for r in off.parallel.curve:
        at_k = plan_sweep(off_sp, launcher="local", inputs=off_inputs, max_parallel=r.slots)
        assert at_k.decided_usd == pytest.approx(r.cost_usd, abs=1e-6) and at_k.pruning.suspend is False
    on_cost = {r.slots: r.cost_usd for r in par.curve}
    assert any(on_cost[r.slots] != pytest.approx(r.cost_usd, rel=1e-4) for r in off.parallel.curve)
