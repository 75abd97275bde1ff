"""Every search strategy replayed over a warehouse's recorded learning curves, across many arrival orders.

    .venv/bin/python benchmarks/search_replay.py --warehouse FILE --sweep NAME [--orders N] [--slots K]
                                                 [--jitter SIGMA] [--seed S] [--json]

`--sweep`: a sweep id, else the latest sweep of that name (a grid: its curves ran to their end).
For each strategy of `gpuledger.search.replay.STRATEGIES` (grid; Optuna's ASHA; gpuledger's rung
pruner at the old 2/3; the cold default; the default a bare `strategy: asha` runs with these curves in
the warehouse; and the cost-aware one; and, one point at a time on one slot, half the points asked by
Optuna's TPE and by expected improvement per dollar), over N seeded arrival orders (launch order shuffled, each
trial's times stretched by exp(N(0, SIGMA))): the share of replays that kept the recipe (best within
2% of the grid's), dollars and trial-seconds against the grid's of the same replay (median and range).
`--json`: `{"strategies": {NAME: {"recipe_kept", "cost_vs_grid", "cost_vs_grid_range",
"trial_s_vs_grid", ...}}, "default": NAME, "cost_aware": NAME, ...}`. The warehouse is opened
read-only; nothing is written. Seconds for the demo's 12 curves at 40 orders.
Exit codes: 0, 2 on bad input (one line on stderr).
"""

from __future__ import annotations

import argparse
import json
import sys


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="search_replay.py", description=__doc__.strip().splitlines()[0])
    ap.add_argument("--warehouse", required=True, help="the DuckDB file")
    ap.add_argument("--sweep", required=True, help="sweep id, or name (its latest sweep)")
    ap.add_argument("--orders", type=int, default=40, help="arrival orders per strategy (default 40)")
    ap.add_argument("--slots", type=int, default=None, help="parallel slots (default: the sweep's max_parallel)")
    ap.add_argument("--jitter", type=float, default=None, help="log-normal sigma of each trial's times per order")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    from pathlib import Path

    from gpuledger.errors import UserError
    from gpuledger.search.replay import DEFAULT_JITTER, replay_strategies

    if not Path(a.warehouse).is_file():
        print(f"search_replay.py: --warehouse {a.warehouse}: no such file", file=sys.stderr)
        return 2
    if a.orders < 1 or a.orders > 10_000 or (a.slots is not None and a.slots < 1):
        print("search_replay.py: --orders must be 1..10000 and --slots >= 1", file=sys.stderr)
        return 2
    try:
        from gpuledger.inputs.ledger import recorded_curves
        from gpuledger.warehouse import Warehouse

        with Warehouse.open(a.warehouse, read_only=True, migrate=False) as wh:
            sweep_id, curves, rate, meta = recorded_curves(wh, a.sweep)
        rep = replay_strategies(curves, rate, slots=a.slots or meta["max_parallel"], goal=meta["goal"],
                                orders=a.orders, seed=a.seed, jitter=DEFAULT_JITTER if a.jitter is None else a.jitter,
                                params=meta["params"])
    except (UserError, ValueError) as err:
        print(f"search_replay.py: {err}", file=sys.stderr)
        return 2
    out = {"warehouse": a.warehouse, "sweep_id": sweep_id, "metric": meta["metric"], "goal": meta["goal"],
           **rep.to_json()}
    if a.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"{sweep_id}: {rep.curves} curves of {meta['metric']} ({meta['goal']}), {rep.orders} arrival orders, "
          f"{rep.slots} slot(s), jitter {rep.jitter}")
    print(f"{'strategy':<15} {'recipe kept':>11} {'$ vs grid (median, range)':>28} {'trial-s vs grid':>24} pruned")
    for name, s in out["strategies"].items():
        lo, hi = s["cost_vs_grid_range"]
        tlo, thi = s["trial_s_vs_grid_range"]
        tag = " (default, cost-aware)" if name == rep.default else (" (plain)" if name == out["plain"] else "")
        print(f"{name:<15} {s['recipe_kept']:>10.0%} {s['cost_vs_grid']:>9.0%} ({lo:.0%}-{hi:.0%})"
              f"{'':>9} {s['trial_s_vs_grid']:>6.0%} ({tlo:.0%}-{thi:.0%}) {s['pruned']:>6}{tag}")
    for n in rep.notes:
        print(f"- {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
