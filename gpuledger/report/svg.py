"""Small hand-written SVG charts for the reports: step/line, scatter (with y = x), bars, Gantt.

No JavaScript and no external resource: each function returns one `<svg>` element as text, sized by
its `viewBox` so it scales with the page and prints. Every chart takes a `title` (read by screen
readers as `<title>`) and axis labels that carry the unit. Pure functions of their arguments.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

#: colours (colour-blind safe, after Okabe & Ito 2008)
BLUE = "#0072B2"
ORANGE = "#E69F00"
GREEN = "#009E73"
RED = "#D55E00"
PURPLE = "#CC79A7"
SKY = "#56B4E9"
GREY = "#8a8f98"
INK = "#1f2328"
GRID = "#e4e6ea"

STATUS_COLOURS = {
    "succeeded": GREEN,
    "failed": RED,
    "oom": PURPLE,
    "preempted": ORANGE,
    "cancelled": GREY,
    "running": SKY,
}

_W, _H = 640, 300
_M_LEFT, _M_RIGHT, _M_TOP, _M_BOTTOM = 64, 16, 14, 44


def _f(v: float) -> str:
    """Returns a compact coordinate (one decimal)."""
    return f"{v:.1f}".rstrip("0").rstrip(".") if math.isfinite(v) else "0"


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """Returns about `n` round tick values covering [lo, hi] (1, 2, 2.5, 5 × 10^k steps)."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return [0.0]
    if hi < lo:
        lo, hi = hi, lo
    if hi == lo:
        hi = lo + (abs(lo) or 1.0)
    raw = (hi - lo) / max(n, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step) * step
    ticks = []
    v = start
    while v <= hi + step * 1e-9:
        ticks.append(round(v, 12))
        v += step
    if ticks[-1] < hi:
        ticks.append(round(v, 12))
    return ticks


def tick_label(v: float) -> str:
    """Returns a short label for an axis tick (1.5k, 0.25, 12)."""
    a = abs(v)
    if a >= 1e6:
        return f"{v / 1e6:g}M"
    if a >= 1e4:
        return f"{v / 1e3:g}k"
    if a >= 100 or v == int(v):
        return f"{v:,.0f}"
    return f"{v:.3g}"


@dataclass
class _Frame:
    """Maps data coordinates to the plotting area of one chart."""

    x0: float
    x1: float
    y0: float
    y1: float
    width: int = _W
    height: int = _H

    def x(self, v: float) -> float:
        span = (self.x1 - self.x0) or 1.0
        return _M_LEFT + (v - self.x0) / span * (self.width - _M_LEFT - _M_RIGHT)

    def y(self, v: float) -> float:
        span = (self.y1 - self.y0) or 1.0
        return self.height - _M_BOTTOM - (v - self.y0) / span * (self.height - _M_TOP - _M_BOTTOM)


def _open(title: str, width: int = _W, height: int = _H) -> list[str]:
    return [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" role="img" '
        f'class="chart" font-family="system-ui, sans-serif" font-size="11">',
        f"<title>{escape(title)}</title>",
    ]


def _axes(fr: _Frame, xticks: list[float], yticks: list[float], x_label: str, y_label: str,
          x_fmt=tick_label, y_fmt=tick_label) -> list[str]:
    out = []
    for t in yticks:
        y = fr.y(t)
        out.append(f'<line x1="{_f(_M_LEFT)}" x2="{_f(fr.width - _M_RIGHT)}" y1="{_f(y)}" y2="{_f(y)}" stroke="{GRID}"/>')
        out.append(f'<text x="{_M_LEFT - 6}" y="{_f(y + 4)}" text-anchor="end" fill="{INK}">{escape(y_fmt(t))}</text>')
    for t in xticks:
        x = fr.x(t)
        out.append(f'<line x1="{_f(x)}" x2="{_f(x)}" y1="{_f(_M_TOP)}" y2="{_f(fr.height - _M_BOTTOM)}" stroke="{GRID}"/>')
        out.append(f'<text x="{_f(x)}" y="{_f(fr.height - _M_BOTTOM + 15)}" text-anchor="middle" fill="{INK}">'
                   f"{escape(x_fmt(t))}</text>")
    bottom = fr.height - _M_BOTTOM
    out.append(f'<line x1="{_M_LEFT}" x2="{fr.width - _M_RIGHT}" y1="{_f(bottom)}" y2="{_f(bottom)}" stroke="{INK}"/>')
    out.append(f'<line x1="{_M_LEFT}" x2="{_M_LEFT}" y1="{_M_TOP}" y2="{_f(bottom)}" stroke="{INK}"/>')
    out.append(f'<text x="{_f((_M_LEFT + fr.width - _M_RIGHT) / 2)}" y="{fr.height - 6}" text-anchor="middle" '
               f'fill="{INK}" font-weight="600">{escape(x_label)}</text>')
    cy = (_M_TOP + bottom) / 2
    out.append(f'<text x="14" y="{_f(cy)}" text-anchor="middle" fill="{INK}" font-weight="600" '
               f'transform="rotate(-90 14 {_f(cy)})">{escape(y_label)}</text>')
    return out


def _range(values: Sequence[float], *, include_zero: bool = False, pad: float = 0.05) -> tuple[float, float]:
    vals = [v for v in values if v is not None and math.isfinite(v)]
    if include_zero:
        vals.append(0.0)
    if not vals:
        return 0.0, 1.0
    lo, hi = min(vals), max(vals)
    if lo == hi:
        return (lo - 1, hi + 1) if lo != 0 else (0.0, 1.0)
    span = hi - lo
    lo2 = lo if (include_zero and lo == 0) else lo - span * pad
    return lo2, hi + span * pad


def empty_chart(title: str, message: str, height: int = 90, width: int = _W) -> str:
    """Returns a small placeholder chart that says why there is nothing to draw."""
    parts = _open(title, width, height)
    parts.append(f'<rect x="1" y="1" width="{width - 2}" height="{height - 2}" fill="#f6f7f9" stroke="{GRID}"/>')
    parts.append(f'<text x="{width / 2}" y="{height / 2 + 4}" text-anchor="middle" fill="{GREY}" font-size="13">'
                 f"{escape(message)}</text>")
    parts.append("</svg>")
    return "\n".join(parts)


def _legend(items: Sequence[tuple[str, str]], y: float, x0: float = _M_LEFT + 6) -> list[str]:
    out, x = [], x0
    for label, colour in items:
        out.append(f'<rect x="{_f(x)}" y="{_f(y - 9)}" width="10" height="10" fill="{colour}"/>')
        out.append(f'<text x="{_f(x + 14)}" y="{_f(y)}" fill="{INK}">{escape(label)}</text>')
        x += 22 + 6.2 * len(label)
    return out


def step_chart(series: Sequence[tuple[str, str, Sequence[tuple[float, float]]]], *, title: str,
               x_label: str, y_label: str, hline: tuple[float, str] | None = None, width: int = _W) -> str:
    """Returns a step chart: each series (name, colour, [(x, y)...]) holds its value until the next point.

    `hline`: (y, label) draws a dashed horizontal reference (e.g. the objective's target).
    """
    pts_all = [p for _, _, pts in series for p in pts]
    if not pts_all:
        return empty_chart(title, "no data yet", width=width)
    ys = [p[1] for p in pts_all] + ([hline[0]] if hline else [])
    x0, x1 = _range([p[0] for p in pts_all], include_zero=True)
    y0, y1 = _range(ys)
    xt, yt = nice_ticks(x0, x1), nice_ticks(y0, y1)
    fr = _Frame(min(xt[0], x0), max(xt[-1], x1), min(yt[0], y0), max(yt[-1], y1), width=width)
    parts = _open(title, width) + _axes(fr, xt, yt, x_label, y_label)
    if hline is not None:
        y = fr.y(hline[0])
        parts.append(f'<line x1="{_M_LEFT}" x2="{width - _M_RIGHT}" y1="{_f(y)}" y2="{_f(y)}" stroke="{RED}" '
                     f'stroke-dasharray="5 4"/>')
        parts.append(f'<text x="{width - _M_RIGHT - 4}" y="{_f(y - 4)}" text-anchor="end" fill="{RED}">'
                     f"{escape(hline[1])}</text>")
    for _name, colour, pts in series:
        pts = sorted(pts)
        if not pts:
            continue
        d = [f"M{_f(fr.x(pts[0][0]))},{_f(fr.y(pts[0][1]))}"]
        for xb, yb in pts[1:]:
            d.append(f"H{_f(fr.x(xb))}V{_f(fr.y(yb))}")
        d.append(f"H{_f(fr.x(fr.x1))}")
        parts.append(f'<path d="{"".join(d)}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for x, y in pts:
            parts.append(f'<circle cx="{_f(fr.x(x))}" cy="{_f(fr.y(y))}" r="3" fill="{colour}"/>')
    if len(series) > 1:
        parts += _legend([(n, c) for n, c, _ in series], _M_TOP + 12)
    parts.append("</svg>")
    return "\n".join(parts)


@dataclass
class Point:
    """One scatter point; `label` is drawn beside it when `highlight` (e.g. an outlier's trial id)."""

    x: float
    y: float
    label: str = ""
    highlight: bool = False
    colour: str = BLUE


def scatter_chart(points: Sequence[Point], *, title: str, x_label: str, y_label: str,
                  diagonal: bool = False, connect: bool = False, legend: Sequence[tuple[str, str]] = (),
                  label_all: bool = False, log_x: bool = False, width: int = _W) -> str:
    """Returns a scatter chart; `diagonal` draws y = x (estimate = measurement) across the shared range.

    `connect` joins the points in the given order (a curve such as the what-if); highlighted points
    are drawn larger with a ring and their label; `label_all` labels every point.
    """
    pts = [p for p in points if p.x is not None and p.y is not None and math.isfinite(p.x) and math.isfinite(p.y)]
    if not pts:
        return empty_chart(title, "no measured points to compare", width=width)

    def tx(v: float) -> float:
        return math.log2(v) if log_x and v > 0 else v

    xs, ys = [tx(p.x) for p in pts], [p.y for p in pts]
    if diagonal:
        lo, hi = _range(xs + ys, include_zero=True)
        x0 = y0 = lo
        x1 = y1 = hi
    else:
        x0, x1 = _range(xs, include_zero=not log_x)
        y0, y1 = _range(ys, include_zero=True)
    xt, yt = nice_ticks(x0, x1), nice_ticks(y0, y1)
    fr = _Frame(min(xt[0], x0), max(xt[-1], x1), min(yt[0], y0), max(yt[-1], y1), width=width)
    if diagonal:
        lo, hi = min(fr.x0, fr.y0), max(fr.x1, fr.y1)
        fr = _Frame(lo, hi, lo, hi, width=width)
        xt = yt = nice_ticks(lo, hi)
        xt = [t for t in xt if lo <= t <= hi]
        yt = xt
    parts = _open(title, width) + _axes(fr, xt, yt, x_label, y_label)
    if diagonal:
        parts.append(f'<line x1="{_f(fr.x(fr.x0))}" y1="{_f(fr.y(fr.x0))}" x2="{_f(fr.x(fr.x1))}" '
                     f'y2="{_f(fr.y(fr.x1))}" stroke="{GREY}" stroke-dasharray="4 4"/>')
        parts.append(f'<text x="{_f(fr.x(fr.x1) - 4)}" y="{_f(fr.y(fr.x1) + 14)}" text-anchor="end" '
                     f'fill="{GREY}">y = x (estimate exact)</text>')
    if connect and len(pts) > 1:
        d = " ".join(f"{'M' if i == 0 else 'L'}{_f(fr.x(tx(p.x)))},{_f(fr.y(p.y))}" for i, p in enumerate(pts))
        parts.append(f'<path d="{d}" fill="none" stroke="{GREY}" stroke-width="1.5"/>')
    for p in pts:
        cx, cy = fr.x(tx(p.x)), fr.y(p.y)
        r = 5 if p.highlight else 3.5
        ring = f' stroke="{INK}" stroke-width="1.5"' if p.highlight else ""
        parts.append(f'<circle cx="{_f(cx)}" cy="{_f(cy)}" r="{r}" fill="{p.colour}"{ring}>'
                     f"<title>{escape(p.label)}</title></circle>")
        if p.label and (p.highlight or label_all):
            anchor = "end" if cx > fr.width * 0.75 else "start"
            dx = -7 if anchor == "end" else 7
            parts.append(f'<text x="{_f(cx + dx)}" y="{_f(cy - 6)}" text-anchor="{anchor}" fill="{INK}">'
                         f"{escape(p.label)}</text>")
    if legend:
        parts += _legend(legend, _M_TOP + 12)
    parts.append("</svg>")
    return "\n".join(parts)


def bar_chart(items: Sequence[tuple[str, float]], *, title: str, value_label: str,
              fmt=lambda v: f"{v:,.2f}", colour: str = BLUE, max_items: int = 15, width: int = _W) -> str:
    """Returns a horizontal bar chart of (label, value) pairs, largest first, values printed at the bar ends."""
    rows = sorted(((str(k), float(v)) for k, v in items if v is not None), key=lambda kv: -kv[1])[:max_items]
    if not rows:
        return empty_chart(title, "nothing to show", width=width)
    bar_h, gap, left, top = 18, 6, min(170, int(width * 0.3)), 8
    height = top + len(rows) * (bar_h + gap) + 30
    vmax = max(v for _, v in rows) or 1.0
    span = width - left - 90
    parts = _open(title, width, height)
    for i, (label, v) in enumerate(rows):
        y = top + i * (bar_h + gap)
        w = max(0.0, v / vmax * span) if vmax > 0 else 0.0
        short = label if len(label) <= 26 else label[:25] + "…"
        parts.append(f'<text x="{left - 6}" y="{_f(y + bar_h - 5)}" text-anchor="end" fill="{INK}">'
                     f"{escape(short)}<title>{escape(label)}</title></text>")
        parts.append(f'<rect x="{left}" y="{y}" width="{_f(w)}" height="{bar_h}" fill="{colour}"/>')
        parts.append(f'<text x="{_f(left + w + 5)}" y="{_f(y + bar_h - 5)}" fill="{INK}">{escape(fmt(v))}</text>')
    parts.append(f'<text x="{left}" y="{height - 8}" fill="{INK}" font-weight="600">{escape(value_label)}</text>')
    parts.append("</svg>")
    return "\n".join(parts)


@dataclass
class GanttBar:
    """One bar of a Gantt chart: a run of a trial, offsets in the chart's x unit from the sweep start."""

    row: str
    start: float
    end: float | None  # None: still running (drawn open-ended to the chart's right edge)
    status: str
    spot: bool = False
    preemptions: int = 0


def gantt_chart(bars: Sequence[GanttBar], *, title: str, x_label: str, max_rows: int = 60) -> str:
    """Returns a Gantt chart, one row per distinct `row` label in order of first appearance.

    Colour = status; spot runs are drawn with a diagonal hatch; a preempted run (status preempted or
    preemptions > 0) carries a ✕ at its end; a run without an end fades out to the right.
    """
    if not bars:
        return empty_chart(title, "no runs yet")
    rows: list[str] = []
    for b in bars:
        if b.row not in rows:
            rows.append(b.row)
    hidden = max(0, len(rows) - max_rows)
    rows = rows[:max_rows]
    ends = [b.end for b in bars if b.end is not None] + [b.start for b in bars]
    xt = nice_ticks(0.0, max(ends) if ends else 1.0, 6)
    left, bar_h, gap, top = 150, 14, 5, 24
    height = top + len(rows) * (bar_h + gap) + _M_BOTTOM + (14 if hidden else 0)
    x1 = max(xt[-1], 1e-9)

    def x(v: float) -> float:
        return left + v / x1 * (_W - left - _M_RIGHT)

    parts = _open(title, _W, height)
    parts.append('<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" '
                 'patternTransform="rotate(45)"><rect width="3" height="6" fill="#ffffff" opacity="0.55"/>'
                 '</pattern><linearGradient id="fade"><stop offset="0" stop-color="#56B4E9"/>'
                 '<stop offset="1" stop-color="#56B4E9" stop-opacity="0.1"/></linearGradient></defs>')
    bottom = top + len(rows) * (bar_h + gap)
    for t in xt:
        parts.append(f'<line x1="{_f(x(t))}" x2="{_f(x(t))}" y1="{top - 4}" y2="{bottom}" stroke="{GRID}"/>')
        parts.append(f'<text x="{_f(x(t))}" y="{bottom + 15}" text-anchor="middle" fill="{INK}">{tick_label(t)}</text>')
    parts.append(f'<text x="{_f((left + _W) / 2)}" y="{bottom + 34}" text-anchor="middle" fill="{INK}" '
                 f'font-weight="600">{escape(x_label)}</text>')
    for i, r in enumerate(rows):
        y = top + i * (bar_h + gap)
        parts.append(f'<text x="{left - 6}" y="{y + bar_h - 3}" text-anchor="end" fill="{INK}">{escape(r)}</text>')
    index = {r: i for i, r in enumerate(rows)}
    for b in bars:
        if b.row not in index:
            continue
        y = top + index[b.row] * (bar_h + gap)
        end = b.end if b.end is not None else x1
        w = max(2.0, x(end) - x(b.start))
        fill = "url(#fade)" if b.end is None else STATUS_COLOURS.get(b.status, GREY)
        tip = f"{b.row}: {b.status}{', spot' if b.spot else ''}{f', {b.preemptions} preemption(s)' if b.preemptions else ''}"
        parts.append(f'<rect x="{_f(x(b.start))}" y="{y}" width="{_f(w)}" height="{bar_h}" fill="{fill}">'
                     f"<title>{escape(tip)}</title></rect>")
        if b.spot:
            parts.append(f'<rect x="{_f(x(b.start))}" y="{y}" width="{_f(w)}" height="{bar_h}" fill="url(#hatch)"/>')
        if b.status == "preempted" or b.preemptions:
            ex = x(b.start) + w
            parts.append(f'<text x="{_f(ex + 3)}" y="{y + bar_h - 3}" fill="{RED}" font-weight="700">✕</text>')
    legend = [(s, c) for s, c in STATUS_COLOURS.items() if any(b.status == s for b in bars)]
    parts += _legend(legend, 14, left)
    note = []
    if any(b.spot for b in bars):
        note.append("hatched = spot")
    if any(b.status == "preempted" or b.preemptions for b in bars):
        note.append("✕ = preempted")
    if note:
        parts.append(f'<text x="{_W - _M_RIGHT}" y="14" text-anchor="end" fill="{INK}">{escape("; ".join(note))}</text>')
    if hidden:
        parts.append(f'<text x="{left}" y="{height - 4}" fill="{GREY}">… {hidden} more rows not drawn '
                     f"(see the trials table)</text>")
    parts.append("</svg>")
    return "\n".join(parts)
