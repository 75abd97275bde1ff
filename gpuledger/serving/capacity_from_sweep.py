"""`measured: {from_sweep: NAME}` in a capacity spec: the operating points a `method: inference`
sweep measured become the capacity plan's measured points."""

from __future__ import annotations

from typing import Any

from gpuledger.serving.points import SweepPoints, best_by_placement, load_points


def capacity_points(sp: SweepPoints, p95_ttft_ms: float, p95_tpot_ms: float) -> tuple[dict[str, list[dict[str, Any]]], list[str]]:
    """Returns ({accelerator: [measured point dicts of gpuledger.capacity.measured]}, notes).

    Each point: output tokens/s per GPU (the run's throughput / its tensor-parallel GPUs), the load
    it ran at, its p95 TTFT and TPOT, the engine and GPUs per replica, labelled "measured in sweep
    NAME on DATE". The capacity planner uses, per accelerator, the highest rate whose TTFT and TPOT
    meet the SLO. The notes say, per accelerator and TP size, which point that is, or that none
    meets the SLO and which is closest; points on a CPU or an unknown accelerator are left out.
    """
    from gpuledger.catalog import UnknownAccelerator, normalize_accelerator
    from gpuledger.estimate import inference

    out: dict[str, list[dict[str, Any]]] = {}
    skipped: set[str] = set()
    engine = sp.engine if sp.engine in inference.ENGINES else None
    for p in sp.points:
        try:
            acc = normalize_accelerator(p.accelerator)
        except UnknownAccelerator:
            skipped.add(p.accelerator)
            continue
        tp = p.gpus or 1
        if tp not in inference.TP_DEGREES:
            skipped.add(f"{p.accelerator}×{tp}")
            continue
        conc, rate = p.params.get("concurrency"), p.params.get("request_rate")
        out.setdefault(acc, []).append({
            "tokens_per_s_per_gpu": p.output_tokens_per_s / tp,
            "concurrency": int(conc) if isinstance(conc, int | float) and conc >= 1 else None,
            "request_rate": float(rate) if isinstance(rate, int | float) and rate > 0 else None,
            "ttft_ms": p.ttft_ms_p95, "tpot_ms": p.tpot_ms_p95, "engine": engine, "gpus_per_replica": tp,
            "origin": f"{sp.label}, run {p.run_id} at {p.load or 'its load'}",
        })
    notes = [f"{sp.label}: {c.accelerator}×{c.gpus or 1}: {c.why}" for c in best_by_placement(sp.points, p95_ttft_ms, p95_tpot_ms)
             if c.accelerator not in skipped]
    if skipped:
        notes.append(f"{sp.label}: points on {', '.join(sorted(skipped))} left out (not a catalog GPU or TP size)")
    if not out:
        notes.append(f"{sp.label}: no point on a catalog GPU, so every option is estimated")
    return out, notes


def plan_capacity_measured(spec, wh=None, **kwargs) -> dict[str, Any]:
    """Returns `gpuledger.capacity.plan_capacity(spec, ...)`, with `measured: {from_sweep: NAME}`
    resolved from the warehouse (`wh`, else the default one opened read-only) and its notes first
    among the assumptions. A spec without `from_sweep` is planned as it is."""
    from gpuledger.capacity import plan_capacity

    name = getattr(spec.measured, "from_sweep", None)
    if name is None:
        return plan_capacity(spec, **kwargs)
    if wh is None:
        from gpuledger.warehouse import Warehouse

        with Warehouse.open(read_only=True) as opened:
            sp = load_points(opened, name)
    else:
        sp = load_points(wh, name)
    measured, notes = capacity_points(sp, spec.slo.p95_ttft_ms, spec.slo.p95_tpot_ms)
    result = plan_capacity(spec, measured=measured, **kwargs)
    result["assumptions"] = notes + list(result.get("assumptions") or [])
    result["measured_from"] = {"sweep": sp.name, "sweep_id": sp.sweep_id, "measured_on": sp.measured_on,
                               "label": sp.label, "points": len(sp.points)}
    return result
