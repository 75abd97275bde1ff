"""The capacity report: the serving options of a capacity plan compared, the cheapest feasible one,
and why the others fail.

Input is the plain dict of `gpuledger.capacity.plan_capacity(spec)` (`spec`, `options`, `best`,
`best_reason`, `assumptions`); nothing is read from the warehouse and nothing is recomputed here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from gpuledger.report import charts
from gpuledger.report.common import (
    DEFAULT_ROOT,
    ReportFiles,
    check_name,
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


_HEADERS = ["accelerator", "GPUs", "max batch", "tokens/s per GPU", "TTFT", "TPOT", "$/h on-demand",
            "$/month on-demand", "$/month spot", "feasible"]


def _row(o: dict[str, Any]) -> list[Any]:
    src = o.get("throughput_source") or "estimated"
    per_replica = o.get("gpus_per_replica")
    gpus = f"{o.get('gpus') if o.get('gpus') is not None else '—'}"
    if per_replica and per_replica > 1:
        gpus += f" ({o.get('replicas')}×{per_replica})"
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
               "TTFT / TPOT (estimated p95)"),
    ]


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


def capacity_tables(result: dict[str, Any]) -> dict[str, pl.DataFrame]:
    """Returns the options table for CSV export."""
    opts = _sorted_options(result)
    return {"options": pl.DataFrame(opts, infer_schema_length=None) if opts else pl.DataFrame()}


def write_capacity_report(result: dict[str, Any], out_dir: str | Path | None = None) -> ReportFiles:
    """Writes the capacity report of a `plan_capacity` result; returns its files.

    Default place: `reports/capacity/<name>.html` (+ `.md`, + `<name>-csv/options.csv`).
    """
    name = check_name(_name(result), "capacity spec name")
    folder = Path(out_dir) if out_dir is not None else DEFAULT_ROOT / "capacity"
    return write_report(folder, name, capacity_document(result), capacity_tables(result))
