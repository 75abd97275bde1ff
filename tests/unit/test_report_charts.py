"""Charts (matplotlib SVG) and the document model: deterministic, self-contained, one font scale,
unique ids per page, labels that never overlap, and the same document in HTML and markdown."""

from __future__ import annotations

import re

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure as MplFigure

from gpuledger.report import charts
from gpuledger.report.document import (
    Bullets,
    Card,
    Cards,
    Columns,
    Definitions,
    Document,
    Figure,
    Note,
    Section,
    Table,
)
from gpuledger.report.html import render_html
from gpuledger.report.markdown import MARKDOWN_MAX_ROWS, render_markdown


def _all_charts() -> list[str]:
    pts = [charts.Point(float(i), float(i) * 1.1, f"#{i}", i % 2 == 0) for i in range(6)]
    return [
        charts.step_chart([("best", charts.BLUE, [(0, 3.0), (1, 2.0), (2, 1.5)])], title="steps", x_label="min",
                          y_label="loss", hline=(1.8, "target 1.8")),
        charts.scatter_chart(pts, title="scatter", x_label="est (GiB)", y_label="measured (GiB)", diagonal=True),
        charts.bar_chart([("a", 1.0), ("b", 2.5)], title="bars", value_label="USD"),
        charts.gantt_chart([charts.GanttBar("#0", 0, 2, "succeeded"), charts.GanttBar("#1", 1, 3, "failed", True, 1)],
                           title="gantt", x_label="min"),
        charts.empty_chart("empty", "no data yet"),
    ]


@pytest.mark.slow  # over ~1 s (a whole report, replay, plan or warehouse): make test runs it, make test-fast does not
def test_svg_is_deterministic_and_self_contained():
    first, second = _all_charts(), _all_charts()
    assert first == second  # same data, same bytes: goldens and diffs are stable
    for svg in first:
        assert svg.startswith('<svg class="chart"') and svg.rstrip().endswith("</svg>")
        assert "<?xml" not in svg and "<!DOCTYPE" not in svg and "<metadata" not in svg
        assert "<script" not in svg.lower() and "<style" not in svg  # no page-wide rule from a chart
        # the only URL is the SVG namespace (a name, never fetched); no date, no creator
        assert re.findall(r"https?://[^\s\"']+", svg) == ["http://www.w3.org/2000/svg"]
        assert not re.search(r"20\d\d-\d\d-\d\d", svg) and "Matplotlib v" not in svg


@pytest.mark.slow  # over ~1 s (a whole report, replay, plan or warehouse): make test runs it, make test-fast does not
def test_text_is_text_in_one_font_scale():
    sizes = set()
    for svg in _all_charts():
        assert "<text" in svg and "glyph" not in svg  # text kept as text, not outlines
        sizes |= {float(s) for s in re.findall(r"font-size: ([\d.]+)px", svg)}
    assert sizes == {charts.FONT_PT, charts.TITLE_PT}  # every chart: one body size, one title size


@pytest.mark.slow  # over ~1 s (a whole report, replay, plan or warehouse): make test runs it, make test-fast does not
def test_ids_are_unique_across_charts_of_one_page():
    ids = [i for svg in _all_charts() for i in re.findall(r' id="([^"]+)"', svg)]
    assert ids and len(ids) == len(set(ids))
    for svg in _all_charts():  # every reference points at an id of the same chart
        own = set(re.findall(r' id="([^"]+)"', svg))
        assert set(re.findall(r'url\(#([^)]+)\)', svg)) | set(re.findall(r'href="#([^"]+)"', svg)) <= own


def test_place_labels_never_overlap_and_leave_out_what_does_not_fit():
    fig = MplFigure(figsize=(charts.HALF_IN, charts.HEIGHT_IN), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.set_xlim(0, 10)
    ax.set_ylim(0, 10)
    labels = [(5.0 + 0.01 * i, 5.0, f"K={2 ** i}", charts.BLUE) for i in range(12)]  # all on one spot
    left_out = charts.place_labels(fig, ax, labels)
    renderer = fig.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in ax.texts]
    assert len(boxes) + len(left_out) == 12 and 1 <= len(boxes) <= 6 and left_out
    assert [t.get_text() for t in ax.texts][0] == "K=1"  # earlier labels (the highlighted ones) win
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            assert not a.overlaps(b)


def test_colour_names_for_captions():
    assert charts.colour_name(charts.RED) == "red" and charts.colour_name(charts.BLUE) == "blue"
    assert set(charts.STATUS_COLOURS.values()) <= set(charts.COLOUR_NAMES)


def test_empty_inputs_give_a_placeholder():
    for svg in (charts.step_chart([("a", charts.BLUE, [])], title="s", x_label="x", y_label="y"),
                charts.scatter_chart([], title="p", x_label="x", y_label="y"),
                charts.bar_chart([], title="b", value_label="v"),
                charts.gantt_chart([], title="g", x_label="x")):
        assert "no data yet" in svg or "nothing to show" in svg or "no runs yet" in svg


DOC = Document(
    "Title <b>", "sub | title", [
        Note("careful: *not* emphasis", "warn"),
        Cards([Card("spend", "$1.00", "local | reference rate")]),
        Columns([Figure(charts.empty_chart("c", "none"), "a caption"), Table(["k", "v"], [[1, "x"]], numeric=[0])]),
        Section("Part", [Table(["a", "b", "c"], [[i, "y", "z"] for i in range(MARKDOWN_MAX_ROWS + 5)],
                               markdown_columns=2, max_rows=10),
                         Section("Sub", [Definitions([("term", "text")]), Bullets(["one"])], level=3),
                         Table(["x"], [], empty="Nothing here.")]),
    ], footer="From the views.", generated_at="2026-01-05 10:00 UTC")


def test_one_document_two_renderings():
    html = render_html(DOC)
    md = render_markdown(DOC)
    # HTML: escaped text, the figure's SVG inline, the cut note, the generation time in the footer only
    assert "<title>Title &lt;b&gt;</title>" in html and "<b>" not in html.split("<main>")[1].split("<svg")[0]
    assert '<div class="banner">careful: *not* emphasis</div>' in html
    assert html.count("<svg") == 1 and "<figcaption>a caption</figcaption>" in html
    assert "35 more rows in the CSV." in html and "Generated 2026-01-05 10:00 UTC. From the views." in html
    # markdown: the same content, charts left out, wide table cut to 2 columns, long table cut with a note
    assert md.startswith("# Title \\<b\\>\n\nsub | title\n")
    assert "> careful: \\*not\\* emphasis" in md
    assert "| spend | $1.00 | local \\| reference rate |" in md
    assert "<svg" not in md and "a caption" not in md
    assert "| a | b |" in md and "| a | b | c |" not in md
    assert "_… 5 more rows; see the CSV and the HTML report._" in md
    assert "### Sub" in md and "- **term**: text" in md and "- one" in md and "_Nothing here._" in md
    assert "2026-01-05" not in md and md.rstrip().endswith("_From the views._")


def test_unknown_block_is_refused():
    with pytest.raises(TypeError, match="not a report block"):
        render_html(Document("t", blocks=["<p>raw html</p>"]))  # type: ignore[list-item]
