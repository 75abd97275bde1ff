"""Reading and validating FOCUS billing exports (FinOps Open Cost and Usage Specification 1.0-1.2).

Every major cloud exports its bill in FOCUS (AWS Data Exports, GCP's FOCUS BigQuery view, Azure Cost
Management exports, OCI). `read_focus(path)` reads one file (CSV, gzipped CSV or Parquet) into a
typed polars frame with the FOCUS columns in snake_case (`BilledCost` -> `billed_cost`), validated:

- the columns the ledger needs are present (`REQUIRED`): the charge and billing periods and
  `BilledCost`; every other FOCUS column is optional and stored as null when absent (the output
  names the absent ones, `FocusFile.absent`);
- values have their FOCUS type: decimals, ISO 8601 date-times (UTC), `Tags` a JSON object;
- the closed vocabularies of the specification: ChargeCategory, ChargeClass, ChargeFrequency,
  PricingCategory, CommitmentDiscountCategory, CommitmentDiscountStatus; currencies are ISO 4217;
- a `BillingCurrency` that is absent is taken as USD and every such row is flagged
  (`currency_assumed`): the specification's own example files omit it.

Any problem raises `FocusError` naming the file, the row (1 = the header line of a CSV) and the column.
Null spellings seen in real exports and in the specification's examples ("", "null", "(null)",
"NULL") read as null. Column names match case-insensitively ("SkuPriceid" is `SkuPriceId`); the
examples' misspelling `BilledCurrency` reads as `BillingCurrency`. Custom columns (`x_...`) and any
other unknown column are kept in `extra` (a JSON object per row), never dropped.

No DuckDB here: the warehouse package stores the frame (`Warehouse.ingest_billing_file`).
Reference: FOCUS specification, https://focus.finops.org/ and
github.com/FinOps-Open-Cost-and-Usage-Spec/FOCUS_Spec (specification/columns/*.md).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from gpuledger.errors import UserError

#: a bill export larger than this is refused (split it, or raise the bound)
MAX_FILE_BYTES = 2 * 1024**3
#: most text a bill may hold once decompressed (bytes), checked while decompressing (a 1.5 MB gzip
#: can expand to gigabytes), and most line items: a month of a team's GPU bill is far below both;
#: a larger export is split by billing period
MAX_TEXT_BYTES = 256 * 1024**2
MAX_ROWS = 500_000

#: FOCUS column -> (snake_case name, kind); kind is decimal | datetime | string | json
COLUMNS: dict[str, tuple[str, str]] = {}
for _name, _kind in [
    ("AvailabilityZone", "string"), ("BilledCost", "decimal"), ("BillingAccountId", "string"),
    ("BillingAccountName", "string"), ("BillingAccountType", "string"), ("BillingCurrency", "string"),
    ("BillingPeriodEnd", "datetime"), ("BillingPeriodStart", "datetime"),
    ("CapacityReservationId", "string"), ("CapacityReservationStatus", "string"),
    ("ChargeCategory", "string"), ("ChargeClass", "string"), ("ChargeDescription", "string"),
    ("ChargeFrequency", "string"), ("ChargePeriodEnd", "datetime"), ("ChargePeriodStart", "datetime"),
    ("CommitmentDiscountCategory", "string"), ("CommitmentDiscountId", "string"),
    ("CommitmentDiscountName", "string"), ("CommitmentDiscountQuantity", "decimal"),
    ("CommitmentDiscountStatus", "string"), ("CommitmentDiscountType", "string"),
    ("CommitmentDiscountUnit", "string"), ("ConsumedQuantity", "decimal"), ("ConsumedUnit", "string"),
    ("ContractedCost", "decimal"), ("ContractedUnitPrice", "decimal"), ("EffectiveCost", "decimal"),
    ("InvoiceId", "string"), ("InvoiceIssuerName", "string"), ("ListCost", "decimal"),
    ("ListUnitPrice", "decimal"), ("PricingCategory", "string"), ("PricingCurrency", "string"),
    ("PricingCurrencyContractedUnitPrice", "decimal"), ("PricingCurrencyEffectiveCost", "decimal"),
    ("PricingCurrencyListUnitPrice", "decimal"), ("PricingQuantity", "decimal"), ("PricingUnit", "string"),
    ("ProviderName", "string"), ("PublisherName", "string"), ("RegionId", "string"),
    ("RegionName", "string"), ("ResourceId", "string"), ("ResourceName", "string"),
    ("ResourceType", "string"), ("ServiceCategory", "string"), ("ServiceName", "string"),
    ("ServiceSubcategory", "string"), ("SkuId", "string"), ("SkuMeter", "string"),
    ("SkuPriceDetails", "json"), ("SkuPriceId", "string"), ("SubAccountId", "string"),
    ("SubAccountName", "string"), ("SubAccountType", "string"), ("Tags", "json"),
]:
    COLUMNS[_name] = (re.sub(r"(?<!^)(?=[A-Z])", "_", _name).lower(), _kind)

#: the columns without which a line item cannot be put in the ledger
REQUIRED = ("BilledCost", "BillingPeriodStart", "BillingPeriodEnd", "ChargePeriodStart", "ChargePeriodEnd")

#: spellings of other names seen in real files (FOCUS 1.0 preview names, the spec's own examples)
ALIASES = {"billedcurrency": "BillingCurrency", "provider": "ProviderName", "publisher": "PublisherName",
           "invoiceissuer": "InvoiceIssuerName"}

#: closed vocabularies (FOCUS 1.2 column definitions); matched exactly, as the specification says
VOCABULARIES: dict[str, frozenset[str]] = {
    "ChargeCategory": frozenset({"Usage", "Purchase", "Tax", "Credit", "Adjustment"}),
    "ChargeClass": frozenset({"Correction"}),
    "ChargeFrequency": frozenset({"One-Time", "Recurring", "Usage-Based"}),
    "PricingCategory": frozenset({"Standard", "Dynamic", "Committed", "Other"}),
    "CommitmentDiscountCategory": frozenset({"Spend", "Usage"}),
    "CommitmentDiscountStatus": frozenset({"Used", "Unused"}),
    "CapacityReservationStatus": frozenset({"Used", "Unused"}),
}

#: ISO 4217 active codes (2024 list) plus the common virtual currencies are not accepted as currency
ISO_4217 = frozenset(["AED", "AFN", "ALL", "AMD", "ANG", "AOA", "ARS", "AUD", "AWG", "AZN", "BAM", "BBD", "BDT", "BGN", "BHD", "BIF", "BMD", "BND", "BOB", "BRL", "BSD", "BTN", "BWP", "BYN", "BZD", "CAD", "CDF", "CHF", "CLP", "CNY", "COP", "CRC", "CUP", "CVE", "CZK", "DJF", "DKK", "DOP", "DZD", "EGP", "ERN", "ETB", "EUR", "FJD", "FKP", "GBP", "GEL", "GHS", "GIP", "GMD", "GNF", "GTQ", "GYD", "HKD", "HNL", "HTG", "HUF", "IDR", "ILS", "INR", "IQD", "IRR", "ISK", "JMD", "JOD", "JPY", "KES", "KGS", "KHR", "KMF", "KPW", "KRW", "KWD", "KYD", "KZT", "LAK", "LBP", "LKR", "LRD", "LSL", "LYD", "MAD", "MDL", "MGA", "MKD", "MMK", "MNT", "MOP", "MRU", "MUR", "MVR", "MWK", "MXN", "MYR", "MZN", "NAD", "NGN", "NIO", "NOK", "NPR", "NZD", "OMR", "PAB", "PEN", "PGK", "PHP", "PKR", "PLN", "PYG", "QAR", "RON", "RSD", "RUB", "RWF", "SAR", "SBD", "SCR", "SDG", "SEK", "SGD", "SHP", "SLE", "SLL", "SOS", "SRD", "SSP", "STN", "SVC", "SYP", "SZL", "THB", "TJS", "TMT", "TND", "TOP", "TRY", "TTD", "TWD", "TZS", "UAH", "UGX", "USD", "UYU", "UZS", "VED", "VES", "VND", "VUV", "WST", "XAF", "XCD", "XOF", "XPF", "YER", "ZAR", "ZMW", "ZWL"])

NULL_TOKENS = ("", "null", "NULL", "Null", "(null)", "None")

_DECIMAL_RE = r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$"
_DT_FORMATS = ("%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%dT%H:%M:%S%.fZ", "%Y-%m-%dT%H:%M:%S%:z",
               "%Y-%m-%dT%H:%M:%S%.f%:z", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d")


class FocusError(UserError):
    """A billing file that is not valid FOCUS: names the file, row and column."""


@dataclass
class FocusFile:
    """One validated export: `frame` holds every FOCUS column (snake_case, typed) plus `source_row`,
    `currency_assumed` and `extra`; `absent` lists the FOCUS columns the file did not have."""

    path: Path
    sha256: str
    frame: pl.DataFrame
    absent: list[str] = field(default_factory=list)
    extra_columns: list[str] = field(default_factory=list)
    currency_assumed_rows: int = 0


def read_focus(path: str | Path) -> FocusFile:
    """Reads and validates one FOCUS file (.csv, .csv.gz, .parquet); raises `FocusError`."""
    p = Path(path)
    where = str(p)
    if not p.is_file():
        raise FocusError(f"{where}: not a readable regular file")
    size = p.stat().st_size
    if size > MAX_FILE_BYTES:
        raise FocusError(f"{where}: {size / 1024**3:.1f} GiB is larger than the {MAX_FILE_BYTES // 1024**3} GiB "
                         "a billing file may be; split the export by billing period")
    if size > MAX_TEXT_BYTES and p.name.lower().endswith(".csv"):
        raise FocusError(f"{where}: {size / 1024**2:.0f} MiB of CSV; a billing file may hold at most "
                         f"{MAX_TEXT_BYTES // 1024**2} MiB of text: split the export by billing period")
    data = p.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    raw, rows = _read_raw(p, data)
    return _validate(p, digest, raw, rows)


def _read_raw(p: Path, data: bytes) -> tuple[pl.DataFrame, pl.Series]:
    """Returns every column as text, and each row's number in the file (a CSV's header is row 1)."""
    import io

    where = str(p)
    name = p.name.lower()
    if name.endswith(".parquet"):
        try:
            height = pl.scan_parquet(io.BytesIO(data)).select(pl.len()).collect().item()
            if height > MAX_ROWS:
                raise FocusError(f"{where}: {height} line items; a billing file may have at most {MAX_ROWS} "
                                 "(split the export by billing period)")
            df = pl.read_parquet(io.BytesIO(data))
        except FocusError:
            raise
        except Exception as err:  # polars/arrow: a corrupt Parquet file
            raise FocusError(f"{where}: cannot be read as Parquet ({_first_line(err)})") from None
        return (pl.DataFrame([_as_text(where, df[c]) for c in df.columns]),
                pl.Series("source_row", range(1, df.height + 1), dtype=pl.Int64))
    if name.endswith(".gz"):
        data = _gunzip_bounded(where, data)
    elif not name.endswith(".csv"):
        raise FocusError(f"{where}: unknown file type; FOCUS exports are .csv, .csv.gz or .parquet")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data[:err.start].count(b"\n") + 1
        raise FocusError(f"{where}: row {line}: not UTF-8 text (byte {err.start}: {err.reason}); export the "
                         "bill as UTF-8") from None
    return _parse_csv(where, text)


def _gunzip_bounded(where: str, data: bytes) -> bytes:
    """Returns the decompressed bytes, read in pieces and refused past `MAX_TEXT_BYTES` (so a gzip
    bomb costs at most that much memory and time)."""
    import io

    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as fh:
            out = fh.read(MAX_TEXT_BYTES + 1)
    except (OSError, EOFError, gzip.BadGzipFile) as err:
        raise FocusError(f"{where}: not a gzip file ({err})") from None
    if len(out) > MAX_TEXT_BYTES:
        raise FocusError(f"{where}: expands to more than {MAX_TEXT_BYTES // 1024**2} MiB once decompressed "
                         f"(a {len(data) / 1024**2:.1f} MB file); a billing file may hold at most that: split the "
                         "export by billing period")
    return out


def _as_text(where: str, s: pl.Series) -> pl.Series:
    """Returns a Parquet column as text the validation reads: native timestamps and dates as ISO 8601
    in UTC (a zone-aware timestamp converted, a naive one taken as UTC), a nested column (AWS writes
    Tags as a map, GCP as a list of key/value structs) as JSON text, everything else cast."""
    dtype = s.dtype
    if isinstance(dtype, pl.Datetime):
        if dtype.time_zone is not None:
            s = s.dt.convert_time_zone("UTC").dt.replace_time_zone(None)
        return s.dt.strftime("%Y-%m-%dT%H:%M:%S%.fZ")
    if isinstance(dtype, pl.Date):
        return s.dt.strftime("%Y-%m-%d")
    if dtype.is_nested():
        return pl.Series(s.name, [None if v is None else json.dumps(_key_values(v), default=str)
                                  for v in s.to_list()], dtype=pl.Utf8)
    try:
        return s.cast(pl.Utf8)
    except Exception as err:  # polars: a type with no text form (binary that is not UTF-8, ...)
        raise FocusError(f"{where}: column {s.name}: a Parquet {dtype} column cannot be read as text "
                         f"({_first_line(err)})") from None


def _key_values(value: Any) -> Any:
    """Returns a nested Parquet value as JSON: a list of {key, value} structs (BigQuery's form of a
    map) as one object, anything else as it is."""
    if isinstance(value, list) and value and all(isinstance(v, dict) and "key" in v and "value" in v
                                                 for v in value):
        return {str(v["key"]): v["value"] for v in value}
    if isinstance(value, list) and not value:
        return {}
    return value


def _parse_csv(where: str, text: str) -> tuple[pl.DataFrame, pl.Series]:
    """Parses CSV text with the standard library (quoted fields over several lines, blank lines
    between rows as in the specification's examples); returns the frame and each row's line number."""
    import csv
    import io

    if "\x00" in text:
        raise FocusError(f"{where}: contains NUL bytes; not a CSV text file")
    reader = csv.reader(io.StringIO(text))
    try:
        header = next(reader, None)
        if not header:
            raise FocusError(f"{where}: empty file (no header line)")
        width = len(header)
        rows: list[list[str]] = []
        lines: list[int] = []
        for row in reader:
            if not row or all(not v.strip() for v in row):
                continue
            if len(row) != width:
                raise FocusError(f"{where}: row {reader.line_num}: {len(row)} fields where the header has {width}")
            if len(rows) >= MAX_ROWS:
                raise FocusError(f"{where}: row {reader.line_num}: more than {MAX_ROWS} line items; a billing file "
                                 "may have at most that (split the export by billing period)")
            rows.append(row)
            lines.append(reader.line_num)
    except csv.Error as err:
        raise FocusError(f"{where}: row {reader.line_num}: not valid CSV ({err})") from None
    if len(set(header)) != width:
        dup = next(h for h in header if header.count(h) > 1)
        raise FocusError(f"{where}: row 1, column {dup}: the column appears twice")
    columns = list(zip(*rows, strict=True)) if rows else [() for _ in header]
    df = pl.DataFrame([pl.Series(h, list(col), dtype=pl.Utf8) for h, col in zip(header, columns, strict=True)])
    return df, pl.Series("source_row", lines, dtype=pl.Int64)


def _validate(p: Path, digest: str, raw: pl.DataFrame, rows: pl.Series) -> FocusFile:
    where = str(p)
    by_lower = {c.lower(): c for c in COLUMNS}
    mapping: dict[str, str] = {}  # file column -> FOCUS column
    extra: list[str] = []
    for col in raw.columns:
        key = col.strip().lower()
        focus = by_lower.get(key) or ALIASES.get(key)
        if focus is None:
            extra.append(col)
        elif focus in mapping.values():
            raise FocusError(f"{where}: row 1, column {col}: the column {focus} appears twice")
        else:
            mapping[col] = focus
    missing = [c for c in REQUIRED if c not in mapping.values()]
    if missing:
        raise FocusError(f"{where}: row 1: required FOCUS column(s) missing: {', '.join(missing)} "
                         f"(the file has: {', '.join(raw.columns[:12])}{' ...' if raw.width > 12 else ''})")
    if raw.height == 0:
        raise FocusError(f"{where}: no line items (only a header)")
    df = raw.with_columns(pl.when(pl.col(c).str.strip_chars().is_in(NULL_TOKENS)).then(None)
                          .otherwise(pl.col(c).str.strip_chars()).alias(c) for c in raw.columns)
    out: dict[str, pl.Series] = {}
    for col, focus in mapping.items():
        snake, kind = COLUMNS[focus]
        s = df[col]
        out[snake] = _typed(where, s, focus, col, kind, rows)
        if focus in REQUIRED and s.null_count():
            i = int(s.is_null().arg_true()[0])
            raise FocusError(f"{where}: row {rows[i]}, column {col}: empty; every line item needs a {focus}")
        if focus in VOCABULARIES:
            _vocabulary(where, s, focus, col, rows)
    for start, end in (("ChargePeriodStart", "ChargePeriodEnd"), ("BillingPeriodStart", "BillingPeriodEnd")):
        a, b = out.get(COLUMNS[start][0]), out.get(COLUMNS[end][0])
        if a is not None and b is not None:
            col = next(c for c, f in mapping.items() if f == end)
            _raise_first(where, df[col], (b < a).fill_null(False), col, rows, f"is before its {start}")
    currency_col = next((c for c, f in mapping.items() if f == "BillingCurrency"), None)
    n = df.height
    if currency_col is None:
        assumed = pl.Series("currency_assumed", [True] * n)
        out["billing_currency"] = pl.Series("billing_currency", ["USD"] * n)
    else:
        cur = df[currency_col]
        assumed = cur.is_null().alias("currency_assumed")
        out["billing_currency"] = cur.fill_null("USD").alias("billing_currency")
    for focus in ("BillingCurrency", "PricingCurrency"):
        snake = COLUMNS[focus][0]
        if snake in out:
            _currency(where, out[snake], focus, rows)
    absent = [c for c in COLUMNS if COLUMNS[c][0] not in out]
    for c in absent:
        snake, kind = COLUMNS[c]
        dtype = {"decimal": pl.Float64, "datetime": pl.Datetime("us")}.get(kind, pl.Utf8)
        out[snake] = pl.Series(snake, [None] * n, dtype=dtype)
    extra_json = [json.dumps({k: v for k, v in row.items() if v is not None}, sort_keys=True) or None
                  for row in df.select(extra).iter_rows(named=True)] if extra else [None] * n
    frame = pl.DataFrame({COLUMNS[c][0]: out[COLUMNS[c][0]] for c in COLUMNS}).with_columns(
        rows,
        assumed.alias("currency_assumed"),
        pl.Series("extra", extra_json, dtype=pl.Utf8),
    )
    return FocusFile(path=p, sha256=digest, frame=frame, absent=absent if currency_col else
                     [c for c in absent if c != "BillingCurrency"] + ["BillingCurrency"],
                     extra_columns=extra, currency_assumed_rows=int(assumed.sum()))


def _typed(where: str, s: pl.Series, focus: str, col: str, kind: str, rows: pl.Series) -> pl.Series:
    snake = COLUMNS[focus][0]
    if kind == "decimal":
        bad = s.is_not_null() & ~s.str.contains(_DECIMAL_RE)
        _raise_first(where, s, bad, col, rows, "is not a decimal number")
        number = s.cast(pl.Float64)
        _raise_first(where, s, number.is_infinite(), col, rows, "is too large to be an amount")
        return number.alias(snake)
    if kind == "datetime":
        parsed = None
        for fmt in _DT_FORMATS:
            attempt = s.str.to_datetime(fmt, strict=False, time_zone="UTC" if "z" in fmt.lower() else None)
            attempt = attempt.dt.replace_time_zone(None) if attempt.dtype.time_zone else attempt  # type: ignore[attr-defined]
            attempt = attempt.cast(pl.Datetime("us"))
            parsed = attempt if parsed is None else parsed.fill_null(attempt)
        assert parsed is not None
        _raise_first(where, s, s.is_not_null() & parsed.is_null(), col, rows,
                     "is not an ISO 8601 date-time (e.g. 2026-02-01T00:00:00Z)")
        return parsed.alias(snake)
    if kind == "json":
        bad = [i for i, v in enumerate(s.to_list()) if v is not None and not _json_object(v)]
        if bad:
            i = bad[0]
            raise FocusError(f"{where}: row {rows[i]}, column {col}: {_show(s[i])} is not a JSON object")
        return s.alias(snake)
    return s.alias(snake)


def _vocabulary(where: str, s: pl.Series, focus: str, col: str, rows: pl.Series) -> None:
    allowed = VOCABULARIES[focus]
    bad = s.is_not_null() & ~s.is_in(sorted(allowed))
    _raise_first(where, s, bad, col, rows, f"is not one of {', '.join(sorted(allowed))}")


def _currency(where: str, s: pl.Series, focus: str, rows: pl.Series) -> None:
    bad = s.is_not_null() & ~s.is_in(sorted(ISO_4217))
    _raise_first(where, s, bad, focus, rows, "is not an ISO 4217 currency code")


def _raise_first(where: str, s: pl.Series, bad: pl.Series, col: str, rows: pl.Series, what: str) -> None:
    if bad.any():
        i = int(bad.arg_true()[0])
        raise FocusError(f"{where}: row {rows[i]}, column {col}: {_show(s[i])} {what}")


def _json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "...'"


def _first_line(err: BaseException) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0][:200]
