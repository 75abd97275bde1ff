"""The HTML page of a report: one self-contained file, inline CSS, inline SVG, no script, printable.

Nothing here refers to a URL: no fonts, no stylesheets, no images from elsewhere, so the page opens
offline and makes no network request (the browser test checks this).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

CSS = """
:root { --ink:#1f2328; --muted:#59636e; --line:#d8dee4; --soft:#f6f8fa; --accent:#0072B2; --bad:#D55E00; --good:#009E73; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--ink); background: #fff; }
main { max-width: 1100px; margin: 0 auto; padding: 24px 28px 48px; }
h1 { font-size: 24px; margin: 0 0 4px; }
h2 { font-size: 18px; margin: 28px 0 8px; padding-bottom: 4px; border-bottom: 1px solid var(--line); }
h3 { font-size: 15px; margin: 16px 0 6px; }
.sub { color: var(--muted); margin: 0 0 16px; }
.banner { padding: 10px 14px; border-radius: 6px; margin: 12px 0; background: #fff8e6; border: 1px solid #f0d58a; }
.banner.info { background: #eef6fc; border-color: #b6d6ee; }
.banner.bad { background: #fdeee8; border-color: #f1b9a0; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(220px, 1fr)); gap: 10px; margin: 12px 0; }
.card { border: 1px solid var(--line); border-radius: 8px; padding: 10px 12px; background: var(--soft); break-inside: avoid; }
.card .label { color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .03em; }
.card .value { font-size: 22px; font-weight: 650; margin: 2px 0; font-variant-numeric: tabular-nums; }
.card .source { color: var(--muted); font-size: 12px; }
.grid2 { display: grid; grid-template-columns: 1fr 1fr; gap: 16px; }
@media (max-width: 800px) { .grid2 { grid-template-columns: 1fr; } }
figure { margin: 8px 0 16px; break-inside: avoid; }
figcaption { color: var(--muted); font-size: 12px; margin-top: 2px; }
svg.chart { width: 100%; height: auto; display: block; }
table { border-collapse: collapse; width: 100%; margin: 6px 0 12px; font-size: 12.5px; font-variant-numeric: tabular-nums; }
th, td { border-bottom: 1px solid var(--line); padding: 4px 6px; text-align: left; vertical-align: top; }
th { background: var(--soft); font-weight: 600; }
td.num, th.num { text-align: right; }
td.num { white-space: nowrap; }
tr.hl td { background: #eaf5ee; font-weight: 600; }
code { font: 12px ui-monospace, SFMono-Regular, Menlo, monospace; background: var(--soft); padding: 0 3px; border-radius: 3px; }
.note { color: var(--muted); font-size: 12px; }
.status-succeeded { color: var(--good); } .status-failed, .status-oom { color: var(--bad); }
dl.defs dt { font-weight: 600; margin-top: 6px; } dl.defs dd { margin: 0 0 0 16px; }
footer { margin-top: 32px; color: var(--muted); font-size: 12px; border-top: 1px solid var(--line); padding-top: 8px; }
@media print {
  main { max-width: none; padding: 0; }
  body { font-size: 11pt; }
  h2 { break-after: avoid; }
  table, figure, .card { break-inside: avoid; }
  .cards { grid-template-columns: repeat(3, 1fr); }
}
"""


@dataclass
class Card:
    """A headline number: label, the value with its unit, and where it came from."""

    label: str
    value: str
    source: str = ""


def cards(items: Sequence[Card]) -> str:
    """Returns the grid of headline cards."""
    out = ['<div class="cards">']
    for c in items:
        out.append(f'<div class="card"><div class="label">{escape(c.label)}</div>'
                   f'<div class="value">{escape(c.value)}</div>'
                   f'<div class="source">{escape(c.source)}</div></div>')
    out.append("</div>")
    return "\n".join(out)


def table(headers: Sequence[str], rows: Sequence[Sequence[object]], *, numeric: Sequence[int] = (),
          highlight: Sequence[int] = (), max_rows: int | None = None, empty: str = "nothing to list") -> str:
    """Returns an HTML table; `numeric` column indices are right-aligned; `highlight` row indices stand out.

    Cells are escaped text; more than `max_rows` rows are cut with a note saying how many.
    """
    if not rows:
        return f'<p class="note">{escape(empty)}</p>'
    num = set(numeric)
    hl = set(highlight)
    shown = rows if max_rows is None else rows[:max_rows]
    out = ["<table><thead><tr>"]
    out += [f'<th{" class=num" if i in num else ""}>{escape(h)}</th>' for i, h in enumerate(headers)]
    out.append("</tr></thead><tbody>")
    for r_i, row in enumerate(shown):
        out.append('<tr class="hl">' if r_i in hl else "<tr>")
        for i, cell in enumerate(row):
            cls = []
            if i in num:
                cls.append("num")
            text = "" if cell is None else str(cell)
            if headers[i].lower() == "status":
                cls.append(f"status-{text}")
            attr = f' class="{" ".join(cls)}"' if cls else ""
            out.append(f"<td{attr}>{escape(text)}</td>")
        out.append("</tr>")
    out.append("</tbody></table>")
    if max_rows is not None and len(rows) > max_rows:
        out.append(f'<p class="note">{len(rows) - max_rows} more rows in the CSV.</p>')
    return "\n".join(out)


def figure(svg: str, caption: str) -> str:
    """Returns a chart with its caption."""
    return f"<figure>{svg}<figcaption>{escape(caption)}</figcaption></figure>"


def banner(text: str, kind: str = "") -> str:
    """Returns a highlighted message (kind: '' warning, 'info', 'bad')."""
    return f'<div class="banner {escape(kind)}">{escape(text)}</div>'


def para(text: str, cls: str = "") -> str:
    attr = f' class="{escape(cls)}"' if cls else ""
    return f"<p{attr}>{escape(text)}</p>"


def definitions(items: Sequence[tuple[str, str]]) -> str:
    """Returns a definition list (term, explanation) for the "how to read this" section."""
    out = ['<dl class="defs">']
    for term, text in items:
        out.append(f"<dt>{escape(term)}</dt><dd>{escape(text)}</dd>")
    out.append("</dl>")
    return "\n".join(out)


def page(title: str, subtitle: str, body: Sequence[str], footer: str = "") -> str:
    """Returns the whole HTML document: `body` parts are HTML fragments (already escaped)."""
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title>",
        f"<style>{CSS}</style>",
        "</head><body><main>",
        f"<h1>{escape(title)}</h1>",
        f'<p class="sub">{escape(subtitle)}</p>',
        *body,
        f"<footer>{escape(footer)}</footer>" if footer else "",
        "</main></body></html>",
        "",
    ])


def section(heading: str, *parts: str) -> str:
    """Returns a titled section."""
    return "\n".join([f"<section><h2>{escape(heading)}</h2>", *parts, "</section>"])
