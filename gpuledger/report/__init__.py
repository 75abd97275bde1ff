"""Reports: sweep ROI, weekly cost and capacity — warehouse views → figures → HTML, markdown, CSV.

Each report is one self-contained HTML page (inline SVG and CSS, no script, no URL), a markdown
twin sized for a Prefect artifact, and the CSVs of its tables:

- `write_sweep_report(wh, name=None, sweep_id=None, out_dir=None)` → `reports/sweeps/<name>/<sweep-id>.html`
- `write_weekly_report(wh, week=None, out_dir=None)` → `reports/weekly/<YYYY-Www>.html`
- `write_capacity_report(result, out_dir=None)` → `reports/capacity/<name>.html`

each returning `ReportFiles(html, markdown, csv, markdown_text)`. For a Prefect artifact without
writing files: `sweep_markdown(load_sweep(wh, name))`, `weekly_markdown(load_week(wh, week))`,
`capacity_markdown(result)`. ISO weeks (`YYYY-Www`, the weekly report's unit; the CLI's `--week`):
`gpuledger.report.weeks`, the one place for them.
"""

from gpuledger.report.capacity import capacity_html, capacity_markdown, write_capacity_report
from gpuledger.report.common import ReportFiles
from gpuledger.report.document import Document
from gpuledger.report.html import render_html
from gpuledger.report.markdown import MARKDOWN_MAX_CHARS, render_markdown
from gpuledger.report.sweep import load_sweep, sweep_html, sweep_markdown, sweep_summary, write_sweep_report
from gpuledger.report.weekly import load_week, weekly_html, weekly_markdown, write_weekly_report

__all__ = [
    "MARKDOWN_MAX_CHARS",
    "Document",
    "ReportFiles",
    "capacity_html",
    "capacity_markdown",
    "load_sweep",
    "load_week",
    "render_html",
    "render_markdown",
    "sweep_html",
    "sweep_markdown",
    "sweep_summary",
    "weekly_html",
    "weekly_markdown",
    "write_capacity_report",
    "write_sweep_report",
    "write_weekly_report",
]
