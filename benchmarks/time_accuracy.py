"""Training-time accuracy against published throughput measurements
(`gpuledger/estimate/data/training_throughput.csv`, the copy of tests/data/training_throughput.csv).

Side by side on the same cases in the same run: gpuledger's throughput model
(`gpuledger/estimate/throughput.py`) and the rule other calculators use, 6·P·tokens (4·P for
LoRA/QLoRA) over 0.4 of the bf16 peak. Error = (predicted time − measured time) / measured time.

- in-sample: the shipped coefficients (fitted on all rows);
- held out: leave-one-source-out: the per-stack matmul efficiencies refitted without the source's
  rows (`throughput.fit_efficiency`), then that source predicted. A stack seen only in the held-out
  source keeps its prior (PRIOR_MATMUL_EFFICIENCY in coefficients.py).

Run: `python benchmarks/time_accuracy.py [--fit] [--json]`.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpuledger.estimate.public import (  # noqa: E402
    held_out_tokens_per_s,
    model_tokens_per_s,
    plain_rule_tokens_per_s,
    summarize,
    time_cases,
    time_error,
)
from gpuledger.estimate.throughput import fit_efficiency  # noqa: E402


def regime(c) -> str:
    """Returns the case's regime: stack class x method x GPU-count regime (1 / 2-8 / >8) x GPU family,
    the cells the estimate bands are kept per (gpuledger/estimate/bands.py)."""
    from gpuledger.catalog import gpu_kinds, normalize_accelerator
    from gpuledger.estimate.coefficients import generation
    from gpuledger.estimate.throughput import framework_class

    g = c.setup.gpus
    count = "1 GPU" if g == 1 else "2-8 GPUs" if g <= 8 else ">8 GPUs"
    family = generation(gpu_kinds()[normalize_accelerator(c.setup.accelerator)])
    return f"{framework_class(c.setup.framework)} {c.setup.method}, {count}, {family}"


GROUPS = (("method", lambda c: c.setup.method), ("framework", lambda c: c.setup.framework),
          ("GPU", lambda c: c.setup.accelerator), ("GPU count", lambda c: c.gpu_count_label),
          ("regime", regime))


def report(cases) -> dict:
    """Returns per-case and per-group errors of the model (in-sample and held out) and the plain rule."""
    ho = held_out_tokens_per_s(cases)
    rows = []
    for c in cases:
        rows.append({"id": c.id, "source": c.source, "method": c.setup.method, "framework": c.setup.framework,
                     "GPU": c.setup.accelerator, "GPU count": c.gpu_count_label, "measured_tps": c.measured,
                     "model": time_error(model_tokens_per_s(c), c.measured),
                     "held_out": time_error(ho[c.id], c.measured),
                     "plain": time_error(plain_rule_tokens_per_s(c), c.measured)})
    groups = {}
    for name, key in GROUPS:
        for value in sorted({key(c) for c in cases}):
            sel = [r for r, c in zip(rows, cases, strict=True) if key(c) == value]
            groups[f"{name}={value}"] = {k: summarize([r[k] for r in sel]).to_json() for k in ("held_out", "model", "plain")}
    overall = {k: summarize([r[k] for r in rows]).to_json() for k in ("held_out", "model", "plain")}
    return {"cases": rows, "groups": groups, "overall": overall}


def whole_runs() -> list[dict]:
    """Returns published whole-run times (dataset x epochs on N GPUs -> minutes; whole_runs.csv, read by
    `gpuledger.estimate.public.whole_runs`) against gpuledger's whole-run time (`train_time_s`: steps +
    load + checkpoints), error = (model - measured) / measured, with the default sample lengths and with
    the row's mean stated. Out of source: no coefficient is fitted on these rows (they are band rows)."""
    from gpuledger.estimate.public import whole_runs as rows

    out = []
    for r in rows():
        model_s, stated_s = r.model_s(), r.model_s(stated_mean=True)
        row = {"id": r.id, "source": r.source, "framework": r.workload.framework, "gpus": r.workload.gpus,
               "micro_batch": r.workload.micro_batch, "measured_s": r.measured_s, "model_s": round(model_s, 1),
               "error": model_s / r.measured_s - 1, "model_s_stated_mean": round(stated_s, 1),
               "error_stated_mean": stated_s / r.measured_s - 1}
        if r.claimed_usd is not None:
            row |= claimed_dollars(r)
        out.append(row)
    return out


def claimed_dollars(r) -> dict:
    """Returns what `estimate --tokens` prints for a whole run with a "for $X" claim, as a user asks it (the
    run's GPU kind and count): its P50 time and on-demand dollars at the catalog's cheapest offer
    (`gpuledger.plan.gpu_table.gpu_options`, the band's P50 included), against the claimed hours and dollars."""
    from gpuledger.catalog.pricing import load_offers
    from gpuledger.plan.gpu_table import gpu_options

    w = r.workload
    opt = gpu_options(w, r.tokens, load_offers(), [r.accelerator], counts=[w.gpus])[0]
    if not opt.get("fits") or opt.get("usd_on_demand") is None:
        return {"plan_error": None, "usd_error": None, "plan_note": opt.get("reason") or "no offer"}
    p50 = opt["time_s"]["p50"]
    return {"claimed_usd": r.claimed_usd, "plan_s": p50, "plan_usd": opt["usd_on_demand"],
            "plan_error": p50 / r.measured_s - 1, "usd_error": opt["usd_on_demand"] / r.claimed_usd - 1,
            "claimed_usd_per_gpu_h": r.claimed_usd / (r.measured_s / 3600) / w.gpus,
            "plan_usd_per_gpu_h": opt["usd_on_demand"] / (p50 / 3600) / w.gpus}


def _fmt(s: dict) -> str:
    return f"{s['median_abs_error']:6.1%} {s['within_25pct']:6.0%}"


def main(argv: list[str]) -> int:
    cases = time_cases()
    if "--fit" in argv:
        fitted = fit_efficiency([(c.shape, c.setup, c.measured, c.source) for c in cases])
        print("MATMUL_EFFICIENCY fitted on all scored rows: "
              + ", ".join(f"{k} {v:.4f} ({n} rows)" for k, (v, n) in sorted(fitted.items())))
        return 0
    rep = report(cases)
    rep["whole_runs"] = whole_runs()
    if "--json" in argv:
        print(json.dumps(rep, indent=2))
        return 0
    print(f"{'case':40} {'measured':>9} {'held-out':>9} {'in-smpl':>8} {'6P/0.4':>8}")
    for r in rep["cases"]:
        print(f"{r['id']:40} {r['measured_tps']:9.0f} {r['held_out']:+9.1%} {r['model']:+8.1%} {r['plain']:+8.1%}")
    print(f"\n{'group':44} {'n':>3}  {'held-out':>13}  {'in-sample':>13}  {'6P/(0.4 peak)':>13}")
    print(f"{'':44} {'':>3}  {'med|e|  ±25%':>13}  {'med|e|  ±25%':>13}  {'med|e|  ±25%':>13}")
    for g, s in [("all", rep["overall"]), *rep["groups"].items()]:
        print(f"{g:44} {s['model']['cases']:3d}  {_fmt(s['held_out'])}  {_fmt(s['model'])}  {_fmt(s['plain'])}")
    runs = rep["whole_runs"]
    print(f"\nwhole runs (whole_runs.csv; model = train_time_s, steps + load + checkpoints; unpacked rows with "
          f"the default lengths (DEFAULT_SAMPLE_TOKENS cut at seq_len), and with the row's mean stated as "
          f"train.sample_tokens): {len(runs)}")
    for r in runs:
        print(f"{r['id']:48} mb{r['micro_batch']:<3} {r['measured_s'] / 60:8.2f} min  model {r['model_s'] / 60:8.2f} min  "
              f"{r['error']:+7.1%}  stated mean {r['error_stated_mean']:+7.1%}")
    by_mb: dict[str, list[float]] = {}
    for r in runs:
        by_mb.setdefault("micro-batch 1" if r["micro_batch"] == 1 else "micro-batch 2-8", []).append(r["error"])
        by_mb.setdefault(f"framework {r['framework']}", []).append(r["error"])
    for g, errs in [("all", [r["error"] for r in runs]), *sorted(by_mb.items())]:
        s = summarize(errs).to_json()
        print(f"whole runs {g:33} {s['cases']:3d}  {s['median_abs_error']:6.1%} {s['within_25pct']:6.0%}  "
              f"(median signed {statistics.median(errs):+.1%})")
    claims = [r for r in runs if r.get("plan_error") is not None]
    if claims:
        print("\nwhole runs with a dollar claim, as `estimate --tokens` prints them (the band's P50 time; on-demand "
              "dollars at the catalog's cheapest offer of that GPU kind and count):")
        for r in claims:
            print(f"{r['id']:40} {r['measured_s'] / 3600:7.2f} h  plan {r['plan_s'] / 3600:7.2f} h {r['plan_error']:+7.1%}   "
                  f"${r['claimed_usd']:>8,.0f} plan ${r['plan_usd']:>8,.0f} {r['usd_error']:+7.1%}   "
                  f"($/GPU-h claimed {r['claimed_usd_per_gpu_h']:.2f}, catalog {r['plan_usd_per_gpu_h']:.2f})")
        for key, what in (("plan_error", "hours"), ("usd_error", "dollars")):
            errs = [r[key] for r in claims]
            s = summarize(errs).to_json()
            print(f"dollar claims, {what:8} {s['cases']:3d}  {s['median_abs_error']:6.1%} {s['within_25pct']:6.0%}  "
                  f"(median signed {statistics.median(errs):+.1%})")
    stated = [r["error_stated_mean"] for r in runs]
    s = summarize(stated).to_json()
    print(f"whole runs {'all, mean length stated':33} {s['cases']:3d}  {s['median_abs_error']:6.1%} {s['within_25pct']:6.0%}  "
          f"(median signed {statistics.median(stated):+.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
