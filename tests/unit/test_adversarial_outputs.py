"""Issue 31: what gpuledger writes is safe wherever it goes, and written whole or not at all.

Chart text is drawn literally (a `$` is not mathtext), CSV cells cannot run as spreadsheet formulas,
markdown table cells are escaped like the rest of the page, log lines stay one per event, and a
report written on a full disk leaves the previous one whole. Each beside a positive control.
"""

from __future__ import annotations

import errno
import logging

import polars as pl
import pytest

from gpuledger import files
from gpuledger.report.charts import bar_chart, step_chart
from gpuledger.report.common import write_report
from gpuledger.report.document import Document, Note, Table
from gpuledger.report.markdown import render_markdown


@pytest.mark.slow  # over ~1 s (a whole report, replay, plan or warehouse): make test runs it, make test-fast does not
@pytest.mark.parametrize("text", ["eval $x^{$ loss", "$\\frac{a}{$", "a$b$c", "$$", "cost $ per $"])
def test_chart_text_with_dollars_is_drawn_as_written(text):
    svg = bar_chart([(f"H100 {text}", 2.0), ("A100", 1.0)], title=text, value_label=text)
    assert text in svg  # the text itself, not a mathtext rendering of it
    svg = step_chart([(text, "#000000", [(0.0, 1.0), (1.0, 0.5)])], title="best so far", x_label=text,
                     y_label="eval_loss")
    assert "<svg" in svg


def test_a_plain_chart_still_draws(tmp_path):  # positive control
    assert "H100" in bar_chart([("H100", 2.0)], title="GPU-hours", value_label="h")


def _doc(cell: str) -> Document:
    return Document(title="t", blocks=[Table(headers=["label", "value"], rows=[[cell, 1.0], ["plain", 2.0]]),
                                       Note(text=cell)])


def test_csv_cells_that_would_run_as_formulas_are_neutralised(tmp_path):
    cells = ['=HYPERLINK("http://x","click")', "@SUM(A1:A9)", "+1+2", "-3+4", "\tcmd", "\rcmd", "plain", "a=b"]
    table = pl.DataFrame({"text": cells, "n": [-1.5, 2, 3, 4, 5, 6, 7, 8]})
    out = write_report(tmp_path, "r", _doc("x"), {"bill": table})
    read = pl.read_csv(out.csv[0])
    assert read["text"].to_list()[:6] == ["'" + c for c in cells[:6]]
    assert read["text"].to_list()[6:] == ["plain", "a=b"]  # positive control: text as written
    assert read["n"].to_list()[0] == -1.5  # numbers stay numbers


def test_markdown_cells_carry_no_raw_html(tmp_path):
    md = render_markdown(_doc("<script>alert(1)</script> | *x*"))
    assert "<script>" not in md and "\\<script\\>" in md and "\\|" in md
    assert "| plain | 2.0 |" in md  # positive control


def test_a_report_written_on_a_full_disk_leaves_the_previous_one_whole(tmp_path, monkeypatch):
    first = write_report(tmp_path, "r", _doc("first"), {"t": pl.DataFrame({"a": [1]})})
    before = {p: p.read_bytes() for p in (first.html, first.markdown, *first.csv)}
    real_write = files.os.write

    def full(fd, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files.os, "write", full)
    with pytest.raises(OSError, match="No space left"):
        write_report(tmp_path, "r", _doc("second, longer " * 100), {"t": pl.DataFrame({"a": [2]})})
    monkeypatch.setattr(files.os, "write", real_write)
    assert {p: p.read_bytes() for p in before} == before
    assert not [p for p in tmp_path.rglob("*.tmp")]  # no temporary file left behind
    second = write_report(tmp_path, "r", _doc("second"), {"t": pl.DataFrame({"a": [2]})})  # positive control
    assert "second" in second.markdown.read_text()


def test_a_newline_in_a_metric_name_cannot_forge_a_log_line(caplog):
    from gpuledger.runtime.trial_lines import _fmt_metrics, _one_line

    with caplog.at_level(logging.INFO):
        logging.getLogger("t").info("Trial %s succeeded (%s)", "t1",
                                    _fmt_metrics({"loss\nERROR Trial t2 budget exceeded": 1.0, "eval": 0.5}))
    assert len(caplog.text.strip().splitlines()) == 1
    assert _one_line("plain reason") == "plain reason"  # positive control


@pytest.mark.parametrize("target", ["ducklake:postgres:password=Pw-123456 host=127.0.0.1 port=1 dbname=d",
                                    "ducklake:postgres:host=127.0.0.1 port=1 password='Pw 123456' dbname=d",
                                    "ducklake:postgres:postgresql://u:Pw-123456@127.0.0.1:1/d"])
def test_passwords_are_redacted_in_every_form_and_by_doctor(target):
    from types import SimpleNamespace

    from gpuledger.cli.commands.doctor import check_warehouse
    from gpuledger.warehouse.connect import redact

    assert "123456" not in redact(target) and "127.0.0.1" in redact(target)  # the rest kept
    said = " ".join(f"{c.detail} {getattr(c, 'fix', '')}" for c in check_warehouse(SimpleNamespace(warehouse=target)))
    assert "123456" not in said
