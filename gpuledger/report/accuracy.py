"""The estimator's accuracy as a page in the reports' style, and as terminal text, from
`gpuledger.estimate.accuracy.accuracy(...)` (error per method, framework and GPU for memory and
time, public measurements and the user's own runs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from gpuledger.report.common import ReportFiles, generated_now, pct, write_report
from gpuledger.report.document import Card, Cards, Document, Note, Section, Table

QUANTITY_WORDS = {"memory": "Memory", "time": "Training time"}
ORIGIN_WORDS = {"public": "public measurements (shipped with gpuledger)", "warehouse": "your runs (warehouse)"}
SOURCES = ("public memory: gpuledger/estimate/data/memory_public.csv (peak rows at their level); public time: "
           "gpuledger/estimate/data/training_throughput.csv (held out: each source predicted with the stack "
           "efficiencies fitted on the others); your runs: named query estimate_runs (planned vs measured "
           "device memory and wall-clock of every succeeded run)")


def _pct(fraction: float | None, signed: bool = False) -> str:
    """A fraction (0.123) as a percentage ('12.3%'; `pct` takes percentages)."""
    return pct(None if fraction is None else 100 * fraction, signed)


def _line(s: dict[str, Any]) -> list[str]:
    if not s["cases"]:
        return [str(0), "-", "-", "-"]
    return [str(s["cases"]), _pct(s["median_abs_error"]), _pct(s["mean_error"], signed=True), _pct(s["within_band"])]


def _group_rows(part: dict[str, Any]) -> list[list[str]]:
    rows = [["all", "", *_line(part["overall"])]]
    for group in ("method", "framework", "gpu"):
        for value, s in part[f"by_{group}"].items():
            rows.append([group, value, *_line(s)])
    return rows


def _headers(band: float) -> list[str]:
    return ["by", "value", "cases", "median |error|", "mean error", f"within ±{band:.0%}"]


def accuracy_document(acc: dict[str, Any]) -> Document:
    """Returns the accuracy page: headline cards, then per quantity and origin the error by method,
    framework and GPU, then every comparison."""
    cards, sections = [], []
    for quantity, band in acc["bands"].items():
        for origin, part in acc["summary"][quantity].items():
            o = part["overall"]
            value = (f"{_pct(o['median_abs_error'])} median |error|, {_pct(o['within_band'])} within ±{band:.0%}"
                     if o["cases"] else "no cases")
            cards.append(Card(f"{QUANTITY_WORDS[quantity]}, {origin}", value, f"{o['cases']} cases"))
            empty = ("No run of yours has both an estimate and a measurement yet: run a sweep, then look again."
                     if origin == "warehouse" else "No public rows.")
            sections.append(Section(f"{QUANTITY_WORDS[quantity]}: {ORIGIN_WORDS[origin]}", [
                Table(_headers(band), _group_rows(part) if o["cases"] else [], numeric=(2, 3, 4, 5), empty=empty)],
                level=3))
    rows = acc["rows"]
    every = Table(["quantity", "origin", "case", "method", "framework", "GPU", "estimated", "measured", "error", "detail"],
                  [[r["quantity"], r["origin"], r["id"], r["method"], r["framework"], r["gpu"], f"{r['estimated']:,.3f}",
                    f"{r['measured']:,.3f}", _pct(r["error"], signed=True), r["detail"]] for r in rows],
                  numeric=(6, 7, 8), max_rows=300)
    blocks = [Cards(cards), Note("Error = (estimate − measured) / measured. Memory in GiB; public time in seconds per "
                                 "1M tokens, your runs' time in seconds of wall-clock.", "small"),
              Section("Error by method, framework and GPU", sections),
              Section("Every comparison", [every])]
    return Document("Estimator accuracy", f"{len(rows)} comparisons; {acc['runs_read']} of your runs read",
                    blocks, footer=SOURCES, generated_at=generated_now())


def accuracy_text(acc: dict[str, Any]) -> str:
    """Returns the terminal text: per quantity and origin, the error by method, framework and GPU."""
    out = []
    for quantity, band in acc["bands"].items():
        for origin, part in acc["summary"][quantity].items():
            out.append(f"{QUANTITY_WORDS[quantity]} — {ORIGIN_WORDS[origin]}")
            if not part["overall"]["cases"]:
                out.append("  no cases" + (" (no run of yours with an estimate and a measurement)" if origin == "warehouse" else ""))
                out.append("")
                continue
            head = _headers(band)
            out.append(f"  {head[0]:10} {head[1]:22} {head[2]:>5} {head[3]:>14} {head[4]:>10} {head[5]:>11}")
            for r in _group_rows(part):
                out.append(f"  {r[0]:10} {r[1][:22]:22} {r[2]:>5} {r[3]:>14} {r[4]:>10} {r[5]:>11}")
            out.append("")
    if acc.get("cells"):
        out.append("Per cell of the estimate bands (framework, method, quantization, GPU count, GPU family; public "
                   "rows out of source + your runs): what each figure's P10 / P50 / P90 rest on (docs/accuracy.md)")
        out.append(f"  {'quantity':8} {'cell':42} {'rows':>4} {'yours':>5} {'med |err|':>9} {'P10':>6} {'P50':>6} {'P90':>6}")
        for c in acc["cells"]:
            b = c["band"]
            out.append(f"  {c['quantity']:8} {c['cell'][:42]:42} {c['rows']:4d} {c['runs']:5d} {c['median_abs_error']:9.1%} "
                       f"{b['p10']:6.2f} {b['p50']:6.2f} {b['p90']:6.2f}")
        out.append("")
    out.append(f"sources: {SOURCES}")
    return "\n".join(out)


def write_accuracy_report(acc: dict[str, Any], out_dir: str | Path) -> ReportFiles:
    """Writes accuracy.html, accuracy.md and accuracy-csv/rows.csv under `out_dir`."""
    rows = pl.DataFrame(acc["rows"]) if acc["rows"] else pl.DataFrame()
    return write_report(Path(out_dir), "accuracy", accuracy_document(acc), {"rows": rows} if acc["rows"] else {})
