"""The document model every report builds: a title, a subtitle, blocks, a footer. Nothing here knows
HTML or markdown; `gpuledger.report.html.render_html(doc)` and
`gpuledger.report.markdown.render_markdown(doc)` turn the same document into a self-contained page and
into the markdown of a Prefect artifact.

Blocks (plain dataclasses, text is plain text, never markup; the renderers escape it):

- `Cards([Card(label, value, source)])` — headline numbers, each with where it came from;
- `Table(headers, rows, ...)` — display strings, numeric columns right-aligned, rows to highlight,
  a cut after `max_rows` (the CSV has everything), what to say when empty;
- `Figure(svg, caption)` — an inline SVG chart (from `gpuledger.report.charts`) and its caption;
  markdown leaves charts out (the artifact links to the HTML page);
- `Note(text, kind)` — a paragraph ('') or a banner ('info', 'warn', 'bad'), or small print ('small');
- `Definitions([(term, text)])`, `Bullets([text])`;
- `Columns([block, block])` — side by side in HTML, one after the other in markdown;
- `Section(heading, [blocks])` — a titled part (`level` 2 or 3).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Union


@dataclass
class Card:
    """A headline number: label, the value with its unit, and where it came from."""

    label: str
    value: str
    source: str = ""


@dataclass
class Cards:
    items: list[Card]


@dataclass
class Table:
    """A table of display strings.

    `numeric`: column indices aligned right; `highlight`: row indices that stand out (HTML);
    `max_rows`: rows shown in HTML before a note (None = all); markdown cuts at its own limit;
    `markdown_columns`: only the first N columns in markdown (wide tables; the HTML and CSV have all);
    `empty`: the sentence shown instead of an empty table.
    """

    headers: Sequence[str]
    rows: Sequence[Sequence[object]]
    numeric: Sequence[int] = ()
    highlight: Sequence[int] = ()
    max_rows: int | None = None
    markdown_columns: int | None = None
    empty: str = "Nothing to list."


class Figure:
    """An inline SVG chart (one `<svg>` element as text) and the caption that explains it.

    `svg` may be given as a function that draws it: it is drawn on first use of `.svg` (the HTML page),
    never for the markdown version, which has no charts (a sweep's Prefect artifact draws nothing)."""

    __slots__ = ("_svg", "caption")

    def __init__(self, svg: str | Callable[[], str], caption: str) -> None:
        self._svg = svg
        self.caption = caption

    @property
    def svg(self) -> str:
        if callable(self._svg):
            self._svg = self._svg()
        return self._svg

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Figure) and (self.svg, self.caption) == (other.svg, other.caption)

    __hash__ = None  # type: ignore[assignment]  # mutable, as the dataclasses beside it

    def __repr__(self) -> str:
        drawn = "not drawn yet" if callable(self._svg) else f"{len(self._svg)} characters"
        return f"Figure(svg=<{drawn}>, caption={self.caption!r})"


@dataclass
class Note:
    """A paragraph. kind: '' plain, 'small' small print, 'info' / 'warn' / 'bad' a banner."""

    text: str
    kind: str = ""


@dataclass
class Definitions:
    items: Sequence[tuple[str, str]]


@dataclass
class Bullets:
    items: Sequence[str]


@dataclass
class Columns:
    """Blocks side by side (two per row in HTML, stacked on narrow screens and in markdown)."""

    blocks: list[Block]


@dataclass
class Section:
    heading: str
    blocks: list[Block] = field(default_factory=list)
    level: int = 2


Block = Union[Cards, Table, Figure, Note, Definitions, Bullets, Columns, Section]  # noqa: UP007


@dataclass
class Document:
    """A whole report: rendered by `render_html` and `render_markdown`."""

    title: str
    subtitle: str = ""
    blocks: list[Block] = field(default_factory=list)
    footer: str = ""  # where the numbers come from (both renderers)
    generated_at: str = ""  # when the page was made (HTML footer only, so the markdown is deterministic)


NOTE_KINDS = ("", "small", "info", "warn", "bad")

__all__ = ["Block", "Bullets", "Card", "Cards", "Columns", "Definitions", "Document", "Figure", "Note",
           "Section", "Table"]
