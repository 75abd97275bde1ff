"""The markdown renderer of a report `Document`, sized for a Prefect artifact.

Prefect 3.8.8 puts no length check on an artifact's `data` (a JSON column; only metadata values are
cut at 500 characters, `prefect._internal.schemas.validators.validate_max_metadata_length`), but the
UI renders the whole markdown and Prefect Cloud caps request bodies; every markdown report stays
under `MARKDOWN_MAX_CHARS` by cutting long tables with a note, and a final hard cut as a backstop.
Charts are left out (the artifact links to the HTML page, which has them).
"""

from __future__ import annotations

from collections.abc import Sequence

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

MARKDOWN_MAX_CHARS = 40_000
#: rows of a markdown table before it is cut (the CSV has all of them)
MARKDOWN_MAX_ROWS = 40


def md_escape(text: object) -> str:
    """Returns `text` safe inside a markdown table cell: shown as written like the rest of the page
    (`_inline`: no emphasis, links or raw HTML such as `<script>`), pipes escaped, newlines flattened."""
    return _inline("" if text is None else str(text)).replace("|", "\\|")


def md_table(headers: Sequence[str], rows: Sequence[Sequence[object]], *, numeric: Sequence[int] = (),
             max_rows: int = MARKDOWN_MAX_ROWS, more: str = "see the CSV") -> str:
    """Returns a GitHub-style markdown table, cut after `max_rows` rows with a note ('… N more rows; see the CSV')."""
    if not rows:
        return "_nothing to list_\n"
    num_cols = set(numeric)
    lines = ["| " + " | ".join(md_escape(h) for h in headers) + " |",
             "| " + " | ".join("---:" if i in num_cols else "---" for i in range(len(headers))) + " |"]
    for row in rows[:max_rows]:
        lines.append("| " + " | ".join(md_escape(c) for c in row) + " |")
    if len(rows) > max_rows:
        lines.append("")
        lines.append(f"_… {len(rows) - max_rows} more rows; {more}._")
    return "\n".join(lines) + "\n"


def cap_markdown(text: str, limit: int = MARKDOWN_MAX_CHARS) -> str:
    """Returns `text` cut to at most `limit` characters (at a line end, with a note) when longer."""
    if len(text) <= limit:
        return text
    note = ("\n\n_… report cut here to stay within the Prefect artifact size this project allows; the HTML "
            "and CSV files have everything._\n")
    cut = text[: limit - len(note)]
    cut = cut[: cut.rfind("\n")] if "\n" in cut else cut
    return cut + note


def _inline(text: str) -> str:
    """Returns plain text that markdown shows as written (no emphasis, no links, no HTML)."""
    out = text.replace("\\", "\\\\")
    for ch in "*`[]<>":
        out = out.replace(ch, "\\" + ch)
    return out.replace("\r\n", " ").replace("\n", " ").replace("\r", " ")


def _table(t: Table) -> list[str]:
    if not t.rows:
        return [f"_{_inline(t.empty)}_", ""]
    n = t.markdown_columns or len(t.headers)
    more = "see the CSV and the HTML report" if n < len(t.headers) else "see the CSV"
    rows = [list(r)[:n] for r in t.rows]
    return [md_table(list(t.headers)[:n], rows, numeric=[i for i in t.numeric if i < n], more=more)]


def _block(b: Block) -> list[str]:
    if isinstance(b, Cards):
        return [md_table(["", "value", "source"], [[c.label, c.value, c.source] for c in b.items], numeric=[1])]
    if isinstance(b, Table):
        return _table(b)
    if isinstance(b, Figure):
        return []
    if isinstance(b, Note):
        if b.kind in ("info", "warn", "bad"):
            return [f"> {_inline(b.text)}", ""]
        return [f"_{_inline(b.text)}_" if b.kind == "small" else _inline(b.text), ""]
    if isinstance(b, Definitions):
        return [f"- **{_inline(t)}**: {_inline(x)}" for t, x in b.items] + [""]
    if isinstance(b, Bullets):
        return [f"- {_inline(x)}" for x in b.items] + [""]
    if isinstance(b, Columns):
        return [line for x in b.blocks for line in _block(x)]
    if isinstance(b, Section):
        inner = [line for x in b.blocks for line in _block(x)]
        if not inner:
            return []
        return [f"{'###' if b.level >= 3 else '##'} {_inline(b.heading)}", "", *inner]
    raise TypeError(f"not a report block: {type(b).__name__}")


def render_markdown(doc: Document, limit: int = MARKDOWN_MAX_CHARS) -> str:
    """Returns the markdown of `doc`, at most `limit` characters."""
    lines = [f"# {_inline(doc.title)}", ""]
    if doc.subtitle:
        lines += [_inline(doc.subtitle), ""]
    for b in doc.blocks:
        lines += _block(b)
    if doc.footer:
        lines += [f"_{_inline(doc.footer)}_", ""]
    return cap_markdown("\n".join(lines), limit)
