"""Prefect artifacts of the flows: a written report (its markdown, with a link to the HTML page, and
a link artifact), tables, and a progress artifact. Shared by the sweep, cost-report and capacity flows."""

from __future__ import annotations

import contextlib
import json
import math
import time
from datetime import date, datetime
from typing import Any

import gpuledger.flows  # noqa: F401  (telemetry off before Prefect is imported)

# isort: split
from prefect.artifacts import (
    create_link_artifact,
    create_markdown_artifact,
    create_progress_artifact,
    create_table_artifact,
    update_progress_artifact,
)

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


def artifact_key(*parts: str) -> str:
    """Returns an artifact key: lowercase letters, digits and dashes only (Prefect's rule)."""
    text = "-".join(parts).lower()
    return "".join(c if c.isalnum() or c == "-" else "-" for c in text)[:200]


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict | list):
        return json.dumps(value, default=str)
    return value


def publish_table(key: str, rows: list[dict[str, Any]], description: str, columns: list[str] | None = None) -> None:
    """Publishes rows as a table artifact (cells made JSON-friendly); a failed publish never fails the flow."""
    table = [{k: _jsonable(row.get(k)) for k in (columns if columns is not None else list(row))} for row in rows]
    with contextlib.suppress(Exception):
        create_table_artifact(key=key, table=table, description=description)


class Progress:
    """A Prefect progress artifact (best effort), updated at most once a second and always at the end."""

    MIN_INTERVAL_S = 1.0

    def __init__(self, key: str, total: int, done: int, description: str) -> None:
        self.total = max(total, 1)
        self.id = None
        self.last = -1.0
        self.last_t = 0.0
        with contextlib.suppress(Exception):
            self.id = create_progress_artifact(progress=100.0 * done / self.total, key=key, description=description)

    def update(self, done: int, force: bool = False) -> None:
        pct = round(100.0 * min(done, self.total) / self.total, 1)
        now = time.monotonic()
        if self.id is None or pct == self.last or (not force and now - self.last_t < self.MIN_INTERVAL_S):
            return
        self.last, self.last_t = pct, now
        with contextlib.suppress(Exception):
            update_progress_artifact(artifact_id=self.id, progress=pct)
