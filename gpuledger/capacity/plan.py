"""Capacity plan: traffic × tokens × latency targets → GPUs per accelerator → $/month.

`plan_capacity(spec, offers=None, measured=None)` returns one JSON-ready dict:

- `options`: one per candidate accelerator: the physical floors of TTFT/TPOT (no engine beats
  them), the replica shape (tensor-parallel GPUs), the latency–throughput curve of one replica
  simulated for the spec's engine (`gpuledger.capacity.operating`), the operating point chosen on it
  (the concurrency with the most tokens/s whose p95 TTFT and TPOT meet the SLO) and why, or the
  measured operating point that replaces it; the GPUs the traffic needs; a check of that fleet under
  Poisson arrivals at the real per-replica rate; what it costs per hour, day (24 h) and month
  (730 h) on demand and on spot from the cheapest offer; `feasible` and a `reason` with numbers;
- `best`: the cheapest feasible option by on-demand month (or null, with `best_reason`);
- `spec`: a summary of what was planned; `assumptions`: every modelling choice with its source.

Fleet sizing: GPUs = ceil(qps × output_tokens × (1 + headroom) / tokens/s per GPU at the operating
point), in whole replicas. A target below the physical floor is infeasible whatever was measured.

Pure: reads the model registry and the price catalog, writes nothing.
"""

from __future__ import annotations

from typing import Any

from gpuledger.capacity import economy, elastic, floors, lengths, operating, prices, sizing
from gpuledger.capacity.measured import measured_points
from gpuledger.capacity.plan_types import CapacityPlan
from gpuledger.capacity.prices import HOURS_PER_DAY, HOURS_PER_MONTH, cheapest_offer
from gpuledger.capacity.simulate import SimulationTooLong
from gpuledger.capacity.sizing import confidence_of, gpus_needed, sizing_factors
from gpuledger.errors import UserError
from gpuledger.estimate import inference

OPTION_KEYS = (
    "accelerator",
    "precision",
    "engine",
    "gpus",
    "gpus_per_replica",
    "replicas",
    "max_batch",
    "tokens_per_s_per_gpu",
    "max_tokens_per_s_per_replica",
    "throughput_source",
    "operating_point",
    "ttft_ms",
    "tpot_ms",
    "ttft_ms_p50",
    "ttft_ms_p99",
    "tpot_ms_p50",
    "tpot_ms_p99",
    "ttft_ms_p95",
    "tpot_ms_p95",
    "replicas_sized",
    "bands",
    "floor_ttft_ms",
    "floor_tpot_ms",
    "load_check",
    "curve",
    "price_per_gpu_hour_on_demand",
    "usd_per_hour_on_demand",
    "usd_per_day_on_demand",
    "usd_per_month_on_demand",
    "usd_per_hour_spot",
    "usd_per_month_spot",
    "cloud",
    "instance_type",
    "price_source",
    "feasible",
    "reason",
    *economy.ECONOMY_KEYS,
)


# --------------------------------------------------------------------------------------------
# Planning helpers


def _fmt(x: float, digits: int = 0) -> str:
    return f"{x:,.{digits}f}"


# --------------------------------------------------------------------------------------------
# Physics and the simulated estimate


def _load_model(spec) -> inference.ServingModel:
    from gpuledger.models import load_config

    try:
        cfg = load_config(spec.model)
    except UserError:
        raise
    except Exception as err:  # a registry/config problem is the user's to fix, not a traceback
        raise UserError(f"cannot load model {spec.model!r}: {err}") from None
    kv = getattr(getattr(spec, "engine_args", None), "kv_cache_dtype", None)
    kv_bytes = None
    if kv in ("fp8", "bf16", "fp16"):
        from gpuledger.estimate import kv_cache_bytes_per_token

        kv_bytes = int(kv_cache_bytes_per_token(cfg, kv))
    return inference.serving_model_from_config(cfg, spec.precision, kv_bytes_per_token=kv_bytes)


def _draft_model(name: str, precision: str) -> inference.ServingModel:
    from gpuledger.models import load_config

    try:
        cfg = load_config(name)
    except Exception as err:  # the registry's own message, said where it comes from
        raise UserError(f"engine_args.speculative.draft_model: {err}") from None
    return inference.serving_model_from_config(cfg, precision)


#: engine_args keys that `inference.engine_with` takes as they are
ENGINE_FLAGS = ("max_num_seqs", "max_num_batched_tokens", "chunked_prefill", "gpu_memory_utilization", "endpoint",
                "prefix_cache_hit")


def engine_of(spec) -> tuple[inference.Engine, dict[str, Any]]:
    """Returns the spec's engine with its `engine_args` applied, and those args as given (JSON-ready)."""
    try:
        engine = inference.engine_for(getattr(spec, "engine", None))
    except ValueError as err:
        raise UserError(str(err)) from None
    args = getattr(spec, "engine_args", None)
    overrides = {k: v for k, v in (args.model_dump() if args is not None else {}).items() if v is not None}
    flags = {k: v for k, v in overrides.items() if k in ENGINE_FLAGS}
    sp = overrides.get("speculative")
    if sp:
        draft = _draft_model(sp["draft_model"], spec.precision) if sp["method"] == "draft_model" else None
        flags["speculative"] = (sp["method"], int(sp["num_speculative_tokens"]), float(sp["acceptance_rate"]), draft)
    try:
        return inference.engine_with(engine, **flags), overrides
    except ValueError as err:
        raise UserError(f"engine_args: {err}") from None


def _choose_at(model: inference.ServingModel, hw: inference.Hardware, spec, engine: inference.Engine, tp: int) -> operating.Choice | None:
    """Returns the simulated operating point of one replica of `tp` GPUs (None: a request does not fit);
    ValueError/SimulationTooLong when the simulation cannot run the shape. The TPOT target is met at the
    spec's confidence (the simulated p95 × the TPOT band's P90 at p90); TTFT's band is shown, not sized on."""
    t, slo = spec.traffic, spec.slo
    pm, om = lengths.mixes(spec)
    rep = operating.replica_setup(model, hw, spec.precision, engine, tp, t.prompt_tokens, t.output_tokens, pm, om)
    if rep is None:
        return None
    tpot_factor = sizing_factors(spec, engine, hw)["tpot"]
    return operating.choose(rep, t.prompt_tokens, t.output_tokens, slo.p95_ttft_ms / 1e3,
                            slo.p95_tpot_ms / 1e3 / tpot_factor, pm, om)


def _estimate(model: inference.ServingModel, hw: inference.Hardware, spec, engine: inference.Engine, tps: list[int]) -> dict[str, Any]:
    """Returns the simulated estimate for one accelerator: the replica shape needing the fewest GPUs
    (the tensor-parallel degrees `tps` tried from 1 up, stopping one past the first that meets the
    SLO), its `operating.Choice` and GPUs; or why none works. Keys: choice, gpus, replicas, reason."""
    t = spec.traffic
    found: list[tuple[int, int, operating.Choice]] = []
    problems: list[str] = []
    missed: operating.Choice | None = None
    for tp in tps:
        try:
            choice = _choose_at(model, hw, spec, engine, tp)
        except (ValueError, SimulationTooLong) as err:  # bounded: a shape the simulation cannot run
            problems.append(f"TP {tp}: {err}")
            continue
        if choice is None:
            continue
        if choice.point is None:
            if missed is None or choice.curve[0].tpot_p95_s < missed.curve[0].tpot_p95_s:
                missed = choice
            if found:
                break
            continue
        rate = choice.point.output_tokens_per_s / tp * sizing_factors(spec, engine, hw)["throughput"]
        gpus, replicas = gpus_needed(t.qps, t.output_tokens, spec.headroom, rate, tp)
        found.append((gpus, tp, choice))
        if len(found) == 2:
            break
    if found:
        gpus, tp, choice = min(found, key=lambda f: (f[0], f[1]))
        return {"choice": choice, "gpus": gpus, "replicas": gpus // tp, "reason": None, "missed": missed}
    if missed is None:
        return {"choice": None, "gpus": None, "replicas": None, "missed": None,
                "reason": "; ".join(problems) or floors.does_not_fit(model, hw, spec, engine, tps[-1])}
    r = missed.curve[0]
    reason = (f"even one request at a time misses the SLO on {missed.replica.tp} × {hw.name} ({engine.name}, "
              f"TP {missed.replica.tp}, the fastest shape tried): "
              f"{missed.limit}; at concurrency 1 TTFT p95 {r.ttft_p95_s * 1e3:,.1f} ms (prefill + "
              f"{inference.request_overhead_for(engine) * 1e3:g} ms request overhead, {engine.endpoint} endpoint), TPOT p95 {r.tpot_p95_s * 1e3:,.2f} ms")
    return {"choice": None, "gpus": None, "replicas": None, "missed": missed, "reason": reason}


def _load(choice: operating.Choice, spec, replicas: int) -> dict[str, Any]:
    """Returns the fleet's latency under its real traffic: Poisson arrivals at qps / replicas per
    replica, simulated on the chosen shape (information: the fleet is sized on the operating point)."""
    t, slo = spec.traffic, spec.slo
    r = operating.load_check(choice.replica, t.qps / replicas, t.prompt_tokens, t.output_tokens, *lengths.mixes(spec))
    check = operating.point_dict(r, choice.replica.tp, slo.p95_ttft_ms / 1e3, slo.p95_tpot_ms / 1e3)
    check.update(mode="poisson", replicas=replicas)
    return check


# --------------------------------------------------------------------------------------------
# Planning


def _empty_option(accelerator: str, precision: str, engine: str) -> dict[str, Any]:
    opt = dict.fromkeys(OPTION_KEYS)
    opt.update(accelerator=accelerator, precision=precision, engine=engine, throughput_source="estimated",
               feasible=False)
    return opt


def _measured_use(points: list[dict[str, Any]], model, hw, spec, engine: inference.Engine,
                  tps: list[int]) -> tuple[dict | None, operating.Choice | None, list[str]]:
    """Returns (the measured point that sizes the fleet or None, the simulated operating point at that
    point's TP when it has no latencies, notes on the points not used). Each point is held to the
    floors of its own TP degree; a rate without latencies counts only when the simulation of a replica
    of that TP meets the SLO (its latencies then stand for the point's)."""
    slo = spec.slo
    notes: list[str] = []
    full: list[dict[str, Any]] = []
    rate_only: list[tuple[dict[str, Any], operating.Choice]] = []
    wb = inference.weights_bytes(model, spec.precision)
    sims: dict[int, operating.Choice | None] = {}
    for p in points:
        tp = p["gpus_per_replica"]
        floor_ttft, floor_tpot = floors.floors(model, hw, spec, tp)
        if tp not in tps:
            notes.append(f"measured point ({p['origin']}) on {tp} × {hw.name}: TP {tp} is not among the shapes "
                         f"planned (TP {', '.join(map(str, tps))}): not used")
        elif wb > tp * hw.memory_gib * inference.GIB:
            notes.append(f"measured point ({p['origin']}) on {tp} × {hw.name}: {wb / inference.GIB:,.1f} GiB of weights "
                         f"exceed {tp} × {hw.memory_gib:g} GiB of device memory: ignored as physically impossible")
        elif p["tpot_ms"] is not None and p["tpot_ms"] / 1e3 < floor_tpot * 0.999:
            notes.append(f"measured TPOT {p['tpot_ms']:g} ms ({p['origin']}) is below the physical floor "
                         f"{floor_tpot * 1e3:,.2f} ms on {tp} × {hw.name}: ignored as inconsistent")
        elif p["ttft_ms"] is not None and p["ttft_ms"] / 1e3 < floor_ttft * 0.999:
            notes.append(f"measured TTFT {p['ttft_ms']:g} ms ({p['origin']}) is below the physical floor "
                         f"{floor_ttft * 1e3:,.2f} ms on {tp} × {hw.name}: ignored as inconsistent")
        elif p["ttft_ms"] is not None and p["tpot_ms"] is not None:
            if p["ttft_ms"] <= slo.p95_ttft_ms and p["tpot_ms"] <= slo.p95_tpot_ms:
                full.append(p)
            else:
                notes.append(f"measured point at concurrency {p['concurrency'] or '?'} (TTFT {p['ttft_ms']:g} ms, "
                             f"TPOT {p['tpot_ms']:g} ms) misses the SLO: not used")
        else:
            if tp not in sims:
                try:
                    sims[tp] = _choose_at(model, hw, spec, engine, tp)
                except (ValueError, SimulationTooLong):
                    sims[tp] = None
            ch = sims[tp]
            if ch is not None and ch.point is not None:
                rate_only.append((p, ch))
            else:
                why = ch.limit if ch is not None else "one request does not fit its KV cache"
                notes.append(f"measured rate {p['tokens_per_s_per_gpu']:,.1f} tokens/s per GPU on {tp} × {hw.name} has "
                             f"no TTFT/TPOT to show it meets the SLO, and the simulation of TP {tp} finds no operating "
                             f"point that does ({why}): not used")
    if full:
        return max(full, key=lambda p: p["tokens_per_s_per_gpu"]), None, notes
    if rate_only:
        p, ch = max(rate_only, key=lambda pc: pc[0]["tokens_per_s_per_gpu"])
        return p, ch, notes
    return None, None, notes


def _plan_one(accel: str, model: inference.ServingModel, spec, engine: inference.Engine, rows: list[dict[str, Any]],
              points: list[dict[str, Any]]) -> dict[str, Any]:
    t, slo = spec.traffic, spec.slo
    opt = _empty_option(accel, spec.precision, engine.name)
    try:
        hw = inference.hardware_for(accel, spec.precision)
    except ValueError as err:  # no peak rate at this precision in the catalog
        opt["reason"] = str(err)
        return opt
    sizes = [int(r["accelerator_count"]) for r in rows if r.get("accelerator") == accel]
    max_tp = min(spec.resources.max_gpus_per_replica, max(sizes)) if sizes else spec.resources.max_gpus_per_replica
    pinned = floors.pinned_tp(spec)
    tps = [pinned] if pinned else [d for d in inference.TP_DEGREES if d <= max_tp]
    tp_top = max(tps)
    f_ttft, f_tpot = floors.floors(model, hw, spec, tp_top)
    opt.update(floor_ttft_ms=round(f_ttft * 1e3, 3), floor_tpot_ms=round(f_tpot * 1e3, 3))
    impossible = floors.impossible(model, hw, spec, tp_top)
    if impossible:
        opt["reason"] = impossible + (f"; {len(points)} measured point(s) for {accel} cannot change physics"
                                      if points else "")
        return opt
    est = _estimate(model, hw, spec, engine, tps)
    choice: operating.Choice | None = est["choice"] or est["missed"]
    if choice is not None:
        opt["curve"] = [operating.point_dict(r, choice.replica.tp, slo.p95_ttft_ms / 1e3, slo.p95_tpot_ms / 1e3)
                        for r in choice.curve]
        opt["gpus_per_replica"] = choice.replica.tp
    pick, sim, notes = _measured_use(points, model, hw, spec, engine, tps)
    demand = t.qps * t.output_tokens * (1.0 + spec.headroom)
    if pick is not None:
        tp = pick["gpus_per_replica"]
        rate = pick["tokens_per_s_per_gpu"]
        gpus, replicas = gpus_needed(t.qps, t.output_tokens, spec.headroom, rate, tp)
        opt.update(gpus=gpus, gpus_per_replica=tp, replicas=replicas, tokens_per_s_per_gpu=round(rate, 1),
                   throughput_source="measured", feasible=True, max_batch=pick["concurrency"])
        has_lat = pick["ttft_ms"] is not None
        op_point = {"mode": "measured", "concurrency": pick["concurrency"], "request_rate": pick["request_rate"],
                    "engine": pick["engine"] or engine.name, "origin": pick["origin"]}
        if pick.get("spread"):
            op_point["spread"] = pick["spread"]
        if has_lat:
            opt.update(ttft_ms=pick["ttft_ms"], tpot_ms=pick["tpot_ms"])
            op_point["why"] = (f"measured at concurrency {pick['concurrency'] or '?'}: TTFT {pick['ttft_ms']:g} ms ≤ "
                               f"{slo.p95_ttft_ms:g} ms and TPOT {pick['tpot_ms']:g} ms ≤ {slo.p95_tpot_ms:g} ms; the "
                               "highest measured rate that meets the SLO")
        else:
            c = sim.point
            opt.update(ttft_ms=round(c.ttft_p95_s * 1e3, 1), tpot_ms=round(c.tpot_p95_s * 1e3, 2))
            opt["curve"] = [operating.point_dict(r, tp, slo.p95_ttft_ms / 1e3, slo.p95_tpot_ms / 1e3) for r in sim.curve]
            op_point["why"] = (f"measured rate without latencies; the simulated operating point of the same shape "
                               f"(TP {tp}, concurrency {c.concurrency}: p95 TTFT {c.ttft_p95_s * 1e3:,.1f} ms, p95 TPOT "
                               f"{c.tpot_p95_s * 1e3:,.2f} ms) meets the SLO, so the measured rate sizes the fleet")
        if pick["engine"] and pick["engine"] != engine.name:
            notes.append(f"measured on {pick['engine']}, planned for {engine.name}")
        opt["operating_point"] = op_point
        opt["reason"] = (f"measured {_fmt(rate, 1)} output tokens/s per GPU ({pick['origin']}) sizes the fleet: "
                         f"{_fmt(demand)} tokens/s demand / {_fmt(rate, 1)} = {gpus} GPUs ({replicas} × {tp}); "
                         + op_point["why"])
    elif est["choice"] is not None:
        ch: operating.Choice = est["choice"]
        p, tp = ch.point, ch.replica.tp
        rate = p.output_tokens_per_s / tp
        replicas = est["replicas"]
        check = _load(ch, spec, replicas)
        gpus = replicas * tp
        opt.update(gpus=gpus, replicas=replicas, gpus_per_replica=tp, max_batch=p.concurrency,
                   tokens_per_s_per_gpu=round(rate, 1), feasible=True, load_check=check,
                   ttft_ms=round(p.ttft_p95_s * 1e3, 1), tpot_ms=round(p.tpot_p95_s * 1e3, 2),
                   ttft_ms_p50=round(p.ttft_p50_s * 1e3, 1), ttft_ms_p99=round(p.ttft_p99_s * 1e3, 1),
                   tpot_ms_p50=round(p.tpot_p50_s * 1e3, 2), tpot_ms_p99=round(p.tpot_p99_s * 1e3, 2))
        why = (f"concurrency {p.concurrency} per replica gives the most tokens/s per GPU with p95 TTFT "
               f"{p.ttft_p95_s * 1e3:,.1f} ms ≤ {slo.p95_ttft_ms:g} ms and p95 TPOT {p.tpot_p95_s * 1e3:,.2f} ms ≤ "
               f"{slo.p95_tpot_ms:g} ms; going higher is stopped by {ch.limit}")
        opt["operating_point"] = {"mode": "closed loop (simulated)", "concurrency": p.concurrency, "engine": engine.name,
                                  "why": why}
        load = (f"; at the planned load ({t.qps / replicas:,.3g} req/s per replica, Poisson) p95 TTFT "
                f"{check['ttft_ms_p95']:,.1f} ms, p95 TPOT {check['tpot_ms_p95']:,.2f} ms")
        if not check["meets_slo"]:
            load += (" — above the SLO under Poisson bursts: the operating point is a closed-loop concurrency, "
                     "as serving benchmarks measure it; headroom covers bursts")
        fac = sizing_factors(spec, engine, hw)["throughput"]
        opt["reason"] = (f"{engine.name} TP {tp}: {why}; {_fmt(demand)} tokens/s demand / ({_fmt(rate, 1)} per GPU × "
                         f"{fac:.2f}, the throughput band's {'P10' if confidence_of(spec) == 'p90' else 'P50'} at "
                         f"slo.confidence {confidence_of(spec)}) = {gpus} GPUs ({replicas} × {tp})" + load)
    else:
        opt["reason"] = est["reason"]
    if notes:
        opt["reason"] = (opt["reason"] or "") + "; " + "; ".join(notes)
    floors.hold_floors(opt, model, hw, spec)
    sizing.add_bands(opt, model, hw, spec, engine, est["choice"] if pick is None else None)
    price = cheapest_offer(rows, accel, min_count=opt["gpus_per_replica"] or 1)
    prices.fill_prices(opt, price)
    if price is None:
        need = opt["gpus_per_replica"] or 1
        clouds = ", ".join(spec.resources.clouds)
        none_text = f"no offer of {accel}" + (f" with ≥ {need} GPUs per instance" if need > 1 else "") + f" in {clouds}"
        opt["price_source"] = none_text
        if opt["feasible"]:  # the SLO is met on this hardware; only the price is unknown
            opt["reason"] = f"{opt['reason']}; unpriced: {none_text}"
    return opt


def plan_capacity(spec, *, offers=None, measured: dict | None = None,
                  model: inference.ServingModel | None = None, fine_tune_usd: float | None = None,
                  fine_tune_source: str | None = None) -> CapacityPlan:
    """Returns the capacity plan of a `CapacitySpec` as a JSON-ready dict (see the module docstring).

    `offers`: a polars frame (or list of dicts) with the columns of `gpuledger.catalog.offers`;
    default: `load_offers` for the spec's clouds, regions and accelerators. `measured`:
    {accelerator: operating point(s)} (see `measured_points`), e.g. what a serving sweep measured;
    it replaces the spec's `measured` for the same accelerator. `model`: a ready `ServingModel`
    (tests; default: the spec's model from the registry). `fine_tune_usd`: the cost of the spec's
    `fine_tune.sweep` read from the warehouse (`gpuledger.serving.capacity_from_sweep.plan_capacity_measured`),
    `fine_tune_source` where it comes from; `fine_tune.usd` in the spec needs neither.
    """
    if getattr(spec, "kind", None) != "capacity":
        raise UserError(f"plan_capacity needs a `kind: capacity` spec (got kind {getattr(spec, 'kind', None)!r})")
    res = spec.resources
    engine, overrides = engine_of(spec)
    if offers is None:
        from gpuledger.catalog.pricing import load_offers

        offers = load_offers(clouds=list(res.clouds), accelerators=list(res.accelerators), regions=res.regions)
    rows = prices.offer_rows(offers)
    clouds = {c.lower() for c in res.clouds}
    rows = [r for r in rows if str(r.get("cloud", "")).lower() in clouds
            and (not res.regions or r.get("region") in res.regions)]
    if model is None:
        model = _load_model(spec)
    points = measured_points(spec, measured)

    t, slo, precision = spec.traffic, spec.slo, spec.precision
    demand = t.qps * t.output_tokens * (1.0 + spec.headroom)
    options = [_plan_one(accel, model, spec, engine, rows, points.get(accel, []))
               for accel in dict.fromkeys(res.accelerators)]
    rates = economy.team_committed()
    for o in options:
        economy.add_to_option(o, spec, rates)
    priced = [o for o in options if o["feasible"] and o["usd_per_month_on_demand"] is not None]
    best = min(priced, key=lambda o: (o["usd_per_month_on_demand"], o["gpus"], o["accelerator"])) if priced else None
    result: CapacityPlan = {
        "spec": {
            "name": spec.name,
            "project": spec.project,
            "owner": spec.owner,
            "model": spec.model,
            "precision": precision,
            "engine": engine.name,
            "engine_version": engine.version,
            "engine_args": overrides,
            "params_total": model.params_total,
            "weights_gib": round(inference.weights_bytes(model, precision) / inference.GIB, 2),
            "kv_bytes_per_token": model.kv_bytes_per_token,
            "qps": t.qps,
            "hourly_qps": list(t.hourly_qps) if t.hourly_qps else None,
            "mean_qps": round(sum(elastic.profile(t)) / len(elastic.profile(t)), 4),
            "autoscale": spec.autoscale.model_dump() if spec.autoscale else None,
            "prompt_tokens": t.prompt_tokens,
            "output_tokens": t.output_tokens,
            "prompt_tokens_mix": pm.describe() if (pm := lengths.mixes(spec)[0]) else None,
            "output_tokens_mix": om.describe() if (om := lengths.mixes(spec)[1]) else None,
            "p95_ttft_ms": slo.p95_ttft_ms,
            "p95_tpot_ms": slo.p95_tpot_ms,
            "headroom": spec.headroom,
            "demand_output_tokens_per_s": round(demand, 1),
            "demand_prompt_tokens_per_s": round(t.qps * t.prompt_tokens * (1.0 + spec.headroom), 1),
            "accelerators": list(res.accelerators),
            "clouds": list(res.clouds),
            "regions": list(res.regions) if res.regions else None,
            "max_gpus_per_replica": res.max_gpus_per_replica,
        },
        "options": options,
        "best": best,
        "best_reason": None if best else _no_best_reason(options),
        "assumptions": assumptions(engine) + elastic.ELASTIC_ASSUMPTIONS,
    }
    ft = spec.fine_tune
    if ft is not None and ft.usd is not None:
        fine_tune_usd, fine_tune_source = ft.usd, "spec fine_tune.usd"
    elif ft is not None and fine_tune_usd is None:
        fine_tune_source = f"sweep {ft.sweep}: not read (planned without the warehouse)"
    result["compare"] = economy.compare(best, spec, fine_tune_usd, fine_tune_source)
    from gpuledger.capacity import mixed, ownership

    result["mixed_fleet"] = mixed.mixed_fleet(options, spec, mixed.spot_regions(rows))
    result["ownership"] = ownership.rent_buy_api(best, spec, result["compare"])
    if pm or om:
        result["assumptions"].insert(0, "request lengths drawn per request (seeded) from the spec's mixes: prompts "
                                     f"{pm.describe() if pm else 'fixed'}, outputs {om.describe() if om else 'fixed ±50%'}; "
                                     "long prompts share steps with the others' decode (chunked prefill), which the "
                                     "TTFT/TPOT percentiles include; fleet sizing uses the means")
    if overrides:
        flags = ", ".join(f"{k} {v}" for k, v in overrides.items())
        result["assumptions"].insert(1, f"engine flags from the spec replace {engine.name}'s defaults: {flags}")
    ignored = sorted(set(points) - set(res.accelerators))
    if ignored:
        result["assumptions"].append(f"measured points for {', '.join(ignored)} ignored: not among resources.accelerators")
    return result


def _no_best_reason(options: list[dict[str, Any]]) -> str:
    lines = [f"{o['accelerator']}: {o['reason']}" for o in options]
    if any(o["feasible"] for o in options):
        return "no feasible accelerator has a price in the spec's clouds; " + " | ".join(lines)
    return "no accelerator meets the targets; " + " | ".join(lines)


def assumptions(engine: inference.Engine | None = None) -> list[str]:
    """Returns the modelling assumptions of every plan, each with its source."""
    e = engine or inference.ENGINES["vllm"]
    return [
        f"engine {e.name} ({e.version}): max sequences {e.max_num_seqs} (GPUs < 70 GiB or A100: "
        f"{e.max_num_seqs_small_gpu}), max batched tokens {e.max_batched_tokens} ({e.max_batched_tokens_small_gpu}), "
        f"chunked prefill {'on' if e.chunked_prefill else 'off'}, CUDA graphs up to batch {e.cuda_graph_max_batch}, "
        f"KV memory fraction {e.kv_memory_fraction:g}, KV {'reserved per request' if e.reserve_full_request else 'on demand with preemption'}; "
        f"source: {e.sources}",
        "one engine step = max(weights / (bandwidth × weight efficiency), 2·P·tokens / (peak × GEMM MFU)) + KV read "
        "/ (bandwidth × KV efficiency) + prompt attention FLOPs / (16-bit peak × attention MFU) + step overhead; "
        "efficiencies per GPU generation (gpuledger.estimate.inference.GENERATIONS) from published vLLM and "
        "TensorRT-LLM measurements (tests/data/serving_*.csv; benchmarks/capacity_accuracy.py)",
        f"every request pays {inference.request_overhead_for(e) * 1e3:g} ms of fixed overhead in its TTFT through the "
        f"{e.endpoint} endpoint (HTTP, chat template, tokenisation, scheduling; chat "
        f"{(e.request_overhead_chat_s if e.request_overhead_chat_s is not None else e.request_overhead_s) * 1e3:g} ms, "
        f"completions {e.request_overhead_s * 1e3:g} ms, offline 0; engine_args.endpoint)",
        f"{e.name} CPU costs as it runs: {e.step_overhead_per_seq_s * 1e6:g} µs per running sequence per step, serial "
        f"with the GPU (scheduler, input preparation, output update), and {e.frontend_s_per_token * 1e6:g} µs of "
        "API-server time per streamed token in its own process, a ceiling of "
        + (f"{1 / e.frontend_s_per_token:,.0f} output tokens/s per replica" if e.frontend_s_per_token else "none")
        + "; GEMM MFU × " + (", ".join(f"{s:g} on {g}" for g, s in e.gemm_mfu_scale_by_generation) or "1")
        + " (gpuledger.estimate.inference.ENGINES, each with its source)",
        "latency under load from a discrete-event simulation of continuous batching (gpuledger.capacity.simulate): "
        f"closed loop at each concurrency, output lengths uniform within ±{operating.OUTPUT_SPREAD:.0%} of the mean, the "
        f"opening burst left out, seed {operating.SEED}; p50/p95/p99 TTFT and TPOT per request",
        "operating point = the concurrency with the most tokens/s per GPU whose p95 TTFT and TPOT meet the SLO "
        "in a closed loop (how serving benchmarks measure); the fleet's latency under Poisson arrivals at "
        "qps / replicas per replica is simulated and shown (load_check), not used for sizing",
        "physical floors of each option's own TP degree (infeasible below them, measured or not): TPOT ≥ weights "
        "/ datasheet bandwidth of the replica's GPUs + at TP > 1 2 all-reduces per layer of at least 2 µs (NVLink) "
        "or 5 µs (PCIe); TTFT ≥ prefill FLOPs (2·P·s + 2·L·d·s²) / dense peak; a prediction below them is lifted",
        "tensor-parallel steps pay 2 all-reduces per layer (~8 µs NVLink, ~25 µs PCIe each) besides the TP "
        "efficiency; engine_args.tensor_parallel pins the degree",
        "weights at the spec's precision (bytes/param: fp32 4, bf16/fp16 2, fp8/int8 1, int4 0.52, nf4 0.5625; "
        "embeddings stay 16 bit in quantised checkpoints); KV cache 16 bit, fp8 with fp8, fp32 with fp32",
        "tensor parallel 1/2/4/8 (up to max_gpus_per_replica) with efficiency NVLink 1/.9/.85/.8, PCIe "
        "1/.8/.7/.6; a replica sits in one instance; the shape needing the fewest GPUs is kept",
        f"GPUs = ceil(qps × output_tokens × (1 + headroom) / tokens/s per GPU) in whole replicas; cost per day "
        f"{HOURS_PER_DAY} h, per month {HOURS_PER_MONTH} h",
        "price per GPU = instance price / GPUs per instance, from the cheapest instance of the accelerator in the "
        "spec's clouds/regions; spot prices flagged spot_suspicious by the catalog are skipped",
        "a measured operating point (spec `measured` or the caller) sizes the fleet when its TTFT and TPOT meet "
        "the SLO (a rate without latencies only when the simulation also meets it); never below the physical floors",
    ]
