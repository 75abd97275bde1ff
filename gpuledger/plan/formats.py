"""Numbers for people: the one place a plan's seconds and dollars become text (`fmt_duration`,
`fmt_usd`). A leaf module, so that every step of the planner can phrase its notes with it."""

from __future__ import annotations

import math


def fmt_usd(x: float) -> str:
    """Returns dollars with cents and thousands separators ($1,234.56); below a cent, four decimals
    ($0.0042), so that a local trial priced at a reference rate does not read as free."""
    if x != 0 and abs(x) < 0.01:
        return f"{'-' if x < 0 else ''}${abs(x):.4f}"
    return f"{'-' if x < 0 else ''}${abs(x):,.2f}"


def fmt_duration(seconds: float | None) -> str:
    """Returns a duration for people: '42.0 s' under 2 min, '12.5 min' under 2 h, else '3.25 h'."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.2f} h"


def fmt_band(p: dict | None, fmt=fmt_duration, says: str = "") -> str:
    """Returns a figure with its band: '2.3 h (P10 1.6 h - P90 4.1 h; 14 public runs of this kind,
    median error 21%)'; `p`: {p10, p50, p90}; `fmt`: fmt_duration or fmt_usd."""
    if not p or p.get("p50") is None:
        return "-"
    tail = f"; {says}" if says else ""
    return f"{fmt(p['p50'])} (P10 {fmt(p['p10'])} - P90 {fmt(p['p90'])}{tail})"
