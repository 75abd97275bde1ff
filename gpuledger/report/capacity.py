"""The capacity report: the serving options of a capacity plan compared, the cheapest feasible one,
the latency–throughput curve of each accelerator with its chosen operating point and the SLO, and why
the others fail.

Input is the plain dict of `gpuledger.capacity.plan_capacity(spec)` (`spec`, `options`, `best`,
`best_reason`, `assumptions`); nothing is read from the warehouse and nothing is recomputed here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from gpuledger.report import charts
from gpuledger.report.common import (
    ReportFiles,
    check_name,
    default_root,
    generated_now,
    num,
    usd,
    write_report,
)
from gpuledger.report.document import (
    Bullets,
    Card,
    Cards,
    Definitions,
    Document,
    Figure,
    Note,
    Section,
    Table,
)
from gpuledger.report.html import render_html
from gpuledger.report.markdown import render_markdown


def _replicas(o: dict[str, Any]) -> int | None:
    """Returns the replicas an option is sized with (`replicas_sized`; plans before bands: `replicas`)."""
    r = o.get("replicas_sized")
    if r is None and isinstance(o.get("replicas"), int):
        r = o["replicas"]
    return r

def _name(result: dict[str, Any]) -> str:
    spec = result.get("spec") or {}
    return spec.get("name") or result.get("name") or "capacity"


def _ms(x: Any) -> str:
    return "—" if x is None else f"{float(x):,.0f} ms" if float(x) >= 10 else f"{float(x):.1f} ms"


def _sorted_options(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Returns the options: feasible first by $/month on demand, then the infeasible ones by name."""
    opts = list(result.get("options") or [])
    return sorted(opts, key=lambda o: (not o.get("feasible"),
                                       o.get("usd_per_month_on_demand") if o.get("usd_per_month_on_demand")
                                       is not None else float("inf"), str(o.get("accelerator"))))


def _is_best(o: dict[str, Any], best: dict[str, Any] | None) -> bool:
    return best is not None and o.get("accelerator") == best.get("accelerator") and o.get("gpus") == best.get("gpus")


_HEADERS = ["accelerator", "GPUs", "concurrency", "tokens/s per GPU", "p95 TTFT", "p95 TPOT", "$/h on-demand",
            "$/month on-demand", "$/month spot", "feasible"]

#: One colour per accelerator on the curve chart (red is the SLO line's).
_CURVE_COLOURS = [charts.BLUE, charts.ORANGE, charts.TEAL, charts.MAGENTA, charts.CYAN, charts.GREY]


def _curve_figure(result: dict[str, Any], opts: list[dict[str, Any]]) -> Figure | None:
    """Returns the latency–throughput chart (tokens/s per GPU against p95 TPOT, one line per
    accelerator, the chosen operating point ringed, the TPOT SLO dashed), or None without curves."""
    with_curve = [o for o in opts if o.get("curve")]
    if not with_curve:
        return None
    spec = result.get("spec") or {}
    series, names = [], []
    for i, o in enumerate(with_curve):
        colour = _CURVE_COLOURS[i % len(_CURVE_COLOURS)]
        pts = [(p["tpot_ms_p95"], p["tokens_per_s_per_gpu"]) for p in o["curve"]]
        chosen = None
        opp = o.get("operating_point") or {}
        if o.get("feasible") and opp.get("mode", "").startswith("closed"):
            chosen = next(((p["tpot_ms_p95"], p["tokens_per_s_per_gpu"]) for p in o["curve"]
                           if p["concurrency"] == opp.get("concurrency")), None)
        label = f"{o.get('accelerator')}" + (f" (TP {o['gpus_per_replica']})" if (o.get("gpus_per_replica") or 1) > 1 else "")
        series.append((label, colour, pts, chosen))
        names.append(f"{label} {charts.colour_name(colour)}")
    slo = spec.get("p95_tpot_ms")
    svg = charts.curve_chart(series, title="latency–throughput per accelerator (one replica, simulated)",
                             x_label="p95 TPOT (ms)", y_label="output tokens/s per GPU",
                             vline=(float(slo), f"SLO p95 TPOT {num(slo)} ms") if slo is not None else None)
    engine = spec.get("engine_version") or spec.get("engine") or "the spec's engine"
    caption = (f"Each point is one closed-loop concurrency simulated on {engine} ({', '.join(names)}); the ring "
               "marks the operating point each option chose (most tokens/s per GPU with p95 TTFT and TPOT within "
               "the SLO); points right of the dashed red line miss the TPOT target. The table below has every point.")
    return Figure(svg, caption)


def _operating_rows(opts: list[dict[str, Any]]) -> list[list[Any]]:
    rows = []
    for o in opts:
        opp = o.get("operating_point") or {}
        if not opp:
            continue
        rows.append([o.get("accelerator"), opp.get("mode") or "—", opp.get("concurrency") or "—",
                     opp.get("engine") or "—", opp.get("why") or "—"])
    return rows


def _curve_rows(opts: list[dict[str, Any]]) -> list[list[Any]]:
    rows = []
    for o in opts:
        for p in o.get("curve") or []:
            rows.append([o.get("accelerator"), p["concurrency"], num(p["tokens_per_s_per_gpu"], 4),
                         _ms(p["ttft_ms_p95"]), _ms(p["tpot_ms_p95"]), "yes" if p.get("meets_slo") else "no",
                         _ms(p["ttft_ms_p50"]), _ms(p["ttft_ms_p99"]), _ms(p["tpot_ms_p50"]), _ms(p["tpot_ms_p99"])])
    return rows


def _row(o: dict[str, Any]) -> list[Any]:
    src = o.get("throughput_source") or "estimated"
    per_replica = o.get("gpus_per_replica")
    gpus = f"{o.get('gpus') if o.get('gpus') is not None else '—'}"
    if per_replica and per_replica > 1:
        gpus += f" ({_replicas(o)}×{per_replica})"
    return [o.get("accelerator"), gpus, o.get("max_batch") if o.get("max_batch") is not None else "—",
            f"{num(o.get('tokens_per_s_per_gpu'), 4)} ({src})", _ms(o.get("ttft_ms")), _ms(o.get("tpot_ms")),
            usd(o.get("usd_per_hour_on_demand")), usd(o.get("usd_per_month_on_demand")),
            usd(o.get("usd_per_month_spot")), "yes" if o.get("feasible") else "no"]


def _traffic_text(spec: dict[str, Any]) -> str:
    parts = []
    if spec.get("model"):
        parts.append(f"{spec['model']} at {spec.get('precision') or '—'}")
    if spec.get("qps") is not None:
        parts.append(f"{num(spec['qps'])} requests/s × ({spec.get('prompt_tokens')} prompt + "
                     f"{spec.get('output_tokens')} output tokens)")
    if spec.get("p95_ttft_ms") is not None or spec.get("p95_tpot_ms") is not None:
        parts.append(f"SLO p95 TTFT ≤ {_ms(spec.get('p95_ttft_ms'))}, p95 TPOT ≤ {_ms(spec.get('p95_tpot_ms'))}")
    if spec.get("headroom") is not None:
        parts.append(f"headroom {100 * float(spec['headroom']):.0f}%")
    return "; ".join(parts)


def _cards(result: dict[str, Any]) -> list[Card]:
    best = result.get("best")
    if not best:
        return [Card("cheapest feasible option", "none", result.get("best_reason") or "no option meets the targets")]
    return [
        Card("cheapest feasible", f"{best.get('gpus')} × {best.get('accelerator')}",
               f"{best.get('cloud') or ''} {best.get('instance_type') or ''}".strip() or "catalog offer"),
        Card("on-demand per month", usd(best.get("usd_per_month_on_demand")),
               f"{usd(best.get('usd_per_hour_on_demand'))}/h × 730 h (catalog price; see Price sources)"),
        Card("on-demand per day", usd(best.get("usd_per_day_on_demand")), "24 h"),
        Card("spot per month", usd(best.get("usd_per_month_spot")),
               "spot capacity can be reclaimed; plan fallback" if best.get("usd_per_month_spot") is not None
               else "no spot price for this offer"),
        Card("throughput per GPU", f"{num(best.get('tokens_per_s_per_gpu'), 4)} tok/s",
               f"{best.get('throughput_source') or 'estimated'} output tokens/s within the SLO"),
        Card("latency at that load", f"{_ms(best.get('ttft_ms'))} / {_ms(best.get('tpot_ms'))}",
               f"p95 TTFT / TPOT at concurrency {best.get('max_batch')} ({best.get('throughput_source') or 'estimated'})"),
    ]


def _hours_figure(best: dict[str, Any], spec: dict[str, Any]) -> Figure:
    """Returns the day's (or week's) replicas of the best option, autoscaled, against the fixed fleet."""
    reps = best["replicas_by_hour"]
    tp = best.get("gpus_per_replica") or 1
    pts = [(float(h), float(r)) for h, r in enumerate(reps)] + [(float(len(reps)), float(reps[-1]))]
    period = "day" if len(reps) == 24 else "week"
    svg = charts.step_chart([("autoscaled replicas", charts.BLUE, pts)],
                            title=f"replicas of {best.get('accelerator')} over the {period}",
                            x_label="hour" + (" of the week (Monday 00:00 = 0)" if period == "week" else " of the day"),
                            y_label="replicas", hline=(float(_replicas(best) or 0), "fixed fleet at peak"))
    price_h = (best.get("price_per_gpu_hour_on_demand") or 0) * tp
    caption = (f"Replicas the autoscaler keeps each hour (blue) against the fixed fleet sized for the peak (dashed); "
               f"one replica costs {usd(price_h)}/h on demand, so the {period} costs "
               f"{usd(sum(reps) * price_h)} autoscaled against {usd(len(reps) * (_replicas(best) or 0) * price_h)} "
               f"fixed (scale-down delay excluded; the month below includes it).")
    return Figure(svg, caption)


def _unit_cost_figure(opts: list[dict[str, Any]], compare: dict[str, Any] | None) -> Figure | None:
    items = [(f"{o.get('gpus')} × {o.get('accelerator')}", o["usd_per_1m_output_tokens"]) for o in opts
             if o.get("feasible") and o.get("usd_per_1m_output_tokens") is not None]
    if compare and compare.get("api_usd_per_1m_output_tokens") is not None:
        items.append(("API (input included)", compare["api_usd_per_1m_output_tokens"]))
    if not items:
        return None
    svg = charts.bar_chart(items, title="$ per 1M output tokens at the planned load",
                           value_label="USD per million output tokens (autoscaled month / tokens served)",
                           fmt=lambda v: f"${v:,.3f}", width_in=charts.FULL_IN)
    return Figure(svg, "Self-hosted: the autoscaled month over the month's output tokens at the traffic profile; "
                       "the API: its bill for the same requests (prompt and output tokens) over the same tokens.")


def _economy_section(result: dict[str, Any], opts: list[dict[str, Any]]) -> Section | None:
    """Returns the elastic fleet and the return on serving of the best option, or None without them."""
    best = result.get("best") or {}
    compare = result.get("compare")
    if not best.get("replicas_by_hour"):
        return None
    blocks: list = [_hours_figure(best, result.get("spec") or {})]
    rows = [["fixed fleet at peak (on demand)", usd(best.get("usd_per_month_on_demand")), f"{_replicas(best)} replicas"],
            ["autoscaled (on demand)", usd(best.get("usd_per_month_autoscaled")), (best.get("autoscale") or {}).get("why", "—")]]
    spot = best.get("spot")
    if spot:
        rows.append(["autoscaled, spot share", usd(spot["usd_per_month_with_spot"]),
                     f"{100 * spot['spot_share']:.0f}% of replica-hours on spot; {num(spot['preemptions_per_month'])} "
                     f"preemptions a month ({num(spot['replica_minutes_down_per_month'])} replica-minutes down)"])
    for term, c in (best.get("committed") or {}).items():
        rows.append([f"committed {term} ({num(c['discount_pct'])}% off)", usd(c["usd_per_month"]),
                     f"pays above {100 * c['break_even_utilisation']:.0f}% utilisation: {c['committed_replicas']} "
                     "replica(s) committed, the rest on demand"])
    for env, e in (best.get("environments") or {}).items():
        rows.append([env, usd(e["usd_per_month"]), f"{e['replicas']} replica(s), {e['gpus']} GPU(s), besides production"])
    blocks.append(Table(["fleet", "$/month", "how"], rows, numeric=[1]))
    unit = _unit_cost_figure(opts, compare)
    if unit is not None:
        blocks.append(unit)
    if compare:
        items = [("self-hosted $/month", f"{usd(compare.get('self_usd_per_month'))} ("
                  f"{' + '.join(compare.get('self_includes') or []) or '—'})"),
                 ("API $/month, same traffic", usd(compare.get("api_usd_per_month"))),
                 ("break-even", (compare.get("break_even") or {}).get("why") or "—"),
                 ("fine-tune", f"{usd(compare.get('fine_tune_usd'))} ({compare.get('fine_tune_source') or '—'})"),
                 ("payback", (compare.get("payback") or {}).get("why") or "—")]
        blocks.append(Definitions([(k, v) for k, v in items if v not in ("—", "— (—)")]))
    return Section("Elastic fleet and the return on serving", blocks)


def _band_text(b: dict | None, unit: str, digits: int = 0) -> str:
    if not b:
        return "—"
    return f"{b['p10']:,.{digits}f} / {b['p50']:,.{digits}f} / {b['p90']:,.{digits}f} {unit}"


def _fleets_section(result: dict[str, Any]) -> Section | None:
    """Bands of the best option, the mixed fleet and rent vs buy vs API (round 4), when the plan has them."""
    best = result.get("best") or {}
    items: list[tuple[str, str]] = []
    if best.get("max_tokens_per_s_per_replica"):
        b = best.get("bands") or {}
        r = best.get("replicas") if isinstance(best.get("replicas"), dict) else None
        items += [("max tokens/s per replica P10 / P50 / P90", _band_text(best["max_tokens_per_s_per_replica"], "tok/s")),
                  ("p95 TTFT P10 / P50 / P90", _band_text(best.get("ttft_ms_p95"), "ms")),
                  ("p95 TPOT P10 / P50 / P90", _band_text(best.get("tpot_ms_p95"), "ms", 1)),
                  ("replicas P10 / P50 / P90", f"{r['p10']} / {r['p50']} / {r['p90']} (sized: {best.get('replicas_sized')}, "
                                               f"slo.confidence {b.get('confidence')})" if r else "—"),
                  ("bands rest on", "; ".join(str(b.get(k)) for k in ("throughput", "tpot", "ttft") if b.get(k)) or "—")]
    mix = result.get("mixed_fleet")
    if mix:
        items.append(("mixed fleet", mix["why"]))
        if mix.get("spot"):
            items.append(("mixed fleet with spot", f"{usd(mix['spot']['usd_per_month_with_spot'])}/month; "
                                                   + mix["spot"]["why"]))
    own = result.get("ownership")
    if own:
        items.append(("rent vs buy vs API, $/month", ", ".join(f"{k} {usd(v)}" for k, v in own["usd_per_month"].items()
                                                              if v is not None) + f" ({own['includes']})"))
        if (own.get("buy") or {}).get("payback"):
            items.append(("buying pays back", own["buy"]["payback"]))
        for c in own.get("cheapest") or []:
            items.append((f"cheapest: {c['path']}", f"{c['from_requests_per_month']:,} to {c['to_requests_per_month']:,} "
                                                    "requests a month"))
    if not items:
        return None
    return Section("Bands, mixed fleet, rent vs buy vs API", [Definitions(items)])


def capacity_document(result: dict[str, Any]) -> Document:
    """Returns the report document of a capacity plan."""
    spec = result.get("spec") or {}
    opts = _sorted_options(result)
    best = result.get("best")
    blocks: list = []
    if not opts:
        blocks.append(Note("The plan has no options: no candidate accelerator was given.", "info"))
    elif not best:
        blocks.append(Note("No option meets the targets. " + (result.get("best_reason") or ""), "bad"))
    blocks.append(Cards(_cards(result)))
    feasible = [o for o in opts if o.get("feasible") and o.get("usd_per_month_on_demand") is not None]
    if feasible:
        blocks.append(Figure(charts.bar_chart([(f"{o.get('gpus')} × {o.get('accelerator')}",
                                                o["usd_per_month_on_demand"]) for o in feasible],
                                              title="feasible options, $/month on demand",
                                              value_label="USD per month (730 h), on demand", fmt=usd,
                                              width_in=charts.FULL_IN),
                             "Feasible options only; the shortest bar is the cheapest."))
    blocks.append(Section("Options compared", [Table(_HEADERS, [_row(o) for o in opts],
                                                     numeric=[1, 2, 3, 4, 5, 6, 7, 8],
                                                     highlight=[i for i, o in enumerate(opts) if _is_best(o, best)],
                                                     empty="No options.")]))
    economy = _economy_section(result, opts)
    if economy is not None:
        blocks.append(economy)
    fleets = _fleets_section(result)
    if fleets is not None:
        blocks.append(fleets)
    curve = _curve_figure(result, opts)
    if curve is not None:
        blocks.append(curve)
    op_rows = _operating_rows(opts)
    if op_rows:
        blocks.append(Section("Operating points and why", [Table(["accelerator", "from", "concurrency", "engine",
                                                                   "why"], op_rows, numeric=[2])]))
    curve_rows = _curve_rows(opts)
    if curve_rows:
        blocks.append(Section("Latency–throughput curves", [Table(
            ["accelerator", "concurrency", "tokens/s per GPU", "TTFT p95", "TPOT p95", "meets SLO", "TTFT p50",
             "TTFT p99", "TPOT p50", "TPOT p99"], curve_rows, numeric=[1, 2, 3, 4, 6, 7, 8, 9], max_rows=200,
            markdown_columns=6)]))
    failing = [o for o in opts if not o.get("feasible")]
    blocks.append(Section("Why the others fail", [Definitions([(str(o.get("accelerator")), o.get("reason") or "—")
                                                               for o in failing]) if failing
                                                  else Note("Every option is feasible.", "small")]))
    sources = sorted({o.get("price_source") for o in opts if o.get("price_source")})
    if sources:
        blocks.append(Section("Price sources", [Bullets(sources)]))
    if result.get("assumptions"):
        blocks.append(Section("Assumptions", [Bullets(list(result["assumptions"]))]))
    return Document(f"Serving capacity: {_name(result)}", _traffic_text(spec), blocks,
                    "Made by gpuledger capacity from the capacity plan (estimates and catalog prices above).",
                    generated_now())


def capacity_html(result: dict[str, Any]) -> str:
    """Returns the self-contained HTML page of a capacity plan."""
    return render_html(capacity_document(result))


def capacity_markdown(result: dict[str, Any]) -> str:
    """Returns the markdown version (for a Prefect artifact), capped in size."""
    return render_markdown(capacity_document(result))


_NESTED = ("curve", "operating_point", "load_check", "autoscale", "spot", "replicas_by_hour", "environments",
           "committed")


def capacity_tables(result: dict[str, Any]) -> dict[str, pl.DataFrame]:
    """Returns the tables for CSV export: `options` (one row per option, the operating point and the
    load check flattened into columns) and `curve` (one row per simulated point)."""
    opts = _sorted_options(result)
    flat = []
    for o in opts:
        row = {k: v for k, v in o.items() if k not in _NESTED}
        for key in ("operating_point", "load_check", "autoscale", "spot"):
            for k, v in (o.get(key) or {}).items():
                row[f"{key}_{k}"] = v
        flat.append(row)
    tables = {"options": pl.DataFrame(flat, infer_schema_length=None) if flat else pl.DataFrame()}
    points = [{"accelerator": o.get("accelerator"), "gpus_per_replica": o.get("gpus_per_replica"), **p}
              for o in opts for p in (o.get("curve") or [])]
    if points:
        tables["curve"] = pl.DataFrame(points, infer_schema_length=None)
    hours = [{"accelerator": o.get("accelerator"), "hour": h, "replicas": r, "gpus": r * (o.get("gpus_per_replica") or 1)}
             for o in opts for h, r in enumerate(o.get("replicas_by_hour") or [])]
    if hours:
        tables["replicas-by-hour"] = pl.DataFrame(hours)
    return tables


def write_capacity_report(result: dict[str, Any], out_dir: str | Path | None = None) -> ReportFiles:
    """Writes the capacity report of a `plan_capacity` result; returns its files.

    Default place: `reports/capacity/<name>.html` (+ `.md`, + `<name>-csv/options.csv`).
    """
    name = check_name(_name(result), "capacity spec name")
    folder = Path(out_dir) if out_dir is not None else default_root() / "capacity"
    return write_report(folder, name, capacity_document(result), capacity_tables(result))
