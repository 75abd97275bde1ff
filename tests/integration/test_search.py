"""Adaptive search (gpuledger.search): the spec's tpe/asha fields, the Optuna study (ask/tell, pruning,
persistence beside the warehouse), and a whole ASHA run through the runtime with the real local launcher,
real trial subprocesses reporting intermediate values and a real DuckDB warehouse."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.sweep_specs import sweep_spec, trial_script, x_points

from gpuledger import vocabulary
from gpuledger.search import AdaptiveSearch, study_path_for
from gpuledger.spec import expand_trials, load_spec
from gpuledger.spec.problems import SpecError

# eval_loss(x, step) = (|x - 0.3| + 1) * (1 + 1/step): every trial improves, x = 0.3 is best at every step
TRIAL = trial_script("""
    for step in range(1, 9):
        log(step=step, eval_loss=(abs(a.x - 0.3) + 1.0) * (1 + 1 / step))
        time.sleep(0.4)
    log(step=8, eval_loss=(abs(a.x - 0.3) + 1.0) * (1 + 1 / 8))
""")


def _spec(folder: Path, strategy: str = "asha", extra: str = "", xs=(0.1, 0.2, 0.3, 0.4, 0.5, 0.6),
          params: str | None = None, max_parallel: int = 1, trial: str = TRIAL) -> Path:
    return sweep_spec(folder, name="tiny-adaptive", search=f"strategy: {strategy}\n{extra}",
                      params=params or x_points(xs), trial=trial, max_parallel=max_parallel)


def test_spec_accepts_tpe_and_asha_and_refuses_what_they_cannot_do(tmp_path):
    sp = load_spec(_spec(tmp_path, "asha"))
    assert sp.search.strategy == "asha" and sp.search.pruning is None
    assert len(expand_trials(sp)) == 6  # the candidates: every point of the lists
    sp = load_spec(_spec(tmp_path, "tpe", extra="pruning: {min_steps: 3, reduction_factor: 4}"))
    assert (sp.search.pruning.min_steps, sp.search.pruning.reduction_factor) == (3, 4)
    with pytest.raises(SpecError, match="pruning needs strategy asha or tpe"):
        load_spec(_spec(tmp_path, "grid", extra="pruning: {min_steps: 2}"))
    with pytest.raises(SpecError, match="strategy asha with a range \\(x\\) needs n_trials"):
        load_spec(_spec(tmp_path, "asha", params="{x: {low: 0.1, high: 1.0}}"))  # ranges: tests/integration/test_search_ranges.py
    with pytest.raises(SpecError, match="n_trials"):
        load_spec(_spec(tmp_path, "tpe", extra="n_trials: 7"))
    with pytest.raises(SpecError, match="reduction_factor"):
        load_spec(_spec(tmp_path, "asha", extra="pruning: {reduction_factor: 1}"))


def test_study_asks_each_point_once_prunes_and_resumes_from_its_journal(tmp_path):
    sp = load_spec(_spec(tmp_path, "asha", extra="pruning: {min_steps: 1, reduction_factor: 2}"))
    trials = expand_trials(sp)
    path = tmp_path / "study.journal"
    search = AdaptiveSearch.open(sp, "sweep-1", trials, path=path)
    asked = [search.ask() for _ in range(4)]
    assert len({t.trial_id for t in asked}) == 4
    first = asked[0]
    # 6 trials, reduction_factor 2: the best 3 at the first value go on. A bad value reported first is not
    # pruned while fewer than 3 better ones are known; at its next report, after 3 better ones, it is.
    worse, *good = asked
    assert search.report(worse.trial_id, [9.0]) is False
    assert [search.report(g.trial_id, [1.0 + i]) for i, g in enumerate(good)] == [False, False, False]
    assert search.report(worse.trial_id, [9.0]) is True
    search.tell_pruned(worse.trial_id)
    for g in good[:2]:
        search.tell(g.trial_id, 1.0)
    running = good[2]  # left running: a killed sweep
    again = AdaptiveSearch.open(sp, "sweep-1", trials, path=path)
    assert again.asked == {worse.trial_id, good[0].trial_id, good[1].trial_id}  # the running one: told failed
    rest = [again.ask() for _ in range(3)]
    assert again.ask() is None and len({t.trial_id for t in rest} | again.asked) == 6
    assert running.trial_id in {t.trial_id for t in rest}
    # the seed fixes the order
    other = AdaptiveSearch.open(sp, "sweep-2", trials, path=tmp_path / "other.journal")
    assert other.ask().trial_id == first.trial_id


def test_tpe_tells_repeats_their_value_and_stops_at_n_trials(tmp_path):
    sp = load_spec(_spec(tmp_path, "tpe", extra="n_trials: 4\nseed: 3"))
    search = AdaptiveSearch.open(sp, "sweep-tpe", expand_trials(sp), path=tmp_path / "tpe.journal")
    seen = []
    while (t := search.ask()) is not None:
        seen.append(t.trial_id)
        search.tell(t.trial_id, abs(t.params["x"] - 0.3))
    assert len(seen) == len(set(seen)) == 4


def test_asha_sweep_prunes_through_the_local_launcher_and_records_pruned(tmp_path, monkeypatch):
    from dataclasses import replace

    from gpuledger.runtime.accepted import prepare
    from gpuledger.runtime.engine import SweepRun, execute
    from gpuledger.warehouse import Warehouse

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GPULEDGER_WAREHOUSE", str(tmp_path / "wh" / "ledger.duckdb"))
    # reduction_factor 4 of 4 trials: the best 1 goes on from the first value (step 2 in the trial script)
    # values 1.2 s apart: at its 2nd value a trial's 6 more to the next rung (8) cost more than its start-up
    # again, whatever the machine's load (suspend_pays: 1/4 x start-up < 3/4 x 6 x 1.2 s)
    spec_path = _spec(tmp_path, "asha", extra="pruning: {min_steps: 2, reduction_factor: 4}",
                      xs=(0.6, 0.5, 0.3, 0.1), trial=TRIAL.replace("time.sleep(0.4)", "time.sleep(1.2)"))
    accepted = replace(prepare(spec_path, launcher="local"), cap=1)
    sweep_id, trials = accepted.sweep_id, accepted.trials
    summary = accepted.new_summary()
    execute(SweepRun(accepted, summary=summary))
    assert summary.succeeded + summary.pruned == 4 and summary.pruned >= 1 and summary.failed == 0
    assert summary.status == vocabulary.SWEEP_SUCCEEDED
    with Warehouse.open(read_only=True) as wh:
        rows = {r["trial_id"]: r for r in wh.query(
            "select trial_id, params, status, metric_value, wall_s, cost_usd, reason, stop_rule from v_trial_results").to_dicts()}
        runs = wh.query("select trial_id, status from v_runs").to_dicts()
    by_x = {t.params["x"]: rows[t.trial_id] for t in trials}
    assert by_x[0.3]["status"] == vocabulary.SUCCEEDED and by_x[0.3]["metric_value"] == pytest.approx(1.125)
    pruned = [r for r in rows.values() if r["status"] == vocabulary.PRUNED]
    assert len(pruned) == summary.pruned
    full = by_x[0.3]["wall_s"]
    for r in pruned:  # stopped early, billed for what they ran, their attempt cancelled
        assert r["metric_value"] is None and 0 < r["wall_s"] < full and r["cost_usd"] > 0
    assert {r["status"] for r in runs if rows[r["trial_id"]]["status"] == vocabulary.PRUNED} == {vocabulary.CANCELLED}
    # the first trial reaches its rung (2nd value) while 3 points have not started: undecided there, it is
    # suspended (its attempt cancelled, billed, the slot freed) and relaunched from its start or dropped once
    # the rung is decided (gpuledger/search/suspension.py)
    assert summary.suspended >= 1 and summary.launched == len(runs)
    attempts: dict[str, list[str]] = {}
    for r in runs:
        attempts.setdefault(r["trial_id"], []).append(r["status"])
    relaunched = [tid for tid, st in attempts.items() if len(st) > 1]
    dropped = [tid for tid, r in rows.items() if "while suspended" in (r["reason"] or "")]
    assert summary.suspended == len(runs) - 4 + len(dropped)  # each suspended: relaunched, or dropped at its rung
    for tid in relaunched:  # each earlier attempt suspended (cancelled, billed), then the trial's own end
        assert vocabulary.CANCELLED in attempts[tid] and rows[tid]["status"] in (vocabulary.SUCCEEDED, vocabulary.PRUNED)
    for tid in dropped:
        assert rows[tid]["status"] == vocabulary.PRUNED and rows[tid]["stop_rule"] == "rung" and attempts[tid] == [
            vocabulary.CANCELLED]
    assert study_path_for(sweep_id).is_file()
    # a second run of the same sweep resumes the study: nothing is asked again
    summary2 = accepted.new_summary()
    execute(SweepRun(accepted, summary=summary2))
    assert summary2.launched == 0 and summary2.status == vocabulary.SWEEP_SUCCEEDED


def test_ei_per_dollar_asks_the_planned_points_cheapest_informative_first(tmp_path):
    from gpuledger.search.extrapolate import CostStopper

    sp = load_spec(_spec(tmp_path, "tpe", extra="n_trials: 4\nacquisition: ei_per_usd\nstopping: cost"))
    trials = expand_trials(sp)
    cost = {t.trial_id: 1.0 + t.params["x"] for t in trials}  # dearer as x grows
    stopper = CostStopper([(3.0, 2.0, 1.5, 1.2), (3.0, 2.5, 2.2, 2.0), (3.0, 2.8, 2.7, 2.6)], "minimize", value_usd=0.5)
    search = AdaptiveSearch.open(sp, "tiny-adaptive-eiusd", trials, path=tmp_path / "s.journal", stopper=stopper,
                                 cost_usd=cost)
    assert search.per_usd and search.stopper is stopper
    asked = []
    while (t := search.ask()) is not None:
        asked.append(t.trial_id)
        x = t.params["x"]
        assert not search.report(t.trial_id, [3.0])  # one value: no decision yet
        search.tell(t.trial_id, abs(x - 0.3) + 1.0)
    assert len(asked) == 4 == len(set(asked)) and set(asked) <= set(cost)
    assert len(stopper.references) == 3 + 4  # every trial that ended became a reference
    # a trial far worse than the references at its step, with more dollars left than its chance is worth
    t = trials[0]
    search.live[t.trial_id] = search.study.ask()
    search.reported[t.trial_id] = 0
    search.cost_usd[t.trial_id] = 10.0
    assert search.report(t.trial_id, [3.0, 2.9])
    rule, why = search.why[t.trial_id]
    assert rule == "curve" and "stopped by its learning curve" in why
