"""Serving model accuracy against public measurements (tests/data/serving_*.csv).

1. Maximum throughput (`serving_throughput.csv`: NVIDIA's TensorRT-LLM perf-overview rows, offline
   `trtllm-bench throughput` with every request queued): the simulation of the same benchmark
   (`gpuledger.capacity.operating.max_throughput`: same engine, GPU, model, precision, lengths and
   request count) against the published output tokens/s; median and largest |error|.
2. Operating points (`serving_latency.csv`: vLLM concurrency sweeps): the simulated closed loop at
   the same concurrency (throughput, TPOT) against the measurement; then what `gpuledger capacity`
   says when asked for 85% of the measured request rate with an SLO 10% looser than measured
   (p95 TTFT = 1.1 × the measured TTFT, p95 TPOT = 1.1 × the measured TPOT, headroom 0): it must
   call ONE replica of the measured shape (one GPU at TP 1) feasible and enough.
3. Physically impossible targets (1 ms TPOT for an 8B model, with and without a measured rate):
   must come out infeasible with the reason.

1b. The same rows through `gpuledger capacity` with a loose SLO: the tokens/s per GPU it plans on
   (its steady-state curve, output lengths ±50%) against the published figure.

4. Request-length mixes (issue 28): the same mean lengths drawn from a mix (ShareGPT's published moments,
   a mean with cv 1) against fixed lengths, p95 TPOT and TTFT under Poisson arrivals: how much the long
   prompts of a real mix interrupt the others' decode through chunked prefill (no measurement here).

Results on this 2-core machine (round 3, 2026-11-26), before → after this round's changes:
- 1. maximum throughput, 22 TensorRT-LLM perf-overview rows: median |error| 5.7% → 3.7% (median signed
  −4.8% → −2.3%), max 14.6% → 18.3% (H200 128/2048), all 22 within 25% both times; the change: TensorRT-LLM
  GEMM MFU × 1.08 (`ENGINES["trtllm"].gemm_mfu_scale`).
- 1b. the capacity plan's per-GPU rate with a loose SLO: median |error| 8.5% → 7.1%, max 14.2% → 12.3%.
- 2. vLLM operating points: two rows added from vLLM's performance CI (H200, batch 8, 32 → 128 tokens:
  Llama-3.1-8B TP 1 and Llama-3-70B TP 4): their TPOT error was −31% and −25% with Hopper's weight stream at
  0.82 of the datasheet, −5% and +2% with vLLM/SGLang's Hopper scale 0.71 (`weight_bw_scale_by_generation`);
  all 8 rows: TPOT median |error| 2.8%; one replica feasible and enough 7/8 (the 6 older rows: 5/6 before
  and after; RTX 4090 at concurrency 8: the SLO takes 1.1 × the *mean*
  TTFT, 87 ms, as a p95 target; the simulated closed-loop p95 is 95 ms and Poisson at 85% of the rate
  87.1 ms, so two GPUs).
- 3. 1 ms TPOT: infeasible with and without a measured point (TP 8 at concurrency 1 now 2.20 ms, with
  2 × 32 all-reduces of 8 µs); the issue's case (fp8, a measured H100 rate without latencies) is
  infeasible at every option (tests/unit/test_capacity_floors.py).
- 4. one H100, Llama-3.1-8B bf16, Poisson 8 req/s: ShareGPT moments fixed vs mixed p95 TPOT 9.27 → 9.55 ms,
  p95 TTFT 21.8 → 25.1 ms; 1,500/300 tokens fixed vs cv 1: p95 TPOT 20.4 → 25.9 ms (+27%), p95 TTFT 130 → 293 ms.
The reserved sources (TensorRT-LLM performance.md v0.5/0.6, SGLang's v0.3 benchmark page) were not used.

5. The capacity bands' rows (round 4): every public serving measurement against the simulation of
   its own benchmark (`vllm bench serve` at request rate inf with its prompts, lengths, endpoint and
   max_num_seqs; trtllm-bench offline; the vLLM concurrency sweeps), log(measured / model) per engine ×
   GPU family × quantity; `--write` ships them to gpuledger/capacity/data/serving_bands.json.

Run: `.venv/bin/python benchmarks/capacity_accuracy.py [--write]` (2-3 minutes on a loaded 2-core machine).
"""

from __future__ import annotations

import csv
import json
import math
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpuledger.capacity import plan_capacity  # noqa: E402
from gpuledger.capacity.operating import max_throughput, replica_setup, run_closed  # noqa: E402
from gpuledger.estimate import inference  # noqa: E402
from gpuledger.models import load_config  # noqa: E402
from gpuledger.spec import CapacitySpec  # noqa: E402

DATA = ROOT / "tests" / "data"


def _model(name: str, precision: str) -> inference.ServingModel:
    return inference.serving_model_from_config(load_config(name), precision)


def _rows(name: str) -> list[dict]:
    with open(DATA / name, newline="") as f:
        return list(csv.DictReader(f))


def throughput_errors() -> list[tuple[dict, float, float]]:
    """Returns (row, simulated tokens/s, relative error) per max-throughput row."""
    out = []
    for row in _rows("serving_throughput.csv"):
        m = _model(row["registry_model"], row["precision"])
        hw = inference.hardware_for(row["gpu"], row["precision"])
        offline = inference.engine_with(inference.engine_for(row["engine"]), endpoint="offline")  # trtllm-bench: no HTTP
        r = max_throughput(m, hw, row["precision"], offline, prompt_tokens=int(row["isl"]),
                           output_tokens=int(row["osl"]), num_requests=int(row["num_requests"]), tp=int(row["tp"]))
        meas = float(row["output_tokens_per_s"])
        out.append((row, r.output_tokens_per_s, r.output_tokens_per_s / meas - 1))
    return out


def capacity_spec(row: dict, *, ttft_ms: float, tpot_ms: float, headroom: float = 0.0, measured=None,
                  confidence: str = "p50") -> CapacitySpec:
    """The judge's question for one measured operating point: 85% of its request rate, SLO 10% looser."""
    rps = float(row["requests_per_s"]) if row.get("requests_per_s") else float(row["output_tokens_per_s"]) / float(row["osl"])
    data = {
        "kind": "capacity", "name": "judge", "project": "p", "owner": "o", "model": row["registry_model"],
        "precision": row["precision"], "engine": row["engine"],
        "traffic": {"qps": 0.85 * rps, "prompt_tokens": int(row["isl"]), "output_tokens": round(float(row["osl"]))},
        "slo": {"p95_ttft_ms": 1.1 * ttft_ms, "p95_tpot_ms": 1.1 * tpot_ms, "confidence": confidence},
        "headroom": headroom, "engine_args": {"endpoint": "completions"},  # measured with vllm bench serve
        "resources": {"accelerators": [row["gpu"]], "clouds": ["aws", "gcp", "azure", "lambda", "runpod"]},
    }
    if measured:
        data["measured"] = measured
    return CapacitySpec.model_validate(data)


def main() -> int:
    t0 = time.perf_counter()
    print("1. maximum throughput (simulated benchmark vs published)")
    errs = []
    for row, sim, err in throughput_errors():
        errs.append(abs(err))
        print(f"  {row['engine']:6} {row['gpu']:5} {row['precision']} {row['isl']:>5}/{row['osl']:<5} "
              f"measured {float(row['output_tokens_per_s']):9,.0f}  model {sim:9,.0f}  error {err:+6.1%}")
    print(f"  rows {len(errs)}, median |error| {statistics.median(errs):.1%}, max |error| {max(errs):.1%}, "
          f"within 25%: {sum(e <= 0.25 for e in errs)}/{len(errs)}")

    print("1b. what `gpuledger capacity` plans per GPU with a loose SLO (its steady-state curve, lengths ±50%)")
    errs_plan = []
    for row in _rows("serving_throughput.csv"):
        spec = CapacitySpec.model_validate({
            "kind": "capacity", "name": "max", "project": "p", "owner": "o", "model": row["registry_model"],
            "precision": row["precision"], "engine": row["engine"], "headroom": 0,
            "engine_args": {"endpoint": "offline"},
            "traffic": {"qps": 1, "prompt_tokens": int(row["isl"]), "output_tokens": int(row["osl"])},
            "slo": {"p95_ttft_ms": 1e7, "p95_tpot_ms": 1e5},
            "resources": {"accelerators": [row["gpu"]], "clouds": ["aws", "gcp"], "max_gpus_per_replica": 1}})
        o = plan_capacity(spec)["options"][0]
        errs_plan.append(abs(o["tokens_per_s_per_gpu"] / float(row["output_tokens_per_s"]) - 1))
    print(f"  rows {len(errs_plan)}, median |error| {statistics.median(errs_plan):.1%}, max |error| "
          f"{max(errs_plan):.1%}, within 25%: {sum(e <= 0.25 for e in errs_plan)}/{len(errs_plan)}")

    print("2. operating points (closed loop at the measured concurrency) and the capacity verdict")
    tpot_errs, verdicts, verdicts90 = [], [], []
    for row in _rows("serving_latency.csv"):
        m = _model(row["registry_model"], row["precision"])
        hw = inference.hardware_for(row["gpu"], row["precision"])
        isl, osl, c = int(row["isl"]), round(float(row["osl"])), int(row["concurrency"])
        e = inference.engine_with(inference.engine_for(row["engine"]), endpoint="completions")  # vllm bench serve's
        rep = replica_setup(m, hw, row["precision"], e, int(row["tp"]), isl, osl)
        r = run_closed(rep, c, isl, osl)
        tpot = float(row["tpot_ms_mean"])
        e_tpot = r.tpot_p50_s * 1e3 / tpot - 1
        e_thr = r.output_tokens_per_s / float(row["output_tokens_per_s"]) - 1
        tpot_errs.append(abs(e_tpot))
        ttft = float(row["ttft_ms_mean"]) if row["ttft_ms_mean"] else None
        line = (f"  {row['gpu']:8} c={c:<3} {isl}/{osl}: tok/s meas {float(row['output_tokens_per_s']):7,.0f} model "
                f"{r.output_tokens_per_s:7,.0f} ({e_thr:+.0%}); TPOT meas {tpot:6.2f} model p50 {r.tpot_p50_s * 1e3:6.2f} "
                f"({e_tpot:+.0%}); TTFT meas mean {row['ttft_ms_mean'] or '-'} model p50 {r.ttft_p50_s * 1e3:6.1f} "
                f"p95 {r.ttft_p95_s * 1e3:6.1f}")
        print(line)
        if ttft is None:
            ttft = 10_000.0  # the source states no TTFT: only the TPOT target binds
        plan = plan_capacity(capacity_spec(row, ttft_ms=ttft, tpot_ms=tpot))
        o = plan["options"][0]
        ok = bool(o["feasible"] and o["gpus"] == int(row["tp"]))  # one replica of the measured shape
        verdicts.append(ok)
        o90 = plan_capacity(capacity_spec(row, ttft_ms=ttft, tpot_ms=tpot, confidence="p90"))["options"][0]
        verdicts90.append(bool(o90["feasible"] and o90["gpus"] == int(row["tp"])))
        print(f"      85% rate, SLO TTFT {1.1 * ttft:,.0f} ms / TPOT {1.1 * tpot:.2f} ms: feasible={o['feasible']} "
              f"GPUs={o['gpus']} (TP {o['gpus_per_replica']}) at concurrency {o['max_batch']} -> {'OK' if ok else 'FAIL'}")
    print(f"  TPOT median |error| {statistics.median(tpot_errs):.1%}; one replica feasible and enough: "
          f"{sum(verdicts)}/{len(verdicts)} at slo.confidence p50 (the central estimate), {sum(verdicts90)}/"
          f"{len(verdicts90)} at p90 (the default: the 10-15% slack of these questions is inside the bands)")

    print("3. physically impossible targets")
    row = {"registry_model": "meta-llama/Llama-3.1-8B", "precision": "bf16", "engine": "vllm", "gpu": "H100",
           "isl": "512", "osl": "128", "requests_per_s": "1"}
    for measured in (None, {"H100": {"tokens_per_s_per_gpu": 5000, "concurrency": 64, "ttft_ms": 50, "tpot_ms": 0.5}}):
        o = plan_capacity(capacity_spec(row, ttft_ms=200, tpot_ms=1 / 1.1, measured=measured))["options"][0]
        print(f"  1 ms TPOT, measured={'yes' if measured else 'no'}: feasible={o['feasible']} — {o['reason'][:160]}")
    print("4. request-length mixes: Llama-3.1-8B bf16 on one H100 (vLLM), Poisson at 8 req/s, same means")
    from gpuledger.capacity.lengths import LengthMix, mix_from
    from gpuledger.capacity.operating import load_check
    from gpuledger.spec.capacity_models import LengthDist

    m = _model("meta-llama/Llama-3.1-8B", "bf16")
    hw = inference.hardware_for("H100", "bf16")
    share_p, share_o = (mix_from(LengthDist(dataset="sharegpt"), k) for k in ("prompt", "output"))
    for name, pm, om, p_len, o_len in (
            ("sharegpt fixed means", None, None, 161, 338), ("sharegpt mix", share_p, share_o, 161, 338),
            ("1,500/300 fixed", None, None, 1500, 300),
            ("1,500/300 cv 1", LengthMix(1500, 1.0), LengthMix(300, 1.0), 1500, 300)):
        rep = replica_setup(m, hw, "bf16", inference.engine_for("vllm"), 1, p_len, o_len, pm, om)
        r = load_check(rep, 8.0, p_len, o_len, pm, om)
        print(f"  {name:22} p95 TTFT {r.ttft_p95_s * 1e3:7.1f} ms  p95 TPOT {r.tpot_p95_s * 1e3:6.2f} ms  "
              f"p50 TPOT {r.tpot_p50_s * 1e3:6.2f} ms")
    rows = band_rows_now(verbose=True)
    if "--write" in sys.argv:
        out = ROOT / "gpuledger" / "capacity" / "data" / "serving_bands.json"
        out.write_text(json.dumps({"written_by": "benchmarks/capacity_accuracy.py --write", "rows": rows},
                                  indent=1) + "\n", encoding="utf-8")
        print(f"wrote {out.relative_to(ROOT)} ({len(rows)} rows)")
    print(f"({time.perf_counter() - t0:.1f} s)")
    return 0


#: issue 37's measurement of TTFT at concurrency 1 through vLLM's OpenAI chat endpoint on an H100 (chat
#: traffic, ShareGPT-like prompts): 60 ms; the only chat-endpoint TTFT here
ISSUE37_CHAT_TTFT_MS = 60.0


def _bench_model(row: dict) -> tuple:
    m = _model(row["registry_model"], row["precision"])
    hw = inference.hardware_for(row["gpu"], row["precision"])
    return m, hw


def band_rows_now(verbose: bool = False) -> list[dict]:
    """5. The rows of the capacity bands (gpuledger/capacity/bands.py): log(measured / model) per engine
    × GPU family × quantity, each public measurement against the simulation of its own benchmark."""
    from gpuledger.capacity.lengths import LengthMix
    from gpuledger.spec.datasets import DATASETS

    out: list[dict] = []

    def add(engine, gpu, quantity, measured, model, source, what):
        err = math.log(measured / model)
        out.append({"engine": engine, "family": inference.GENERATION_OF.get(gpu, "ampere"), "quantity": quantity,
                    "log_error": round(err, 4), "source": source, "what": what})
        if verbose:
            print(f"  {engine:6} {gpu:9} {quantity:10} measured {measured:9,.1f} model {model:9,.1f} "
                  f"({model / measured - 1:+6.1%})  {what}")

    if verbose:
        print("5. band rows: vllm bench serve / benchmark_serving at request rate inf (tests/data/serving_bench_public.csv)")
    cv_p, cv_o = DATASETS["sharegpt"]["prompt"][1], DATASETS["sharegpt"]["output"][1]
    for row in _rows("serving_bench_public.csv"):
        if row["scored"] == "older_engine":
            continue
        m, hw = _bench_model(row)
        seqs = int(row["max_num_seqs"]) if row["max_num_seqs"] else None
        e = inference.engine_with(inference.engine_for(row["engine"]), endpoint=row["endpoint"], max_num_seqs=seqs)
        isl, osl = float(row["isl_mean"]), float(row["osl_mean"])
        r = max_throughput(m, hw, row["precision"], e, prompt_tokens=round(isl), output_tokens=round(osl),
                           num_requests=int(row["num_prompts"]), tp=int(row["tp"]),
                           prompt_mix=LengthMix(isl, cv_p), output_mix=LengthMix(osl, cv_o))
        add(row["engine"], row["gpu"], "throughput", float(row["output_tokens_per_s"]), r.output_tokens_per_s,
            row["source_url"], f"{row['registry_model']} {row['precision']} {row['endpoint']} {row['num_prompts']} "
            f"prompts ({row['scored']})")
    for row, sim, _err in throughput_errors():
        add(row["engine"], row["gpu"], "throughput", float(row["output_tokens_per_s"]), sim, row["source_url"],
            f"trtllm-bench {row['isl']}/{row['osl']}")
    for row in _rows("serving_latency.csv"):
        m, hw = _bench_model(row)
        isl, osl, c = int(row["isl"]), round(float(row["osl"])), int(row["concurrency"])
        e = inference.engine_with(inference.engine_for(row["engine"]), endpoint="completions")
        rep = replica_setup(m, hw, row["precision"], e, int(row["tp"]), isl, osl)
        r = run_closed(rep, c, isl, osl)
        what = f"{row['registry_model']} c={c} {isl}/{osl}"
        add(row["engine"], row["gpu"], "throughput", float(row["output_tokens_per_s"]), r.output_tokens_per_s,
            row["source_url"], what)
        add(row["engine"], row["gpu"], "tpot", float(row["tpot_ms_mean"]), r.tpot_p50_s * 1e3, row["source_url"], what)
        # TTFT rows of closed loops above concurrency 8 are left out of the band: there measured mean TTFT is
        # 2.6-7x the model's (queueing in the API server the simulation lacks; printed in section 2)
        if row["ttft_ms_mean"] and c <= 8:
            add(row["engine"], row["gpu"], "ttft", float(row["ttft_ms_mean"]), r.ttft_p50_s * 1e3, row["source_url"], what)
    m = _model("meta-llama/Llama-3.1-8B", "bf16")
    hw = inference.hardware_for("H100", "bf16")
    from gpuledger.capacity.lengths import mix_from
    from gpuledger.spec.capacity_models import LengthDist

    pm, om = (mix_from(LengthDist(dataset="sharegpt"), k) for k in ("prompt", "output"))
    rep = replica_setup(m, hw, "bf16", inference.engine_for("vllm"), 1, 161, 338, pm, om)
    r = run_closed(rep, 1, 161, 338, pm, om)
    add("vllm", "H100", "ttft", ISSUE37_CHAT_TTFT_MS, r.ttft_p50_s * 1e3, "issue 37 (chat endpoint, concurrency 1)",
        "Llama-3.1-8B ShareGPT c=1 chat")
    if verbose:
        from gpuledger.capacity import bands

        for q in bands.QUANTITIES:
            errs = [abs(math.exp(x["log_error"]) - 1) for x in out if x["quantity"] == q]
            print(f"  {q}: {len(errs)} rows, median |error| {statistics.median(errs):.1%}, within 25%: "
                  f"{sum(e <= 0.25 for e in errs)}/{len(errs)}")
        loso_coverage(out)
    return out


def loso_coverage(rows: list[dict]) -> None:
    """Prints, per quantity, how often the P10-P90 band built without a row's source holds that row."""
    from gpuledger.capacity import bands

    for q in bands.QUANTITIES:
        inside = below = above = n = 0
        for r in (x for x in rows if x["quantity"] == q):
            rest = tuple(x for x in rows if x["source"] != r["source"])
            bands.band_rows.cache_clear()
            bands.band_for.cache_clear()
            orig = bands.band_rows
            bands.band_rows = lambda rest=rest: rest  # the table without this row's source
            try:
                b = bands.band_for(r["engine"], r["family"], q)
            finally:
                bands.band_rows = orig
                bands.band_for.cache_clear()
            ratio = math.exp(r["log_error"])
            n += 1
            inside += b.p10 <= ratio <= b.p90
            below += ratio < b.p10
            above += ratio > b.p90
        if n:
            print(f"  {q}: leave-one-source-out P10-P90 holds {inside}/{n} ({inside / n:.0%}); below P10 {below}, "
                  f"above P90 {above}")


if __name__ == "__main__":
    raise SystemExit(main())
