"""Inference capacity planning: traffic × tokens × latency targets → GPUs per accelerator → $/month.

`plan_capacity(spec, offers=None, measured=None)` returns one JSON-ready dict:

- `options`: one per candidate accelerator, each with the replica shape (tensor-parallel GPUs per
  replica), the batch chosen within the SLO, TTFT/TPOT at that batch, the sustainable output
  tokens/s per GPU (estimated, or measured when a rate is known), the GPUs the traffic needs, and
  what they cost per hour, day (24 h) and month (730 h) on demand and on spot, from the cheapest
  offer of that accelerator in the spec's clouds/regions; `feasible` and a `reason` with numbers;
- `best`: the cheapest feasible option by on-demand month (or null, with `best_reason`);
- `spec`: a summary of what was planned; `assumptions`: every modelling choice with its source.

Fleet sizing: GPUs = ceil(qps × output_tokens × (1 + headroom) / tokens_per_s_per_gpu), rounded
up to whole replicas. The estimated rate already charges every output token its share of prefill
(see `gpuledger.estimate.inference.serving_point`), so the prefill load is checked on the same GPU
time. A measured rate is output tokens/s one GPU sustained under the real mix, prefill included: it
sizes the fleet on its own.

Pure: reads the model registry and the price catalog, writes nothing.
"""

from __future__ import annotations

import math
from typing import Any

from gpuledger.errors import UserError
from gpuledger.estimate import inference as inf

HOURS_PER_DAY = 24
#: 730 h = 8,760 h a year / 12: the month cloud providers bill by (AWS, GCP pricing pages).
HOURS_PER_MONTH = 730

OPTION_KEYS = (
    "accelerator",
    "precision",
    "gpus",
    "gpus_per_replica",
    "replicas",
    "max_batch",
    "tokens_per_s_per_gpu",
    "throughput_source",
    "ttft_ms",
    "tpot_ms",
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
)


# --------------------------------------------------------------------------------------------
# Money and fleet arithmetic


def fleet_cost(gpus: int, usd_per_gpu_hour: float) -> dict[str, float]:
    """Returns `usd_per_hour`, `usd_per_day` (24 h) and `usd_per_month` (730 h) of `gpus` GPUs at a
    per-GPU hourly price, rounded to cents. 10 GPUs at $1.99/h → 19.90, 477.60, 14,527.00."""
    hourly = gpus * usd_per_gpu_hour
    return {
        "usd_per_hour": round(hourly, 2),
        "usd_per_day": round(hourly * HOURS_PER_DAY, 2),
        "usd_per_month": round(hourly * HOURS_PER_MONTH, 2),
    }


def gpus_needed(qps: float, output_tokens: int, headroom: float, tokens_per_s_per_gpu: float,
                gpus_per_replica: int = 1) -> tuple[int, int]:
    """Returns (GPUs, replicas): ceil(qps × output_tokens × (1 + headroom) / rate), in whole replicas."""
    demand = qps * output_tokens * (1.0 + headroom)
    gpus = math.ceil(demand / tokens_per_s_per_gpu - 1e-9)  # 1e-9: 150.0000000001 is 150
    replicas = max(1, math.ceil(gpus / gpus_per_replica))
    return replicas * gpus_per_replica, replicas


# --------------------------------------------------------------------------------------------
# Prices


def _offer_rows(offers: Any) -> list[dict[str, Any]]:
    if offers is None:
        return []
    if hasattr(offers, "to_dicts"):  # polars
        return offers.to_dicts()
    return [dict(r) for r in offers]


def cheapest_offer(rows: list[dict[str, Any]], accelerator: str, min_count: int = 1) -> dict[str, Any] | None:
    """Returns on-demand and spot per-GPU prices of an accelerator from its cheapest offers, or None.

    A replica of `min_count` GPUs must sit in one instance (tensor parallelism needs the GPUs of one
    host), so only instances with at least that many GPUs count. Price per GPU = instance price /
    accelerator_count. Spot comes from the cheapest offer whose spot price is present and not
    flagged `spot_suspicious` (the catalog's artefacts: exactly 10% of on-demand, ≥ on-demand,
    below 8%); suspicious ones are skipped and counted.
    """
    mine = [r for r in rows if r.get("accelerator") == accelerator and int(r.get("accelerator_count") or 0) >= min_count
            and r.get("usd_per_hour_on_demand") is not None]
    if not mine:
        return None

    def per_gpu(r: dict[str, Any], col: str) -> float:
        return float(r[col]) / int(r["accelerator_count"])

    def key(r: dict[str, Any], col: str) -> tuple:
        # round so that $21.5332/4 and $5.3833/1 tie, and the smaller instance wins the tie
        return (round(per_gpu(r, col), 4), int(r["accelerator_count"]), r["cloud"], r["region"], r["instance_type"])

    od = min(mine, key=lambda r: key(r, "usd_per_hour_on_demand"))
    with_spot = [r for r in mine if r.get("usd_per_hour_spot") is not None]
    trusted = [r for r in with_spot if not r.get("spot_suspicious")]
    spot = min(trusted, key=lambda r: key(r, "usd_per_hour_spot")) if trusted else None
    return {
        "on_demand": od,
        "price_per_gpu_hour_on_demand": per_gpu(od, "usd_per_hour_on_demand"),
        "spot": spot,
        "price_per_gpu_hour_spot": per_gpu(spot, "usd_per_hour_spot") if spot else None,
        "spot_skipped": len(with_spot) - len(trusted),
    }


def _describe_offer(r: dict[str, Any], col: str) -> str:
    n = int(r["accelerator_count"])
    return (f"{r['cloud']} {r['instance_type']} ({r['region']}) ${float(r[col]):,.4g}/h for {n} GPU"
            f"{'s' if n > 1 else ''}")


def _price_source(price: dict[str, Any]) -> str:
    od = price["on_demand"]
    text = f"on-demand: {_describe_offer(od, 'usd_per_hour_on_demand')}"
    if price["spot"] is not None:
        text += f"; spot: {_describe_offer(price['spot'], 'usd_per_hour_spot')}"
    else:
        text += "; spot: none trusted"
    if price["spot_skipped"]:
        text += f" ({price['spot_skipped']} spot price(s) flagged suspicious, skipped)"
    src = od.get("source") or "catalog"
    as_of = od.get("as_of") or "?"
    return f"{text}; source: {src}, as of {as_of}"


# --------------------------------------------------------------------------------------------
# Planning


def _fmt(x: float, digits: int = 0) -> str:
    return f"{x:,.{digits}f}"


def _measured_rates(spec, measured: dict | None) -> tuple[dict[str, float], dict[str, str]]:
    """Returns {accelerator: rate} and {accelerator: where it came from}; the caller's rates
    (e.g. from the warehouse) override the spec's for the same accelerator."""
    from gpuledger.catalog import UnknownAccelerator, normalize_accelerator

    rates: dict[str, float] = {}
    origin: dict[str, str] = {}
    for name, m in (spec.measured or {}).items():
        rates[normalize_accelerator(name)] = float(m.tokens_per_s_per_gpu)
        origin[normalize_accelerator(name)] = "spec `measured`"
    for name, m in (measured or {}).items():
        try:
            key = normalize_accelerator(name)
        except UnknownAccelerator as err:
            raise UserError(f"measured rate for an unknown accelerator: {err}") from None
        if isinstance(m, dict):
            value = m.get("tokens_per_s_per_gpu")
        else:
            value = getattr(m, "tokens_per_s_per_gpu", m)
        try:
            value = float(value)
        except (TypeError, ValueError):
            raise UserError(f"measured rate for {key} must be a number of tokens/s per GPU (got {m!r})") from None
        if not value > 0:
            raise UserError(f"measured rate for {key} must be positive (got {value})")
        rates[key] = value
        origin[key] = "measured (caller/warehouse)"
    return rates, origin


def _load_model(spec) -> inf.ServingModel:
    from gpuledger.models import load_config

    try:
        cfg = load_config(spec.model)
    except UserError:
        raise
    except Exception as err:  # a registry/config problem is the user's to fix, not a traceback
        raise UserError(f"cannot load model {spec.model!r}: {err}") from None
    return inf.serving_model_from_config(cfg, spec.precision)


def _empty_option(accelerator: str, precision: str) -> dict[str, Any]:
    opt = dict.fromkeys(OPTION_KEYS)
    opt.update(accelerator=accelerator, precision=precision, throughput_source="estimated", feasible=False)
    return opt


def _estimate_accelerator(model: inf.ServingModel, hw: inf.Hardware, spec, max_tp: int) -> dict[str, Any]:
    """Returns the estimate for one accelerator: the best (fewest GPUs) feasible tensor-parallel
    shape up to `max_tp` GPUs per replica, or why none is, with numbers.
    Keys: point (ServingPoint|None), tp, kv_batch, reason."""
    t = spec.traffic
    precision = spec.precision
    wb = inf.weights_bytes(model, precision)
    fits: list[tuple[int, int]] = []  # (tp, KV-limited batch)
    for tp in inf.TP_DEGREES:
        if tp > max_tp:
            break
        kv_batch = inf.max_batch_kv(model, hw, precision, t.prompt_tokens, t.output_tokens, tp)
        if kv_batch >= 1:
            fits.append((tp, kv_batch))
    if not fits:
        tp_max = max(d for d in inf.TP_DEGREES if d <= max_tp)
        usable = tp_max * (inf.usable_bytes_per_gpu(hw) - inf.ACTIVATION_RESERVE_GIB * inf.GIB)
        kv_req = inf.kv_tokens_per_request(t.prompt_tokens, t.output_tokens) * model.kv_bytes_per_token
        if wb > usable:
            reason = (f"weights need {wb / inf.GIB:,.1f} GiB at {precision} ({model.params_total:,} params × "
                      f"{inf.weight_bytes_per_param(precision):g} B), more than {tp_max} × {hw.name} usable "
                      f"({tp_max} × ({inf.GPU_MEMORY_UTILIZATION:g} × {hw.memory_gib:g} GiB − "
                      f"{inf.ACTIVATION_RESERVE_GIB:g} GiB reserve) = {usable / inf.GIB:,.1f} GiB)")
        else:
            reason = (f"after {wb / inf.GIB:,.1f} GiB of weights, {tp_max} × {hw.name} leave "
                      f"{(usable - wb) / inf.GIB:,.2f} GiB for KV cache; one request of "
                      f"{t.prompt_tokens + t.output_tokens:,} tokens needs {kv_req / inf.GIB:,.2f} GiB")
        return {"point": None, "tp": None, "kv_batch": 0, "reason": reason}

    candidates = []
    for tp, kv_batch in fits:
        limit = min(kv_batch, inf.MAX_NUM_SEQS)
        point = inf.best_batch(model, hw, precision, prompt_tokens=t.prompt_tokens, output_tokens=t.output_tokens,
                               tp=tp, p95_ttft_s=spec.slo.p95_ttft_ms / 1e3, p95_tpot_s=spec.slo.p95_tpot_ms / 1e3,
                               headroom=spec.headroom, batch_limit=limit)
        if point is not None:
            gpus, _ = gpus_needed(t.qps, t.output_tokens, spec.headroom, point.output_tokens_per_s_per_gpu, tp)
            candidates.append((gpus, tp, point, kv_batch))
    if candidates:
        gpus, tp, point, kv_batch = min(candidates, key=lambda c: (c[0], c[1]))
        return {"point": point, "tp": tp, "kv_batch": kv_batch, "reason": None}

    # Nothing meets the SLO even at batch 1: explain with the best single stream we found.
    singles = [inf.serving_point(model, hw, precision, batch=1, prompt_tokens=t.prompt_tokens,
                                 output_tokens=t.output_tokens, tp=tp, headroom=spec.headroom) for tp, _ in fits]
    best_tpot = min(singles, key=lambda p: p.tpot_s)
    best_ttft = min(singles, key=lambda p: p.ttft_p95_s)
    parts = []
    if best_tpot.tpot_s > spec.slo.p95_tpot_ms / 1e3:
        need = 1e3 / spec.slo.p95_tpot_ms
        parts.append(
            f"{t.output_tokens:,} output tokens at p95 TPOT {spec.slo.p95_tpot_ms:g} ms needs {_fmt(need, 1)} tokens/s "
            f"per stream; the best single stream on {hw.name} {precision} (TP {best_tpot.tp}) is about "
            f"{_fmt(1 / best_tpot.tpot_s, 1)} tokens/s (TPOT {best_tpot.tpot_s * 1e3:,.1f} ms: weights "
            f"{wb / best_tpot.tp / inf.GIB:,.1f} GiB per GPU read every step at {hw.bandwidth_gbps:,.0f} GB/s × "
            f"{hw.bandwidth_efficiency:g})")
    if best_ttft.ttft_p95_s > spec.slo.p95_ttft_ms / 1e3:
        parts.append(
            f"a {t.prompt_tokens:,}-token prompt takes {best_ttft.prefill_s * 1e3:,.1f} ms to prefill on {hw.name} "
            f"{precision} (TP {best_ttft.tp}), TTFT p95 {best_ttft.ttft_p95_s * 1e3:,.1f} ms > target "
            f"{spec.slo.p95_ttft_ms:g} ms")
    if not parts:  # each target alone is met at some TP, but never both at once
        parts.append(f"no tensor-parallel degree meets p95 TTFT {spec.slo.p95_ttft_ms:g} ms and p95 TPOT "
                     f"{spec.slo.p95_tpot_ms:g} ms together even at batch 1")
    return {"point": None, "tp": fits[0][0], "kv_batch": fits[0][1], "reason": "; ".join(parts)}


def _batch_limit(model: inf.ServingModel, hw: inf.Hardware, spec, point: inf.ServingPoint, kv_batch: int) -> str:
    """Returns what stops the batch from growing: the KV cache, the scheduler cap, or which SLO."""
    if point.batch >= min(kv_batch, inf.MAX_NUM_SEQS):
        return "KV cache" if kv_batch <= inf.MAX_NUM_SEQS else f"max_num_seqs {inf.MAX_NUM_SEQS}"
    t = spec.traffic
    nxt = inf.serving_point(model, hw, spec.precision, batch=point.batch + 1, prompt_tokens=t.prompt_tokens,
                            output_tokens=t.output_tokens, tp=point.tp, headroom=spec.headroom)
    hit = [f"p95 TPOT {spec.slo.p95_tpot_ms:g} ms"] if nxt.tpot_s > spec.slo.p95_tpot_ms / 1e3 else []
    hit += [f"p95 TTFT {spec.slo.p95_ttft_ms:g} ms"] if nxt.ttft_p95_s > spec.slo.p95_ttft_ms / 1e3 else []
    return " and ".join(hit)


def _fill_prices(opt: dict[str, Any], price: dict[str, Any] | None, clouds: str) -> None:
    if price is None:
        return
    od, spot = price["on_demand"], price["spot"]
    opt["price_per_gpu_hour_on_demand"] = round(price["price_per_gpu_hour_on_demand"], 4)
    opt["cloud"] = od["cloud"]
    opt["instance_type"] = od["instance_type"]
    opt["price_source"] = _price_source(price)
    gpus = opt["gpus"]
    if gpus:
        c = fleet_cost(gpus, price["price_per_gpu_hour_on_demand"])
        opt["usd_per_hour_on_demand"] = c["usd_per_hour"]
        opt["usd_per_day_on_demand"] = c["usd_per_day"]
        opt["usd_per_month_on_demand"] = c["usd_per_month"]
        if spot is not None:
            s = fleet_cost(gpus, price["price_per_gpu_hour_spot"])
            opt["usd_per_hour_spot"] = s["usd_per_hour"]
            opt["usd_per_month_spot"] = s["usd_per_month"]


def plan_capacity(spec, *, offers=None, measured: dict | None = None,
                  model: inf.ServingModel | None = None) -> dict[str, Any]:
    """Returns the capacity plan of a `CapacitySpec` as a JSON-ready dict (see the module docstring).

    `offers`: a polars frame (or list of dicts) with the columns of `gpuledger.catalog.offers`;
    default: `load_offers` for the spec's clouds, regions and accelerators. `measured`:
    {accelerator: tokens_per_s_per_gpu (number, or a dict/object with that key)}, e.g. rates the
    warehouse measured; it overrides the spec's `measured` for the same accelerator. `model`: a
    ready `ServingModel` (tests; default: the spec's model from the registry).
    """
    if getattr(spec, "kind", None) != "capacity":
        raise UserError(f"plan_capacity needs a `kind: capacity` spec (got kind {getattr(spec, 'kind', None)!r})")
    res = spec.resources
    if offers is None:
        from gpuledger.catalog.offers import load_offers

        offers = load_offers(clouds=list(res.clouds), accelerators=list(res.accelerators), regions=res.regions)
    rows = _offer_rows(offers)
    clouds = {c.lower() for c in res.clouds}
    rows = [r for r in rows if str(r.get("cloud", "")).lower() in clouds
            and (not res.regions or r.get("region") in res.regions)]
    if model is None:
        model = _load_model(spec)
    rates, origin = _measured_rates(spec, measured)

    t, slo, precision = spec.traffic, spec.slo, spec.precision
    demand = t.qps * t.output_tokens * (1.0 + spec.headroom)
    cloud_text = ", ".join(res.clouds) + (f" (regions {', '.join(res.regions)})" if res.regions else "")
    options: list[dict[str, Any]] = []
    for accel in dict.fromkeys(res.accelerators):
        opt = _empty_option(accel, precision)
        try:
            hw = inf.hardware_for(accel, precision)
        except ValueError as err:  # no peak rate at this precision in the catalog
            opt["reason"] = str(err)
            options.append(opt)
            continue
        # a replica sits in one instance: no wider than the largest instance on offer
        sizes = [int(r["accelerator_count"]) for r in rows if r.get("accelerator") == accel]
        max_tp = min(res.max_gpus_per_replica, max(sizes)) if sizes else res.max_gpus_per_replica
        est = _estimate_accelerator(model, hw, spec, max_tp)
        point = est["point"]
        tp = est["tp"]
        if point is not None:
            opt.update(ttft_ms=round(point.ttft_p95_s * 1e3, 1), tpot_ms=round(point.tpot_s * 1e3, 2),
                       max_batch=point.batch)
        if accel in rates and tp is not None:
            rate = rates[accel]
            gpus, replicas = gpus_needed(t.qps, t.output_tokens, spec.headroom, rate, tp)
            opt.update(gpus=gpus, gpus_per_replica=tp, replicas=replicas, tokens_per_s_per_gpu=round(rate, 1),
                       throughput_source="measured", feasible=True)
            if point is None:
                opt["max_batch"] = min(est["kv_batch"], inf.MAX_NUM_SEQS)
            note = (f"measured {_fmt(rate, 1)} output tokens/s per GPU ({origin[accel]}, prefill included) sizes the "
                    f"fleet: {_fmt(demand)} tokens/s demand / {_fmt(rate, 1)} = {gpus} GPUs "
                    f"({replicas} × {tp}); TTFT/TPOT are estimates")
            if point is None:
                note += f"; the estimate alone would say infeasible: {est['reason']}"
            opt["reason"] = note
        elif point is not None:
            rate = point.output_tokens_per_s_per_gpu
            gpus, replicas = gpus_needed(t.qps, t.output_tokens, spec.headroom, rate, tp)
            opt.update(gpus=gpus, gpus_per_replica=tp, replicas=replicas, tokens_per_s_per_gpu=round(rate, 1),
                       feasible=True)
            limit = _batch_limit(model, hw, spec, point, est["kv_batch"])
            opt["reason"] = (
                f"batch {point.batch} per replica (KV cache holds {est['kv_batch']}; limited by {limit}): "
                f"TPOT {point.tpot_s * 1e3:,.1f} ms (decode step {point.decode_step_s * 1e3:,.1f} ms + prefill share), "
                f"TTFT p95 {point.ttft_p95_s * 1e3:,.0f} ms (prefill {point.prefill_s * 1e3:,.1f} ms), prefill "
                f"{point.prefill_utilization:.0%} of GPU time; {_fmt(demand)} tokens/s demand / {_fmt(rate, 1)} per GPU "
                f"= {gpus} GPUs ({replicas} × {tp})")
        else:
            opt["reason"] = est["reason"]
            if accel in rates:
                opt["reason"] += f"; a measured rate exists for {accel} but the model does not fit it"
            if tp is not None:
                opt["gpus_per_replica"] = tp
                opt["max_batch"] = min(est["kv_batch"], inf.MAX_NUM_SEQS)

        price = cheapest_offer(rows, accel, min_count=opt["gpus_per_replica"] or 1)
        _fill_prices(opt, price, cloud_text)
        if price is None:
            need = opt["gpus_per_replica"] or 1
            none_text = (f"no offer of {accel}" + (f" with ≥ {need} GPUs per instance" if need > 1 else "")
                         + f" in {cloud_text}")
            if opt["feasible"]:
                opt["feasible"] = False
                opt["reason"] = f"{none_text}; {opt['reason']}"
            else:
                opt["price_source"] = none_text
        options.append(opt)

    feasible = [o for o in options if o["feasible"]]
    best = min(feasible, key=lambda o: (o["usd_per_month_on_demand"], o["gpus"], o["accelerator"])) if feasible else None
    result: dict[str, Any] = {
        "spec": {
            "name": spec.name,
            "project": spec.project,
            "owner": spec.owner,
            "model": spec.model,
            "precision": precision,
            "params_total": model.params_total,
            "weights_gib": round(inf.weights_bytes(model, precision) / inf.GIB, 2),
            "kv_bytes_per_token": model.kv_bytes_per_token,
            "qps": t.qps,
            "prompt_tokens": t.prompt_tokens,
            "output_tokens": t.output_tokens,
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
        "assumptions": assumptions(),
    }
    ignored = sorted(set(rates) - set(res.accelerators))
    if ignored:
        result["assumptions"].append(f"measured rates for {', '.join(ignored)} ignored: not among resources.accelerators")
    return result


def _no_best_reason(options: list[dict[str, Any]]) -> str:
    lines = [f"{o['accelerator']}: {o['reason']}" for o in options]
    return "no accelerator meets the targets; " + " | ".join(lines)


def assumptions() -> list[str]:
    """Returns the modelling assumptions of every plan, each with its source."""
    return [
        f"usable memory = {inf.GPU_MEMORY_UTILIZATION:g} × device memory (vLLM's default gpu_memory_utilization); "
        f"minus weights and {inf.ACTIVATION_RESERVE_GIB:g} GiB activation/CUDA-graph reserve per GPU (vLLM start-up "
        "profile of an 8B model) is the KV cache",
        f"each request holds prompt + output tokens of KV, in {inf.KV_BLOCK_TOKENS}-token pages (vLLM block_size); "
        f"at most {inf.MAX_NUM_SEQS} concurrent sequences per replica (vLLM max_num_seqs)",
        "weights at the spec's precision (bytes/param: fp32 4, bf16/fp16 2, fp8/int8 1, int4 0.52 with group-128 "
        "scales, nf4 0.5625 with bitsandbytes absmax per 64; every parameter at that width, although embeddings and "
        "lm_head often stay 16 bit); KV cache in 16 bit, fp8 with fp8, fp32 with fp32",
        f"decode step = max(weights + batch KV bytes / (bandwidth × {inf.DECODE_BANDWIDTH_EFFICIENCY:g}), "
        f"2·P·batch FLOPs / (peak × {inf.DECODE_MFU:g})) + {inf.DECODE_STEP_OVERHEAD_S * 1e3:g} ms; calibrated on "
        "Llama-2-7B bf16 on A100-80GB at batch 1 ≈ 91 tokens/s vs 70-100 seen in vLLM-class servers and the 151 "
        "tokens/s bandwidth bound of shared/reference/gpu_specs.csv",
        f"prefill = (2·P·s + 2·layers·d_attn·s²) / (peak × MFU {inf.PREFILL_MFU:g}, fp8 {inf.PREFILL_MFU_FP8:g})",
        "TPOT = decode step + (batch / output_tokens) × prefill time: decode and prefill share GPU time "
        "(chunked prefill), so the sized rate already covers the prefill load",
        "TTFT p95 = own prefill + one decode step + p95 wait of an M/M/1 queue of prompts at the planned load "
        "(pessimistic for equal-length prompts)",
        "latency at capacity (all batch slots busy); with headroom the fleet runs below it, so real latency is lower",
        "tensor parallel 1/2/4/8 (up to max_gpus_per_replica) with efficiency NVLink 1/.9/.85/.8, PCIe 1/.8/.7/.6; "
        "per accelerator the shape needing the fewest GPUs is kept; a replica sits in one instance",
        f"GPUs = ceil(qps × output_tokens × (1 + headroom) / tokens/s per GPU) in whole replicas; cost per day "
        f"{HOURS_PER_DAY} h, per month {HOURS_PER_MONTH} h",
        "price per GPU = instance price / GPUs per instance, from the cheapest instance of the accelerator in the "
        "spec's clouds/regions (a fleet not a multiple of the instance size may bill a few more GPUs)",
        "spot prices flagged spot_suspicious by the catalog (exactly 10% of on-demand, ≥ on-demand, < 8%) are "
        "skipped; spot is shown for comparison, serving on spot needs capacity to ride out preemptions",
        "a measured rate (spec `measured` or the warehouse) is output tokens/s per GPU under the real request "
        "mix, prefill included: it replaces the estimate and sizes the fleet alone",
    ]
