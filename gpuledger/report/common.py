"""What every report shares: output paths (validated names only), number formats with units, and
writing the files of a report (its document rendered to HTML and markdown, its tables to CSV).
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from gpuledger.errors import UserError
from gpuledger.files import write_text_atomic
from gpuledger.report.document import Document
from gpuledger.report.html import render_html
from gpuledger.report.markdown import render_markdown
from gpuledger.report.weeks import WEEK_RE

#: Names that may become part of a path (the spec's `name` pattern).
NAME_RE = re.compile(r"^[a-z0-9-]+$")



def default_root() -> Path:
    """Returns where reports go without `--out`: the project's `reports/` (`paths.reports_dir`, see
    `gpuledger.settings`), the same folder from any subfolder of the project."""
    from gpuledger import settings

    return settings.current().reports_dir


@dataclass
class ReportFiles:
    """The files one report wrote: the HTML page, its markdown twin and the CSVs of its tables."""

    html: Path
    markdown: Path
    csv: list[Path] = field(default_factory=list)
    markdown_text: str = ""  # the markdown itself (for a Prefect artifact)
    notes: list[str] = field(default_factory=list)  # lines for the terminal (e.g. which week was chosen)

    @property
    def csv_dir(self) -> Path | None:
        return self.csv[0].parent if self.csv else None


def check_name(name: str, what: str = "name") -> str:
    """Returns `name` when it may be used in a file name ([a-z0-9-]+, at most 100 characters); else UserError."""
    if not isinstance(name, str) or not NAME_RE.match(name) or len(name) > 100:
        raise UserError(f"{what} {name!r} is not valid: use lowercase letters, digits and '-' "
                        f"(the pattern [a-z0-9-]+, at most 100 characters)")
    return name


def path_name(text: str) -> str:
    """Returns a file-name-safe form of a warehouse value (e.g. a sweep id written by hand elsewhere).

    Valid names are returned unchanged; anything else becomes a slug plus 8 hex of its sha256 so
    two different values never share a file.
    """
    if isinstance(text, str) and NAME_RE.match(text) and len(text) <= 100:
        return text
    slug = re.sub(r"[^a-z0-9]+", "-", str(text).lower()).strip("-")[:60] or "x"
    return f"{slug}-{hashlib.sha256(str(text).encode()).hexdigest()[:8]}"


# -------------------------------------------------------------------------------- formats


def _bad(x: object) -> bool:
    return x is None or (isinstance(x, float) and not math.isfinite(x))


def usd(x: float | None) -> str:
    """Returns dollars: cents from $0.10 up ($1,234.50, $0.25); below that three significant digits
    ($0.0971, $0.00420), so a small rate or a short run never reads as $0.10 or $0.00; None → '—'."""
    if _bad(x):
        return "—"
    x = float(x)  # type: ignore[arg-type]
    sign = "-" if x < 0 else ""
    a = abs(x)
    if a == 0 or a >= 0.1 - 5e-10:
        return f"{sign}${a:,.2f}"
    decimals = 2 - math.floor(math.log10(a))
    return f"{sign}${a:.{decimals}f}"


def duration(seconds: float | None) -> str:
    """Returns a duration a person reads at once: '42.0 s', '3 min 05 s', '2 h 07 min', '3 d 4 h'."""
    if _bad(seconds):
        return "—"
    s = float(seconds)  # type: ignore[arg-type]
    sign = "-" if s < 0 else ""
    s = abs(s)
    if s < 60:
        return f"{sign}{s:.1f} s"
    if s < 3600:
        m, sec = divmod(round(s), 60)
        return f"{sign}{m} min {sec:02d} s"
    if s < 86400 * 2:
        h, rem = divmod(round(s / 60), 60)
        return f"{sign}{h} h {rem:02d} min"
    d, rem = divmod(round(s / 3600), 24)
    return f"{sign}{d} d {rem} h"


def num(x: float | None, digits: int = 4) -> str:
    """Returns a number with `digits` significant digits (None → '—')."""
    if _bad(x):
        return "—"
    return f"{float(x):.{digits}g}"  # type: ignore[arg-type]


def gib(x: float | None) -> str:
    return "—" if _bad(x) else f"{float(x):.2f} GiB"  # type: ignore[arg-type]


def pct(x: float | None, signed: bool = False) -> str:
    if _bad(x):
        return "—"
    return f"{float(x):+.1f}%" if signed else f"{float(x):.1f}%"  # type: ignore[arg-type]


def hours(x: float | None) -> str:
    return "—" if _bad(x) else f"{float(x):,.2f} h"  # type: ignore[arg-type]


# -------------------------------------------------------------------------------- files


def generated_now() -> str:
    """Returns the time a page is made, for its footer ('2026-01-05 10:00 UTC')."""
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")


def write_report(out_dir: Path, stem: str, doc: Document, tables: dict[str, pl.DataFrame]) -> ReportFiles:
    """Writes `doc` as `<stem>.html` and `<stem>.md`, and `<stem>-csv/<table>.csv`, under `out_dir`;
    returns their paths.

    Side effect: creates `out_dir`. `stem` ([a-z0-9-]+ or an ISO week) and table names are checked again here.
    """
    if not WEEK_RE.match(stem):  # ISO weeks keep their capital W (reports/weekly/2026-W05.html)
        check_name(stem, "report file name")
    html_text, markdown_text = render_html(doc), render_markdown(doc)
    out_dir.mkdir(parents=True, exist_ok=True)
    html_path = out_dir / f"{stem}.html"
    md_path = out_dir / f"{stem}.md"
    # written whole or not at all: a full disk leaves the previous report, never a truncated one
    write_text_atomic(html_path, html_text)
    write_text_atomic(md_path, markdown_text)
    csv_paths: list[Path] = []
    if tables:
        csv_dir = out_dir / f"{stem}-csv"
        csv_dir.mkdir(exist_ok=True)
        for name, df in tables.items():
            check_name(name, "table name")
            p = csv_dir / f"{name}.csv"
            write_text_atomic(p, _csv_safe(df).write_csv())
            csv_paths.append(p)
    return ReportFiles(html=html_path, markdown=md_path, csv=csv_paths, markdown_text=markdown_text)


#: What a spreadsheet reads as a formula at the start of a cell (OWASP "CSV injection"): = + - @,
#: and tab / carriage return, which some import paths strip before that check.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_FORMULA_RE = r"^[=+\-@\t\r]"  # the same characters, as the pattern polars matches


def _csv_safe(df: pl.DataFrame) -> pl.DataFrame:
    """Returns `df` as a CSV may hold it: nested columns (lists, structs) as text, and every text
    cell that a spreadsheet would run as a formula gets a leading apostrophe (`=HYPERLINK(...)` ->
    `'=HYPERLINK(...)`, the neutralisation OWASP recommends)."""
    nested = [c for c, t in df.schema.items() if isinstance(t, (pl.List, pl.Struct, pl.Array, pl.Object))]
    if nested:
        df = df.with_columns([pl.col(c).map_elements(lambda v: str(v), return_dtype=pl.String) for c in nested])
    text = [c for c, t in df.schema.items() if t == pl.String]
    if not text:
        return df
    return df.with_columns([
        pl.when(pl.col(c).str.contains(_FORMULA_RE)).then(pl.lit("'") + pl.col(c)).otherwise(pl.col(c)).alias(c)
        for c in text])
