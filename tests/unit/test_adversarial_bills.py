"""Issue 31: hostile and careless bills. A gzip bomb is refused while it decompresses (bounded memory
and time), too many line items are refused while they are read, a real Parquet export with native
timestamp columns is read, a charge period that ends before it starts is refused with its row, and
bill text that looks like a spreadsheet formula never lands as one in a CSV the reports write."""

from __future__ import annotations

import gzip
import json
import shutil
import time
from pathlib import Path

import polars as pl
import pytest

from gpuledger.billing import focus
from gpuledger.billing.focus import FocusError, read_focus

BILL = Path(__file__).resolve().parents[1] / "data" / "focus" / "gpu_cloud_2026-02.csv"


def test_a_gzip_bomb_is_refused_while_decompressing(tmp_path, monkeypatch):
    monkeypatch.setattr(focus, "MAX_TEXT_BYTES", 8 * 1024**2)  # the same rule at a test's scale
    bomb = tmp_path / "bill.csv.gz"
    with gzip.open(bomb, "wb") as fh:
        fh.write(BILL.read_bytes())
        zeros = b"0" * (1 << 20)
        for _ in range(64):  # 64 MiB of text in a file of ~70 KB
            fh.write(zeros)
    assert bomb.stat().st_size < 1024**2
    started = time.monotonic()
    with pytest.raises(FocusError, match=r"expands to more than 8 MiB once decompressed") as info:
        read_focus(bomb)
    assert time.monotonic() - started < 10 and len(str(info.value).splitlines()) == 1


def test_a_small_gzip_bill_still_reads(tmp_path):  # positive control
    small = tmp_path / "bill.csv.gz"
    small.write_bytes(gzip.compress(BILL.read_bytes()))
    assert read_focus(small).frame.height == read_focus(BILL).frame.height > 0


def test_too_many_line_items_are_refused_while_reading(tmp_path, monkeypatch):
    monkeypatch.setattr(focus, "MAX_ROWS", 3)
    with pytest.raises(FocusError, match=r"row \d+: more than 3 line items"):
        read_focus(BILL)


def test_a_parquet_export_with_native_timestamps_is_read(tmp_path):
    text = pl.read_csv(BILL, infer_schema_length=0)
    periods = ["BillingPeriodStart", "BillingPeriodEnd", "ChargePeriodStart", "ChargePeriodEnd"]
    native = text.with_columns(pl.col(c).str.to_datetime("%Y-%m-%dT%H:%M:%SZ", time_zone="UTC") for c in periods)
    native = native.with_columns(pl.col("BilledCost").cast(pl.Float64))
    assert all(isinstance(native.schema[c], pl.Datetime) for c in periods)
    native.write_parquet(tmp_path / "bill.parquet")
    from_parquet = read_focus(tmp_path / "bill.parquet").frame
    from_csv = read_focus(BILL).frame
    for c in ("charge_period_start", "charge_period_end", "billing_period_start", "billed_cost"):
        assert from_parquet[c].to_list() == from_csv[c].to_list()


def test_a_charge_period_that_ends_before_it_starts_is_refused(tmp_path):
    lines = BILL.read_text().splitlines()
    lines[2] = lines[2].replace("2026-02-02T10:00:00Z,2026-02-02T11:00:00Z", "2026-02-02T11:00:00Z,2026-02-02T10:00:00Z")
    (tmp_path / "bill.csv").write_text("\n".join(lines) + "\n")
    with pytest.raises(FocusError, match=r"row 3, column ChargePeriodEnd: '2026-02-02T10:00:00Z' is before its "
                                         r"ChargePeriodStart"):
        read_focus(tmp_path / "bill.csv")
    shutil.copy(BILL, tmp_path / "ok.csv")
    assert read_focus(tmp_path / "ok.csv").frame.height > 0  # positive control


def test_a_parquet_export_with_tags_as_a_map_or_key_value_list_is_read(tmp_path):
    # AWS Data Exports write Tags as map<string,string>, BigQuery's FOCUS view as a list of key/value
    # structs: ingest ended in polars' "cannot cast `map[str, str]` to `str`" traceback
    import pyarrow as pa
    import pyarrow.parquet as pq

    text = pl.read_csv(BILL, infer_schema_length=0)
    expected = read_focus(BILL).frame["tags"].to_list()
    pairs = [None if t is None else sorted(json.loads(t).items()) for t in expected]
    table = text.drop("Tags").to_arrow()
    forms = {"map": pa.array(pairs, pa.map_(pa.string(), pa.string())),
             "list": pa.array([None if p is None else [{"key": k, "value": v} for k, v in p] for p in pairs],
                              pa.list_(pa.struct([("key", pa.string()), ("value", pa.string())])))}
    for name, tags in forms.items():
        pq.write_table(table.append_column("Tags", tags), tmp_path / f"{name}.parquet")
        got = read_focus(tmp_path / f"{name}.parquet").frame["tags"].to_list()
        assert [g and json.loads(g) for g in got] == [t and json.loads(t) for t in expected], name


def test_a_bill_that_is_not_utf8_names_its_row(tmp_path):
    # a spreadsheet's Windows-1252 save of the bill said only "not UTF-8 text (byte 1234)"
    lines = BILL.read_text().splitlines()
    lines[3] = lines[3].replace("g5.xlarge spot", "g5.xlarge spot caf\u00e9")
    latin = tmp_path / "bill.csv"
    latin.write_bytes(("\n".join(lines) + "\n").encode("cp1252"))
    with pytest.raises(FocusError, match=r"bill.csv: row 4: not UTF-8 text \(byte \d+: invalid") as info:
        read_focus(latin)
    assert len(str(info.value).splitlines()) == 1
