"""The inference part of a sweep ROI report (a `method: inference` sweep): the latency–throughput
curve of each serving configuration with the SLO marked, every measured operating point with its
cost per million output tokens, the best point per accelerator and tensor-parallel size under the
SLO (or the closest), and the cheapest configuration that meets it.

`serving_section(points)` returns a `Section` of the report document; `serving_table(points)` the
same rows as a frame for the report's CSV. The points come from `gpuledger.serving.sweep_points`
(named query `serving_points`: the final metrics gpuledger/trainers/serve_bench.py reported, the hourly price
each run was billed at).
"""

from __future__ import annotations

import polars as pl

from gpuledger.report import charts
from gpuledger.report.common import num, usd
from gpuledger.report.document import Bullets, Card, Cards, Columns, Figure, Note, Section, Table
from gpuledger.serving import OperatingPoint, SweepPoints, best_by_placement, cheapest_meeting

_COLOURS = (charts.BLUE, charts.ORANGE, charts.TEAL, charts.MAGENTA, charts.CYAN, charts.GREY)
HEADERS = ["configuration", "load", "output tok/s", "req/s", "TTFT p50 ms", "TTFT p95 ms", "TTFT p99 ms",
           "TPOT p50 ms", "TPOT p95 ms", "TPOT p99 ms", "$/hour", "$ per M output tokens", "meets SLO"]


def _load_key(p: OperatingPoint) -> tuple:
    return tuple(float(p.params.get(k) or 0) for k in ("concurrency", "request_rate"))


def _per_million(p: OperatingPoint) -> str:
    value = p.usd_per_million_output_tokens
    return "price unknown" if value is None else usd(value)


def _curves(points: list[OperatingPoint]) -> dict[str, list[OperatingPoint]]:
    by_config: dict[str, list[OperatingPoint]] = {}
    for p in sorted(points, key=lambda p: (p.config, _load_key(p), p.run_id)):
        by_config.setdefault(p.config, []).append(p)
    return by_config


def serving_table(sp: SweepPoints) -> pl.DataFrame:
    """Returns one row per measured operating point (numbers, not display strings) for the CSV."""
    slo = sp.slo
    rows = [{"configuration": p.config, "load": p.load, "run_id": p.run_id, "trial_id": p.trial_id,
             "accelerator": p.accelerator, "gpus": p.gpus, "output_tokens_per_s": p.output_tokens_per_s,
             "requests_per_s": p.requests_per_s, "ttft_ms_p50": p.ttft_ms_p50, "ttft_ms_p95": p.ttft_ms_p95,
             "ttft_ms_p99": p.ttft_ms_p99, "tpot_ms_p50": p.tpot_ms_p50, "tpot_ms_p95": p.tpot_ms_p95,
             "tpot_ms_p99": p.tpot_ms_p99, "usd_per_hour": p.usd_per_hour,
             "usd_per_million_output_tokens": p.usd_per_million_output_tokens,
             "meets_slo": None if slo is None else p.meets(*slo)}
            for ps in _curves(sp.points).values() for p in ps]
    return pl.DataFrame(rows, infer_schema_length=None)


def serving_section(sp: SweepPoints) -> Section:
    """Returns the report section of an inference sweep."""
    slo = sp.slo
    if not sp.points:
        return Section("Serving: latency against throughput", [
            Note("No benchmark run has succeeded yet, so there is no measured operating point.", "info")])
    curves = _curves(sp.points)
    colours = {cfg: _COLOURS[i % len(_COLOURS)] for i, cfg in enumerate(curves)}
    chosen: dict[str, OperatingPoint] = {}
    if slo is not None:
        for cfg, ps in curves.items():
            ok = [p for p in ps if p.meets(*slo)]
            if ok:
                chosen[cfg] = max(ok, key=lambda p: (p.output_tokens_per_s, p.run_id))

    def figure(metric: str, what: str, limit: float | None, caption: str) -> Figure:
        series = [(cfg, colours[cfg], [(getattr(p, metric), p.output_tokens_per_s) for p in ps],
                   (getattr(chosen[cfg], metric), chosen[cfg].output_tokens_per_s) if cfg in chosen else None)
                  for cfg, ps in curves.items()]
        svg = charts.curve_chart(series, title=f"output tokens/s against p95 {what}", x_label=f"p95 {what} (ms)",
                                 y_label="output tokens/s", width_in=charts.HALF_IN,
                                 vline=(limit, f"SLO p95 {what} {limit:g} ms") if limit else None)
        return Figure(svg, caption)

    tpot_fig = figure("tpot_ms_p95", "TPOT", slo[1] if slo else None,
                      "Each line is one configuration measured at rising load; the ringed point is its highest "
                      "throughput within the SLO (dashed).")
    ttft_fig = figure("ttft_ms_p95", "TTFT", slo[0] if slo else None,
                      "Queueing shows here first: past the batch the engine runs, TTFT grows while throughput stays.")
    blocks: list = []
    cards: list[Card] = []
    bullets: list[str] = []
    if slo is None:
        blocks.append(Note("The spec sets no serve.slo, so no point is marked as meeting or missing one.", "info"))
    else:
        cheapest = cheapest_meeting(sp.points, *slo)
        if cheapest is not None:
            cards.append(Card("cheapest configuration meeting the SLO", f"{cheapest.config} at {cheapest.load}",
                              f"{_per_million(cheapest)} per million output tokens, {num(cheapest.output_tokens_per_s)} "
                              "tokens/s"))
        else:
            blocks.append(Note(f"No measured point with a known price meets p95 TTFT ≤ {slo[0]:g} ms and "
                               f"TPOT ≤ {slo[1]:g} ms.", "warn"))
        for choice in best_by_placement(sp.points, *slo):
            where = f"{choice.accelerator}×{choice.gpus}" if choice.gpus else choice.accelerator
            p = choice.point
            bullets.append(f"{where}: {'best' if choice.meets_slo else 'closest'} point {p.load or p.config}: "
                           f"{num(p.output_tokens_per_s)} output tokens/s, p95 TTFT {num(p.ttft_ms_p95)} ms, "
                           f"p95 TPOT {num(p.tpot_ms_p95)} ms, {_per_million(p)} per M tokens — {choice.why}.")
    best = max(sp.points, key=lambda p: (p.output_tokens_per_s, p.run_id))
    cards.append(Card("highest throughput measured", f"{num(best.output_tokens_per_s)} output tokens/s",
                      f"{best.config} at {best.load}"))
    if cards:
        blocks.append(Cards(cards))
    blocks.append(Columns([tpot_fig, ttft_fig]))
    if bullets:
        blocks.append(Bullets(bullets))
    ordered = [p for ps in curves.values() for p in ps]
    rows = [[p.config, p.load, num(p.output_tokens_per_s), num(p.requests_per_s), num(p.ttft_ms_p50),
             num(p.ttft_ms_p95), num(p.ttft_ms_p99), num(p.tpot_ms_p50), num(p.tpot_ms_p95), num(p.tpot_ms_p99),
             "unknown" if p.usd_per_hour is None else usd(p.usd_per_hour), _per_million(p),
             "—" if slo is None else ("yes" if p.meets(*slo) else "no")]
            for p in ordered]
    highlight = [i for i, p in enumerate(ordered) if slo and p.meets(*slo)]
    blocks.append(Table(HEADERS, rows, numeric=list(range(2, 12)), highlight=highlight, markdown_columns=10))
    blocks.append(Note(f"Operating points {sp.label}: final metrics of each succeeded benchmark run "
                       "(gpuledger/trainers/serve_bench.py; TTFT and TPOT percentiles over its requests, measured by the client). "
                       "$ per million output tokens = the run's billed hourly price ÷ (output tokens/s × 3600) × 10⁶.",
                       "small"))
    return Section("Serving: latency against throughput", blocks)


__all__ = ["serving_section", "serving_table"]
