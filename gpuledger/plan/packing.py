"""Packed trials: k trials sharing one GPU, offered beside one trial per GPU (a cloud plan).

    packing = packing_options(plan.trials, settings, precision="bf16")   # Plan.packing

Small trials (a LoRA of a 1B model) use a fraction of a large GPU; several side by side on one GPU in one
job (k agents, one per trial: PLoRA, "Efficient LoRA hyper-parameter tuning", 2025, reports up to 7.5×
shorter makespans) pay the job's start-up once and fill the GPU's compute. For k = 2, 4, 8, ... the
feasible one-GPU trials of the plan are grouped k at a time in launch order on their own accelerator
(the plan's choice): a group fits when the sum of its trials' device memory (each estimate includes its
own CUDA context and buffers) is within the GPU's usable memory (nvidia-smi total ×
MEMORY_SAFETY_FRACTION − MEMORY_RESERVE_GIB, the planner's rule). A group's compute time: the trials'
utilisation alone is u_i = flops_i / (compute_s_i × peak), and together they cannot exceed PACK_MFU of
the peak: max(max_i compute_s_i, Σ_i compute_s_i × u_i / PACK_MFU); its wall-clock adds the start-up
(provisioning + set-up) once; its cost is the group's wall-clock at the plan's price of that GPU (the
cheapest offer of the first trial, on-demand or spot as the plan chose), split among its trials by their
compute seconds (each billed for its share). The groups are scheduled on max_parallel slots, longest
first. Each option: k, groups, makespan_s, cost_usd, per_trial_usd, fits; the plan recommends the
cheapest option that is no slower than one per GPU (ties: smaller k). Pure.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpuledger.plan.sections import PackingPlan

#: the most of a GPU's dense peak that trials side by side reach together (Megatron-LM's 52% on A100,
#: Narayanan et al. 2021; PaLM 46%): packing never assumes a GPU faster than a well-tuned large run
PACK_MFU = 0.5
#: the packing factors offered
PACK_KS = (2, 4, 8, 16)


def _makespan(durations: Sequence[float], slots: int) -> float:
    heap = [0.0] * max(1, slots)
    for d in sorted(durations, reverse=True):
        t = heapq.heappop(heap)
        heapq.heappush(heap, t + d)
    return max(heap) if durations else 0.0


def packing_options(trials: Sequence[Mapping[str, Any]], *, overhead_s: float, max_parallel: int,
                    precision: str) -> PackingPlan | None:
    """Returns the options, the k recommended and the basis (`PackingPlan`) for the plan's `trials` rows, or None when fewer than 2
    one-GPU trials are feasible (nothing to pack)."""
    from gpuledger.catalog import gpu_kinds
    from gpuledger.plan.settings import MEMORY_RESERVE_GIB, MEMORY_SAFETY_FRACTION

    kinds = gpu_kinds()
    one = [t for t in trials if t.get("feasible") and int(t.get("gpus") or 0) == 1 and t.get("accelerator") in kinds
           and t.get("compute_s") and t.get("est_memory_gib") and t.get("usd_per_hour") is not None]
    if len(one) < 2:
        return None
    alone = [float(t["est_wall_s"] or 0.0) for t in one]
    base = {"k": 1, "groups": len(one), "makespan_s": round(_makespan(alone, max_parallel), 3),
            "cost_usd": round(sum(float(t["est_cost_usd"] or 0.0) for t in one), 6), "fits": True}
    options = [base]
    by_acc: dict[str, list[Mapping[str, Any]]] = {}
    for t in one:
        by_acc.setdefault(t["accelerator"], []).append(t)
    for k in PACK_KS:
        if k > len(one):
            break
        durations, cost, shares, fits, why = [], 0.0, {}, True, ""
        for acc, ts in by_acc.items():
            kind = kinds[acc]
            usable = kind.memory_gib * MEMORY_SAFETY_FRACTION - MEMORY_RESERVE_GIB
            peak = kind.peak_tflops(precision) * 1e12
            for i in range(0, len(ts), k):
                g = ts[i:i + k]
                mem = sum(float(t["est_memory_gib"]) for t in g)
                if mem > usable:
                    fits, why = False, f"{len(g)} trials need {mem:.1f} GiB on one {acc}, {usable:.1f} usable"
                    break
                util = [min(1.0, float(t.get("flops_total") or 0.0) / (float(t["compute_s"]) * peak)) if peak > 0
                        else 1.0 for t in g]
                compute = max(max(float(t["compute_s"]) for t in g),
                              sum(float(t["compute_s"]) * u for t, u in zip(g, util, strict=True)) / PACK_MFU)
                wall = overhead_s + compute
                usd = wall / 3600.0 * float(g[0]["usd_per_hour"])
                durations.append(wall)
                cost += usd
                total_c = sum(float(t["compute_s"]) for t in g)
                for t in g:
                    shares[t["trial_id"]] = round(usd * float(t["compute_s"]) / total_c, 6)
            if not fits:
                break
        row = {"k": k, "fits": fits}
        if fits:
            row.update(groups=len(durations), makespan_s=round(_makespan(durations, max_parallel), 3),
                       cost_usd=round(cost, 6), per_trial_usd=shares)
        else:
            row["reason"] = why
        options.append(row)
    ok = [o for o in options if o["fits"] and o["makespan_s"] <= base["makespan_s"] + 1e-9]
    rec = min(ok, key=lambda o: (o["cost_usd"], o["k"]))
    basis = (f"k one-GPU trials per GPU in one job (k agents), grouped in launch order on the plan's GPU: fits when "
             f"their device memory sums within the usable memory; compute max(longest alone, Σ compute_s × "
             f"utilisation / {PACK_MFU:.0%} of peak); start-up {overhead_s:.0f} s once per job; each trial billed "
             "its share of the job by compute seconds")
    from gpuledger.plan.sections import PackingOption, PackingPlan

    return PackingPlan(options=tuple(PackingOption(**o) for o in options), recommended=rec["k"], basis=basis,
                       why=(f"{rec['k']} trial(s) per GPU: ${rec['cost_usd']:.4g} and {rec['makespan_s'] / 60:.1f} min "
                            f"against one per GPU ${base['cost_usd']:.4g} and {base['makespan_s'] / 60:.1f} min"))


def with_packed_prices(plan: Any) -> Any:
    """Returns `plan` priced as it runs when its chosen packing (`packing.chosen` k > 1, an option that fits,
    with each trial's share) packs trials: each packed trial's `est_cost_usd` (and its P10 / P90 and pruned
    cost) is its share of the job (`per_trial_usd`) instead of a GPU of its own, the total, the bands' cost
    totals and the expected spend under pruning scaled with it, and `within_budget` decided again on that
    spend (`Plan.decided_usd`); so the budget guard before launch and the budget meter during the sweep
    (which read these rows) charge what the pack rents, not one GPU per trial. The one-per-GPU total stays in
    `packing.options` (k 1) and an assumption says both. Anything else: `plan` unchanged."""
    from dataclasses import replace

    import polars as pl

    pk = getattr(plan, "packing", None)
    k = int(pk.chosen or 1) if pk is not None else 1
    opt = next((o for o in pk.options if o.k == k), None) if k > 1 else None
    frame = plan.trials_frame
    if opt is None or not opt.fits or not opt.per_trial_usd or frame is None:
        return plan
    alone = {r["trial_id"]: float(r["est_cost_usd"] or 0.0) for r in frame.iter_rows(named=True)
             if r["trial_id"] in opt.per_trial_usd}
    ratio = {tid: (opt.per_trial_usd[tid] / c if c > 0 else 1.0) for tid, c in alone.items()}
    scale = pl.col("trial_id").replace_strict(ratio, default=1.0, return_dtype=pl.Float64)
    cols = [c for c in ("est_cost_usd", "est_cost_usd_p10", "est_cost_usd_p90", "est_pruned_cost_usd")
            if c in frame.columns]
    frame = frame.with_columns([(pl.col(c) * scale).alias(c) for c in cols])
    old = float(plan.total_est_cost_usd or 0.0)
    new = old - sum(alone.values()) + sum(opt.per_trial_usd[t] for t in alone)
    factor = new / old if old > 0 else 1.0
    bands = plan.bands
    if bands is not None:  # the totals' band moves with the total (the trials' spread is the same work's)
        bands = replace(bands, total_cost_usd_p10=round(bands.total_cost_usd_p10 * factor, 6),
                        total_cost_usd_p90=round(bands.total_cost_usd_p90 * factor, 6))
    pruning = plan.pruning
    if pruning is not None:
        per = {t: v * ratio.get(t, 1.0) for t, v in pruning.per_trial_usd.items()}
        pf = sum(per.values()) / sum(pruning.per_trial_usd.values()) if sum(pruning.per_trial_usd.values()) > 0 else factor
        pruning = replace(pruning, per_trial_usd=per, full_usd=new,
                          expected_usd=None if pruning.expected_usd is None else pruning.expected_usd * pf)
    note = (f"priced as packed: {len(alone)} trial(s) {k} per GPU, each its share of its job: ${new:.4g} for the "
            f"sweep against ${old:.4g} at one GPU per trial (the budget guard decides on the packed price)")
    out = replace(plan, trials_frame=frame, total_est_cost_usd=new, bands=bands, pruning=pruning,
                  assumptions=[*(plan.assumptions or []), note])
    budget = plan.budget_usd if plan.budget_usd is not None else math.inf
    return replace(out, within_budget=out.decided_usd <= budget + 1e-9)
