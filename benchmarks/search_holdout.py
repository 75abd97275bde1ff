"""The cost-aware default against plain gpuledger ASHA, in sample and out of sample, side by side in one run.

    .venv/bin/python benchmarks/search_holdout.py [--orders N] [--held-out-seeds A-B] [--json]

Three sets of grids, each replayed by `gpuledger.search.comparison.replay_strategies` (grid, plain
`asha-rungs`, the default `asha`, both suspending at undecided rungs as a spec does by default, and plain
successive halving `asha-rungs-no-suspend`, `search.pruning.suspend: false`) over N seeded arrival orders
(default 40), 2 slots:
- `tuned`: the curves the rule's constants were set and checked on: the demo grid recorded 2026-12-01
  (tests/data/demo_grid_curves.json) and seeds 0-2 of each synthetic family (`gpuledger.search.synthetic`);
- `held-out`: seeds the rule was never replayed on while it was set (default 20-24 of each family; seeds 10-12 were replayed while the rule was being changed, so they are not held out), the
  cost-aware references the other curves of the same grid (leave one out, as the tuned set);
- `held-out, another sweep's references`: the same held-out grids, with the settings chosen and checked,
  and every forecast made, on a different grid of the family (seed + 100): the warehouse holds a former
  sweep of the kind, not the curves of the points this sweep runs.
Per grid: the recipe kept (share of orders), the default's and plain ASHA's median dollars against the
grid, `vs_plain` (default / plain, the issue's ratio), `vs_plain_no_suspend` (default / plain successive
halving without suspension) and `floor_vs_plain` (`replay.stopping_floor`: the
least any rule that must see 2 values of a trial could spend keeping the recipe, over plain's). Per set:
the grids whose recipe was kept in every order, and the median and range of each ratio.
Nothing is read but the demo's JSON; nothing is written. About 10 min at 40 orders on the shared 2-core VM.
Exit codes: 0, 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TUNED_SEEDS = (0, 1, 2)
#: the offset of the grid whose curves serve as another sweep's references
OTHER_SWEEP = 100


def _demo():
    from gpuledger.search.asha_replay import Curve

    d = json.loads((REPO / "tests" / "data" / "demo_grid_curves.json").read_text())
    curves = [Curve(c["trial_id"], tuple(c["values"]), tuple(c["times_s"]), c["wall_s"], True) for c in d["curves"]]
    return curves, {c["trial_id"]: c["usd_per_s"] for c in d["curves"]}


def _row(rep) -> dict:
    j = rep.to_json()
    a, b = j["strategies"]["asha"], j["strategies"]["asha-rungs"]
    c = j["strategies"]["asha-rungs-no-suspend"]
    cmp_ = j["cost_aware_vs_plain"]
    return {"default_kept": a["recipe_kept"], "default_cost_vs_grid": a["cost_vs_grid"],
            "plain_kept": b["recipe_kept"], "plain_cost_vs_grid": b["cost_vs_grid"],
            "plain_no_suspend_kept": c["recipe_kept"], "plain_no_suspend_cost_vs_grid": c["cost_vs_grid"],
            "vs_plain": cmp_.get("vs_plain"), "vs_plain_no_suspend": cmp_.get("vs_plain_no_suspend"),
            "floor_vs_plain": cmp_.get("floor_vs_plain"), "suspend": a["settings"].get("suspend"),
            "rule": "on" if a["settings"].get("cost_stopping") else "off",
            "settings": f"{a['settings']['min_steps']}/{a['settings']['reduction_factor']}"}


def _summary(rows: dict) -> dict:
    def rng(key):
        xs = [r[key] for r in rows.values() if isinstance(r.get(key), float)]
        return {"median": round(statistics.median(xs), 4), "range": [min(xs), max(xs)]} if xs else {}

    return {"grids": len(rows), "grids_default_always_kept": sum(r["default_kept"] >= 1.0 for r in rows.values()),
            "grids_plain_always_kept": sum(r["plain_kept"] >= 1.0 for r in rows.values()),
            "default_kept_min": min(r["default_kept"] for r in rows.values()),
            "default_kept_mean": round(statistics.mean(r["default_kept"] for r in rows.values()), 4),
            "plain_kept_mean": round(statistics.mean(r["plain_kept"] for r in rows.values()), 4),
            "grids_plain_no_suspend_always_kept": sum(r["plain_no_suspend_kept"] >= 1.0 for r in rows.values()),
            "plain_no_suspend_kept_mean": round(statistics.mean(r["plain_no_suspend_kept"] for r in rows.values()), 4),
            "vs_plain": rng("vs_plain"), "vs_plain_no_suspend": rng("vs_plain_no_suspend"),
            "floor_vs_plain": rng("floor_vs_plain"),
            "default_cost_vs_grid": rng("default_cost_vs_grid"), "plain_cost_vs_grid": rng("plain_cost_vs_grid")}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="search_holdout.py", description=__doc__.strip().splitlines()[0])
    ap.add_argument("--orders", type=int, default=40)
    ap.add_argument("--held-out-seeds", default="20-24", help="synthetic seeds A-B held out (default 20-24)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    try:
        lo, hi = (int(x) for x in a.held_out_seeds.split("-"))
    except ValueError:
        lo = hi = -1
    if a.orders < 1 or lo < 0 or hi < lo or set(range(lo, hi + 1)) & set(TUNED_SEEDS):
        print("search_holdout.py: --orders >= 1; --held-out-seeds A-B with 0 <= A <= B, none of the tuned seeds "
              f"{', '.join(map(str, TUNED_SEEDS))}", file=sys.stderr)
        return 2
    from gpuledger.search.comparison import replay_strategies
    from gpuledger.search.synthetic import FAMILIES, synthetic_curves

    strategies = ("grid", "asha-rungs", "asha-rungs-no-suspend", "asha")
    t0 = time.monotonic()

    def replay(curves, rate, refs=None):
        return _row(replay_strategies(curves, rate, slots=2, goal="minimize", orders=a.orders,
                                      strategies=strategies, references=refs))

    sets: dict[str, dict] = {"tuned": {}, "held-out": {}, "held-out, another sweep's references": {}}
    sets["tuned"]["demo"] = replay(*_demo())
    for fam in FAMILIES:
        for s in TUNED_SEEDS:
            c, r, _ = synthetic_curves(fam, seed=s)
            sets["tuned"][f"{fam}-{s}"] = replay(c, r)
        for s in range(lo, hi + 1):
            c, r, _ = synthetic_curves(fam, seed=s)
            sets["held-out"][f"{fam}-{s}"] = replay(c, r)
            other, _, _ = synthetic_curves(fam, seed=s + OTHER_SWEEP)
            sets["held-out, another sweep's references"][f"{fam}-{s}"] = replay(c, r, other)
    out = {"orders": a.orders, "slots": 2, "tuned_seeds": list(TUNED_SEEDS), "held_out_seeds": [lo, hi],
           "other_sweep_seed_offset": OTHER_SWEEP, "wall_s": round(time.monotonic() - t0, 1),
           "sets": {k: {"summary": _summary(v), "grids": v} for k, v in sets.items()}}
    if a.json:
        print(json.dumps(out, indent=2))
        return 0
    for name, block in out["sets"].items():
        sm = block["summary"]
        print(f"{name}: {sm['grids']} grids x {a.orders} orders; default kept the recipe always in "
              f"{sm['grids_default_always_kept']}/{sm['grids']} grids (plain {sm['grids_plain_always_kept']}), in "
              f"{sm['default_kept_mean']:.0%} of the replays (plain {sm['plain_kept_mean']:.0%}); "
              f"default / plain ${sm['vs_plain'].get('median', float('nan')):.2f}x "
              f"({sm['vs_plain']['range'][0]:.2f}-{sm['vs_plain']['range'][1]:.2f}); default / plain without "
              f"suspension ${sm['vs_plain_no_suspend'].get('median', float('nan')):.2f}x; stopping floor / plain "
              f"{sm['floor_vs_plain'].get('median', float('nan')):.2f}x")
        for g, r in block["grids"].items():
            print(f"  {g:<12} default kept {r['default_kept']:>4.0%} ${r['default_cost_vs_grid']:>5.0%} of grid "
                  f"(rule {r['rule']}, {r['settings']}) | plain kept {r['plain_kept']:>4.0%} "
                  f"${r['plain_cost_vs_grid']:>5.0%} | default/plain {r['vs_plain']:.2f}x floor/plain "
                  f"{r['floor_vs_plain']:.2f}x")
    print(f"({out['wall_s']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
