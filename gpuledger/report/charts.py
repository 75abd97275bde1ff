"""Charts of the reports, drawn by matplotlib's SVG backend into inline SVG text.

Why matplotlib (not Vega-Lite through vl-convert): it is already in the lock file, draws offline in
the same process with no JavaScript engine, and its SVG needs no script to display, so the page stays
one self-contained file with no script.

Text is kept as text (`svg.fonttype = 'none'`), not glyph paths: labels stay selectable, searchable
and readable by screen readers, print crisply, and the SVG is several times smaller (a chart is
15-40 kB instead of 60-150 kB), which keeps goldens and diffs readable. The cost is that the viewer's
font draws the text: the charts name DejaVu Sans first (the font matplotlib measured the labels with,
installed with matplotlib's own fonts and on Debian/Ubuntu), then generic sans-serif, and leave room
around labels so a slightly wider fallback font still fits.

Every chart of every report uses one font scale (`FONT_PT`), one palette with names that captions
use (`colour_name`), and one of two widths (`FULL_IN`, `HALF_IN`, sized so that text appears at the
same size on the page whether a chart is full width or one of two side by side). Labels are placed
so that they never overlap: each is tried at a few offsets and left out (the table beside the chart
has it) when none is free. Output is deterministic: fixed ids (`svg.hashsalt` from the title), no
date and no creator in the metadata, so goldens are stable.
"""

from __future__ import annotations

import hashlib
import io
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

from matplotlib import rc_context
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure as MplFigure
from matplotlib.patches import Patch
from matplotlib.ticker import StrMethodFormatter
from matplotlib.transforms import Bbox

#: the palette (Paul Tol's "vibrant" scheme, colour-blind safe) and the word a caption uses for each
BLUE = "#0077BB"
CYAN = "#33BBEE"
TEAL = "#009988"
ORANGE = "#EE7733"
RED = "#CC3311"
MAGENTA = "#EE3377"
GREY = "#999999"
INK = "#1f2328"
GRID = "#e4e6ea"
COLOUR_NAMES = {BLUE: "blue", CYAN: "light blue", TEAL: "green", ORANGE: "orange", RED: "red",
                MAGENTA: "pink", GREY: "grey"}
GREEN = TEAL

STATUS_COLOURS = {
    "succeeded": TEAL,
    "failed": RED,
    "oom": MAGENTA,
    "preempted": ORANGE,
    "cancelled": GREY,
    "running": CYAN,
    "pending": GREY,
}

#: one font scale for every chart (points of the figure; on the page about 1.45 px per point)
FONT_PT = 9.0
TITLE_PT = 10.0
#: widths: a full-width chart and one of two side by side (same text size on the page)
FULL_IN = 10.0
HALF_IN = 4.85
HEIGHT_IN = 3.3

_RC = {
    # every text is drawn as written: a `$` in a metric, label or bill text is not mathtext (which
    # would fail on `$x^{$` or render TeX), and nothing calls LaTeX (matplotlib >= 3.5)
    "text.parse_math": False,
    "text.usetex": False,
    "svg.fonttype": "none",
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans", "Arial", "Helvetica", "sans-serif"],
    "font.size": FONT_PT,
    "axes.titlesize": TITLE_PT,
    "axes.titleweight": "bold",
    "axes.labelsize": FONT_PT,
    "xtick.labelsize": FONT_PT,
    "ytick.labelsize": FONT_PT,
    "legend.fontsize": FONT_PT,
    "axes.edgecolor": INK,
    "axes.labelcolor": INK,
    "text.color": INK,
    "xtick.color": INK,
    "ytick.color": INK,
    "axes.grid": True,
    "grid.color": GRID,
    "grid.linewidth": 0.8,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.axisbelow": True,
    "legend.frameon": False,
    "hatch.linewidth": 0.8,
    "path.simplify": False,
}


def colour_name(colour: str) -> str:
    """Returns the word a caption uses for one of the palette's colours ('blue', 'red', ...)."""
    return COLOUR_NAMES.get(colour, colour)


@dataclass
class Point:
    """One point of a scatter chart; `label` is drawn beside it when `highlight` (or label_all)."""

    x: float
    y: float
    label: str = ""
    highlight: bool = False
    colour: str = BLUE


@dataclass
class GanttBar:
    """One run on the timeline: row label, start and end (same unit as the axis), how it ended."""

    label: str
    start: float
    end: float
    status: str
    spot: bool = False
    preemptions: int = 0


# ------------------------------------------------------------------------------------ plumbing


def _new(width_in: float, height_in: float) -> tuple[MplFigure, object]:
    fig = MplFigure(figsize=(width_in, height_in), layout="constrained")
    FigureCanvasAgg(fig)  # a renderer to measure label sizes with; the output is still SVG
    ax = fig.add_subplot()
    return fig, ax


def _svg(fig: MplFigure, title: str) -> str:
    """Returns the figure as one `<svg class="chart">` element: no XML prolog, no metadata, fixed ids."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    text = buf.getvalue()
    text = text[text.index("<svg"):]
    text = re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.S)
    text = re.sub(r'<svg([^>]*?) width="[^"]*" height="[^"]*"', r"<svg\1", text, count=1)
    # SVG 2 `href` instead of `xlink:href`: no second namespace URL in the page
    text = text.replace(' xmlns:xlink="http://www.w3.org/1999/xlink"', "").replace("xlink:href=", "href=")
    # matplotlib's document-wide `*{stroke-linejoin…}` rule would style the whole page: the root's
    # (inherited) presentation attributes do the same for this chart only
    text = re.sub(r"<defs>\s*<style[^>]*>[^<]*</style>\s*</defs>\s*", "", text, count=1)
    text = text.replace("<svg ", f'<svg class="chart" role="img" aria-label="{escape(title)}" '
                                 f'stroke-linejoin="round" stroke-linecap="butt" ', 1)
    text = _unique_ids(text)
    head_end = text.index(">") + 1
    return text[:head_end] + f"<title>{escape(title)}</title>" + text[head_end:].strip() + "\n"


def _unique_ids(svg: str) -> str:
    """Returns `svg` with every id (and reference to it) prefixed by a hash of the chart, so that
    several charts on one page never share an id ('figure_1', clip paths)."""
    prefix = "c" + hashlib.sha256(svg.encode()).hexdigest()[:8] + "-"
    ids = set(re.findall(r' id="([^"]+)"', svg))
    if not ids:
        return svg

    def swap(m: re.Match) -> str:
        return f"{m.group(1)}{prefix}{m.group(2)}{m.group(3)}" if m.group(2) in ids else m.group(0)

    return re.sub(r'( id="|url\(#|href="#)([^")]+)(["\)])', swap, svg)


def _render(draw: Callable[[], MplFigure], title: str) -> str:
    with rc_context({**_RC, "svg.hashsalt": f"gpuledger:{title}"}):
        fig = draw()
        return _svg(fig, title)


def _overlaps(box: Bbox, placed: Sequence[Bbox]) -> bool:
    return any(box.overlaps(p) for p in placed)


#: offsets (points) and alignment tried in turn for a point's label
_OFFSETS = [((6, 5), "left", "bottom"), ((6, -5), "left", "top"), ((-6, 5), "right", "bottom"),
            ((-6, -5), "right", "top"), ((0, 9), "center", "bottom"), ((0, -9), "center", "top")]


#: a chart draws at most this many point labels (the first ones given: highlighted points first);
#: more could not be read anyway, and measuring each candidate's text costs time (1,000-trial sweeps)
MAX_LABELS = 40


def place_labels(fig: MplFigure, ax, labels: Sequence[tuple[float, float, str, str]]) -> list[str]:
    """Draws each (x, y, text, colour) label beside its point at the first offset where it overlaps no
    label placed before it and stays inside the axes; returns the texts left out (none fitted, or past
    the first `MAX_LABELS`: those points are named in the table beside the chart)."""
    left_over = [text for _, _, text, _ in labels[MAX_LABELS:]]
    labels = labels[:MAX_LABELS]
    renderer = fig.canvas.get_renderer()
    fig.draw_without_rendering()
    area = ax.get_window_extent(renderer)
    placed: list[Bbox] = []
    left_out = []
    for x, y, text, colour in labels:
        for (dx, dy), ha, va in _OFFSETS:
            ann = ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points", ha=ha, va=va,
                              color=colour, fontsize=FONT_PT)
            box = ann.get_window_extent(renderer).expanded(1.06, 1.15)
            inside = (box.x0 >= area.x0 and box.x1 <= area.x1 and box.y0 >= area.y0 and box.y1 <= area.y1)
            if inside and not _overlaps(box, placed):
                placed.append(box)
                break
            ann.remove()
        else:
            left_out.append(text)
    return left_out + left_over


def _legend_below(fig: MplFigure, handles: Sequence) -> None:
    """Puts the legend under the chart, outside the plotting area, so it never hides a point or label."""
    if handles:
        fig.legend(handles=handles, loc="outside lower center", ncols=len(handles), handlelength=1.4,
                   columnspacing=1.2)


def _finite(values: Sequence[float]) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(float(v))]


def empty_chart(title: str, message: str, width_in: float = HALF_IN) -> str:
    """Returns a small placeholder chart that says why there is nothing to draw."""
    def draw() -> MplFigure:
        fig, ax = _new(width_in, 1.2)
        ax.set_axis_off()
        ax.set_title(title, loc="left")
        ax.text(0.5, 0.45, message, ha="center", va="center", color=GREY, transform=ax.transAxes)
        return fig
    return _render(draw, title)


# ------------------------------------------------------------------------------------ charts


def step_chart(series: Sequence[tuple[str, str, Sequence[tuple[float, float]]]], *, title: str,
               x_label: str, y_label: str, hline: tuple[float, str] | None = None,
               width_in: float = HALF_IN) -> str:
    """Returns a step chart: each series (name, colour, [(x, y)...]) holds its value until the next
    point; `hline` (y, label) draws a dashed reference line (e.g. the objective's target)."""
    if not any(pts for _, _, pts in series):
        return empty_chart(title, "no data yet", width_in)

    def draw() -> MplFigure:
        fig, ax = _new(width_in, HEIGHT_IN)
        for name, colour, pts in series:
            if not pts:
                continue
            xs, ys = [p[0] for p in pts], [p[1] for p in pts]
            ax.step(xs, ys, where="post", color=colour, linewidth=1.8, label=name)
            ax.plot(xs, ys, "o", color=colour, markersize=4)
        handles = [ax.get_lines()[0]] if len(series) == 1 else None
        if hline is not None:
            line = ax.axhline(hline[0], color=RED, linestyle="--", linewidth=1.2, label=hline[1])
            handles = (handles or []) + [line] if handles is not None else None
        ax.margins(y=0.1)
        ax.set_xlim(left=0)
        ax.set_title(title, loc="left")
        ax.set_xlabel(x_label)
        ax.set_ylabel(y_label)
        _legend_below(fig, handles or ax.get_lines()[:1])
        return fig
    return _render(draw, title)


def scatter_chart(points: Sequence[Point], *, title: str, x_label: str, y_label: str, diagonal: bool = False,
                  connect: bool = False, label_all: bool = False,
                  legend: Sequence[tuple[str, str]] = (), width_in: float = HALF_IN,
                  x_zero: bool = False, y_zero: bool = False) -> str:
    """Returns a scatter chart. `diagonal`: the y = x line (estimate = measurement); `connect`: a line
    through the points in order; labels of highlighted points (all with `label_all`) beside them,
    never overlapping (one that does not fit anywhere is left out; the report's table has it)."""
    pts = [p for p in points if _finite([p.x, p.y]) == [p.x, p.y]]
    if not pts:
        return empty_chart(title, "no data yet", width_in)

    def draw() -> MplFigure:
        fig, ax = _new(width_in, HEIGHT_IN)
        xs, ys = [p.x for p in pts], [p.y for p in pts]
        if diagonal:
            lo, hi = min(xs + ys), max(xs + ys)
            pad = (hi - lo) * 0.08 or max(abs(hi), 1.0) * 0.1
            lo, hi = max(0.0, lo - pad), hi + pad
            ax.plot([lo, hi], [lo, hi], linestyle="--", color=GREY, linewidth=1, label="estimate = measured")
            ax.set_xlim(lo, hi)
            ax.set_ylim(lo, hi)
        if connect:
            ax.plot(xs, ys, color=GREY, linewidth=1, zorder=1)
        ax.scatter(xs, ys, c=[p.colour for p in pts], s=[40 if p.highlight else 22 for p in pts],
                   zorder=3, edgecolors="white", linewidths=0.6)
        if x_zero:
            ax.set_xlim(left=0, right=max(xs) * 1.15 if max(xs) > 0 else 1)
        if y_zero:
            ax.set_ylim(bottom=0, top=max(ys) * 1.2 if max(ys) > 0 else 1)
        if not diagonal and not (x_zero or y_zero):
            ax.margins(0.12, 0.15)
        ax.set_title(title, loc="left")
        ax.set_xlabel(x_label)
        ax.set_ylabel(y_label)
        handles = [Patch(color=c, label=name) for name, c in legend]
        if diagonal:
            handles = ax.get_lines()[:1] + handles
        _legend_below(fig, handles)
        labelled = [(p.x, p.y, p.label, p.colour) for p in pts if p.label and (label_all or p.highlight)]
        labelled.sort(key=lambda item: not any(p.highlight and p.label == item[2] for p in pts))
        place_labels(fig, ax, labelled)
        return fig
    return _render(draw, title)


def bar_chart(items: Sequence[tuple[str, float]], *, title: str, value_label: str,
              fmt: Callable[[float], str] = lambda v: f"{v:,.2f}", colour: str = BLUE,
              width_in: float = HALF_IN) -> str:
    """Returns a horizontal bar chart of (label, value), largest first, each bar labelled with fmt(value)."""
    rows = sorted([(str(k), float(v)) for k, v in items if v is not None], key=lambda kv: (-kv[1], kv[0]))
    if not rows:
        return empty_chart(title, "nothing to show", width_in)

    def draw() -> MplFigure:
        fig, ax = _new(width_in, max(1.6, 0.9 + 0.32 * len(rows)))
        labels, values = [r[0] for r in rows], [r[1] for r in rows]
        y = list(range(len(rows)))
        ax.barh(y, values, color=colour, height=0.6)
        ax.set_yticks(y, labels)
        ax.invert_yaxis()
        ax.grid(axis="y", visible=False)
        top = max(values) if max(values) > 0 else 1.0
        ax.set_xlim(0, top * 1.3)
        if top >= 1000:  # 10,000 rather than 10000
            ax.xaxis.set_major_formatter(StrMethodFormatter("{x:,.0f}"))
        for yi, v in zip(y, values, strict=True):
            ax.annotate(fmt(v), (v, yi), xytext=(4, 0), textcoords="offset points", va="center", ha="left")
        ax.set_title(title, loc="left")
        ax.set_xlabel(value_label)
        return fig
    return _render(draw, title)


def gantt_chart(bars: Sequence[GanttBar], *, title: str, x_label: str, max_rows: int = 60,
                width_in: float = FULL_IN) -> str:
    """Returns a timeline: one row per run (first `max_rows`), coloured by how it ended, hatched when
    spot, a ✕ at the end of a preempted run; a legend of the statuses present."""
    rows = list(bars)[:max_rows]
    if not rows:
        return empty_chart(title, "no runs yet", width_in)

    def draw() -> MplFigure:
        fig, ax = _new(width_in, max(1.8, 0.9 + 0.24 * len(rows)))
        for i, b in enumerate(rows):
            colour = STATUS_COLOURS.get(b.status, GREY)
            ax.barh(i, max(b.end - b.start, 0.0), left=b.start, height=0.62, color=colour,
                    hatch="///" if b.spot else None, edgecolor="white" if b.spot else colour, linewidth=0)
            if b.preemptions or b.status == "preempted":
                ax.plot([b.end], [i], marker="x", color=INK, markersize=6, markeredgewidth=1.6)
        ax.set_yticks(range(len(rows)), [b.label for b in rows])
        ax.invert_yaxis()
        ax.grid(axis="y", visible=False)
        ax.set_xlim(left=0)
        statuses = [s for s in STATUS_COLOURS if any(b.status == s for b in rows)]
        handles = [Patch(color=STATUS_COLOURS[s], label=s) for s in statuses]
        if any(b.spot for b in rows):
            handles.append(Patch(facecolor="white", edgecolor=INK, hatch="///", label="spot"))
        ax.legend(handles=handles, loc="lower right", ncols=len(handles), bbox_to_anchor=(1.0, 1.0),
                  handlelength=1.2, borderaxespad=0.2)
        ax.set_title(title, loc="left")
        ax.set_xlabel(x_label)
        if len(bars) > max_rows:
            ax.text(1.0, -0.08, f"first {max_rows} of {len(bars)} runs", transform=ax.transAxes, ha="right",
                    va="top", color=GREY)
        return fig
    return _render(draw, title)


def curve_chart(series: Sequence[tuple[str, str, Sequence[tuple[float, float]], tuple[float, float] | None]], *,
                title: str, x_label: str, y_label: str, vline: tuple[float, str] | None = None,
                width_in: float = FULL_IN) -> str:
    """Returns one line per series (name, colour, [(x, y)...] in order, chosen (x, y) or None) with
    markers at the points; the chosen point is ringed and labelled with the series name; `vline`
    (x, label) draws a dashed red reference line (e.g. a latency SLO)."""
    if not any(_finite([v for p in pts for v in p]) for _, _, pts, _ in series):
        return empty_chart(title, "no data yet", width_in)

    def draw() -> MplFigure:
        fig, ax = _new(width_in, HEIGHT_IN)
        handles, labels = [], []
        for name, colour, pts, chosen in series:
            pts = [p for p in pts if _finite(p) == [float(p[0]), float(p[1])]]
            if not pts:
                continue
            (line,) = ax.plot([p[0] for p in pts], [p[1] for p in pts], "-o", color=colour, linewidth=1.6,
                              markersize=3.5, label=name)
            handles.append(line)
            if chosen is not None:
                ax.plot([chosen[0]], [chosen[1]], "o", markersize=9, markerfacecolor="none", markeredgecolor=colour,
                        markeredgewidth=1.8)
                labels.append((chosen[0], chosen[1], name, colour))
        if vline is not None:
            handles.append(ax.axvline(vline[0], color=RED, linestyle="--", linewidth=1.2, label=vline[1]))
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
        ax.margins(y=0.12)
        ax.set_title(title, loc="left")
        ax.set_xlabel(x_label)
        ax.set_ylabel(y_label)
        place_labels(fig, ax, labels)
        _legend_below(fig, handles)
        return fig
    return _render(draw, title)


def progress_chart(best: Sequence[tuple[float, float]],
                   groups: Sequence[tuple[str, str, str, Sequence[tuple[float, float]]]], *, title: str,
                   x_label: str, y_label: str, hline: tuple[float, str] | None = None,
                   width_in: float = HALF_IN) -> str:
    """Returns a best-so-far step line (blue) over every trial's end as a point: `groups` are (name,
    colour, matplotlib marker, [(x, y)...]), e.g. succeeded trials at their final value and pruned ones
    (marker 'x') at the last value they reported; `hline` (y, label) a dashed red reference line."""
    if not best and not any(pts for _, _, _, pts in groups):
        return empty_chart(title, "no data yet", width_in)

    def draw() -> MplFigure:
        fig, ax = _new(width_in, HEIGHT_IN)
        handles = []
        if best:
            (line,) = ax.step([p[0] for p in best], [p[1] for p in best], where="post", color=BLUE,
                              linewidth=1.8, label="best so far", zorder=2)
            handles.append(line)
        for name, colour, marker, pts in groups:
            pts = [p for p in pts if _finite(p) == [float(p[0]), float(p[1])]]
            if pts:
                handles.append(ax.scatter([p[0] for p in pts], [p[1] for p in pts], c=colour, marker=marker,
                                          s=26, linewidths=1.4 if marker == "x" else 0.6, zorder=3, label=name,
                                          edgecolors=None if marker == "x" else "white"))
        if hline is not None:
            handles.append(ax.axhline(hline[0], color=RED, linestyle="--", linewidth=1.2, label=hline[1]))
        ax.margins(y=0.1)
        ax.set_xlim(left=0)
        ax.set_title(title, loc="left")
        ax.set_xlabel(x_label)
        ax.set_ylabel(y_label)
        _legend_below(fig, handles)
        return fig
    return _render(draw, title)


def lines_chart(series: Sequence[tuple[str, str, Sequence[tuple[float, float]], bool]], *, title: str,
                x_label: str, y_label: str, legend: Sequence[tuple[str, str]] = (),
                width_in: float = FULL_IN) -> str:
    """Returns one thin line per series (name, colour, [(x, y)...] in order, emphasised), e.g. each
    trial's learning curve: an emphasised series is drawn thick and on top; each line's name is placed
    at its last point where it overlaps nothing (`place_labels`: emphasised first); `legend` (text,
    colour) explains the colours under the chart."""
    if not any(_finite([v for p in pts for v in p]) for _, _, pts, _ in series):
        return empty_chart(title, "no points logged yet", width_in)

    def draw() -> MplFigure:
        fig, ax = _new(width_in, HEIGHT_IN + 0.4)
        labels = []
        for name, colour, pts, strong in sorted(series, key=lambda s: s[3]):
            pts = [p for p in pts if _finite(p) == [float(p[0]), float(p[1])]]
            if not pts:
                continue
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "-", color=colour, linewidth=2.4 if strong else 1.0,
                    alpha=1.0 if strong else 0.75, zorder=3 if strong else 2)
            ax.plot([pts[-1][0]], [pts[-1][1]], "o", color=colour, markersize=5 if strong else 3, zorder=3)
            labels.append((strong, pts[-1][0], pts[-1][1], name, colour))
        ax.set_xlim(left=0)
        ax.margins(x=0.08, y=0.08)
        ax.set_title(title, loc="left")
        ax.set_xlabel(x_label)
        ax.set_ylabel(y_label)
        place_labels(fig, ax, [(x, y, n, c) for _, x, y, n, c in sorted(labels, key=lambda r: not r[0])])
        _legend_below(fig, [Patch(color=c, label=t) for t, c in legend])
        return fig
    return _render(draw, title)


def params_chart(panels: Sequence[tuple[str, str, Sequence[tuple[float | str, float, str]]]], *, title: str,
                 y_label: str, best: tuple[str, float] | None = None, legend: Sequence[tuple[str, str]] = (),
                 width_in: float = FULL_IN) -> str:
    """Returns the objective against each hyper-parameter, one panel per parameter side by side:
    `panels` are (parameter, scale, [(value, objective, colour)...]) with scale 'log', 'linear' or
    'category' (values drawn as evenly spaced categories in the order given); `best` (y label, y)
    draws the best value as a dashed line across every panel."""
    panels = [p for p in panels if any(_finite([y]) for _, y, _ in p[2])][:6]
    if not panels:
        return empty_chart(title, "no trial has a value of the objective yet", width_in)

    def draw() -> MplFigure:
        fig = MplFigure(figsize=(width_in, HEIGHT_IN), layout="constrained")
        FigureCanvasAgg(fig)
        axes = fig.subplots(1, len(panels), sharey=True, squeeze=False)[0]
        for ax, (name, scale, pts) in zip(axes, panels, strict=True):
            pts = [p for p in pts if _finite([p[1]])]
            if scale == "category":
                cats = list(dict.fromkeys(str(p[0]) for p in pts))
                xs = [cats.index(str(p[0])) for p in pts]
                ax.set_xticks(range(len(cats)), [c if len(c) <= 10 else c[:9] + "…" for c in cats])
                ax.set_xlim(-0.6, len(cats) - 0.4)
            else:
                xs = [float(p[0]) for p in pts]
                if scale == "log":  # ticks as plain numbers (0.001, 0.01): text is never parsed as math here
                    from matplotlib.ticker import FuncFormatter, NullFormatter

                    ax.set_xscale("log")
                    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
                    ax.xaxis.set_minor_formatter(NullFormatter())
                ax.margins(x=0.12)
            ax.scatter(xs, [p[1] for p in pts], c=[p[2] for p in pts], s=30, edgecolors="white", linewidths=0.6,
                       zorder=3)
            if best is not None:
                ax.axhline(best[1], color=GREY, linestyle="--", linewidth=1.0, zorder=1)
            ax.set_xlabel(name)
        axes[0].set_ylabel(y_label)
        fig.suptitle(title, x=0.0, ha="left", fontsize=TITLE_PT, fontweight="bold")
        handles = [Patch(color=c, label=t) for t, c in legend]
        if best is not None:
            from matplotlib.lines import Line2D

            handles.append(Line2D([], [], color=GREY, linestyle="--", label=best[0]))
        _legend_below(fig, handles)
        return fig
    return _render(draw, title)


__all__ = ["BLUE", "COLOUR_NAMES", "CYAN", "FONT_PT", "FULL_IN", "GREEN", "GREY", "GanttBar", "HALF_IN",
           "MAGENTA", "ORANGE", "Point", "RED", "STATUS_COLOURS", "TEAL", "bar_chart", "colour_name", "curve_chart",
           "empty_chart", "gantt_chart", "lines_chart", "params_chart", "place_labels", "progress_chart", "scatter_chart",
           "step_chart"]
