"""The pandera schema of validated FOCUS line items (after `focus.read_focus` typed them)."""

from __future__ import annotations

import pandera.polars as pa
import polars as pl

from gpuledger.billing.focus import COLUMNS, ISO_4217, REQUIRED, VOCABULARIES, FocusError

_DTYPES = {"decimal": pl.Float64, "datetime": pl.Datetime("us"), "string": pl.Utf8, "json": pl.Utf8}


def _column(focus: str, kind: str) -> pa.Column:
    checks = []
    if focus in VOCABULARIES:
        checks.append(pa.Check.isin(sorted(VOCABULARIES[focus])))
    if focus in ("BillingCurrency", "PricingCurrency"):
        checks.append(pa.Check.isin(sorted(ISO_4217)))
    if kind == "decimal":
        checks.append(pa.Check(lambda d: d.lazyframe.select(pl.col(d.key).is_finite() | pl.col(d.key).is_null()),
                               name="finite"))
    return pa.Column(_DTYPES[kind], checks=checks, nullable=focus not in REQUIRED and focus != "BillingCurrency")


LINE_ITEMS = pa.DataFrameSchema(
    {**{snake: _column(focus, kind) for focus, (snake, kind) in COLUMNS.items()},
     "source_row": pa.Column(pl.Int64, pa.Check.ge(1)),
     "currency_assumed": pa.Column(pl.Boolean),
     "extra": pa.Column(pl.Utf8, nullable=True)},
    strict=True,
    name="billing_line_items",
)


def validate_line_items(frame: pl.DataFrame, where: str) -> pl.DataFrame:
    """Returns the frame when it meets the schema; else raises FocusError naming the first failure."""
    try:
        return LINE_ITEMS.validate(frame, lazy=True)
    except pa.errors.SchemaErrors as err:
        cases = err.failure_cases
        first = cases.row(0, named=True) if cases.height else {}
        raise FocusError(f"{where}: column {first.get('column')}: {first.get('check')} failed "
                         f"(value {first.get('failure_case')!r})") from None
