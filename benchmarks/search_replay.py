"""Every search strategy replayed over a warehouse's recorded learning curves, across many arrival orders.

    .venv/bin/python benchmarks/search_replay.py --warehouse FILE --sweep NAME [--orders N] [--slots K]
                                                 [--jitter SIGMA] [--seed S] [--json]
    .venv/bin/python benchmarks/search_replay.py --synthetic FAMILY|all [--seeds N] [--orders N] [--json]

`--sweep`: a sweep id, else the latest sweep of that name (a grid: its curves ran to their end).
For each strategy of `gpuledger.search.replay.STRATEGIES` (grid; Optuna's ASHA; gpuledger's rung
pruner at the old 2/3; the cold default (a fresh project: no curves of the kind); plain gpuledger ASHA
(`stopping: rungs`) at the settings checked on these curves; the default a bare `strategy: asha` runs
with these curves in the warehouse (the cost-aware one); each of the last three suspending at undecided
rungs as the runtime does by default, and beside it its `-no-suspend` twin (`search.pruning.suspend:
false`); and, one point at a time on one slot, half the points asked by Optuna's TPE and by expected
improvement per dollar), over N seeded arrival orders (launch order shuffled, each
trial's times stretched by exp(N(0, SIGMA))): the share of replays that kept the recipe (best within
2% of the grid's), dollars and trial-seconds against the grid's of the same replay (median and range).
`--json`: `{"strategies": {NAME: {"recipe_kept", "cost_vs_grid", "cost_vs_grid_range",
"trial_s_vs_grid", ...}}, "default": NAME, "cost_aware": NAME, "plain": NAME, "cost_aware_vs_plain":
{"vs_plain", "vs_plain_no_suspend", "floor_vs_plain", "vs_optuna_asha_same_rate" | "vs_optuna_asha_safest"}, "plain_same_rate": {...},
"stopping_floor": {"cost_vs_grid", "cost_vs_grid_range", "vs_plain", ...}, ...}`:
the cost-aware strategy's median dollars against plain ASHA's at the same recipe rate (gpuledger's rung
pruner at the same checked settings; and the cheapest of Optuna's ASHA settings that keeps the recipe as
often, else the safest of them); `stopping_floor` (`gpuledger.search.replay.stopping_floor`): the least
any stopping rule that sees a trial's first 2 values can spend keeping the recipe (the recipe in full,
every other trial stopped at its 2nd value), so `floor_vs_plain` is the lowest `vs_plain` reachable on
these curves. `--synthetic`: instead of a warehouse, `--seeds` grids of a synthetic
curve family (`gpuledger.search.synthetic`: smooth, noisy, crossing, late bloomers, mixed; `all`: each),
each replayed the same way; `--json` then has one report per grid under `grids` and per family the
share of grids and replays kept and the median ratios under `families`. The warehouse is opened
read-only; nothing is written. About 15 s for the demo's 12 curves at 40 orders.
Exit codes: 0, 2 on bad input (one line on stderr).
"""

from __future__ import annotations

import argparse
import json
import sys


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="search_replay.py", description=__doc__.strip().splitlines()[0])
    ap.add_argument("--warehouse", help="the DuckDB file")
    ap.add_argument("--sweep", help="sweep id, or name (its latest sweep)")
    ap.add_argument("--synthetic", help="a synthetic curve family (gpuledger.search.synthetic.FAMILIES) or all")
    ap.add_argument("--seeds", type=int, default=5, help="--synthetic: grids per family (default 5)")
    ap.add_argument("--orders", type=int, default=40, help="arrival orders per strategy (default 40)")
    ap.add_argument("--slots", type=int, default=None, help="parallel slots (default: the sweep's max_parallel)")
    ap.add_argument("--jitter", type=float, default=None, help="log-normal sigma of each trial's times per order")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    from pathlib import Path

    from gpuledger.errors import UserError
    from gpuledger.search.comparison import replay_strategies
    from gpuledger.search.replay import DEFAULT_JITTER

    if a.synthetic is not None:
        return _synthetic(a)
    if not a.warehouse or not a.sweep:
        print("search_replay.py: give --warehouse FILE and --sweep NAME, or --synthetic FAMILY", file=sys.stderr)
        return 2
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
                                params=meta["params"], frontier=True)
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
    print(f"{'strategy':<22} {'recipe kept':>11} {'$ vs grid (median, range)':>28} {'trial-s vs grid':>24} pruned")
    for name, s in out["strategies"].items():
        lo, hi = s["cost_vs_grid_range"]
        tlo, thi = s["trial_s_vs_grid_range"]
        tag = " (default, cost-aware)" if name == rep.default else (" (plain)" if name == out["plain"] else "")
        print(f"{name:<22} {s['recipe_kept']:>10.0%} {s['cost_vs_grid']:>9.0%} ({lo:.0%}-{hi:.0%})"
              f"{'':>9} {s['trial_s_vs_grid']:>6.0%} ({tlo:.0%}-{thi:.0%}) {s['pruned']:>6}{tag}")
    for n in rep.notes:
        print(f"- {n}")
    cmp_ = out["cost_aware_vs_plain"]
    print("- cost-aware dollars / plain ASHA's at the same recipe rate: "
          + ", ".join(f"{k} {v:.2f}x" for k, v in cmp_.items() if isinstance(v, float) and k != "floor_vs_plain"))
    fl = out["stopping_floor"]
    if fl:
        print(f"- stopping floor (the recipe in full, every other trial stopped after its first {fl['min_values']} values: "
              f"no stopping rule keeps the recipe for less): {fl['cost_vs_grid']:.0%} of the grid's dollars "
              f"({fl['cost_vs_grid_range'][0]:.0%}-{fl['cost_vs_grid_range'][1]:.0%}), "
              f"{fl.get('vs_plain', float('nan')):.2f}x plain ASHA's")
    return 0


def _synthetic(a: argparse.Namespace) -> int:
    import statistics

    from gpuledger.search.comparison import replay_strategies
    from gpuledger.search.replay import DEFAULT_JITTER
    from gpuledger.search.synthetic import FAMILIES, synthetic_curves

    fams = FAMILIES if a.synthetic == "all" else (a.synthetic,)
    if any(f not in FAMILIES for f in fams) or a.seeds < 1 or a.orders < 1:
        print(f"search_replay.py: --synthetic must be one of {', '.join(FAMILIES)} or all; --seeds, --orders >= 1",
              file=sys.stderr)
        return 2
    grids, families = {}, {}
    for fam in fams:
        reps = []
        for s in range(a.seeds):
            curves, rate, _params = synthetic_curves(fam, seed=s)
            rep = replay_strategies(curves, rate, slots=a.slots or 2, goal="minimize", orders=a.orders, seed=a.seed,
                                    jitter=DEFAULT_JITTER if a.jitter is None else a.jitter, frontier=True).to_json()
            grids[f"{fam}-{s}"] = rep
            reps.append(rep)
        fam_out = {}
        for name in reps[0]["strategies"]:
            ss = [r["strategies"][name] for r in reps]
            fam_out[name] = {"recipe_kept": round(statistics.mean(x["recipe_kept"] for x in ss), 4),
                             "grids_all_kept": sum(x["recipe_kept"] >= 1.0 for x in ss),
                             "cost_vs_grid": round(statistics.median(x["cost_vs_grid"] for x in ss), 4),
                             "cost_vs_grid_range": [min(x["cost_vs_grid"] for x in ss),
                                                    max(x["cost_vs_grid"] for x in ss)]}
        ratios = {k: round(statistics.median(r["cost_aware_vs_plain"][k] for r in reps
                                             if isinstance(r["cost_aware_vs_plain"].get(k), float)), 4)
                  for k in ("vs_plain", "vs_plain_no_suspend", "vs_optuna_asha_same_rate", "vs_optuna_asha_safest")
                  if any(isinstance(r["cost_aware_vs_plain"].get(k), float) for r in reps)}
        families[fam] = {"grids": a.seeds, "strategies": fam_out, "cost_aware_vs_plain": ratios}
    if a.json:
        print(json.dumps({"synthetic": list(fams), "seeds": a.seeds, "orders": a.orders, "families": families,
                          "grids": grids}, indent=2))
        return 0
    for fam, f in families.items():
        print(f"{fam}: {a.seeds} grid(s) x {a.orders} orders; cost-aware / plain: "
              + ", ".join(f"{k} {v:.2f}x" for k, v in f["cost_aware_vs_plain"].items()))
        for name, s in f["strategies"].items():
            lo, hi = s["cost_vs_grid_range"]
            print(f"  {name:<22} recipe kept {s['recipe_kept']:>5.0%} ({s['grids_all_kept']}/{a.seeds} grids always)"
                  f"  $ vs grid {s['cost_vs_grid']:>5.0%} ({lo:.0%}-{hi:.0%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
