"""Open a report in a real headless Chromium (Debian's `chromium`, driven by playwright), record every
console error and every network request, take a screenshot and check it is not blank.

Without /usr/bin/chromium the browser tests skip with a message saying how to enable them
(`apt-get install chromium`); with env CI=true its absence is a failure (CI installs it, `.ci/run`).
Never `playwright install`: the browser is the system's.
"""

from __future__ import annotations

import base64
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

CHROMIUM = Path(os.environ.get("GPULEDGER_CHROMIUM", "/usr/bin/chromium"))
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run"]


def require_chromium() -> Path:
    """Returns the Chromium path; skips the test when it is absent (fails instead when CI=true)."""
    if CHROMIUM.exists():
        return CHROMIUM
    message = (f"{CHROMIUM} is absent: browser tests need Debian's chromium "
               f"(enable them with `sudo apt-get install chromium`)")
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true but {message}; .ci/run must install it")
    pytest.skip(message)
    raise AssertionError("unreachable")


@dataclass
class PageCheck:
    """What happened while a page was open."""

    url: str
    screenshot: Path
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)  # every request the page made
    width: int = 0
    height: int = 0
    pixel_stddev: float = 0.0
    distinct_colours: int = 0

    text_overlaps: list[tuple[str, str, str]] = field(default_factory=list)  # (chart title, text, text)

    @property
    def foreign_requests(self) -> list[str]:
        """Requests other than the page's own file:// URL (any of them is a failure)."""
        return [u for u in self.requests if u != self.url]


class Browser:
    """One headless Chromium with a fresh user-data-dir; `check(path, shot)` opens a page in a new tab."""

    def __init__(self, context):
        self._context = context

    def check(self, html_path: Path, screenshot: Path) -> PageCheck:
        """Returns what opening `html_path` did; the full-page screenshot is written to `screenshot`."""
        url = html_path.resolve().as_uri()
        result = PageCheck(url=url, screenshot=screenshot)
        page = self._context.new_page()
        page.set_viewport_size({"width": 1100, "height": 900})
        page.on("request", lambda req: result.requests.append(req.url))
        page.on("console", lambda msg: result.console_errors.append(msg.text) if msg.type == "error" else None)
        page.on("pageerror", lambda exc: result.page_errors.append(str(exc)))

        def route(r):  # record, then refuse anything that is not the page itself: nothing leaves the machine
            if r.request.url == url:
                r.continue_()
            else:
                r.abort()

        page.route("**/*", route)
        page.goto(url, wait_until="load")
        result.text_overlaps = [tuple(x) for x in page.evaluate(_OVERLAPS_JS)]
        png = page.screenshot(full_page=True)
        page.close()
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        screenshot.write_bytes(png)
        result.width, result.height, result.pixel_stddev, result.distinct_colours = png_stats(self._context, png)
        return result


@contextmanager
def browser() -> Iterator[Browser]:
    """Yields a Browser (headless Chromium with ARGS and a fresh temporary --user-data-dir)."""
    exe = require_chromium()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="gpuledger-chromium-") as profile, sync_playwright() as p:
        # launch_persistent_context is playwright's way to pass --user-data-dir (it refuses it in args)
        context = p.chromium.launch_persistent_context(profile, executable_path=str(exe), headless=True,
                                                       args=ARGS, offline=True)
        try:
            yield Browser(context)
        finally:
            context.close()


#: every pair of texts of one chart (`svg.chart`) whose boxes, as the browser lays them out, share
#: more than 1 px in both directions: [chart title, text, text]
_OVERLAPS_JS = """() => {
  const out = [];
  document.querySelectorAll('svg.chart').forEach((svg) => {
    const title = (svg.querySelector('title') || {}).textContent || '';
    const boxes = [...svg.querySelectorAll('text')].map(t => [t.textContent, t.getBoundingClientRect()])
      .filter(([s, r]) => s.trim() && r.width > 0 && r.height > 0);
    for (let a = 0; a < boxes.length; a++) for (let b = a + 1; b < boxes.length; b++) {
      const [sa, ra] = boxes[a], [sb, rb] = boxes[b];
      const w = Math.min(ra.right, rb.right) - Math.max(ra.left, rb.left);
      const h = Math.min(ra.bottom, rb.bottom) - Math.max(ra.top, rb.top);
      if (w > 1 && h > 1) out.push([title, sa, sb]);
    }
  });
  return out;
}"""


# ------------------------------------------------------------------------------- PNG pixels

_STATS_JS = """async (src) => {
  const img = new Image();
  img.src = src;
  await img.decode();
  const c = document.createElement('canvas');
  c.width = img.naturalWidth; c.height = img.naturalHeight;
  const g = c.getContext('2d');
  g.drawImage(img, 0, 0);
  const d = g.getImageData(0, 0, c.width, c.height).data;
  let n = 0, sum = 0, sq = 0;
  const colours = new Set();
  const step = Math.max(1, Math.floor(d.length / 4 / 400000));
  for (let i = 0; i < d.length; i += 4 * step) {
    const grey = 0.299 * d[i] + 0.587 * d[i + 1] + 0.114 * d[i + 2];
    sum += grey; sq += grey * grey; n++;
    if (colours.size < 5000) colours.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
  }
  const mean = sum / n;
  return [c.width, c.height, Math.sqrt(Math.max(0, sq / n - mean * mean)), colours.size];
}"""


def png_stats(context, png: bytes) -> tuple[int, int, float, int]:
    """Returns (width, height, standard deviation of grey levels, distinct colours sampled) of a PNG.

    Decoded by the same Chromium in a separate blank tab (a canvas), not by the report's page, so
    the report's own request log stays untouched; no image library is needed.
    """
    page = context.new_page()
    try:
        src = "data:image/png;base64," + base64.b64encode(png).decode()
        w, h, std, colours = page.evaluate(_STATS_JS, src)
        return int(w), int(h), float(std), int(colours)
    finally:
        page.close()
