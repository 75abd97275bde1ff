"""Query results as text a person can read in a terminal: a table when the columns fit the width,
else one block per row with one `column | value` line each (vertical, like psql's `\\x`), long values
wrapped. Plain text (no colour codes), deterministic for the same rows and width."""

from __future__ import annotations

import json
import math
import textwrap
from datetime import date, datetime
from typing import Any

#: a table cell longer than this is cut (with …) in table mode; vertical mode shows it whole
MAX_CELL = 40


def cell(value: Any) -> str:
    """Returns the text of one value: NULL, numbers as written back exactly, dates ISO, lists/dicts JSON."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        text = repr(value)
        return text if len(text) <= 14 else f"{value:.10g}"
    if isinstance(value, datetime):
        return value.isoformat(sep=" ", timespec="seconds")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, dict | list | tuple):
        return json.dumps(value, separators=(",", ":"), default=str)
    return str(value).replace("\r", "\\r").replace("\t", "\\t")


def _cut(text: str, n: int) -> str:
    text = text.replace("\n", "\\n")
    return text if len(text) <= n else text[: n - 1] + "…"


def render(columns: list[str], rows: list[tuple | list], width: int = 120) -> str:
    """Returns `rows` as a table if it fits `width` characters, else vertically."""
    texts = [[cell(v) for v in row] for row in rows]
    widths = [min(MAX_CELL, max([len(c)] + [len(_cut(r[i], MAX_CELL)) for r in texts])) for i, c in enumerate(columns)]
    if sum(widths) + 3 * (len(columns) - 1) <= width:
        line = lambda parts: " | ".join(p.ljust(w) for p, w in zip(parts, widths, strict=True)).rstrip()  # noqa: E731
        out = [line(columns), "-+-".join("-" * w for w in widths)]
        out += [line([_cut(t, MAX_CELL) for t in r]) for r in texts]
        return "\n".join(out)
    name_w = min(max(len(c) for c in columns), 32)
    value_w = max(20, width - name_w - 3)
    out = []
    for n, r in enumerate(texts, 1):
        out.append(f"-[ row {n} ]" + "-" * max(0, min(width, name_w + 3 + value_w) - len(f"-[ row {n} ]")))
        for name, text in zip(columns, r, strict=True):
            pieces = []
            for part in text.split("\n"):
                pieces += textwrap.wrap(part, value_w, break_long_words=True, break_on_hyphens=False,
                                        drop_whitespace=False) or [""]
            for k, piece in enumerate(pieces):
                label = _cut(name, name_w).ljust(name_w) if k == 0 else " " * name_w
                out.append(f"{label} | {piece}".rstrip())
    return "\n".join(out)
