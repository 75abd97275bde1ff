"""The HTML renderer of a report `Document`: one self-contained page, inline CSS, inline SVG, no
script, printable.

Nothing here refers to a URL: no fonts, no stylesheets, no images from elsewhere, so the page opens
offline and makes no network request (the browser test checks this). Every text of the document is
escaped here; only a `Figure`'s SVG (drawn by `gpuledger.report.charts`) is inserted as markup.
"""

from __future__ import annotations

from html import escape

from gpuledger.report.document import (
    Block,
    Bullets,
    Cards,
    Columns,
    Definitions,
    Document,
    Figure,
    Note,
    Section,
    Table,
)

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
.grid2 { display: grid; grid-template-columns: 1fr 1fr; gap: 16px; align-items: start; }
.grid2 > div { min-width: 0; }
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


def _cards(block: Cards) -> str:
    out = ['<div class="cards">']
    for c in block.items:
        out.append(f'<div class="card"><div class="label">{escape(c.label)}</div>'
                   f'<div class="value">{escape(c.value)}</div>'
                   f'<div class="source">{escape(c.source)}</div></div>')
    out.append("</div>")
    return "\n".join(out)


def _table(t: Table) -> str:
    if not t.rows:
        return f'<p class="note">{escape(t.empty)}</p>'
    num = set(t.numeric)
    hl = set(t.highlight)
    shown = t.rows if t.max_rows is None else t.rows[:t.max_rows]
    out = ["<table><thead><tr>"]
    out += [("<th class=\"num\">" if i in num else "<th>") + f"{escape(h)}</th>" for i, h in enumerate(t.headers)]
    out.append("</tr></thead><tbody>")
    for r_i, row in enumerate(shown):
        out.append('<tr class="hl">' if r_i in hl else "<tr>")
        for i, cell in enumerate(row):
            cls = []
            if i in num:
                cls.append("num")
            text = "" if cell is None else str(cell)
            if str(t.headers[i]).lower() == "status":
                cls.append(f"status-{text}")
            attr = f' class="{escape(" ".join(cls))}"' if cls else ""
            out.append(f"<td{attr}>{escape(text)}</td>")
        out.append("</tr>")
    out.append("</tbody></table>")
    if t.max_rows is not None and len(t.rows) > t.max_rows:
        out.append(f'<p class="note">{len(t.rows) - t.max_rows} more rows in the CSV.</p>')
    return "\n".join(out)


_BANNER = {"info": "banner info", "warn": "banner", "bad": "banner bad"}


def _note(n: Note) -> str:
    if n.kind in _BANNER:
        return f'<div class="{_BANNER[n.kind]}">{escape(n.text)}</div>'
    return f'<p class="note">{escape(n.text)}</p>' if n.kind == "small" else f"<p>{escape(n.text)}</p>"


def _block(b: Block) -> str:
    if isinstance(b, Cards):
        return _cards(b)
    if isinstance(b, Table):
        return _table(b)
    if isinstance(b, Figure):
        return f"<figure>{b.svg}<figcaption>{escape(b.caption)}</figcaption></figure>"
    if isinstance(b, Note):
        return _note(b)
    if isinstance(b, Definitions):
        return '<dl class="defs">' + "".join(f"<dt>{escape(t)}</dt><dd>{escape(x)}</dd>" for t, x in b.items) + "</dl>"
    if isinstance(b, Bullets):
        return "<ul>" + "".join(f"<li>{escape(x)}</li>" for x in b.items) + "</ul>"
    if isinstance(b, Columns):
        return '<div class="grid2">' + "".join(f"<div>{_block(x)}</div>" for x in b.blocks) + "</div>"
    if isinstance(b, Section):
        level = 3 if b.level >= 3 else 2
        return "\n".join([f"<section><h{level}>{escape(b.heading)}</h{level}>",
                          *(_block(x) for x in b.blocks), "</section>"])
    raise TypeError(f"not a report block: {type(b).__name__}")


def _footer(doc: Document) -> str:
    parts = [p for p in (f"Generated {doc.generated_at}." if doc.generated_at else "", doc.footer) if p]
    return f"<footer>{escape(' '.join(parts))}</footer>" if parts else ""


def render_html(doc: Document) -> str:
    """Returns the whole HTML page of `doc` (UTF-8 text, self-contained)."""
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(doc.title)}</title>",
        f"<style>{CSS}</style>",
        "</head><body><main>",
        f"<h1>{escape(doc.title)}</h1>",
        f'<p class="sub">{escape(doc.subtitle)}</p>' if doc.subtitle else "",
        *(_block(b) for b in doc.blocks),
        _footer(doc),
        "</main></body></html>",
        "",
    ])
