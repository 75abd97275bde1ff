"""docs/views.md is generated from views.yml (gpuledger/warehouse/views_doc.py) and must be current."""

from __future__ import annotations

from pathlib import Path

from gpuledger.warehouse.sqlfiles import view_docs
from gpuledger.warehouse.views_doc import render

PAGE = Path(__file__).resolve().parents[2] / "docs" / "views.md"


def test_the_views_page_is_what_views_yml_generates():
    assert PAGE.read_text(encoding="utf-8") == render(), (
        "docs/views.md is out of date: run `python -m gpuledger.warehouse.views_doc --write`")


def test_the_page_names_every_view_and_column():
    text = render()
    for view, doc in view_docs().items():
        assert f"## {view}\n" in text
        for column in doc["columns"]:
            assert f"| `{column}` |" in text, (view, column)
