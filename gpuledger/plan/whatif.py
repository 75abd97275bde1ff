"""The what-if curve: K parallel slots against expected time-to-recipe and cost.

`WHAT_IF_KS` is the one list of parallelism levels (the plan and the ROI report use it)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gpuledger.plan.schedule import list_starts

#: The what-if curve's parallelism levels.
WHAT_IF_KS = (1, 2, 4, 8, 16, 32, 64)


def what_if_curve(
    durations_s: Sequence[float],
    costs_usd: Sequence[float],
    *,
    target_index: int | None = None,
    ks: Sequence[int] = WHAT_IF_KS,
    stop_at_target: bool = True,
    shared_cores: int | None = None,
    _schedules: dict[int, tuple[np.ndarray, np.ndarray]] | None = None,
) -> list[dict[str, float]]:
    """Returns [{parallel: K, time_to_recipe_s, cost_usd}] for each K in `ks`.

    Trials are given in launch order and run by greedy list scheduling on K slots (a trial starts
    as soon as a slot is free). The "recipe" trial is `target_index` (the first trial to reach
    `objective.target`, or the best trial).
    - time_to_recipe_s(K) = the moment the recipe trial finishes (start + duration); without
      `shared_cores` it never rises with K (list scheduling of independent trials in a fixed order:
      a trial's start time cannot increase when slots are added).
    - cost_usd(K), with `stop_at_target` (the sweep stops launching once the target is reached):
      the cost of every trial started before the recipe trial finished; trials in flight at that
      moment run to completion and are paid in full (the waste of parallelism: more slots start
      more trials that turn out to be unnecessary). Without `stop_at_target`, every trial runs:
      cost = the sum of all costs for every K.
    - `shared_cores` (the local launcher: K slots share this machine's cores): the durations and
      costs given are those of at most that many trials at once; at K > shared_cores each trial
      takes, and is billed for, K / shared_cores times as long (the cores are shared evenly).
    With `target_index=None` (unknown before running) both are expectations under a uniform prior
    over which trial is the recipe: the mean over every possible recipe position.
    """
    d0 = np.asarray(durations_s, dtype=np.float64)
    c0 = np.asarray(costs_usd, dtype=np.float64)
    n = len(d0)
    if n == 0:
        return [{"parallel": int(k), "time_to_recipe_s": 0.0, "cost_usd": 0.0} for k in ks]
    if len(c0) != n:
        raise ValueError("durations_s and costs_usd must have the same length")
    if target_index is not None and not 0 <= target_index < n:
        raise ValueError(f"target_index {target_index} is outside 0..{n - 1}")
    out = []
    cum0, d0_list = np.concatenate([[0.0], np.cumsum(c0)]), None
    for k in ks:
        slow = max(1.0, int(k) / shared_cores) if shared_cores else 1.0
        if slow == 1.0:  # d0 × 1.0 is d0
            d, cum = d0, cum0
            cached = (_schedules or {}).get(int(k))
            if cached is None and d0_list is None and n > k > 1:
                d0_list = d0.tolist()
            start = cached[0] if cached is not None else list_starts(d, k, as_list=d0_list)
        else:
            d, c = d0 * slow, c0 * slow
            cum = np.concatenate([[0.0], np.cumsum(c)])
            start = list_starts(d, k)
        finish = start + d
        if stop_at_target:
            # starts are non-decreasing in launch order under list scheduling: count by binary search
            started_before = np.searchsorted(start, finish, side="left")
            # the recipe trial itself always counts, whatever its own start
            cost_if = cum[np.maximum(started_before, np.arange(1, n + 1))]
        else:
            cost_if = np.full(n, cum[-1])
        if target_index is None:
            t, cost = float(finish.mean()), float(cost_if.mean())
        else:
            t, cost = float(finish[target_index]), float(cost_if[target_index])
        out.append({"parallel": int(k), "time_to_recipe_s": round(t, 6), "cost_usd": round(cost, 6)})
    return out
