"""A GRPO plan by role (gpuledger/plan/rl_roles.py): time and dollars per role under each trial,
colocated and split placements, the split's share of rollout GPUs chosen among candidates."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpuledger.plan import plan_sweep
from gpuledger.plan.render import render_plan
from gpuledger.spec import expand_trials, load_spec

ROOT = Path(__file__).resolve().parents[2]
SPEC_PATH = ROOT / "specs" / "grpo-qwen-7b.yaml"


def _spec(tmp_path, **train):
    data = yaml.safe_load(SPEC_PATH.read_text())
    data["train"].update(train)
    data["search"]["params"] = {"learning_rate": [1.0e-6]}
    data["resources"].update(accelerators=["H100"], gpus_per_trial=8)
    path = tmp_path / "grpo.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_spec(path)


def _plan(spec):
    return plan_sweep(spec, expand_trials(spec))


def test_the_grpo_example_shows_roles_in_json_and_text():
    spec = load_spec(SPEC_PATH)
    plan = _plan(spec)
    trials = plan.to_json()["trials"]
    assert all("roles" in t for t in trials if t["feasible"])
    t = next(t for t in trials if t["feasible"])
    r = t["roles"]
    assert r["placement"] == "colocated" and set(r["groups"]) == {"trainer"}
    assert {"rollout", "train", "reference", "sync"} <= set(r["roles"])
    # the roles add up to the trial's compute time and its compute dollars
    assert sum(v["seconds"] for v in r["roles"].values()) == pytest.approx(t["compute_s"], rel=0.01)
    usd = sum(v["usd"] for v in r["roles"].values())
    assert usd == pytest.approx(t["compute_s"] / 3600 * t["usd_per_hour"], rel=0.02)
    text = render_plan(plan)
    assert f"roles {t['trial_id']}: colocated" in text and "rollout" in text


def test_split_placement_chooses_a_share_and_async_is_faster(tmp_path):
    split = _plan(_spec(tmp_path, generation="vllm_server"))
    t = split.to_json()["trials"][0]
    r = t["roles"]
    assert r["placement"] == "split" and set(r["groups"]) == {"trainer", "rollout"}
    tried = r["placements"]
    assert [c["rollout_gpus"] for c in tried] == [2, 4] and sum(c["chosen"] for c in tried) == 1
    chosen = next(c for c in tried if c["chosen"])
    assert r["groups"]["rollout"]["gpus"] == chosen["rollout_gpus"]
    assert chosen["tokens_per_s"] == max(c["tokens_per_s"] for c in tried)
    # all 8 GPUs are billed for the whole trial: the groups' GPU-hours add up to 8 x the compute time
    assert sum(v["gpu_hours"] for v in r["roles"].values()) == pytest.approx(8 * t["compute_s"] / 3600, rel=0.02)
    asyn = _plan(_spec(tmp_path, generation="vllm_server", async_rollout=True)).to_json()["trials"][0]
    assert asyn["compute_s"] <= t["compute_s"]
    fixed = _plan(_spec(tmp_path, generation="vllm_server", rollout_gpus=2)).to_json()["trials"][0]["roles"]
    assert [c["rollout_gpus"] for c in fixed["placements"]] == [2]
    mem = r["memory_gib"]
    assert mem["rollout"]["weights"] > 14 and mem["rollout"]["kv_cache"] > 0  # 7.6B params in bf16 on each
    assert mem["trainer"]["device"] <= t["usable_memory_gib"]


def test_group_size_and_tail_change_the_planned_time(tmp_path):
    base = _plan(_spec(tmp_path)).to_json()["trials"][0]["compute_s"]
    tail = _plan(_spec(tmp_path, completion_len_p90=2000)).to_json()["trials"][0]["compute_s"]
    assert tail > 1.05 * base  # vLLM's continuous batching: the tail costs less than static hf batches' would
    # more responses per prompt: more tokens per step, the same tokens per trial: fewer steps, a different time
    g16 = _plan(_spec(tmp_path, group_size=16)).to_json()["trials"][0]["compute_s"]
    assert g16 != pytest.approx(base, rel=0.02)


def test_async_or_rollout_gpus_without_a_vllm_server_is_one_located_problem(tmp_path):
    from gpuledger.errors import UserError
    from gpuledger.plan.requirements import check_spec

    spec = _spec(tmp_path, async_rollout=True, generation="vllm_colocate")
    out = check_spec(tmp_path / "grpo.yaml")
    assert not out["ok"] and len(out["problems"]) == 1
    assert "grpo.yaml:" in out["problems"][0] and "train.async_rollout need train.generation: vllm_server" in out["problems"][0]
    with pytest.raises(UserError, match="vllm_server"):
        _plan(spec)


def _rl_probe(spec, plan, *, rollout_s, logprob_s, reward_s, train_s, sync_s, tokens_per_s):
    """The `plan_probes` row of one GRPO probe of the plan's first trial, on its chosen placement."""
    import json
    from datetime import datetime

    import polars as pl

    from gpuledger.plan.probes import PROBE_SCHEMA, shapes_to_probe, trial_shape

    rows = {t.trial_id: t for t in plan.planned_trials}
    shape, trial = shapes_to_probe(spec, expand_trials(spec), rows)[0]
    placed = rows[trial.trial_id]
    step = rollout_s + logprob_s + reward_s + train_s + sync_s
    return pl.DataFrame([{
        "run_id": "probe-rl", "accelerator": placed.accelerator, "gpus": placed.gpus, "hostname": "h",
        "probe_shape": json.dumps(trial_shape(spec, trial.params, placed)), "startup_s": 300.0,
        "warm_startup_s": 300.0, "tokens_per_s": tokens_per_s, "memory_gib": 60.0,
        "ended_at": datetime(2026, 12, 1, 10), "rollout_s": rollout_s, "logprob_s": logprob_s, "reward_s": reward_s,
        "train_s": train_s, "sync_s": sync_s, "rl_step_s": step, "rollout_tokens_per_s": 5000.0}], schema=PROBE_SCHEMA)


def test_a_probed_grpo_trial_is_split_by_what_its_probe_measured(tmp_path):
    spec = _spec(tmp_path)
    before = _plan(spec)
    t0 = before.to_json()["trials"][0]
    assert t0["roles"]["basis"].startswith("model")
    model_step = t0["roles"]["step_s"]
    # a probe that found generation twice the model's and the trainer half of it, at the model's overall rate
    phases = t0["roles"]["phases_s"]
    measured = {"rollout_s": 2 * phases["rollout"], "logprob_s": phases["reference"] + phases["old_logprob"],
                "reward_s": phases["reward"], "train_s": phases["train"] / 2, "sync_s": phases["sync"]}
    tokens = float(yaml.safe_load(SPEC_PATH.read_text())["train"]["tokens_per_trial"])
    probes = _rl_probe(spec, before, **measured, tokens_per_s=tokens / (1.5 * t0["compute_s"]))
    after = plan_sweep(spec, expand_trials(spec), probes=probes)
    t = after.to_json()["trials"][0]
    r = t["roles"]
    assert t["est_basis"].startswith("probe probe-rl") and r["basis"] == t["est_basis"]
    assert r["model_phases_s"]["rollout"] == pytest.approx(phases["rollout"], rel=1e-3)
    assert r["roles"]["rollout"]["seconds_per_step"] == pytest.approx(measured["rollout_s"], rel=1e-3)
    assert r["roles"]["train"]["seconds_per_step"] == pytest.approx(measured["train_s"], rel=1e-3)
    assert r["step_s"] == pytest.approx(sum(measured.values()), rel=1e-3) and r["step_s"] != pytest.approx(model_step)
    assert r["rollout"]["measured_tokens_per_s"] == 5000.0
    # the roles still add up to the trial's (now probe-extrapolated) compute time
    assert sum(v["seconds"] for v in r["roles"].values()) == pytest.approx(t["compute_s"], rel=0.01)
    assert f"measured by {t['est_basis']}" in render_plan(after)


def _cheapest_on_demand(accelerator: str, gpus: int, clouds) -> float:
    """The catalog's cheapest on-demand instance with >= `gpus` x `accelerator` in `clouds` (by hand)."""
    import polars as pl

    from gpuledger.catalog.pricing import load_offers

    o = load_offers(clouds=clouds, accelerators=[accelerator], usable_only=False)
    o = o.filter((pl.col("accelerator_count") >= gpus) & pl.col("usd_per_hour_on_demand").is_not_null())
    return float(o["usd_per_hour_on_demand"].min())


@pytest.mark.slow  # over ~1 s (a whole report, replay, plan or warehouse): make test runs it, make test-fast does not
def test_rollouts_on_an_instance_of_another_kind_are_billed_as_a_second_instance(tmp_path):
    from gpuledger.models import count_params, load_config

    spec = _spec(tmp_path, generation="vllm_server", rollout_gpu="l40s", rollout_gpus=4)
    plan = _plan(spec)
    t = plan.to_json()["trials"][0]
    r = t["roles"]
    assert t["accelerator"] == "H100" and t["gpus"] == 8  # the trial's own GPUs all train
    tr, ro = r["groups"]["trainer"], r["groups"]["rollout"]
    assert (tr["accelerator"], tr["gpus"], ro["accelerator"], ro["gpus"]) == ("H100", 8, "L40S", 4)
    rollout_usd = _cheapest_on_demand("L40S", 4, spec.resources.clouds)
    assert ro["usd_per_hour"] == pytest.approx(rollout_usd, rel=1e-4) and not ro["spot"] and ro["instance_type"]
    # the trial's price is both instances', its cost that price for its whole wall time, nothing left out
    assert t["usd_per_hour"] == pytest.approx(tr["usd_per_hour"] + ro["usd_per_hour"], rel=1e-4)
    assert t["est_cost_usd"] == pytest.approx(t["usd_per_hour"] * t["est_wall_s"] / 3600, rel=1e-6)
    assert plan.total_est_cost_usd == pytest.approx(sum(x["est_cost_usd"] for x in plan.to_json()["trials"]), rel=1e-6)
    usd = sum(v["usd"] for v in r["roles"].values())
    assert usd == pytest.approx(t["compute_s"] / 3600 * t["usd_per_hour"], rel=0.02)
    rollout_side = sum(v["usd"] for k, v in r["roles"].items() if v["accelerator"] == "L40S")
    assert rollout_side == pytest.approx(t["compute_s"] / 3600 * ro["usd_per_hour"], rel=0.02)
    # the rollouts timed on the L40S, the weights synced over the network between two instances (25 GB/s)
    same = _plan(_spec(tmp_path, generation="vllm_server", rollout_gpu="H100", rollout_gpus=4)).to_json()
    assert r["phases_s"]["rollout"] > 1.3 * same["trials"][0]["roles"]["phases_s"]["rollout"]
    weights = 2.0 * count_params(load_config(spec.model)).total
    assert r["phases_s"]["sync"] == pytest.approx(weights / 25e9 + 0.5, rel=0.01)
    # a pool's worker is one instance: refused, said why
    assert "rollout_gpu" in plan.to_json()["pool"]["reason"]
    text = render_plan(plan)
    assert f"rollout 4x L40S on {ro['cloud']} {ro['instance_type']}" in text
    # the same sweep colocated and split on one node, planned for comparison: each one's decided spend
    note = next(a for a in plan.assumptions if a.startswith("placements planned"))
    colocated = _plan(_spec(tmp_path, generation="vllm_colocate"))
    assert f"this plan) ${plan.decided_usd:,.2f}" in note
    fits = any(x["feasible"] for x in colocated.trials)
    assert (f"colocated (train.generation: vllm_colocate) ${colocated.decided_usd:,.2f}" if fits
            else "colocated (train.generation: vllm_colocate): no trial fits") in note
    assert "split on one node (train.generation: vllm_server)" in note and "cheapest meeting the deadline: " in note


@pytest.mark.parametrize(("train", "words"), [
    ({"generation": "vllm_server", "rollout_gpu": "L40Z", "rollout_gpus": 4}, "train.rollout_gpu: "),
    ({"generation": "vllm_server", "rollout_gpu": "L40S"}, "train.rollout_gpu needs train.rollout_gpus"),
    ({"generation": "vllm_colocate", "rollout_gpu": "L40S", "rollout_gpus": 4}, "need train.generation: vllm_server"),
])
def test_a_rollout_gpu_the_planner_cannot_use_is_one_located_problem(tmp_path, train, words):
    from gpuledger.errors import UserError
    from gpuledger.plan.requirements import check_spec

    spec = _spec(tmp_path, **train)
    out = check_spec(tmp_path / "grpo.yaml")
    assert not out["ok"] and len(out["problems"]) == 1
    assert "grpo.yaml:" in out["problems"][0] and words in out["problems"][0]
    with pytest.raises(UserError, match=words.split(":")[0].split(" need")[0]):
        _plan(spec)


def test_a_rollout_instance_of_its_own_launches_only_as_a_job_group_on_kubernetes(tmp_path):
    """Without task.rollout_run there is no rollout task (validate says so, located; the launch refuses); on a VM
    cloud SkyPilot gives a job group's tasks no hostnames (gpuledger/launch/skypilot_group.py): one message why."""
    from gpuledger.cli.commands.render_task import launch_requests
    from gpuledger.errors import UserError
    from gpuledger.plan.requirements import check_spec
    from gpuledger.runtime.launching import make_launcher

    spec = _spec(tmp_path, generation="vllm_server", rollout_gpu="L40S", rollout_gpus=4)
    out = check_spec(tmp_path / "grpo.yaml")
    assert not out["ok"] and len(out["problems"]) == 1
    assert "grpo.yaml:" in out["problems"][0] and "train.rollout_gpu: rollouts on an instance of their own" in \
        out["problems"][0] and "need task.rollout_run" in out["problems"][0]
    with pytest.raises(UserError, match="need task.rollout_run to launch"):
        make_launcher("skypilot", spec, 1, tmp_path)
    spec = spec.model_copy(update={"task": spec.task.model_copy(update={"rollout_run": "trl vllm-serve --model m"})})
    for launch in (lambda: make_launcher("skypilot", spec, 1, tmp_path),
                   lambda: launch_requests(spec, use_planner=False)):  # render-task: not a trainer-only task either
        with pytest.raises(UserError, match="hostnames only on Kubernetes .* put kubernetes in resources.clouds"):
            launch()
