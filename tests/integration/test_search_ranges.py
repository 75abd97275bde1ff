"""Ranges in adaptive search (issue 18 item 1): `{low, high, log, type}` parameters for tpe and asha.

Spec validation (ranges need n_trials, a log range needs low > 0, int ranges whole numbers), the
suggest calls (lists categorical, ranges numeric, log scale), a whole tpe sweep over a log-scale
learning rate through the runtime with the fake launcher and a real DuckDB warehouse (every asked
point planned alone and registered with its params and plan row before it launches), resuming it
(nothing asked again, the same ids), and the seed's reproducibility (asha: the same sequence, which
is the plan's; tpe: the same first points)."""

from __future__ import annotations

import json
import math
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest
from helpers.sweep_specs import sweep_spec

from gpuledger import vocabulary
from gpuledger.search import AdaptiveSearch, sample_points, study_path_for
from gpuledger.spec import expand_trials, load_spec, trial_id_for
from gpuledger.spec.problems import SpecError

LR = "{low: 1.0e-4, high: 1.0e-1, log: true}"


def _spec(folder: Path, params: str, strategy: str = "tpe", extra: str = "n_trials: 8", name: str = "ranged",
          usd_per_hour: float = 1.0, budget: float = 5.0) -> Path:
    return sweep_spec(folder, name=name, search=f"strategy: {strategy}\n{extra}", params=params,
                      run="python trial.py --lr {learning_rate} --r {lora_r} --mb {micro_batch}", tokens_per_trial=20000,
                      budget_usd=budget, usd_per_hour=usd_per_hour)


def _messages(path: Path) -> str:
    with pytest.raises(SpecError) as err:
        load_spec(path)
    return str(err.value)


def test_ranges_validate_for_tpe_and_asha_with_n_trials_and_are_refused_where_wrong(tmp_path):
    params = f"{{learning_rate: {LR}, lora_r: {{low: 4, high: 64, type: int}}, micro_batch: [8, 32]}}"
    for strategy in ("tpe", "asha", "random"):
        sp = load_spec(_spec(tmp_path, params, strategy))
        trials = expand_trials(sp)
        assert len(trials) == 8 and len({t.trial_id for t in trials}) == 8
        for t in trials:
            assert 1e-4 <= t.params["learning_rate"] <= 1e-1 and isinstance(t.params["lora_r"], int)
            assert 4 <= t.params["lora_r"] <= 64 and t.params["micro_batch"] in (8, 32)
            assert t.trial_id == trial_id_for(sp.name, t.params)  # the expansion's stable hash
    # n_trials is required as soon as one parameter is a range (lists alone default to the grid)
    msg = _messages(_spec(tmp_path, params, "tpe", extra=""))
    assert "search.n_trials" in msg and "needs n_trials" in msg and "learning_rate, lora_r" in msg
    assert "needs n_trials" in _messages(_spec(tmp_path, params, "asha", extra="seed: 1"))
    assert len(expand_trials(load_spec(_spec(tmp_path, "{learning_rate: [0.01], lora_r: [4, 8], micro_batch: [8, 32]}", "tpe",
                                             extra="")))) == 4
    # a log range needs low > 0; an int range whole numbers; high >= low; grid needs lists
    msg = _messages(_spec(tmp_path, "{learning_rate: {low: 0, high: 0.1, log: true}, lora_r: [4], micro_batch: [8]}"))
    assert "search.params.learning_rate" in msg and "a log range needs low > 0" in msg
    msg = _messages(_spec(tmp_path, "{learning_rate: [0.01], lora_r: {low: 4.5, high: 64, type: int}, micro_batch: [8]}"))
    assert "search.params.lora_r" in msg and "an int range needs whole numbers" in msg
    assert "high (0.001) is below low (0.1)" in _messages(_spec(tmp_path, "{learning_rate: {low: 0.1, high: 0.001}, lora_r: [4], micro_batch: [8]}"))
    assert "strategy grid needs a list of values" in _messages(_spec(tmp_path, f"{{learning_rate: {LR}, lora_r: [4], micro_batch: [8]}}",
                                                                     "grid", extra=""))
    # int ranges and lists have a finite number of distinct points: n_trials may not exceed it
    msg = _messages(_spec(tmp_path, "{learning_rate: [0.01], lora_r: {low: 4, high: 6, type: int}, micro_batch: [8, 32]}",
                         "asha"))
    assert "n_trials (8) is more than the 6 distinct combinations of the lists and int ranges" in msg
    assert "range" in load_spec(_spec(tmp_path, params)).model_json_schema()["$defs"]["Search"]["properties"][
        "params"]["description"]


def test_the_suggest_calls_are_numeric_for_ranges_log_scale_for_log_and_seeded(tmp_path):
    params = f"{{learning_rate: {LR}, lora_r: {{low: 4, high: 64, type: int}}, micro_batch: [8, 32]}}"
    sp = load_spec(_spec(tmp_path, params, "asha", extra="n_trials: 400\nseed: 7"))
    points = sample_points(sp)
    assert points == sample_points(sp)  # the seed fixes the draws
    other = load_spec(_spec(tmp_path, params, "asha", extra="n_trials: 400\nseed: 8", name="other"))
    assert sample_points(other) != points
    lrs = [p["learning_rate"] for p in points]
    # log scale: about as many draws in each decade (uniform would put ~90% in the top decade)
    decades = [sum(1 for x in lrs if 10 ** (k - 4) <= x < 10 ** (k - 3)) for k in range(3)]
    assert all(80 <= n <= 185 for n in decades), decades
    assert {type(p["lora_r"]) for p in points} == {int} and {p["micro_batch"] for p in points} == {8, 32}
    # the study's params are Optuna's distributions: float log, int, categorical
    search = AdaptiveSearch.open(sp, "dists", expand_trials(sp), path=tmp_path / "d.journal")
    first = search.ask()
    assert first.params == points[0]  # asha runs the drawn points, in the order drawn
    (frozen,) = search.study.get_trials(deepcopy=False)
    dists = frozen.distributions
    assert dists["learning_rate"].log and (dists["learning_rate"].low, dists["learning_rate"].high) == (1e-4, 1e-1)
    assert type(dists["lora_r"]).__name__ == "IntDistribution" and dists["micro_batch"].choices == (8, 32)


def _lr_loss(params: dict) -> float:
    """eval_loss of the fake trainer: best at learning_rate 3e-3 (in log space), a little better with lora_r."""
    return round(1.0 + (math.log10(params["learning_rate"]) - math.log10(3e-3)) ** 2 - params["lora_r"] / 1000, 6)


def _ranged_run(folder: Path, monkeypatch, *, budget: float = 5.0, n_trials: int = 8, cap: int = 1, seed: int = 0,
             strategy: str = "tpe"):
    from helpers.fake_launcher import FakeLauncher

    from gpuledger.runtime.accepted import prepare
    from gpuledger.runtime.engine import SweepRun

    monkeypatch.chdir(folder)
    monkeypatch.setenv("GPULEDGER_WAREHOUSE", str(folder / "wh" / "ledger.duckdb"))
    spec_path = _spec(folder, f"{{learning_rate: {LR}, lora_r: {{low: 4, high: 64, type: int}}, micro_batch: [8, 32]}}",
                      strategy, extra=f"n_trials: {n_trials}\nseed: {seed}", budget=budget)
    accepted = replace(prepare(spec_path, launcher="local"), cap=cap)  # its trials: the points the plan prices

    def factory(name, spec, cap_, landing):
        return FakeLauncher(landing_dir=landing, wall_s=36.0, metrics=lambda req: {"eval_loss": _lr_loss(req.params)})

    return SweepRun(accepted, summary=accepted.new_summary(), launcher_factory=factory, retry_delays_s=(0.01,))


def _study_trials(sweep_id: str) -> dict[str, dict]:
    """{trial_id: {params, state, number}} of the sweep's persisted study."""
    import optuna

    study = optuna.load_study(study_name=sweep_id, storage=optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(study_path_for(sweep_id)))))
    return {t.user_attrs["gpuledger_trial_id"]: {"params": t.params, "state": t.state.name, "number": t.number}
            for t in study.get_trials(deepcopy=False) if "gpuledger_trial_id" in t.user_attrs}


def test_a_tpe_sweep_over_a_log_range_plans_and_registers_every_asked_point(tmp_path, monkeypatch):
    from gpuledger.runtime.engine import execute
    from gpuledger.warehouse import Warehouse

    run = _ranged_run(tmp_path, monkeypatch)
    assert any("search tpe over ranges" in a for a in run.plan.assumptions)
    summary = execute(run)
    assert (summary.status, summary.launched, summary.succeeded, summary.failed) == (vocabulary.SWEEP_SUCCEEDED, 8, 8, 0)
    asked = _study_trials(run.sweep_id)
    assert len(asked) == 8 and {a["state"] for a in asked.values()} == {"COMPLETE"}
    with Warehouse.open(read_only=True) as wh:
        rows = {r["trial_id"]: r for r in wh.query(
            "select trial_id, trial_index, params, status, est_memory_gib, est_wall_s, est_cost_usd, feasible "
            "from trials where sweep_id = ?", [run.sweep_id]).to_dicts()}
        results = {r["trial_id"]: r for r in wh.query(
            "select trial_id, status, metric_value from v_trial_results where sweep_id = ?", [run.sweep_id]).to_dicts()}
    # every asked point, and only those (not the plan's representative points), with its params and plan row
    assert set(rows) == set(asked) == set(results)
    for tid, a in asked.items():
        row = rows[tid]
        assert json.loads(row["params"]) == a["params"] and tid == trial_id_for(run.spec.name, a["params"])
        assert row["trial_index"] == a["number"] and row["status"] == vocabulary.SUCCEEDED and row["feasible"] is True
        assert row["est_wall_s"] > 0 and row["est_cost_usd"] > 0 and row["est_memory_gib"] > 0
        assert results[tid]["metric_value"] == pytest.approx(_lr_loss(a["params"]))
    # each point is planned with its own params: micro_batch and lora_r change the memory estimate
    by_shape = {(json.loads(r["params"])["micro_batch"], json.loads(r["params"])["lora_r"]): r["est_memory_gib"]
                for r in rows.values()}
    assert len(set(by_shape.values())) > 1
    mb8 = [m for (mb, _), m in by_shape.items() if mb == 8]
    mb32 = [m for (mb, _), m in by_shape.items() if mb == 32]
    if mb8 and mb32:
        assert max(mb8) < min(mb32)


def test_a_resumed_tpe_sweep_asks_nothing_again_and_keeps_its_ids(tmp_path, monkeypatch):
    from gpuledger.runtime.engine import execute
    from gpuledger.warehouse import Warehouse

    # the first run stops at the budget after 3 trials ($0.01 each: 36 s at $1/h); the budget is not
    # part of the sweep's identity, so the second run (a larger budget) is the same sweep, resumed
    first = _ranged_run(tmp_path, monkeypatch, budget=0.035, n_trials=6)
    s1 = execute(first)
    assert s1.budget_stopped and s1.succeeded == 3
    before = {tid: a for tid, a in _study_trials(first.sweep_id).items() if a["state"] == "COMPLETE"}
    assert len(before) == 3
    second = _ranged_run(tmp_path, monkeypatch, budget=5.0, n_trials=6)
    assert second.sweep_id == first.sweep_id
    s2 = execute(second)
    assert s2.status == vocabulary.SWEEP_SUCCEEDED and (s2.skipped_done, s2.launched, s2.succeeded) == (3, 3, 3)
    after = _study_trials(first.sweep_id)
    complete = {tid: a for tid, a in after.items() if a["state"] == "COMPLETE"}
    for tid, a in before.items():  # the same ids, the same params, the same study trial
        assert after[tid]["params"] == a["params"] and after[tid]["number"] == a["number"]
    assert len(complete) == 6
    with Warehouse.open(read_only=True) as wh:
        runs = wh.query("select trial_id, count(*) as n from runs where sweep_id = ? group by trial_id",
                        [first.sweep_id]).to_dicts()
    assert {r["trial_id"] for r in runs} == set(complete) and {r["n"] for r in runs} == {1}  # none ran twice


def test_an_asha_sweep_over_ranges_runs_exactly_the_planned_points_in_their_order(tmp_path, monkeypatch):
    from gpuledger.runtime.engine import execute
    from gpuledger.warehouse import Warehouse

    run = _ranged_run(tmp_path, monkeypatch, strategy="asha", n_trials=5, cap=2)
    assert any("asha runs exactly these points" in a for a in run.plan.assumptions)
    summary = execute(run)
    assert (summary.status, summary.launched, summary.succeeded) == (vocabulary.SWEEP_SUCCEEDED, 5, 5)
    asked = sorted(_study_trials(run.sweep_id).items(), key=lambda kv: kv[1]["number"])
    assert [tid for tid, _ in asked] == [t.trial_id for t in run.trials]  # the plan's points, in its order
    with Warehouse.open(read_only=True) as wh:
        rows = wh.query("select trial_id, est_cost_usd, status from trials where sweep_id = ?",
                        [run.sweep_id]).to_dicts()
    plan_cost = {t.trial_id: t.est_cost_usd for t in run.plan.planned_trials}
    assert {r["trial_id"]: r["est_cost_usd"] for r in rows} == pytest.approx(plan_cost)
    assert {r["status"] for r in rows} == {vocabulary.SUCCEEDED}


def test_the_seed_reproduces_asha_sequences_and_tpe_first_points(tmp_path):
    params = f"{{learning_rate: {LR}, lora_r: {{low: 4, high: 64, type: int}}, micro_batch: [8, 32]}}"
    asha = load_spec(_spec(tmp_path, params, "asha", extra="n_trials: 6\nseed: 5"))
    planned = expand_trials(asha)

    def asha_sequence(journal: str) -> list[str]:
        search = AdaptiveSearch.open(asha, journal, expand_trials(asha), path=tmp_path / journal)
        out = []
        while (t := search.ask()) is not None:
            out.append(t.trial_id)
            search.tell(t.trial_id, 1.0)
        return out

    # asha: two fresh studies with the same seed ask the same sequence, exactly the plan's points in order
    assert asha_sequence("a1") == asha_sequence("a2") == [t.trial_id for t in planned]

    def tpe_first(seed: int, journal: str, k: int = 4) -> list[dict]:
        sp = load_spec(_spec(tmp_path, params, "tpe", extra=f"n_trials: 12\nseed: {seed}", name=f"t{seed}"))
        search = AdaptiveSearch.open(sp, journal, [], path=tmp_path / journal)
        out = []
        for _ in range(k):
            t = search.ask()
            out.append(t.params)
            search.tell(t.trial_id, _lr_loss(t.params))
        return out

    # tpe: the same seed, the same startup points (and they are the first points its plan priced)
    assert tpe_first(3, "t1") == tpe_first(3, "t2")
    assert tpe_first(3, "t3") != tpe_first(4, "t4")
    sp3 = load_spec(_spec(tmp_path, params, "tpe", extra="n_trials: 12\nseed: 3", name="t3"))
    assert [t.params for t in expand_trials(sp3)][:4] == tpe_first(3, "t5")


def test_a_tpe_point_the_planner_finds_infeasible_is_registered_with_its_reason_and_not_launched(tmp_path, monkeypatch):
    """Planned on the cloud (bundled catalog), launched by the fake launcher: micro_batch changes the
    memory estimate, and the points that do not fit one A100-80GB are registered, not launched."""
    from helpers.fake_launcher import FakeLauncher

    from gpuledger.plan.model import PlanningInputs
    from gpuledger.runtime.accepted import prepare
    from gpuledger.runtime.engine import SweepRun, execute
    from gpuledger.warehouse import Warehouse

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GPULEDGER_WAREHOUSE", str(tmp_path / "wh" / "ledger.duckdb"))
    spec_path = tmp_path / "cloud.yaml"
    spec_path.write_text(textwrap.dedent("""
        kind: sweep
        name: cloud-ranged
        project: tests
        owner: ci
        model: meta-llama/Meta-Llama-3-8B
        method: lora
        precision: bf16
        train: {seq_len: 2048, tokens_per_trial: 1000000}
        search:
          strategy: tpe
          n_trials: 8
          seed: 2
          params:
            micro_batch: {low: 1, high: 64, type: int, log: true}
            learning_rate: {low: 1.0e-5, high: 1.0e-3, log: true}
          objective: {metric: eval_loss}
        resources: {accelerators: [A100-80GB], gpus_per_trial: 1, clouds: [aws]}
        budget: {max_usd: 5000}
        launcher: skypilot
        task:
          run: python train.py --mb {micro_batch} --lr {learning_rate}
    """), encoding="utf-8")
    accepted = replace(prepare(spec_path, launcher="skypilot", inputs=PlanningInputs()), cap=2)
    sweep_id, summary = accepted.sweep_id, accepted.new_summary()
    run = SweepRun(accepted, summary=summary, retry_delays_s=(0.01,),
                   launcher_factory=lambda name, spec, cap, landing: FakeLauncher(landing_dir=landing, wall_s=60.0))
    execute(run)
    with Warehouse.open(read_only=True) as wh:
        rows = wh.query("select trial_id, params, feasible, reason, status, accelerator, est_memory_gib from trials "
                        "where sweep_id = ?", [sweep_id]).to_dicts()
        launched = set(wh.query("select trial_id from runs where sweep_id = ?", [sweep_id])["trial_id"])
    infeasible = [r for r in rows if r["feasible"] is False]
    feasible = [r for r in rows if r["feasible"] is True]
    assert len(rows) == 8 and infeasible and feasible  # every asked point is registered
    assert summary.not_feasible == len(infeasible) and summary.launched == len(feasible) == len(launched)
    for r in infeasible:
        assert "A100-80GB" in r["reason"] and r["trial_id"] not in launched and r["status"] == vocabulary.PENDING
    for r in feasible:
        assert r["accelerator"] == "A100-80GB" and r["status"] == vocabulary.SUCCEEDED
    # the memory estimate grows with micro_batch; what fits is below what does not
    assert max(json.loads(r["params"])["micro_batch"] for r in feasible) < min(
        json.loads(r["params"])["micro_batch"] for r in infeasible)
