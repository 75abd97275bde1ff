"""Which GPU to rent for one workload and a number of training tokens: per GPU kind and count, does
it fit, the peak memory, the time (gpuledger/estimate/throughput.py) and the dollars at the cheapest
on-demand and spot offer of the catalog (`gpuledger estimate MODEL ... --tokens N`). Pure: the
offers come in as a frame (`gpuledger.catalog.pricing.load_offers`)."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from gpuledger.plan.settings import AUTO_GPU_COUNTS, MEMORY_RESERVE_GIB, MEMORY_SAFETY_FRACTION, S_PER_H

#: JSON keys of one option (`estimate --tokens --json` `options[]`)
#: `time_s`, `cost_usd` (on demand) and `cost_usd_spot` are {p10, p50, p90}: the model's figure moved
#: by the measured error of its cell (gpuledger/estimate/bands.py; `time_band`, `memory_band` say what
#: they rest on); `usd_on_demand`, `usd_spot` are the P50 dollars; `peak_memory_gib` is the estimate
#: the fit is decided on, `peak_memory_gib_p10`/`peak_memory_gib_p90` its P10/P90 (the planner's rule,
#: gpuledger/plan/bands.py MEMORY_FIT_RULE: `fits` when the P10 fits the usable memory; `oom_risk` the chance
#: the peak exceeds it, `memory_note` the warning where the P90 does not fit). `spot_note`: why the
#: spot row is not the saving it looks like (it costs more than on-demand: a bigger box), else null.
OPTION_KEYS = ("accelerator", "gpus", "sharding", "fits", "peak_memory_gib", "peak_memory_gib_p10", "peak_memory_gib_p90",
               "usable_memory_gib",
               "time_s", "tokens_per_s_per_gpu", "usd_on_demand", "usd_spot", "cost_usd", "cost_usd_spot",
               "on_demand_offer", "spot_offer", "price_as_of", "cheapest", "fastest", "reason", "time_calibration",
               "time_band", "memory_band", "spot_note", "rl", "oom_risk", "memory_note")


def _p(band: dict, scale: float, ndigits: int) -> dict:
    return {k: round(band[k] * scale, ndigits) for k in ("p10", "p50", "p90")}


def _cheapest(offers: pl.DataFrame, accelerator: str, gpus: int, spot: bool, nodes: int = 1) -> dict | None:
    """Returns the cheapest offer of `accelerator` with at least `gpus` GPUs (the whole instance is
    paid), on-demand or spot (suspicious spot prices skipped), or None. `nodes` > 1: one instance per node with
    at least gpus / nodes GPUs, `usd_per_hour` all of them (as the planner's candidates)."""
    col = "usd_per_hour_spot" if spot else "usd_per_hour_on_demand"
    if gpus % nodes:
        return None
    sel = offers.filter((pl.col("accelerator") == accelerator) & (pl.col("accelerator_count") >= gpus // nodes)
                        & pl.col(col).is_not_null())
    if spot and "spot_suspicious" in sel.columns:
        sel = sel.filter(~pl.col("spot_suspicious"))
    if sel.is_empty():
        return None
    row = sel.sort(col, "accelerator_count", "cloud", "region", "instance_type").row(0, named=True)
    return {"usd_per_hour": float(row[col]) * nodes, "cloud": row["cloud"], "region": row["region"],
            "instance_type": row["instance_type"] if nodes == 1 else f"{nodes} x {row['instance_type']}",
            "as_of": row["as_of"],
            "accelerator_count": int(row["accelerator_count"])}


def _shardings(method: str, gpus: int, given: str) -> list[str]:
    from gpuledger.plan.estimates import sharding_options

    return sharding_options(method, gpus, given if given != "none" else "auto")


def gpu_options(workload, tokens: float, offers: pl.DataFrame, accelerators: Sequence[str] | None = None,
                counts: Sequence[int] = AUTO_GPU_COUNTS, time_corrections: dict | None = None,
                band_table=None) -> list[dict]:
    """Returns one option per GPU kind x count (OPTION_KEYS): the kinds of `accelerators`, else
    every kind the offers rent. Memory: the estimate at nvidia-smi level against the usable memory
    (nvidia-smi total x MEMORY_SAFETY_FRACTION − MEMORY_RESERVE_GIB, the planner's rule); with
    several GPUs the sharding rule of the planner (plan/estimates.py SHARDING_RULE) picks ddp or fsdp.
    `cheapest` marks the fitting option of least on-demand cost, `fastest` the one of least time.
    `time_corrections`: {GPU family: calibration.Correction of time} learnt from the user's runs: the
    model's time x its factor on the kinds of that family (`time_calibration` says so), the band its
    cell's spread around it. `band_table`: `bands.table_with_runs(runs)` (default: the public rows)."""
    from gpuledger.catalog import gpu_kinds
    from gpuledger.estimate import estimate, train_time_s
    from gpuledger.estimate.bands import band_for
    from gpuledger.estimate.calibration import accelerator_family
    from gpuledger.estimate.coefficients import nodes_for
    from gpuledger.plan.bands import oom_risk, risk_note

    if workload.gpus > max(counts) and counts == AUTO_GPU_COUNTS:  # a trial of several nodes asked for: its count too
        counts = (*counts, workload.gpus)
    kinds = gpu_kinds()
    names = list(dict.fromkeys(accelerators)) if accelerators else sorted(
        set(offers["accelerator"].unique().to_list()) & set(kinds))
    options = []
    for acc in names:
        kind = kinds[acc]
        usable = kind.memory_gib * MEMORY_SAFETY_FRACTION - MEMORY_RESERVE_GIB
        for n in counts:
            best = None  # the first sharding that fits, else the one that needs least memory
            for sharding in _shardings(workload.method, n, workload.sharding):
                try:
                    w = type(workload)(**{**workload.model_dump(), "gpus": n, "sharding": sharding})
                except ValueError as err:  # e.g. n GPUs do not split into tensor x pipeline parallel
                    best = best or {"accelerator": acc, "gpus": n, "sharding": sharding, "fits": False,
                                    "reason": _refusal(err)}
                    continue
                est = estimate(w)
                need = est.memory_gib["device"]
                cell = (w.framework, w.method, w.precision, n, acc)
                mband = band_for("memory", *cell[:-1], None, table=band_table)  # as the planner: no GPU family
                risky = need * mband.p90 > usable
                opt = {"accelerator": acc, "gpus": n, "sharding": sharding, "fits": need * mband.p10 <= usable,
                       "oom_risk": round(oom_risk(need, usable, mband.p10, mband.p50, mband.p90), 4),
                       "memory_note": risk_note(need, usable, acc, mband) if risky else None,
                       "peak_memory_gib": round(need, 2), "peak_memory_gib_p10": round(need * mband.p10, 2),
                       "peak_memory_gib_p90": round(need * mband.p90, 2),
                       "usable_memory_gib": round(usable, 2), "memory_band": mband.to_json()}
                if opt["fits"]:
                    try:
                        model_s = train_time_s(est, tokens, acc, n)
                    except ValueError as err:  # the time model refuses it (a split RL trial on one GPU)
                        opt |= {"fits": False, "reason": str(err).splitlines()[0]}
                if opt["fits"]:
                    tband = band_for("time", *cell, w.stack, w.model, table=band_table)
                    corr = (time_corrections or {}).get(accelerator_family(acc))
                    if corr is not None:
                        model_s *= corr.factor
                        tband = tband.centered(corr.describe())
                    time_s = _p(tband.of(model_s), 1.0, 1)
                    if w.method in ("grpo", "ppo"):  # the RL step by role (docs/rl.md)
                        from gpuledger.estimate.rl_plan import placement_candidates, rl_step_cached

                        cands = placement_candidates(w, acc, n)
                        rl_obj = rl_step_cached(next(c["setup"] for c in cands if c["chosen"]))
                        st = rl_obj.to_json()
                        opt["rl"] = {k: st[k] for k in ("placement", "engine", "async", "step_s", "phases_s", "groups")} | {
                            "steps": round(tokens / st["tokens_per_step"], 1),
                            "placements": [{k: v for k, v in c.items() if k != "setup"} for c in cands]}
                        if "dynamic_sampling" in st["rollout"]:  # DAPO's group filter: what it does to the rollout
                            opt["rl"]["dynamic_sampling"] = st["rollout"]["dynamic_sampling"]
                    best = opt | {"time_s": time_s, "tokens_per_s_per_gpu": round(tokens / time_s["p50"] / n, 1),
                                  "time_calibration": corr.describe() if corr is not None else None,
                                  "time_band": tband.to_json()}
                    break
                if best is None or best.get("peak_memory_gib") is None or need < best["peak_memory_gib"]:
                    best = opt
            row = {k: None for k in OPTION_KEYS} | best
            row["cheapest"] = row["fastest"] = False
            if not row["fits"]:
                row["reason"] = row.get("reason") or (
                    f"needs {row['peak_memory_gib_p10']:.1f} GiB per GPU even at the memory band's P10 (P50 "
                    f"{row['peak_memory_gib']:.1f}), {row['usable_memory_gib']:.1f} usable"
                    if row.get("peak_memory_gib_p10") is not None else
                    f"needs {row['peak_memory_gib']:.1f} GiB per GPU, {row['usable_memory_gib']:.1f} usable")
            else:
                t = row["time_s"]
                hours = t["p50"] / S_PER_H
                nodes = nodes_for(n, workload.nodes)
                od, sp = _cheapest(offers, acc, n, False, nodes), _cheapest(offers, acc, n, True, nodes)
                if od:
                    row.update(usd_on_demand=round(hours * od["usd_per_hour"], 2), price_as_of=od["as_of"],
                               cost_usd=_p(t, od["usd_per_hour"] / S_PER_H, 2),
                               on_demand_offer=f"{od['cloud']} {od['region']} {od['instance_type']} "
                                               f"${od['usd_per_hour']:.2f}/h")
                if sp:
                    row.update(usd_spot=round(hours * sp["usd_per_hour"], 2), cost_usd_spot=_p(t, sp["usd_per_hour"] / S_PER_H, 2),
                               spot_offer=f"{sp['cloud']} {sp['region']} {sp['instance_type']} "
                                          f"${sp['usd_per_hour']:.2f}/h")
                    if od and sp["usd_per_hour"] >= od["usd_per_hour"]:  # issue 38: a dearer "saving"
                        box = (f"a {sp['accelerator_count']}-GPU {sp['instance_type']} for {n} GPU{'s' if n > 1 else ''}"
                               if sp["accelerator_count"] > n else sp["instance_type"])
                        row["spot_note"] = (f"spot costs more than on-demand here (${sp['usd_per_hour']:.2f}/h vs "
                                            f"${od['usd_per_hour']:.2f}/h): the cheapest spot offer is {box}, paid whole; "
                                            "on-demand is cheaper")
                if row.get("rl") and od:
                    _rl_roles(row, rl_obj, t["p50"], od["usd_per_hour"] / n)
                if not od and not sp:
                    row["reason"] = (f"no offer of {n} x {acc} in the catalog" if acc in offers["accelerator"] else
                                     f"no price for {acc} in any cloud: bring your own rate (docs/prices.md)")
                elif workload.precision.startswith("bf16") and not kind.tflops.get("bf16"):
                    # V100, T4: no bf16 tensor cores; the time is the fp16 rate (catalog.GpuKind.peak_tflops)
                    row["reason"] = "no bf16 on this GPU: timed as fp16 (train with --precision fp16-mixed)"
            options.append(row)
    priced = [o for o in options if o["fits"] and o["usd_on_demand"] is not None]
    if priced:  # a placement whose memory P90 fits before a cheaper one at risk of OOM (as the planner)
        min(priced, key=lambda o: (o["memory_note"] is not None, o["usd_on_demand"], o["time_s"]["p50"]))["cheapest"] = True
    timed = [o for o in options if o["fits"] and o["time_s"] is not None]
    if timed:
        min(timed, key=lambda o: (o["time_s"]["p50"], o["usd_on_demand"] or float("inf")))["fastest"] = True
    return options


def _rl_roles(row: dict, step, time_s: float, usd_per_gpu_hour: float) -> None:
    """Adds to an RL option's `rl` its roles (gpuledger.estimate.rl_plan.role_costs): each role's time over the
    option's P50 time (the model's steps scaled by the band, so the roles add up to it), GPU-hours and
    on-demand dollars at the option's price per GPU-hour, and the answer's GPU groups."""
    from gpuledger.estimate.rl_plan import role_costs

    rl = row["rl"]
    factor = time_s / (rl["steps"] * step.step_s) if rl["steps"] and step.step_s else 1.0
    prices = {g["accelerator"]: usd_per_gpu_hour for g in step.groups.values()}
    rl["time_factor"] = round(factor, 3)
    rl["roles"] = role_costs(step, rl["steps"] * factor, prices)


def _refusal(err: ValueError) -> str:
    """Returns why a placement's workload was refused: pydantic's own messages without its link line."""
    from pydantic import ValidationError

    from gpuledger.errors import validation_message

    if isinstance(err, ValidationError):
        return "; ".join(validation_message(e) for e in err.errors())
    return str(err).splitlines()[0].strip()
