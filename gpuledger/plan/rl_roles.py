"""RL trials' time and dollars by role in a plan (issue 40 item 2; docs/rl.md).

For a `method: grpo|ppo` sweep, each feasible trial's compute time (what the plan priced: the RL
step of `gpuledger.estimate.rl` x the steps its tokens take, times its band's P50 and any
calibration) is split over the roles of one step (rollout, reference, old_logprob, reward, critic,
train, sync; split placements also the idle share each GPU group waits), with GPU-hours and dollars
at the trial's own price per GPU-hour (its offer / the GPUs it uses). `Plan.roles` holds them by
trial id; `plan --json` puts each under its trial as `roles`, the text prints one line per trial.

A trial the plan extrapolated from a probe of its shape (est_basis "probe RUN_ID DATE") whose trainer
reported its roles (gpuledger/integrations/trl.py; v_probes rollout_s .. sync_s, rl_step_s) is split by
what the probe measured, not by the model: its step is the probe's median step, each phase the probe's
median seconds (the log-probs it measured as one, split between reference and old_logprob as the model
splits them), `basis` the probe; the model's phases stay under `model_phases_s` for comparison, and
`rollout.measured_tokens_per_s` is the probe's generation rate.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import polars as pl

from gpuledger.vocabulary import RL_METHODS


def rollout_instance(w, offers: pl.DataFrame, settings) -> dict | None:
    """Returns the rollout instance of a workload whose rollouts run on GPUs of their own (`rollout_gpu` x
    `rollout_gpus`): the cheapest on-demand offer with at least that many GPUs of the kind ({accelerator,
    gpus, cloud, region, instance_type, usd_per_hour, price_source}); None for any other workload. It is
    billed on demand for the trial's whole wall time (both instances run through every step). A kind the
    offers lack: UserError naming `train.rollout_gpu`."""
    from gpuledger.catalog import normalize_accelerator
    from gpuledger.errors import UserError
    from gpuledger.plan.candidates import candidate_offers

    if not (w.method in RL_METHODS and w.generation == "vllm_server" and w.rollout_gpu and w.rollout_gpus):
        return None
    acc, n = normalize_accelerator(w.rollout_gpu), int(w.rollout_gpus)
    kind = offers.filter(pl.col("accelerator") == acc)
    cands = candidate_offers(kind, [n], settings).filter(~pl.col("spot")) if kind.height else kind
    if not cands.height:
        raise UserError(f"train.rollout_gpu {acc}: no on-demand offer with {n} or more {acc} GPUs among the "
                        "plan's offers (the rollout instance; see gpuledger prices)")
    r = cands.sort("usd_per_hour").row(0, named=True)
    return {"accelerator": acc, "gpus": n, "cloud": r["cloud"], "region": r["region"],
            "instance_type": r["instance_type"], "usd_per_hour": float(r["usd_per_hour"]),
            "price_source": r["price_source"]}


def rollout_extra_usd(keys: pl.DataFrame, offers: pl.DataFrame, settings) -> np.ndarray | None:
    """Returns per scoring key (by key id) the rollout instance's $/hour its trial also pays (0 where none),
    or None when no key has one (the plan's usual single-instance pricing)."""
    from gpuledger.estimate.workload import Workload

    if keys.is_empty() or '"method": "grpo"' not in (first := str(keys["workload"][0])) and '"method": "ppo"' not in first:
        return None  # a plan's rows share their method: only RL plans look further
    if not keys["workload"].str.contains('"rollout_gpu": "', literal=True).any():
        return None
    extra = np.zeros(int(keys["key"].max()) + 1)
    usd: dict[str, float] = {}
    for key, text in keys.select("key", "workload").iter_rows():
        if text not in usd:
            inst = rollout_instance(Workload(**json.loads(text)["workload"]), offers, settings)
            usd[text] = inst["usd_per_hour"] if inst else 0.0
        extra[int(key)] = usd[text]
    return extra


def _measured(probed: pl.DataFrame | None, t: dict) -> dict | None:
    """Returns the probe row a trial's time rests on when it carries RL role timings, else None."""
    basis = str(t.get("est_basis") or "")
    if probed is None or probed.is_empty() or not basis.startswith("probe ") or "rl_step_s" not in probed.columns:
        return None
    rows = probed.filter((pl.col("trial_id") == t["trial_id"]) & (pl.col("basis") == basis)
                         & pl.col("rl_step_s").is_not_null() & (pl.col("rl_step_s") > 0))
    return rows.row(0, named=True) if rows.height else None


def _measured_step(step, probe: dict):
    """Returns `step` with the probe's phases and step time (see the module)."""
    model = step.phases_s
    logprob = float(probe.get("logprob_s") or 0.0)
    ref, old = model.get("reference", 0.0), model.get("old_logprob", 0.0)
    share = ref / (ref + old) if ref + old > 0 else 1.0
    phases = {k: 0.0 for k in model}
    phases.update(rollout=float(probe.get("rollout_s") or 0.0), reference=logprob * share,
                  old_logprob=logprob * (1 - share), reward=float(probe.get("reward_s") or 0.0),
                  train=float(probe.get("train_s") or 0.0), sync=float(probe.get("sync_s") or 0.0))
    return dataclasses.replace(step, phases_s=phases, step_s=float(probe["rl_step_s"]))


def trial_roles(plan, estimates: pl.DataFrame, probed: pl.DataFrame | None = None,
                offers: pl.DataFrame | None = None, settings=None) -> dict[str, dict]:
    """Returns {trial_id: {placement, engine, async, steps, step_s, phases_s, groups, roles, basis}} for the
    feasible trials of an RL plan (empty for other methods, or where a trial cannot be timed); `probed`:
    the probes the plan used (`probes_for_trials`), whose RL role timings split a probed trial; `offers` and
    `settings`: the plan's, for the rollout instance of a trial whose rollouts run on GPUs of their own
    (`rollout_instance`: its $/hour is in the trial's `usd_per_hour`, split off here by group)."""
    from gpuledger.estimate.rl_plan import placement_candidates, rl_step_cached, role_costs
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
        model_phases = step.to_json()["phases_s"]
        probe = _measured(probed, t)
        if probe is not None:
            step = _measured_step(step, probe)
        steps = float(json.loads(text[0])["tokens"]) / step.tokens
        # the plan's compute time over the model's steps: its band's P50 and any calibration (and the load)
        factor = float(t["compute_s"]) / (steps * step.step_s)
        inst = rollout_instance(w, offers, settings) if offers is not None else None
        trainer_usd = float(t["usd_per_hour"]) - (inst["usd_per_hour"] if inst else 0.0) if t.get("usd_per_hour") else None
        per_gpu = trainer_usd / max(1, int(t["gpus"])) if trainer_usd else None
        prices = {g["accelerator"]: per_gpu for g in step.groups.values()} if per_gpu else None
        j = step.to_json()
        if inst is not None:  # each group its own instance and price
            prices = {"trainer": per_gpu, "rollout": inst["usd_per_hour"] / inst["gpus"]} if per_gpu else None
            j["groups"]["trainer"].update(instance_type=t.get("instance_type"), cloud=t.get("cloud"),
                                          usd_per_hour=round(trainer_usd, 4) if trainer_usd else None,
                                          spot=bool(t.get("spot")))
            j["groups"]["rollout"].update(instance_type=inst["instance_type"], cloud=inst["cloud"], region=inst["region"],
                                          usd_per_hour=round(inst["usd_per_hour"], 4), spot=False,
                                          price_source=inst["price_source"])
        rollout = dict(j["rollout"])
        if probe is not None and probe.get("rollout_tokens_per_s"):
            rollout["measured_tokens_per_s"] = round(float(probe["rollout_tokens_per_s"]), 1)
        out[t["trial_id"]] = {
            "placement": j["placement"], "engine": j["engine"], "async": j["async"], "steps": round(steps, 1),
            "step_s": j["step_s"], "time_factor": round(factor, 3), "phases_s": j["phases_s"], "groups": j["groups"],
            "rollout": rollout, "roles": role_costs(step, steps * factor, prices),
            "basis": t["est_basis"] if probe is not None else "model (gpuledger/estimate/rl.py)",
            **({"model_phases_s": model_phases} if probe is not None else {}),
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

    def group(name: str, g: dict) -> str:
        inst = g.get("instance_type")  # an instance of its own per group: where and its $/hour
        where = (f" on {g.get('cloud')} {inst}{' spot' if g.get('spot') else ''}"
                 + (f" {fmt_usd(g['usd_per_hour'])}/h" if g.get("usd_per_hour") is not None else "")) if inst else ""
        return f"{name} {g['gpus']}x {g['accelerator']}{where}"

    groups = ", ".join(group(name, g) for name, g in r["groups"].items())
    parts = []
    for name, v in r["roles"].items():
        usd = f" {fmt_usd(v['usd'])}" if v.get("usd") is not None else ""
        parts.append(f"{name} {fmt_duration(v['seconds'])}{usd}")
    tried = ""
    if len(r.get("placements") or []) > 1:
        tried = "; placements tried: " + ", ".join(
            f"{c['rollout_gpus']} rollout + {c['trainer_gpus']} train {fmt_duration(c['step_s'])}/step"
            + (" <- chosen" if c["chosen"] else "") for c in r["placements"])
    measured = str(r.get("basis", "")).startswith("probe ")
    scale = f"measured by {r['basis']}" if measured else f"x{r['time_factor']:g} the band's P50"
    ds = (r.get("rollout") or {}).get("dynamic_sampling")
    return (f"roles {trial_id}: {r['placement']} ({groups}; {r['engine']}{', async' if r['async'] else ''}), "
            f"{r['steps']:,.0f} steps of {fmt_duration(r['step_s'])} ({scale}): "
            + ", ".join(parts) + tried + (f"; {ds['note']}" if ds else ""))


def is_rl(method: str) -> bool:
    return method in RL_METHODS


#: The placements an RL sweep with rollouts on an instance of their own (`train.rollout_gpu`) is also planned
#: under, for comparison: {name: the `train` fields each sets}.
PLACEMENT_VARIANTS = {
    "colocated": {"generation": "vllm_colocate", "rollout_gpu": None, "rollout_gpus": None, "async_rollout": False},
    "split on one node": {"generation": "vllm_server", "rollout_gpu": None, "rollout_gpus": None},
}


def placement_note(plan, spec, plan_variant) -> str | None:
    """Returns one assumption line comparing the plan of a spec whose rollouts run on an instance of their own
    with the plans of the same sweep colocated and split on one node (`PLACEMENT_VARIANTS`; `plan_variant(spec)`
    plans a variant spec): each one's decided spend, makespan and whether it meets the deadline, and the
    cheapest that meets it. None for other specs. The plan itself stays the spec's placement (what its
    trainer command runs); the line says which to set for the cheaper one."""
    from gpuledger.errors import UserError
    from gpuledger.plan.formats import fmt_duration, fmt_usd

    t = spec.train
    if not (spec.method in RL_METHODS and t.generation == "vllm_server" and t.rollout_gpu):
        return None
    dl = plan.deadline_s

    def summary(p) -> tuple[float, float, bool, int]:
        feasible = [x for x in p.trials if x.get("feasible")]
        ok = bool(feasible) and len(feasible) == len(p.trials) and all(x.get("deadline_ok") for x in feasible) \
            and (dl is None or p.makespan_s <= dl)
        return float(p.decided_usd), float(p.makespan_s), ok, len(feasible)

    from gpuledger.catalog import normalize_accelerator

    kind = normalize_accelerator(t.rollout_gpu)
    rows = {f"split on two instances ({t.rollout_gpus}x {kind} rollouts, this plan)": summary(plan)}
    for name, fields in PLACEMENT_VARIANTS.items():
        variant = spec.model_copy(update={"train": t.model_copy(update=fields)})
        try:
            rows[f"{name} (train.generation: {fields['generation']})"] = summary(plan_variant(variant))
        except (UserError, ValueError) as err:
            rows[name] = (float("nan"), float("nan"), False, 0)
            rows[name + f": not plannable ({str(err).splitlines()[0][:120]})"] = rows.pop(name)
    parts = [f"{name} {fmt_usd(usd)}, makespan {fmt_duration(mk)}"
             + ("" if ok else (" (misses the deadline or leaves trials out)" if n else ""))
             for name, (usd, mk, ok, n) in rows.items() if n]
    parts += [name if "not plannable" in name else f"{name}: no trial fits" for name, (_, _, _, n) in rows.items()
              if not n]
    meeting = {name: usd for name, (usd, _, ok, _) in rows.items() if ok}
    best = min(meeting, key=meeting.get) if meeting else None
    verdict = f"cheapest meeting the deadline: {best}" if best else "none meets the deadline with every trial"
    return "placements planned (decided spend): " + "; ".join(parts) + f"; {verdict}"
