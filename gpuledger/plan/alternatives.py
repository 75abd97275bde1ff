"""What the budget guard quotes when a plan is over budget: fewer trials, all spot, all
on-demand, the cheapest ignoring the deadline, one accelerator for every trial."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import polars as pl

from gpuledger.plan.compute_table import KeyCompute
from gpuledger.plan.scoring import scored_candidates
from gpuledger.plan.settings import PlanSettings


def alternatives(any_fit: bool, row_key: np.ndarray, row_ids: pl.Series, candidates: pl.DataFrame, accel: pl.DataFrame,
                 compute: KeyCompute, table: pl.DataFrame, s: PlanSettings, total: float, keys: pl.DataFrame) -> dict[str, Any]:
    """Returns the totals the budget guard quotes (the cheaper alternatives only when over budget and
    `any_fit`: some candidate fits some trial). `row_key`, `row_ids`: per estimate row (with a memory
    estimate) its scoring key and its trial_id; `compute`: the keys' compute matrix
    (`gpuledger.plan.compute_table`)."""
    out: dict[str, Any] = {}
    feas = table.filter(pl.col("feasible"))
    costs = np.sort(feas["est_cost_usd"].to_numpy())
    out["trials_within_budget"] = int(np.searchsorted(np.cumsum(costs), s.budget_usd, side="right")) if len(costs) else 0
    out["trials_feasible"] = int(feas.height)
    out["top_cost_drivers"] = top_drivers(feas, total)
    if not any_fit or total <= s.budget_usd:
        return out
    # per-accelerator totals need candidates pruned within each accelerator, deadline ignored
    reduced = scored_candidates(keys, candidates, accel, None, replace(s, deadline_s=None),
                                prune_within=("spot", "acc_id"), compute=compute).select("key", "acc_id", "spot", "est_cost_usd")
    tk_key = row_key
    tk_trial = row_ids.rank("dense").to_numpy().astype(np.int64) - 1  # trials in id order: the sums' order
    n_keys, n_trials = int(tk_key.max()) + 1, int(tk_trial.max()) + 1
    r_key = reduced["key"].to_numpy().astype(np.int64)
    r_cost = reduced["est_cost_usd"].to_numpy()
    r_spot = reduced["spot"].to_numpy()
    r_acc = reduced["acc_id"].to_numpy()

    def total_for(mask: np.ndarray) -> tuple[float, int]:
        per_key = np.full(n_keys, np.inf)
        np.minimum.at(per_key, r_key[mask], r_cost[mask])
        per_trial = np.full(n_trials, np.inf)
        np.minimum.at(per_trial, tk_trial, per_key[tk_key])
        ok = np.isfinite(per_trial)
        return float(per_trial[ok].sum()), int(ok.sum())

    cheapest, n = total_for(np.ones(len(r_key), dtype=bool))
    out["cheapest_ignoring_deadline_usd"] = {"total_usd": round(cheapest, 2), "trials": n}
    for name, mask in (("all_spot_usd", r_spot), ("all_on_demand_usd", ~r_spot)):
        if mask.any():
            t, n = total_for(mask)
            out[name] = {"total_usd": round(t, 2), "trials": n}
    names = accel.select("accelerator").unique(maintain_order=True).with_row_index("acc_id")
    by_acc = {}
    for acc_id, acc in names.iter_rows():
        mask = r_acc == acc_id
        if mask.any():
            t, n = total_for(mask)
            by_acc[acc] = {"total_usd": round(t, 2), "trials": n, "of": int(feas.height)}
    out["by_accelerator"] = dict(sorted(by_acc.items()))
    return out


def top_drivers(feas: pl.DataFrame, total: float) -> list[dict[str, Any]]:
    """Returns the (accelerator, gpus, spot, instance) groups that cost the most (at most 3)."""
    drivers = (
        feas.group_by("accelerator", "gpus", "spot", "instance_type")
        .agg(pl.len().alias("trials"), pl.col("est_cost_usd").sum().alias("cost_usd"), pl.col("est_wall_s").sum().alias("wall_s"))
        .sort("cost_usd", descending=True)
        .head(3)
    )
    return [
        {**r, "cost_usd": round(r["cost_usd"], 2), "wall_s": round(r["wall_s"], 1), "share": round(r["cost_usd"] / total, 4) if total else 0.0}
        for r in drivers.iter_rows(named=True)
    ]
