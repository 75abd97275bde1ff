"""RL trials' time and dollars by role in a plan (issue 40 item 2; docs/rl.md).

For a `method: grpo|ppo` sweep, each feasible trial's compute time (what the plan priced: the RL
step of `gpuledger.estimate.rl` x the steps its tokens take, times its band's P50 and any
calibration) is split over the roles of one step (rollout, reference, old_logprob, reward, critic,
train, sync; split placements also the idle share each GPU group waits), with GPU-hours and dollars
at the trial's own price per GPU-hour (its offer / the GPUs it uses). `Plan.roles` holds them by
trial id; `plan --json` puts each under its trial as `roles`, the text prints one line per trial.
"""

from __future__ import annotations

import json

import polars as pl

from gpuledger.vocabulary import RL_METHODS


def trial_roles(plan, estimates: pl.DataFrame) -> dict[str, dict]:
    """Returns {trial_id: {placement, engine, async, steps, step_s, phases_s, groups, roles}} for the
    feasible trials of an RL plan (empty for other methods, or where a trial cannot be timed)."""
    from gpuledger.estimate.rl import placement_candidates, rl_step_cached, role_costs
    from gpuledger.estimate.workload import Workload

    out: dict[str, dict] = {}
    for t in plan.trials:
        if not t.get("feasible") or not t.get("compute_s"):
            continue
        rows = estimates.filter((pl.col("trial_id") == t["trial_id"]) & (pl.col("gpus") == t["gpus"])
                                & (pl.col("sharding") == t["sharding"]))
        text = rows["workload"].drop_nulls().head(1).to_list()
        if not text:
            continue
        w = Workload(**json.loads(text[0])["workload"])
        if w.method not in RL_METHODS:
            continue
        try:
            cands = placement_candidates(w, t["accelerator"], t["gpus"])
        except ValueError:
            continue
        best = next(c for c in cands if c["chosen"])
        step = rl_step_cached(best["setup"])
        steps = float(json.loads(text[0])["tokens"]) / step.tokens
        # the plan's compute time over the model's steps: its band's P50 and any calibration (and the load)
        factor = float(t["compute_s"]) / (steps * step.step_s)
        per_gpu = float(t["usd_per_hour"]) / max(1, int(t["gpus"])) if t.get("usd_per_hour") else None
        prices = {g["accelerator"]: per_gpu for g in step.groups.values()} if per_gpu else None
        j = step.to_json()
        out[t["trial_id"]] = {
            "placement": j["placement"], "engine": j["engine"], "async": j["async"], "steps": round(steps, 1),
            "step_s": j["step_s"], "time_factor": round(factor, 3), "phases_s": j["phases_s"], "groups": j["groups"],
            "rollout": j["rollout"], "roles": role_costs(step, steps * factor, prices),
            "memory_gib": _memory(w, t["gpus"], j),
            "placements": [{k: (round(v, 1) if k == "tokens_per_s" else v) for k, v in c.items() if k != "setup"}
                           for c in cands]}
    return out


def _memory(w, gpus: int, step_json: dict) -> dict:
    """Per-GPU GiB of each GPU group: the trainer's components from the memory estimate (policy and
    reference weights, gradients, optimizer states, activations, logits, the generation's KV cache
    when colocated, device total); split, the vLLM GPUs' weights and KV cache."""
    from gpuledger.estimate import estimate

    e = estimate(w.model_copy(update={"gpus": gpus}))
    keys = ("weights", "gradients", "optimizer", "activations", "logits", "kv_cache", "device")
    out = {"trainer": {k: round(e.memory_gib[k], 2) for k in keys}}
    ro = step_json.get("rollout") or {}
    if step_json["placement"] == "split" and "kv_cache_gib_per_gpu" in ro:
        out["rollout"] = {"weights": ro["weights_gib_per_gpu"], "kv_cache": ro["kv_cache_gib_per_gpu"]}
    return out


def roles_line(trial_id: str, r: dict) -> str:
    """Returns one text line of a trial's roles: placement, then each role's time and dollars."""
    from gpuledger.plan.formats import fmt_duration, fmt_usd

    groups = ", ".join(f"{name} {g['gpus']}x {g['accelerator']}" for name, g in r["groups"].items())
    parts = []
    for name, v in r["roles"].items():
        usd = f" {fmt_usd(v['usd'])}" if v.get("usd") is not None else ""
        parts.append(f"{name} {fmt_duration(v['seconds'])}{usd}")
    tried = ""
    if len(r.get("placements") or []) > 1:
        tried = "; placements tried: " + ", ".join(
            f"{c['rollout_gpus']} rollout + {c['trainer_gpus']} train {fmt_duration(c['step_s'])}/step"
            + (" <- chosen" if c["chosen"] else "") for c in r["placements"])
    return (f"roles {trial_id}: {r['placement']} ({groups}; {r['engine']}{', async' if r['async'] else ''}), "
            f"{r['steps']:,.0f} steps of {fmt_duration(r['step_s'])} (x{r['time_factor']:g} the band's P50): "
            + ", ".join(parts) + tried)


def is_rl(method: str) -> bool:
    return method in RL_METHODS
