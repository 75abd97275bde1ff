"""RL step-time accuracy: published GRPO/PPO step times (gpuledger/estimate/data/rl_step_times.csv, each row with its
source URL, config URL and versions) against `gpuledger plan` of the spec a user would write for that run
(gpuledger/estimate/rl.py through the planner: the trial's compute time over its steps is the planned
seconds per step; its P10-P90 band is the plan's compute band).

Error = (planned step − measured step) / measured step. Reported: per row, median |error|, the share
within ±25%, and how many measured values fall inside the plan's P10-P90 band; in source (the plan, whose band
table holds every row) and out of source (each publisher's rows timed at the P50 and banded by a table of the
other sources' rows: `gpuledger.estimate.bands.BandTable` without that source).

Run: `python benchmarks/rl_accuracy.py [--json]`.
"""

from __future__ import annotations

import csv
import json
import statistics
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CSV = ROOT / "gpuledger" / "estimate" / "data" / "rl_step_times.csv"


def spec_of(row: dict) -> dict:
    """Returns the sweep spec a user would write for the published run (one trial on its GPUs)."""
    from gpuledger.estimate.public import rl_train_fields

    train = {**rl_train_fields(row), "grad_checkpointing": True, "tokens_per_trial": 10_000_000}
    return {"kind": "sweep", "name": f"rl-{row['id'][:40].replace('_', '-')}", "project": "rl-accuracy",
            "owner": "bench", "model": row["model"], "method": row["algorithm"], "precision": "bf16",
            "train": train, "search": {"strategy": "grid", "params": {"learning_rate": [1e-6]},
                                       "objective": {"metric": "reward", "goal": "maximize"}},
            "resources": {"accelerators": [row["accelerator"]], "gpus_per_trial": int(row["gpus"]),
                          "clouds": ["aws", "gcp", "lambda", "nebius", "runpod"]},
            "budget": {"max_usd": 1_000_000}, "launcher": "skypilot", "task": {"run": "python trainers/grpo.py"}}


def planned(row: dict) -> dict:
    """Returns the plan's seconds per step for the row, its P10/P90, and the roles' phases."""
    from gpuledger.plan import plan_sweep
    from gpuledger.spec import expand_trials, load_spec

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "rl.yaml"
        path.write_text(yaml.safe_dump(spec_of(row)), encoding="utf-8")
        spec = load_spec(path)
        plan = plan_sweep(spec, expand_trials(spec))
    t = plan.to_json()["trials"][0]
    if not t.get("feasible") or "roles" not in t:
        return {"feasible": False, "reason": t.get("reason") or "no RL roles"}
    r = t["roles"]
    step = float(t["compute_s"]) / float(r["steps"])
    overhead = float(t["est_wall_s"]) - float(t["compute_s"])
    lo = (float(t["est_wall_s_p10"]) - overhead) / float(t["compute_s"])
    hi = (float(t["est_wall_s_p90"]) - overhead) / float(t["compute_s"])
    return {"feasible": True, "step_s": step, "step_s_p10": step * lo, "step_s_p90": step * hi,
            "phases_s": r["phases_s"], "placement": r["placement"], "groups": r["groups"]}


def out_of_source() -> dict:
    """Returns {id: {error, in_band}}: each RL row planned at the P50 and P10-P90 of a band table without its own
    source (the model's step x the band; error = P50 / (measured / model) - 1)."""
    import math

    from gpuledger.estimate.bands import BandTable, band_rows, public_rl_rows

    rows, rl = band_rows(), public_rl_rows()
    out = {}
    for source in sorted({r.source for r in rl}):
        table = BandTable([r for r in rows if r.source != source])
        for r in (r for r in rl if r.source == source):
            b, m = table.band("time", r.cell), math.exp(r.log_ratio)
            out[r.id] = {"error": b.p50 / m - 1, "in_band": b.p10 <= m <= b.p90}
    return out


def _summary(items: list[dict]) -> dict:
    errors = [abs(r["error"]) for r in items]
    return {"median_abs_error": statistics.median(errors) if errors else None,
            "within_25pct": sum(e <= 0.25 for e in errors), "in_band": sum(r["in_band"] for r in items)}


def report() -> dict:
    rows = list(csv.DictReader(CSV.open(encoding="utf-8")))
    out = []
    for row in rows:
        p = planned(row)
        measured = float(row["measured_step_s"])
        item = {"id": row["id"], "framework": row["framework"], "gpus": int(row["gpus"]),
                "accelerator": row["accelerator"], "measured_step_s": measured, **p}
        if p["feasible"]:
            item["error"] = (p["step_s"] - measured) / measured
            item["in_band"] = p["step_s_p10"] <= measured <= p["step_s_p90"]
        out.append(item)
    timed = [r for r in out if "error" in r]
    held = out_of_source()
    for r in timed:
        if r["id"] in held:
            r["out_of_source"] = held[r["id"]]
    summary = {"rows": len(out), "timed": len(timed), "refused": len(out) - len(timed), **_summary(timed),
               "out_of_source": {"rows": len(held), **_summary(list(held.values()))}}
    return {"summary": summary, "rows": out}


def main(argv: list[str]) -> int:
    rep = report()
    if "--json" in argv:
        print(json.dumps(rep, indent=2, default=str))
        return 0
    for r in rep["rows"]:
        if "error" in r:
            print(f"{r['id']}: measured {r['measured_step_s']:.1f} s/step, planned {r['step_s']:.1f} "
                  f"(P10-P90 {r['step_s_p10']:.1f}-{r['step_s_p90']:.1f}), error {r['error']:+.0%}, "
                  f"{r['placement']} {r['groups']}, phases {r['phases_s']}")
        else:
            print(f"{r['id']}: refused: {r['reason']}")
    s = rep["summary"]
    med = f"{s['median_abs_error']:.0%}" if s["median_abs_error"] is not None else "n/a"
    print(f"{s['timed']} of {s['rows']} rows timed: median |error| {med}, within ±25% {s['within_25pct']}, "
          f"in the P10-P90 band {s['in_band']}")
    o = s["out_of_source"]
    if o["rows"]:
        print(f"out of source ({o['rows']} rows, each publisher banded by the others): median |error| "
              f"{o['median_abs_error']:.0%}, within ±25% {o['within_25pct']}, in the P10-P90 band {o['in_band']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
