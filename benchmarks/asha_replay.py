"""The planner's expected spend under pruning against a real ASHA sweep, from stored warehouses.

Given a grid sweep and an ASHA sweep of the same points (e.g. the two warehouses
`benchmarks/search_compare.py` leaves, or `make demo` then `gpuledger sweep` of the grid spec with
`strategy: asha`), prints side by side:
- the real ASHA sweep: runs, pruned, trial-seconds (sum of run wall-clock), cost;
- its own learning curves replayed (`gpuledger.search.asha_replay.simulate_asha`) at its slot count and
  launch order: the same trials pruned?, trial-seconds (the difference is the cancel lag of pruned
  runs past their rung);
- the grid's curves replayed in the ASHA sweep's launch order at 1, 2, 4, 8 slots (what the planner's
  `measured` source does): pruned, trial-seconds and their share of the grid's, makespan, best,
  time-to-best; and the planner's expected spend (the grid's cost per trial scaled by each trial's
  replayed fraction) against the ASHA sweep's real cost.

Every replay suspends at undecided rungs when the ASHA sweep's stored spec does (`search.pruning.suspend`,
its default when the spec was stored before the field: `gpuledger.search.suspension.suspends`, the
runtime's and the planner's rule), each attempt's seconds counted.

Run: `.venv/bin/python benchmarks/asha_replay.py GRID_WAREHOUSE GRID_SWEEP_ID ASHA_WAREHOUSE ASHA_SWEEP_ID`
(seconds; nothing is written: each warehouse is opened read-only).
"""

from __future__ import annotations

import sys


def _load(path: str, sweep_id: str) -> list[dict]:
    from gpuledger.warehouse import Warehouse

    with Warehouse.open(path, read_only=True, migrate=False) as wh:
        return wh.query_named("learning_curves", {"sweep_id": sweep_id, "model": None, "method": None,
                                                  "metric": None}).to_dicts()


def _runs(rows: list[dict]) -> list[dict]:
    return list({r["run_id"]: r for r in rows}.values())


def main(argv: list[str]) -> int:
    import json

    from gpuledger.search.asha_replay import curves_from_points, simulate_asha
    from gpuledger.search.suspension import suspends

    if len(argv) != 4:
        print(__doc__.strip().splitlines()[-2], file=sys.stderr)
        return 2
    grid_wh, grid_id, asha_wh, asha_id = argv
    grows, arows = _load(grid_wh, grid_id), _load(asha_wh, asha_id)
    if not grows or not arows:
        print(f"no runs of {grid_id if not grows else asha_id} in {grid_wh if not grows else asha_wh}", file=sys.stderr)
        return 2
    gruns, aruns = _runs(grows), _runs(arows)
    pruning = json.loads(arows[0]["pruning"] or "{}") or {}
    min_steps, eta = pruning.get("min_steps", 2), pruning.get("reduction_factor", 3)
    goal, slots = arows[0]["goal"], int(arows[0]["max_parallel"])
    suspend = suspends("asha", pruning)
    real_s, real_usd = sum(r["wall_s"] for r in aruns), sum(r["cost_usd"] for r in aruns)
    print(f"real ASHA {asha_id}: {len(aruns)} runs, {sum(r['status'] == 'cancelled' for r in aruns)} pruned, "
          f"{real_s:.1f} trial-s, ${real_usd:.4f} (min_steps {min_steps}, reduction_factor {eta}, {slots} slot(s), "
          f"{'with' if suspend else 'without'} suspension at undecided rungs)")
    acurves = curves_from_points(arows)
    order = [c.trial_id for c in acurves]
    own = simulate_asha(acurves, slots=slots, min_steps=min_steps, reduction_factor=eta, goal=goal, suspend=suspend)
    real = {r["trial_id"]: "pruned" if r["status"] == "cancelled" else "completed" for r in aruns}
    same = {t.trial_id: t.status for t in own.trials} == real
    print(f"its own curves replayed at {slots} slot(s): {own.pruned} pruned, same trials pruned: {same}, "
          f"{own.trial_seconds:.1f} trial-s ({own.trial_seconds / real_s:.1%} of the real)")
    gcurves = {c.trial_id: c for c in curves_from_points(grows)}
    grid_s = sum(c.wall_s for c in gcurves.values())
    cost = {r["trial_id"]: r["cost_usd"] for r in gruns}
    print(f"grid {grid_id}: {len(gcurves)} curves, {grid_s:.1f} trial-s, ${sum(cost.values()):.4f}")
    if set(gcurves) != set(order):
        print("the two sweeps' trial ids differ (a different spec name?): replaying the grid in its own order")
        order = list(gcurves)
    print("| slots | pruned | trial-s | share of grid | makespan s | best | time-to-best s | expected $ |")
    print("|---|---|---|---|---|---|---|---|")
    for k in (1, 2, 4, 8):
        sim = simulate_asha(list(gcurves.values()), slots=k, min_steps=min_steps, reduction_factor=eta, goal=goal,
                            order=order, suspend=suspend)
        expected = sum(cost[t.trial_id] * t.seconds / gcurves[t.trial_id].wall_s for t in sim.trials)
        print(f"| {k} | {sim.pruned} | {sim.trial_seconds:.1f} | {sim.trial_seconds / grid_s:.0%} | {sim.makespan_s:.1f} "
              f"| {sim.best_value:.5f} | {sim.time_to_best_s:.1f} | {expected:.4f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
