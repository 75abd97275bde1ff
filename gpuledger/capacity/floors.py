"""The physical floors of one serving replica (no engine beats them) and how a plan holds every
option to the floors of its own tensor-parallel degree.

TPOT floor: the weights read once per token at the full datasheet bandwidth of the replica's GPUs,
plus at TP > 1 the least time of a step's all-reduces (`gpuledger.estimate.inference.tpot_floor_s`);
TTFT floor: the prompt's prefill FLOPs at the dense peak (`ttft_floor_s`). Pure.
"""

from __future__ import annotations

from typing import Any

from gpuledger.estimate import inference


def floors(model: inference.ServingModel, hw: inference.Hardware, spec, tp: int) -> tuple[float, float]:
    """Returns the (TTFT, TPOT) floors in seconds on `tp` GPUs (`inference.ttft_floor_s`, `inference.tpot_floor_s`)."""
    p = spec.traffic.prompt_tokens
    return inference.ttft_floor_s(model, hw, spec.precision, p, tp), inference.tpot_floor_s(model, hw, spec.precision, tp)


def floor_text(model: inference.ServingModel, hw: inference.Hardware, spec, tp: int) -> str:
    """Returns the floors of `tp` GPUs with their arithmetic, as the reasons print them."""
    ttft_s, tpot_s = floors(model, hw, spec, tp)
    wb = inference.weights_bytes(model, spec.precision)
    comm = inference.allreduce_s(model, hw, tp, floor=True)
    tpot = (f"TPOT ≥ {tpot_s * 1e3:,.2f} ms = {wb / 1e9:,.2f} GB of {spec.precision} weights / ({tp} × "
            f"{hw.bandwidth_gbps:,.0f} GB/s {hw.name} bandwidth), read once per token at 100% of the datasheet")
    if comm:
        tpot += f", + {comm * 1e3:,.3g} ms of all-reduces (2 × {model.num_layers} layers, at least " \
                f"{inference.ALLREDUCE_FLOOR_S['nvlink' if hw.nvlink else 'pcie'] * 1e6:g} µs each)"
    ttft = (f"TTFT ≥ {ttft_s * 1e3:,.2f} ms = {inference.prefill_flops(model, spec.traffic.prompt_tokens) / 1e12:,.2f} "
            f"TFLOP of prefill / ({tp} × {hw.peak_tflops:,.0f} TFLOPS {hw.name} dense peak at 100%)")
    return f"floors at TP {tp}: {tpot}; {ttft}"


def impossible(model: inference.ServingModel, hw: inference.Hardware, spec, tp: int) -> str | None:
    """Returns why the SLO is physically impossible on `tp` GPUs of `hw` (the most the option may
    use, whose floors are the lowest), or None."""
    ttft_s, tpot_s = floors(model, hw, spec, tp)
    parts = []
    if spec.slo.p95_tpot_ms / 1e3 < tpot_s:
        parts.append(f"p95 TPOT {spec.slo.p95_tpot_ms:g} ms is below the floor {tpot_s * 1e3:,.2f} ms")
    if spec.slo.p95_ttft_ms / 1e3 < ttft_s:
        parts.append(f"p95 TTFT {spec.slo.p95_ttft_ms:g} ms is below the floor {ttft_s * 1e3:,.2f} ms")
    if not parts:
        return None
    return "physically impossible: " + " and ".join(parts) + f" ({floor_text(model, hw, spec, tp)})"


def does_not_fit(model: inference.ServingModel, hw: inference.Hardware, spec, engine: inference.Engine, tp: int) -> str:
    t = spec.traffic
    wb = inference.weights_bytes(model, spec.precision)
    usable = tp * (engine.kv_memory_fraction * hw.memory_gib * inference.GIB - inference.ACTIVATION_RESERVE_GIB * inference.GIB)
    need = (t.prompt_tokens + t.output_tokens) * model.kv_bytes_per_token
    if wb > usable:
        return (f"weights need {wb / inference.GIB:,.1f} GiB at {spec.precision}, more than {tp} × {hw.name} usable "
                f"({tp} × ({engine.kv_memory_fraction:g} × {hw.memory_gib:g} GiB − {inference.ACTIVATION_RESERVE_GIB:g} GiB "
                f"reserve) = {usable / inference.GIB:,.1f} GiB)")
    return (f"after {wb / inference.GIB:,.1f} GiB of weights, {tp} × {hw.name} leave {(usable - wb) / inference.GIB:,.2f} GiB "
            f"for KV cache; one request of {t.prompt_tokens + t.output_tokens:,} tokens needs {need / inference.GIB:,.2f} GiB")


def pinned_tp(spec) -> int | None:
    """Returns the tensor-parallel degree `engine_args.tensor_parallel` pins, or None."""
    args = getattr(spec, "engine_args", None)
    return getattr(args, "tensor_parallel", None) if args is not None else None


def hold_floors(opt: dict[str, Any], model, hw, spec) -> None:
    """Sets the option's floors to those of its own TP degree, lifts a predicted p95 below them to them
    (a prediction never beats physics), makes the option infeasible when that breaks the SLO, and names
    the floors in the reason."""
    tp = opt["gpus_per_replica"] or 1
    f_ttft, f_tpot = floors(model, hw, spec, tp)
    opt.update(floor_ttft_ms=round(f_ttft * 1e3, 3), floor_tpot_ms=round(f_tpot * 1e3, 3))
    if not opt["feasible"]:
        return
    lifted = []
    for key, floor_ms, digits in (("tpot_ms", f_tpot * 1e3, 2), ("ttft_ms", f_ttft * 1e3, 1)):
        if opt[key] is not None and opt[key] < floor_ms:
            lifted.append(f"predicted {key[:4].upper()} {opt[key]:g} ms lifted to the floor")
            opt[key] = round(floor_ms, digits + 1)
    text = floor_text(model, hw, spec, tp)
    slo = spec.slo
    if (opt["tpot_ms"] or 0) > slo.p95_tpot_ms or (opt["ttft_ms"] or 0) > slo.p95_ttft_ms:
        opt["feasible"] = False
        opt["reason"] = (f"infeasible at TP {tp}: p95 TTFT {opt['ttft_ms']:g} ms / TPOT {opt['tpot_ms']:g} ms at the "
                         f"floors of its own shape miss the SLO ({text}); " + opt["reason"])
        return
    opt["reason"] = f"{opt['reason']}; {text}" + (f" ({', '.join(lifted)})" if lifted else "")
