"""Pandera (polars backend) schemas of every frame that crosses into the warehouse.

One `DataFrameModel` per table of `gpuledger/warehouse/sql/migrations/*.sql`, same column names, same units
(`_s` seconds, `_gib` GiB, `_usd` US dollars; timestamps are naive UTC). `gpuledger.warehouse`
validates every frame with `validate_frame(table, df)` before it writes it, so a bad value is
refused with the column and the failing check named, before anything reaches DuckDB.

Checks are column expressions (polars, vectorised): validating a million metric rows costs a
fraction of a second (`benchmarks/ingest.py`).
"""

from __future__ import annotations

import functools

import pandera.polars as pa
import polars as pl
from pandera.errors import SchemaError, SchemaErrors

from gpuledger.vocabulary import (
    BILLING_ROLES,
    PRICE_SOURCES,
    PURPOSES,
    RECORD_LAUNCHERS,
    RUN_STATUSES,
    SWEEP_KINDS,
    TRIAL_STATUSES,
)

GOALS = ("minimize", "maximize")

_TS = pl.Datetime("us")
_nonempty = {"min_value": 1}


class _Base(pa.DataFrameModel):
    class Config:
        strict = True  # no unknown columns
        coerce = True  # ints to floats, etc.; a value that cannot be coerced is an error


def _finite(*cols: str) -> pl.Expr:
    """True where every one of `cols` is finite or null (no NaN, no +-inf reaches a sum or a report)."""
    return pl.all_horizontal([pl.col(c).is_finite().fill_null(True) for c in cols])


class SpecsFrame(_Base):
    spec_id: str = pa.Field(str_length=_nonempty, unique=True)
    name: str = pa.Field(str_length=_nonempty)
    kind: str = pa.Field(isin=list(SWEEP_KINDS))
    path: str = pa.Field(nullable=True)
    yaml_text: str = pa.Field(nullable=True)
    spec_json: str = pa.Field(nullable=True)
    first_seen_at: _TS = pa.Field()


class SweepsFrame(_Base):
    sweep_id: str = pa.Field(str_length=_nonempty, unique=True)
    name: str = pa.Field(str_length=_nonempty)
    project: str = pa.Field(nullable=True)
    owner: str = pa.Field(nullable=True)
    spec_id: str = pa.Field(nullable=True)
    spec_path: str = pa.Field(nullable=True)
    kind: str = pa.Field(isin=list(SWEEP_KINDS))
    method: str = pa.Field(nullable=True)
    model: str = pa.Field(nullable=True)
    launcher: str = pa.Field(nullable=True)
    objective_metric: str = pa.Field(nullable=True)
    objective_goal: str = pa.Field(nullable=True, isin=list(GOALS))
    objective_target: float = pa.Field(nullable=True)
    budget_usd: float = pa.Field(nullable=True, ge=0)
    deadline_s: float = pa.Field(nullable=True, ge=0)
    max_parallel: pl.Int32 = pa.Field(nullable=True, ge=1)
    forced: bool = pa.Field()
    started_at: _TS = pa.Field(nullable=True)
    ended_at: _TS = pa.Field(nullable=True)
    status: str = pa.Field(nullable=True)
    plan_json: str = pa.Field(nullable=True)
    updated_at: _TS = pa.Field()


class TrialsFrame(_Base):
    sweep_id: str = pa.Field(str_length=_nonempty)
    trial_id: str = pa.Field(str_length=_nonempty)
    trial_index: pl.Int32 = pa.Field(nullable=True, ge=0)
    params: str = pa.Field(nullable=True)
    accelerator: str = pa.Field(nullable=True)
    gpus: pl.Int32 = pa.Field(nullable=True, ge=0)
    cloud: str = pa.Field(nullable=True)
    region: str = pa.Field(nullable=True)
    instance_type: str = pa.Field(nullable=True)
    spot: bool = pa.Field(nullable=True)
    est_memory_gib: float = pa.Field(nullable=True, ge=0)
    est_wall_s: float = pa.Field(nullable=True, ge=0)
    est_cost_usd: float = pa.Field(nullable=True, ge=0)
    feasible: bool = pa.Field(nullable=True)
    reason: str = pa.Field(nullable=True)
    status: str = pa.Field(isin=list(TRIAL_STATUSES))
    updated_at: _TS = pa.Field()
    est_flops: float = pa.Field(nullable=True, ge=0)
    est_basis: str = pa.Field(nullable=True)
    cloud_equiv_accelerator: str = pa.Field(nullable=True)
    cloud_equiv_gpus: pl.Int32 = pa.Field(nullable=True, ge=0)
    cloud_equiv_instance_type: str = pa.Field(nullable=True)
    cloud_equiv_cloud: str = pa.Field(nullable=True)
    cloud_equiv_spot: bool = pa.Field(nullable=True)
    cloud_equiv_wall_s: float = pa.Field(nullable=True, ge=0)
    cloud_equiv_usd: float = pa.Field(nullable=True, ge=0)
    # migration 004 (columns added at the end of the table)
    est_pruned_cost_usd: float = pa.Field(nullable=True, ge=0)  # migration 008
    stop_rule: str = pa.Field(nullable=True, isin=["rung", "curve"])  # migration 042: what stopped a pruned trial

    @pa.dataframe_check
    def unique_key(cls, data: pa.PolarsData) -> pl.LazyFrame:
        return data.lazyframe.select(~pl.struct("sweep_id", "trial_id").is_duplicated())


class RunsFrame(_Base):
    run_id: str = pa.Field(str_length={"min_value": 1, "max_value": 200}, unique=True)
    sweep_id: str = pa.Field(nullable=True)
    trial_id: str = pa.Field(str_length=_nonempty)
    attempt: pl.Int32 = pa.Field(ge=1)
    launcher: str = pa.Field(isin=list(RECORD_LAUNCHERS))
    cloud: str = pa.Field(nullable=True)
    region: str = pa.Field(nullable=True)
    instance_type: str = pa.Field(nullable=True)
    accelerator: str = pa.Field(nullable=True)
    gpus: pl.Int32 = pa.Field(ge=0)
    spot: bool = pa.Field()
    started_at: _TS = pa.Field()
    ended_at: _TS = pa.Field()
    wall_s: float = pa.Field(ge=0)
    exit_code: pl.Int32 = pa.Field(nullable=True)
    status: str = pa.Field(isin=list(RUN_STATUSES))
    reason: str = pa.Field(nullable=True)
    peak_gpu_mem_gib: float = pa.Field(nullable=True, ge=0)
    peak_gpu_util_pct: float = pa.Field(nullable=True, ge=0)
    peak_rss_gib: float = pa.Field(nullable=True, ge=0)
    preemptions: pl.Int32 = pa.Field(ge=0)
    recoveries: pl.Int32 = pa.Field(ge=0)
    hostname: str = pa.Field(nullable=True)
    command: str = pa.Field(nullable=True)
    params: str = pa.Field(nullable=True)
    stderr_tail: str = pa.Field(nullable=True)
    cost_usd: float = pa.Field(ge=0)
    ingested_at: _TS = pa.Field()
    purpose: str = pa.Field(isin=list(PURPOSES))
    probe_shape: str = pa.Field(nullable=True)
    log_path: str = pa.Field(nullable=True)
    pack_slot: str = pa.Field(nullable=True)
    pack_share: float = pa.Field(nullable=True, gt=0, le=1)
    pack_k: pl.Int32 = pa.Field(nullable=True, ge=1)
    pack_wall_s: float = pa.Field(nullable=True, ge=0)

    @pa.dataframe_check
    def ends_after_start(cls, data: pa.PolarsData) -> pl.LazyFrame:
        return data.lazyframe.select(pl.col("ended_at") >= pl.col("started_at"))

    @pa.dataframe_check
    def numbers_finite(cls, data: pa.PolarsData) -> pl.LazyFrame:
        return data.lazyframe.select(_finite("wall_s", "peak_gpu_mem_gib", "peak_gpu_util_pct", "peak_rss_gib",
                                             "cost_usd"))


class FinalMetricsFrame(_Base):
    run_id: str = pa.Field(str_length=_nonempty)
    name: str = pa.Field(str_length=_nonempty)
    value: float = pa.Field(nullable=True)

    @pa.dataframe_check
    def value_finite(cls, data: pa.PolarsData) -> pl.LazyFrame:
        return data.lazyframe.select(_finite("value"))


class MetricsFrame(_Base):
    run_id: str = pa.Field()
    name: str = pa.Field()
    seq: pl.Int32 = pa.Field(ge=0)
    step: pl.Int64 = pa.Field(nullable=True)
    t_s: float = pa.Field(nullable=True, ge=0)
    value: float = pa.Field(nullable=True)
    # a downsampled point (`gpuledger warehouse maintain`, migration 044): NULL on raw points
    value_min: float = pa.Field(nullable=True)
    value_max: float = pa.Field(nullable=True)
    points: pl.Int32 = pa.Field(nullable=True, ge=1)

    @pa.dataframe_check
    def keys_set_values_finite(cls, data: pa.PolarsData) -> pl.LazyFrame:
        # one expression for keys and values: cheaper than separate checks on a million rows
        return data.lazyframe.select((pl.col("run_id").str.len_bytes() > 0) & (pl.col("name").str.len_bytes() > 0)
                                     & _finite("value", "t_s"))


class BillingFrame(_Base):
    run_id: str = pa.Field(str_length=_nonempty)
    line_no: pl.Int32 = pa.Field(ge=0)
    source: str = pa.Field(isin=list(PRICE_SOURCES))
    description: str = pa.Field(nullable=True)
    usd_per_hour: float = pa.Field(ge=0)
    hours: float = pa.Field(ge=0)
    cost_usd: float = pa.Field(ge=0)
    spot: bool = pa.Field()
    on_demand_usd_per_hour: float = pa.Field(nullable=True, ge=0)
    role: str = pa.Field(nullable=True, isin=list(BILLING_ROLES))
    instance_type: str = pa.Field(nullable=True)
    accelerator: str = pa.Field(nullable=True)
    gpus: pl.Int32 = pa.Field(nullable=True, ge=0)

    @pa.dataframe_check
    def numbers_finite(cls, data: pa.PolarsData) -> pl.LazyFrame:
        return data.lazyframe.select(_finite("usd_per_hour", "hours", "cost_usd", "on_demand_usd_per_hour"))


class PricesFrame(_Base):
    sweep_id: str = pa.Field(str_length=_nonempty)
    seq: pl.Int32 = pa.Field(ge=0)
    cloud: str = pa.Field(nullable=True)
    region: str = pa.Field(nullable=True)
    instance_type: str = pa.Field(nullable=True)
    accelerator: str = pa.Field(nullable=True)
    accelerator_count: pl.Int32 = pa.Field(nullable=True, ge=0)
    spot: bool = pa.Field(nullable=True)
    usd_per_hour: float = pa.Field(nullable=True, ge=0)
    on_demand_usd_per_hour: float = pa.Field(nullable=True, ge=0)
    source: str = pa.Field(nullable=True)
    as_of: str = pa.Field(nullable=True)
    extra: str = pa.Field(nullable=True)


#: table name -> schema of the frames written to it
SCHEMAS: dict[str, type[_Base]] = {
    "specs": SpecsFrame,
    "sweeps": SweepsFrame,
    "trials": TrialsFrame,
    "runs": RunsFrame,
    "final_metrics": FinalMetricsFrame,
    "metrics": MetricsFrame,
    "billing": BillingFrame,
    "prices": PricesFrame,
}


class FrameError(ValueError):
    """A frame failed its schema; the message names the table, the columns and the checks."""


@functools.cache
def _schema(table: str) -> pa.DataFrameSchema:
    return SCHEMAS[table].to_schema()


def columns(table: str) -> list[str]:
    """Returns the column names of `table`'s frame, in table order."""
    return list(_schema(table).columns)


def empty_frame(table: str) -> pl.DataFrame:
    """Returns an empty frame of `table` with the schema's dtypes."""
    schema = _schema(table)
    return pl.DataFrame(schema={name: col.dtype.type for name, col in schema.columns.items()})


def conform(table: str, df: pl.DataFrame) -> pl.DataFrame:
    """Returns `df` with the columns of `table` in order; missing nullable columns become nulls.

    Unknown columns are kept so validation (strict) names them.
    """
    schema = _schema(table)
    missing = [
        pl.lit(None, dtype=col.dtype.type).alias(name)
        for name, col in schema.columns.items()
        if name not in df.columns and col.nullable
    ]
    if missing:
        df = df.with_columns(missing)
    known = [c for c in schema.columns if c in df.columns]
    return df.select(known + [c for c in df.columns if c not in schema.columns])


def validate_frame(table: str, df: pl.DataFrame) -> pl.DataFrame:
    """Returns the validated (and coerced) frame of `table`; raises `FrameError` saying what failed."""
    schema = SCHEMAS[table]
    try:
        return schema.validate(conform(table, df), lazy=True)
    except (SchemaErrors, SchemaError) as err:
        raise FrameError(f"{table}: {_summarise(err)}") from None


def _summarise(err: SchemaError | SchemaErrors) -> str:
    """Returns a short one-paragraph summary of a pandera error (column: check, failure cases)."""
    if isinstance(err, SchemaError):
        return _short(str(err).splitlines()[0])
    parts: list[str] = []
    message = getattr(err, "message", None)
    if isinstance(message, dict):
        for _kind, by_check in message.items():
            for _check_kind, items in by_check.items():
                for item in items:
                    col = item.get("column")
                    text = item.get("error", "")
                    parts.append(f"{col}: {text}" if col else text)
    if not parts:
        parts = [str(err)]
    return "; ".join(_short(p) for p in parts)


def _short(text: str) -> str:
    """Cuts pandera's dump of the whole schema after 'not in DataFrameSchema' and long failure lists."""
    cut = text.find(" not in DataFrameSchema")
    if cut >= 0:
        text = text[:cut] + " not in the schema (unknown column)"
    return text if len(text) <= 300 else text[:297] + "..."
