"""docs/views.md: the page of the warehouse's views and their columns, generated from views.yml.

    python -m gpuledger.warehouse.views_doc            # prints the page
    python -m gpuledger.warehouse.views_doc --write    # writes docs/views.md of this checkout

`render()` returns the page: the definitions views.yml names (`definitions.X` in a column's text), then
each view with its description, its column tests and a table of its columns (name, unit, description).
tests/unit/test_views_doc.py fails when docs/views.md is not what `render()` returns (regenerate it).
"""

from __future__ import annotations

import sys
from pathlib import Path

from gpuledger.warehouse.sqlfiles import VIEWS_DOC


def _cell(text: object) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def render() -> str:
    """Returns docs/views.md's text for the package's views.yml."""
    import yaml

    doc = yaml.safe_load(VIEWS_DOC.read_text(encoding="utf-8")) or {}
    lines = ["# The warehouse's views", "",
             "<!-- generated from gpuledger/warehouse/sql/views.yml by `python -m gpuledger.warehouse.views_doc "
             "--write`; do not edit by hand (tests/unit/test_views_doc.py) -->", "",
             "Every view of the warehouse (`.gpuledger/ledger.duckdb`), column by column. Any DuckDB client reads "
             "them: `gpuledger sql \"select * from v_sweep_roi\"`, or `duckdb .gpuledger/ledger.duckdb` and "
             "`select * from v_runs` (the same text is in the database as comments: `duckdb_views()`, "
             "`duckdb_columns()`). Units: `_s` seconds, `_gib` GiB, `_usd` US dollars, `_pct` percent; "
             "timestamps are UTC. [docs/warehouse.md](warehouse.md) explains the warehouse.", ""]
    views = doc.get("views") or {}
    lines += ["| view | what |", "|---|---|"]
    lines += [f"| [`{name}`](#{name}) | {_cell(v.get('description') or '')} |"
              for name, v in views.items()]
    lines += ["", "## Definitions", ""]
    for name, text in (doc.get("definitions") or {}).items():
        lines.append(f"- **`{name}`**: {_cell(text)}")
    for name, v in views.items():
        lines += ["", f"## {name}", "", _cell(v.get("description") or "")]
        tests = v.get("tests") or []
        if tests:
            lines += ["", "Tests: " + "; ".join(f"`{_cell(yaml.safe_dump(t, default_flow_style=True).strip())}`"
                                                for t in tests)]
        lines += ["", "| column | unit | description | tests |", "|---|---|---|---|"]
        for c in v.get("columns") or []:
            ctests = ", ".join(_cell(yaml.safe_dump(t, default_flow_style=True).strip()) for t in c.get("tests") or [])
            lines.append(f"| `{c['name']}` | {_cell(c.get('unit') or '')} | {_cell(c.get('description') or '')} | "
                         f"{ctests} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    text = render()
    if "--write" in argv:
        target = Path(__file__).resolve().parents[2] / "docs" / "views.md"
        target.write_text(text, encoding="utf-8")
        print(f"wrote {target}")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
