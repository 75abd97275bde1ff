"""Publishing a written report as Prefect artifacts: its markdown (with a link to the HTML page)
and a link artifact. Shared by the sweep, cost-report and capacity flows."""

from __future__ import annotations

import contextlib

import flows  # noqa: F401  (telemetry off before Prefect is imported)

# isort: split
from prefect.artifacts import create_link_artifact, create_markdown_artifact

from gpuledger.report import ReportFiles


def publish_report(files: ReportFiles, key: str, title: str, link_key: str | None = None) -> str:
    """Publishes the report's markdown (plus a link to its HTML) under `key` and a link artifact
    under `link_key` (default `key-html`); returns the HTML page's file URI. A failed publish never
    fails the flow."""
    html = files.html.resolve()
    uri = html.as_uri()
    markdown = f"{files.markdown_text}\n\n---\nFull report (HTML, charts): [{html}]({uri})\n"
    with contextlib.suppress(Exception):
        create_markdown_artifact(key=key, markdown=markdown, description=title)
    with contextlib.suppress(Exception):
        create_link_artifact(key=link_key or f"{key}-html", link=uri, link_text=f"{title} (HTML)")
    return uri
