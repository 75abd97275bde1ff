"""What the budget guard quotes when a plan is over budget: fewer trials, all spot, all
on-demand, the cheapest ignoring the deadline, one accelerator for every trial."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import polars as pl

from gpuledger.plan.compute_table import KeyCompute
from gpuledger.plan.scoring import fitting, key_groups, numeric_candidates, timing
from gpuledger.plan.sections import BudgetAlternatives, CostDriver, CostTotal
from gpuledger.plan.settings import PlanSettings


def alternatives(any_fit: bool, row_key: np.ndarray, row_ids: pl.Series, candidates: pl.DataFrame, accel: pl.DataFrame,
                 compute: KeyCompute, table: pl.DataFrame, s: PlanSettings, total: float, keys: pl.DataFrame,
                 extra_usd: np.ndarray | None = None) -> BudgetAlternatives:
    """Returns the totals the budget guard quotes (the cheaper alternatives only when over budget and
    `any_fit`: some candidate fits some trial). `row_key`, `row_ids`: per estimate row (with a memory
    estimate) its scoring key and its trial_id; `compute`: the keys' compute matrix
    (`gpuledger.plan.compute_table`); `extra_usd`: per key a second instance's $/hour (`scoring.best_rows`)."""
    feas = table.filter(pl.col("feasible"))
    costs = np.sort(feas["est_cost_usd"].to_numpy())
    base = BudgetAlternatives(
        trials_within_budget=int(np.searchsorted(np.cumsum(costs), s.budget_usd, side="right")) if len(costs) else 0,
        trials_feasible=int(feas.height), top_cost_drivers=tuple(top_drivers(feas, total)))
    if not any_fit or total <= s.budget_usd:
        return base
    # per-accelerator totals need candidates pruned within each accelerator, deadline ignored
    acc_ids, cand = numeric_candidates(candidates, accel, s, prune_within=("spot", "acc_id"))
    groups = list(key_groups(keys, cand))
    tk_key = row_key
    tk_trial = row_ids.rank("dense").to_numpy().astype(np.int64) - 1  # trials in id order: the sums' order
    n_trials = int(tk_trial.max()) + 1

    def total_for(per_key: np.ndarray) -> tuple[float, int]:
        per_trial = np.full(n_trials, np.inf)
        np.minimum.at(per_trial, tk_trial, per_key[tk_key])
        ok = np.isfinite(per_trial)
        return float(per_trial[ok].sum()), int(ok.sum())

    cheapest, spot, on_demand = (np.full(compute.n_keys, np.inf) for _ in range(3))
    by_acc = {}
    for acc_id, acc in acc_ids.iter_rows():
        per_key = _cheapest_on(acc_id, groups, compute, s, cheapest, spot, on_demand, extra_usd)
        if per_key is not None:
            t, n = total_for(per_key)
            by_acc[acc] = CostTotal(total_usd=round(t, 2), trials=n, of=int(feas.height))
    t, n = total_for(cheapest)
    out: dict[str, Any] = {"cheapest_ignoring_deadline_usd": CostTotal(total_usd=round(t, 2), trials=n)}
    for name, per_key in (("all_spot_usd", spot), ("all_on_demand_usd", on_demand)):
        if np.isfinite(per_key).any():
            t, n = total_for(per_key)
            out[name] = CostTotal(total_usd=round(t, 2), trials=n)
    return replace(base, **out, by_accelerator=dict(sorted(by_acc.items())))


def _cheapest_on(acc_id: int, groups: list, compute: KeyCompute, s: PlanSettings, cheapest: np.ndarray, spot: np.ndarray,
                 on_demand: np.ndarray, extra_usd: np.ndarray | None = None) -> np.ndarray | None:
    """Returns each key's cheapest cost on accelerator `acc_id`, deadline ignored (inf: none; None: no
    candidate there fits any key), and lowers `cheapest`, `spot` and `on_demand` (per key, all
    accelerators) by it: the minima of `scored_candidates`' rows, by `scoring.timing`'s formulas, without
    its keys × candidates frame."""
    per_key = None
    for gc, idx, rank, levels in groups:
        rows = gc.filter(pl.col("acc_id") == acc_id)
        for usd, rate, is_spot, usable, tf in rows.select(
                "usd_per_hour", "preemptions_per_hour", "spot", "usable_memory_gib", "time_factor").iter_rows():
            n = fitting(rank, levels, usable)
            seconds = compute.at(idx[:n], acc_id)
            has = ~np.isnan(seconds)
            if not has.any():  # no (key, candidate) row here
                continue
            keys = idx[:n][has]
            cost = timing(seconds[has] * tf, usd if extra_usd is None else usd + extra_usd[keys], rate, s)["est_cost_usd"]
            if per_key is None:
                per_key = np.full(compute.n_keys, np.inf)
            for target in (per_key, cheapest, spot if is_spot else on_demand):
                target[keys] = np.minimum(target[keys], cost)
    return per_key


def top_drivers(feas: pl.DataFrame, total: float) -> list[CostDriver]:
    """Returns the (accelerator, gpus, spot, instance) groups that cost the most (at most 3)."""
    drivers = (
        feas.group_by("accelerator", "gpus", "spot", "instance_type")
        .agg(pl.len().alias("trials"), pl.col("est_cost_usd").sum().alias("cost_usd"), pl.col("est_wall_s").sum().alias("wall_s"))
        .sort("cost_usd", descending=True)
        .head(3)
    )
    return [
        CostDriver(**{**r, "cost_usd": round(r["cost_usd"], 2), "wall_s": round(r["wall_s"], 1),
                      "share": round(r["cost_usd"] / total, 4) if total else 0.0})
        for r in drivers.iter_rows(named=True)
    ]
