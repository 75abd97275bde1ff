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
    _add_spread(out)
    if skipped:
        notes.append(f"{sp.label}: points on {', '.join(sorted(skipped))} left out (not a catalog GPU or TP size)")
    if not out:
        notes.append(f"{sp.label}: no point on a catalog GPU, so every option is estimated")
    return out, notes


def _add_spread(points: dict[str, list[dict[str, Any]]]) -> None:
    """Gives every point the spread of the sweep's runs at the same accelerator, TP and load: the lowest
    and highest tokens/s as ratios to their mean (`spread` {low, high, runs}); one run: none (the plan
    then takes ±8% run-to-run noise, gpuledger.capacity.bands.MIN_HALF_WIDTH)."""
    for pts in points.values():
        groups: dict[tuple, list[dict[str, Any]]] = {}
        for p in pts:
            groups.setdefault((p["gpus_per_replica"], p["concurrency"], p["request_rate"]), []).append(p)
        for same in groups.values():
            if len(same) < 2:
                continue
            rates = [p["tokens_per_s_per_gpu"] for p in same]
            mean = sum(rates) / len(rates)
            for p in same:
                p["spread"] = {"low": min(rates) / mean, "high": max(rates) / mean, "runs": len(rates)}


def fine_tune_cost(wh, name: str) -> tuple[float, str]:
    """Returns (the cost in USD, a label) of the latest sweep called `name` (named query
    `capacity_fine_tune_cost`); UserError when the warehouse has none."""
    from gpuledger.errors import UserError

    rows = wh.query_named("capacity_fine_tune_cost", {"name": name}).to_dicts()
    if not rows:
        raise UserError(f"fine_tune.sweep: no sweep called {name!r} in the warehouse (run it first, or give "
                        "fine_tune.usd instead)")
    r = rows[0]
    cost = float(r["total_cost_usd"] or 0.0)
    when = str(r["started_at"])[:10] if r.get("started_at") else "?"
    return cost, f"sweep {name} ({r['sweep_id']}, started {when}): {r['runs'] or 0} runs, {r['gpu_hours'] or 0:,.1f} GPU-hours"


def plan_capacity_measured(spec, wh=None, **kwargs) -> dict[str, Any]:
    """Returns `gpuledger.capacity.plan_capacity(spec, ...)`, with what the spec asks of the warehouse
    (`wh`, else the default one opened read-only): `measured: {from_sweep: NAME}` resolved, its notes
    first among the assumptions; `fine_tune: {sweep: NAME}`'s cost. A spec asking neither is planned
    as it is."""
    from gpuledger.capacity import plan_capacity

    name = getattr(spec.measured, "from_sweep", None)
    ft = getattr(spec, "fine_tune", None)
    ft_sweep = getattr(ft, "sweep", None) if ft is not None else None
    if name is None and ft_sweep is None:
        return plan_capacity(spec, **kwargs)
    if wh is None:
        from gpuledger.warehouse import Warehouse

        with Warehouse.open(read_only=True) as opened:
            return _plan_with(spec, opened, name, ft_sweep, kwargs)
    return _plan_with(spec, wh, name, ft_sweep, kwargs)


def _plan_with(spec, wh, name: str | None, ft_sweep: str | None, kwargs: dict) -> dict[str, Any]:
    from gpuledger.capacity import plan_capacity

    if ft_sweep is not None:
        kwargs["fine_tune_usd"], kwargs["fine_tune_source"] = fine_tune_cost(wh, ft_sweep)
    if name is None:
        return plan_capacity(spec, **kwargs)
    sp = load_points(wh, name)
    measured, notes = capacity_points(sp, spec.slo.p95_ttft_ms, spec.slo.p95_tpot_ms)
    result = plan_capacity(spec, measured=measured, **kwargs)
    result["assumptions"] = notes + list(result.get("assumptions") or [])
    result["measured_from"] = {"sweep": sp.name, "sweep_id": sp.sweep_id, "measured_on": sp.measured_on,
                               "label": sp.label, "points": len(sp.points)}
    return result
