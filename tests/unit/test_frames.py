"""The pandera schemas: what they refuse, and that they match the warehouse tables."""

from __future__ import annotations

from datetime import datetime

import polars as pl
import pytest
from helpers.warehouse_template import fresh_warehouse
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuledger.warehouse import Warehouse, frames


def metrics_frame(n=3, **over):
    data = {"run_id": ["r"] * n, "name": ["loss"] * n, "seq": list(range(n)), "step": [None] * n,
            "t_s": [0.5] * n, "value": [1.0] * n}
    data.update(over)
    return pl.DataFrame(data)


def test_valid_frame_passes_and_is_coerced():
    df = frames.validate_frame("metrics", metrics_frame())
    assert df.schema["seq"] == pl.Int32 and df.schema["step"] == pl.Int64


@pytest.mark.parametrize("over, needle", [
    ({"seq": [0, -1, 2]}, "seq"),
    ({"t_s": [0.0, -3.0, 1.0]}, "t_s"),
    ({"name": ["loss", "", "loss"]}, "keys_set_values_finite"),
    ({"value": [1.0, float("nan"), 2.0]}, "keys_set_values_finite"),
    ({"value": [1.0, float("inf"), 2.0]}, "keys_set_values_finite"),
    ({"value": ["a", "b", "c"]}, "value"),
])
def test_bad_metric_values_are_named(over, needle):
    with pytest.raises(frames.FrameError, match=needle):
        frames.validate_frame("metrics", metrics_frame(**over))


def test_non_finite_numbers_are_refused_by_every_frame_that_holds_them():
    with pytest.raises(frames.FrameError, match="value_finite"):
        frames.validate_frame("final_metrics", pl.DataFrame({"run_id": ["r"], "name": ["loss"],
                                                             "value": [float("-inf")]}))
    line = {"run_id": "r", "line_no": 0, "source": "catalog", "description": None, "usd_per_hour": 2.0,
            "hours": float("inf"), "cost_usd": float("inf"), "spot": False, "on_demand_usd_per_hour": None}
    with pytest.raises(frames.FrameError, match="numbers_finite"):
        frames.validate_frame("billing", pl.DataFrame([line]))


def test_unknown_column_and_bad_enum():
    with pytest.raises(frames.FrameError, match="colour"):
        frames.validate_frame("metrics", metrics_frame().with_columns(colour=pl.lit("red")))
    row = {"sweep_id": "s", "trial_id": "t", "status": "exploded", "updated_at": datetime(2026, 1, 5)}
    with pytest.raises(frames.FrameError, match="status"):
        frames.validate_frame("trials", pl.DataFrame([row]))


def test_schemas_match_the_tables(tmp_path):
    with Warehouse.open(fresh_warehouse(tmp_path / "w.duckdb")) as wh:
        for table in frames.SCHEMAS:
            cols = wh.query(f"select * from {table} limit 0").columns
            assert cols == frames.columns(table), table


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False, width=64), min_size=1, max_size=20),
       st.floats(min_value=0, max_value=1e6))
@pytest.mark.slow  # over ~0.5 s alone (a report, warehouse, plan or subprocess): make test runs it, make test-fast does not
def test_any_finite_metric_series_validates(values, t):
    n = len(values)
    df = metrics_frame(n, value=values, t_s=[t] * n)
    assert frames.validate_frame("metrics", df).height == n
