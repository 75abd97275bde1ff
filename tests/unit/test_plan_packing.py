"""Packed trials (gpuledger/plan/packing.py): k one-GPU trials per GPU in one job, priced beside one per GPU
by hand, each trial billed its share; a group that does not fit the GPU's memory is said; and a real
plan of a small LoRA grid on H100s offers a packed option cheaper than one per GPU."""

from __future__ import annotations

import pytest

from gpuledger.catalog import gpu_kinds
from gpuledger.plan.packing import PACK_MFU, packing_options
from gpuledger.plan.settings import MEMORY_RESERVE_GIB, MEMORY_SAFETY_FRACTION

H100 = gpu_kinds()["H100"]
PEAK = H100.peak_tflops("bf16") * 1e12


def _row(i: int, mem: float = 10.0, compute_s: float = 100.0, util: float = 0.1, usd_h: float = 3.6) -> dict:
    wall = 60.0 + compute_s
    return {"trial_id": f"t{i}", "feasible": True, "gpus": 1, "accelerator": "H100", "est_memory_gib": mem,
            "compute_s": compute_s, "flops_total": util * compute_s * PEAK, "est_wall_s": wall,
            "est_cost_usd": wall / 3600 * usd_h, "usd_per_hour": usd_h}


def test_two_small_trials_share_one_gpu_and_are_billed_by_share():
    rows = [_row(0, compute_s=100.0), _row(1, compute_s=300.0)]
    pk = packing_options(rows, overhead_s=60.0, max_parallel=2, precision="bf16")
    one, two = pk.options[0], pk.options[1]
    assert one.to_json() == {"k": 1, "groups": 2, "makespan_s": 360.0, "cost_usd": pytest.approx((160 + 360) / 3600 * 3.6),
                             "fits": True}
    # together: max(300, (100 + 300) x 0.1 / PACK_MFU = 80) = 300 s of compute, the start-up once
    assert two.fits and two.groups == 1 and two.makespan_s == 360.0
    assert two.cost_usd == pytest.approx(360 / 3600 * 3.6) and two.cost_usd < one.cost_usd
    assert two.per_trial_usd == {"t0": pytest.approx(0.36 * 100 / 400, abs=1e-6),
                                 "t1": pytest.approx(0.36 * 300 / 400, abs=1e-6)}
    assert pk.recommended == 2 and "per GPU" in pk.why
    # busy trials: two at half the peak each take twice as long together (the GPU is full)
    busy = packing_options([_row(0, util=PACK_MFU), _row(1, util=PACK_MFU)], overhead_s=60.0, max_parallel=2,
                           precision="bf16")
    assert busy.options[1].makespan_s == 60.0 + 200.0 and busy.recommended == 1  # slower: not chosen


def test_a_group_over_the_gpus_memory_does_not_fit():
    usable = H100.memory_gib * MEMORY_SAFETY_FRACTION - MEMORY_RESERVE_GIB
    rows = [_row(i, mem=usable / 1.5) for i in range(4)]
    pk = packing_options(rows, overhead_s=60.0, max_parallel=4, precision="bf16")
    assert [o.k for o in pk.options] == [1, 2, 4] and not pk.options[1].fits
    assert "usable" in pk.options[1].reason and pk.recommended == 1
    assert packing_options(rows[:1], overhead_s=60.0, max_parallel=1, precision="bf16") is None


def test_a_small_lora_grid_plans_packed_cheaper(tmp_path):
    from gpuledger.plan import plan_sweep
    from gpuledger.spec import load_spec

    spec = tmp_path / "small.yaml"
    spec.write_text("""kind: sweep
name: small-lora
project: p
owner: o
model: meta-llama/Llama-3.2-1B
method: lora
precision: bf16
train: {seq_len: 512, tokens_per_trial: 2000000, micro_batch: 4}
search:
  strategy: grid
  params: {lora_r: [8, 16], learning_rate: [1.0e-4, 2.0e-4, 3.0e-4, 5.0e-4]}
  objective: {metric: eval_loss, goal: minimize}
resources: {accelerators: [H100], max_parallel: 8}
budget: {max_usd: 100}
launcher: skypilot
task:
  run: python train.py --r {lora_r} --lr {learning_rate}
""")
    plan = plan_sweep(load_spec(spec))
    pk = plan.to_json()["packing"]
    one = pk["options"][0]
    best = next(o for o in pk["options"] if o["k"] == pk["recommended"])
    assert pk["recommended"] > 1 and best["cost_usd"] < one["cost_usd"] and best["makespan_s"] <= one["makespan_s"]
    assert sum(best["per_trial_usd"].values()) == pytest.approx(best["cost_usd"], rel=1e-4)
    assert set(best["per_trial_usd"]) == {t["trial_id"] for t in plan.trials}


def test_trials_per_gpu_is_chosen_from_the_plan_and_refused_where_it_cannot_run(tmp_path):
    from dataclasses import replace

    from gpuledger.errors import UserError
    from gpuledger.runtime.accepted import choose_pack
    from gpuledger.spec.models import SweepSpec

    pk = packing_options([_row(i) for i in range(4)], overhead_s=60.0, max_parallel=4, precision="bf16")

    def spec(k):
        return SweepSpec.model_validate({
            "kind": "sweep", "name": "p", "project": "p", "owner": "o", "model": "meta-llama/Llama-3.2-1B",
            "method": "lora", "search": {"strategy": "grid", "params": {"lora_r": [8, 16]},
                                         "objective": {"metric": "eval_loss", "goal": "minimize"}},
            "resources": {"accelerators": ["H100"], "trials_per_gpu": k}, "budget": {"max_usd": 10},
            "task": {"run": "python t.py"}})

    plan = _plan_with(pk)
    path = tmp_path / "s.yaml"
    k, chosen = choose_pack(spec("auto"), plan, path, "local")
    assert k == pk.recommended > 1 and chosen.packing.chosen == k and "auto" in chosen.packing.chosen_why
    assert chosen.packing.chosen_why in chosen.assumptions  # the plan says which and why
    assert chosen.packing.to_json()["chosen"] == k
    assert choose_pack(spec("auto"), plan, path, "skypilot")[0] == k  # SkyPilot packs too (skypilot_pack.py)
    k, chosen = choose_pack(spec("auto"), plan, path, "fake")  # a launcher registered at run time does not
    assert k == 1 and "one trial per GPU" in chosen.packing.chosen_why
    with pytest.raises(UserError, match="trials_per_gpu 2: the fake launcher"):
        choose_pack(spec(2), plan, path, "fake")
    tight = replace(plan, packing=replace(pk, options=tuple(
        replace(o, fits=False, reason="4 trials need 90.0 GiB") if o.k == 4 else o for o in pk.options)))
    with pytest.raises(UserError, match="trials_per_gpu 4: 4 trials need 90.0 GiB"):
        choose_pack(spec(4), tight, path, "local")
    assert choose_pack(spec(1), _plan_with(None), path, "fake")[0] == 1


def _plan_with(packing):
    import dataclasses

    from gpuledger.plan.model import Plan

    fields = {f.name: None for f in dataclasses.fields(Plan) if f.init}
    return Plan(**{**fields, "packing": packing, "assumptions": []})


def test_the_budget_guard_prices_packed_trials_by_what_the_pack_rents(tmp_path):
    """A packed plan is priced by its jobs (each trial its share), so a budget between the packed price and one
    GPU per trial passes the guard packed and is refused unpacked; the sweep's budget meter counts the shares."""
    from gpuledger.errors import BudgetExceeded
    from gpuledger.plan import budget_guard, plan_sweep
    from gpuledger.runtime.accepted import choose_pack
    from gpuledger.runtime.budget import BudgetMeter
    from gpuledger.spec import load_spec

    path = tmp_path / "small.yaml"
    text = """kind: sweep
name: small-lora
project: p
owner: o
model: meta-llama/Llama-3.2-1B
method: lora
precision: bf16
train: {seq_len: 512, tokens_per_trial: 2000000, micro_batch: 4}
search:
  strategy: grid
  params: {lora_r: [8, 16], learning_rate: [1.0e-4, 2.0e-4, 3.0e-4, 5.0e-4]}
  objective: {metric: eval_loss, goal: minimize}
resources: {accelerators: [H100], max_parallel: 8, trials_per_gpu: K}
budget: {max_usd: BUDGET}
launcher: skypilot
task:
  run: python train.py --r {lora_r} --lr {learning_rate}
"""
    path.write_text(text.replace("K", "auto").replace("BUDGET", "100"))
    plan = plan_sweep(load_spec(path))
    one = plan.packing.options[0].cost_usd
    k, packed = choose_pack(load_spec(path), plan, path, "skypilot")
    opt = next(o for o in plan.packing.options if o.k == k)
    assert k > 1 and opt.cost_usd < one * 0.9
    assert packed.total_est_cost_usd == pytest.approx(opt.cost_usd, rel=1e-4)
    assert {t.trial_id: t.est_cost_usd for t in packed.planned_trials} == pytest.approx(opt.per_trial_usd, rel=1e-6)
    assert packed.bands.total_cost_usd_p90 < plan.bands.total_cost_usd_p90
    assert any("priced as packed" in a for a in packed.assumptions)
    meter = BudgetMeter.for_plan(100.0, {t.trial_id: t for t in packed.planned_trials})
    assert sum(meter.estimate_usd(t) for t in meter.plan_costs_usd) == pytest.approx(opt.cost_usd, rel=1e-4)
    # a budget between the two prices: packed launches, one GPU per trial is refused
    budget = round((opt.cost_usd + one) / 2 * (plan.decided_usd / plan.total_est_cost_usd), 4)
    for kk, ok in (("auto", True), ("1", False)):
        path.write_text(text.replace("K", kk).replace("BUDGET", str(budget)))
        spec = load_spec(path)
        _, chosen = choose_pack(spec, plan_sweep(spec), path, "skypilot")
        if ok:
            budget_guard(chosen)
            assert chosen.within_budget and chosen.decided_usd <= budget
        else:
            with pytest.raises(BudgetExceeded):
                budget_guard(chosen)
