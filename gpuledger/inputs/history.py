"""History in: runs a team ran before gpuledger (or beside it), from a W&B export, an MLflow export, a
Parquet table or gpuledger's own record files, into the ledger (`gpuledger import`, `Ledger.import_history`;
docs/import.md), so that they feed the calibration and the reports.

Accepted shapes (the format is told from the columns or keys unless `--format` says it):

- **W&B**: the Public API export its docs show (`api.runs(...)`; a CSV or JSON/JSONL with `name`,
  `config`, `summary` per run, the dicts as JSON or as Python's repr, which `DataFrame.to_csv` writes),
  with `id`, `state`, `created_at`, `metadata` (`gpu`, `gpu_count`, `host`, `startedAt`), `user` when
  present; and the runs table the W&B UI exports (`Name`, `State`, `Created`, `Runtime`, `GPU Type`,
  `GPU Count`, `User`, then one column per config key and summary metric).
  Runtime: summary `_runtime` (or `_wandb.runtime`, `Runtime`); start: `created_at`, else
  `metadata.startedAt`, else summary `_timestamp` − `_runtime`.
- **MLflow**: what `mlflow.search_runs()` returns, written with `to_csv`/`to_parquet` (also
  `mlflow experiments csv`): `run_id`, `status`, `start_time`, `end_time`, `metrics.*`, `params.*`,
  `tags.*` (`tags.mlflow.runName`, `tags.mlflow.user`).
- **Parquet / CSV table** (gpuledger's own shape): `run_id`, `name`, `project`, `started_at`,
  `ended_at` or `wall_s`, `accelerator`, `gpus`, `status`, optional `cost_usd`, `usd_per_hour`,
  `model`, `method`, `config` (JSON text or a struct), and `metrics.NAME` columns.
- **gpuledger records**: result record JSON files (`gpuledger-run-*.json`, written by an ad-hoc run
  that could not reach the ledger).

GPU type and count come from the run's metadata, else from its config (`gpu`, `gpu_type`,
`accelerator`; `gpu_count`, `num_gpus`, `n_gpus`, `gpus`) or, for MLflow, the `system/gpu_N_*`
metrics; a row without a GPU count, a runtime or a start, or still running, is not imported and gets
one message naming the row and what it lacks. Cost: the row's `cost_usd`, else its wall-clock x
`usd_per_hour`, else x the cheapest on-demand catalog price of that many GPUs of its kind (the
billing line says which; `gpuledger.runtime.adhoc.run_rate`). Idempotent: each run's id is derived
from its source's own id, and the same export imported again changes nothing.

Calibration: when a run's config names a model the estimator knows, its method (`lora` when the
config has LoRA/PEFT keys, else `full`), and its summary counts its training tokens (`tokens`,
`num_input_tokens_seen`, `train/num_input_tokens_seen`), the trial row gets the estimator's device
memory and compute time (`est_basis` 'estimate'), so `gpuledger.estimate.calibration` and
`gpuledger accuracy` use the run.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from gpuledger.errors import UserError

#: the largest export file read (bytes) and the most rows taken from it
MAX_FILE_BYTES = 512 * 1024 * 1024
MAX_ROWS = 200_000
#: the longest runtime believed (seconds): a year
MAX_WALL_S = 366 * 86_400.0
FORMATS = ("wandb", "mlflow", "table", "record")
#: a run's status words in the three sources -> gpuledger.vocabulary.RUN_STATUSES (None: not finished)
STATUS_WORDS = {"finished": "succeeded", "succeeded": "succeeded", "success": "succeeded", "completed": "succeeded",
                "failed": "failed", "crashed": "failed", "error": "failed", "killed": "cancelled",
                "cancelled": "cancelled", "canceled": "cancelled", "preempted": "preempted", "oom": "oom",
                "running": None, "scheduled": None, "pending": None, "queued": None}
GPU_TYPE_KEYS = ("gpu_type", "gpu", "accelerator", "gpu_name", "GPU Type")
GPU_COUNT_KEYS = ("gpu_count", "num_gpus", "n_gpus", "gpus", "GPU Count", "world_size")
MODEL_KEYS = ("model_name_or_path", "model_name", "model_id", "base_model", "model", "_name_or_path")
TOKEN_KEYS = ("tokens", "num_input_tokens_seen", "train/num_input_tokens_seen", "train/tokens")


@dataclass
class ImportReport:
    """What one import did: rows read, runs stored (new among them), messages for rows not imported."""

    sources: list[str] = field(default_factory=list)
    formats: list[str] = field(default_factory=list)
    rows: int = 0
    stored: int = 0
    new: int = 0
    skipped: list[str] = field(default_factory=list)
    run_ids: list[str] = field(default_factory=list)
    sweeps: list[str] = field(default_factory=list)
    calibrated: int = 0  # runs whose trial carries the estimator's numbers

    def to_json(self) -> dict[str, Any]:
        return {"sources": self.sources, "formats": self.formats, "rows": self.rows, "stored": self.stored,
                "new": self.new, "already_stored": self.stored - self.new, "skipped": self.skipped,
                "run_ids": self.run_ids, "sweeps": self.sweeps, "with_estimates": self.calibrated}


class RowProblem(Exception):
    """A row that cannot be imported; the message says what it lacks."""


# -- reading files ------------------------------------------------------------------------------
def read_rows(path: Path) -> list[dict[str, Any]]:
    """Returns the rows of an export file (CSV, Parquet, JSON array, JSON lines, or one JSON object)."""
    if not path.is_file():
        raise UserError(f"{path}: no such file")
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise UserError(f"{path}: {size:,} bytes; an export of at most {MAX_FILE_BYTES:,} bytes is read")
    suffix = path.suffix.lower()
    try:
        if suffix == ".parquet":
            import polars as pl

            return pl.read_parquet(path, n_rows=MAX_ROWS).to_dicts()
        if suffix in (".csv", ".tsv"):
            import polars as pl

            frame = pl.read_csv(path, infer_schema=False, separator="\t" if suffix == ".tsv" else ",",
                                n_rows=MAX_ROWS, truncate_ragged_lines=True)
            return frame.to_dicts()
        text = path.read_text(encoding="utf-8")
    except UserError:
        raise
    except UnicodeDecodeError as err:
        raise UserError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    except Exception as err:  # polars' own errors (a broken Parquet or CSV file): one line
        raise UserError(f"{path}: cannot be read as {suffix.lstrip('.') or 'a table'}: {str(err).splitlines()[0]}") from None
    stripped = text.strip()
    try:
        if stripped.startswith("["):
            data = json.loads(stripped)
        elif stripped.startswith("{") and "\n{" not in stripped:
            data = [json.loads(stripped)]
        else:
            data = [json.loads(line) for line in stripped.splitlines() if line.strip()]
    except json.JSONDecodeError as err:
        raise UserError(f"{path}:{err.lineno}:{err.colno}: not JSON ({err.msg}); an export is CSV, Parquet, "
                        "JSON or JSON lines") from None
    rows = [r for r in data if isinstance(r, dict)]
    if len(rows) != len(data):
        raise UserError(f"{path}: every item must be a JSON object (a run)")
    return rows[:MAX_ROWS]


def detect_format(rows: list[dict[str, Any]]) -> str:
    """Returns the format of the rows (`FORMATS`), told from their columns or keys."""
    keys = set().union(*(r.keys() for r in rows[:50])) if rows else set()
    if "schema" in keys and any(str(r.get("schema", "")).startswith("gpuledger.result/") for r in rows[:50]):
        return "record"
    if ("experiment_id" in keys or any(k.startswith(("params.", "tags.")) for k in keys)) and "run_id" in keys:
        return "mlflow"
    if "summary" in keys or {"Name", "State"} <= keys or ("config" in keys and bool({"state", "metadata"} & keys)):
        return "wandb"
    return "table"


# -- values ---------------------------------------------------------------------------------------
def _mapping(value: Any, what: str) -> dict[str, Any]:
    """Returns a dict from a dict, JSON text, or the Python repr `DataFrame.to_csv` writes of a dict."""
    if value is None or value == "":
        return {}
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, str):
        text = value.strip()
        if len(text) > 4 * 1024 * 1024:
            raise RowProblem(f"{what} is longer than 4 MiB")
        try:
            out = json.loads(text)
        except json.JSONDecodeError:
            try:
                out = ast.literal_eval(text)  # literals only: never evaluates code
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                raise RowProblem(f"{what} is neither JSON nor a Python dict literal") from None
        if isinstance(out, dict):
            return out
    raise RowProblem(f"{what} is not a mapping")


def _unwrap(config: dict[str, Any]) -> dict[str, Any]:
    """W&B's raw config keeps each value as {"value": v, "desc": ...}; returns plain values, `_` keys dropped."""
    out = {}
    for k, v in config.items():
        if str(k).startswith("_"):
            continue
        out[str(k)] = v["value"] if isinstance(v, dict) and "value" in v and set(v) <= {"value", "desc"} else v
    return out


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _time(value: Any) -> datetime | None:
    """Returns naive UTC from an ISO text, a datetime, or epoch seconds / milliseconds (MLflow's)."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value.astimezone(UTC).replace(tzinfo=None) if value.tzinfo else value
    number = _number(value)
    if number is not None:
        if number > 1e11:  # milliseconds (MLflow keeps start_time as epoch ms)
            number /= 1000.0
        if 0 < number < 4e10:
            return datetime.fromtimestamp(number, UTC).replace(tzinfo=None)
        return None
    text = str(value).strip().replace("Z", "+00:00")
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed.astimezone(UTC).replace(tzinfo=None) if parsed.tzinfo else parsed


def _first(sources: Iterable[Mapping[str, Any]], keys: Iterable[str]) -> Any:
    for source in sources:
        for key in keys:
            value = source.get(key)
            if value not in (None, ""):
                return value
    return None


def _accelerator(raw: Any) -> str | None:
    if raw in (None, ""):
        return None
    from gpuledger.agent.measure import accelerator_name
    from gpuledger.catalog import UnknownAccelerator, normalize_accelerator

    text = str(raw).strip()[:100]
    name = accelerator_name(text)
    try:
        return normalize_accelerator(name)
    except UnknownAccelerator:
        return name


def _finals(metrics: Mapping[str, Any]) -> dict[str, float]:
    out = {}
    for k, v in metrics.items():
        number = _number(v)
        key = str(k)
        if number is not None and not key.startswith("_") and len(key) <= 200:
            out[key] = number
    return out


# -- one run ----------------------------------------------------------------------------------------
@dataclass
class Incoming:
    """One run as read from an export, before it is a record."""

    key: str
    name: str
    project: str | None
    started_at: datetime
    wall_s: float
    status: str
    accelerator: str | None
    gpus: int
    config: dict[str, Any]
    finals: dict[str, float]
    owner: str | None = None
    hostname: str | None = None
    cost_usd: float | None = None
    usd_per_hour: float | None = None
    peak_gpu_mem_gib: float | None = None
    model: str | None = None
    method: str | None = None


def _status(raw: Any) -> str:
    word = str(raw or "finished").strip().lower()
    if word not in STATUS_WORDS:
        raise RowProblem(f"state {str(raw)[:40]!r} is not one of {', '.join(sorted(STATUS_WORDS))}")
    status = STATUS_WORDS[word]
    if status is None:
        raise RowProblem(f"it is still {word} (import it once it ended)")
    return status


def _gpus(count: Any, accelerator: str | None) -> int:
    number = _number(count)
    if number is None:
        if accelerator:
            return 1  # a GPU named without a count: one
        raise RowProblem("no GPU type or count (metadata gpu / gpu_count, or config gpu_type / gpu_count; 0 for a CPU run)")
    if number < 0 or number != int(number) or number > 100_000:
        raise RowProblem(f"GPU count {count!r} is not a whole number of GPUs")
    return int(number)


def _wall(runtime: Any, start: datetime | None, end: datetime | None) -> float:
    wall = _number(runtime)
    if wall is None and start is not None and end is not None:
        wall = (end - start).total_seconds()
    if wall is None:
        raise RowProblem("no runtime (summary _runtime, Runtime, or start and end times)")
    if not 0 < wall <= MAX_WALL_S:
        raise RowProblem(f"runtime {wall:g} s is not between 0 and a year")
    return wall


def _model_method(config: Mapping[str, Any]) -> tuple[str | None, str | None]:
    model = _first([config], MODEL_KEYS)
    lora = any(re.search(r"lora|peft", str(k), re.I) for k in config)
    quant = any(str(config.get(k)).lower() in ("true", "4", "nf4") for k in ("load_in_4bit", "bits", "quant_type"))
    method = ("qlora" if quant else "lora") if lora else ("full" if model else None)
    return (str(model)[:200] if model else None), method


def from_wandb(row: dict[str, Any], project: str | None) -> Incoming:
    if "summary" in row or "config" in row:
        config = _unwrap(_mapping(row.get("config"), "config"))
        summary = _mapping(row.get("summary"), "summary")
        meta = _mapping(row.get("metadata"), "metadata") if row.get("metadata") not in (None, "") else {}
        wandb_meta = summary.get("_wandb") if isinstance(summary.get("_wandb"), dict) else {}
        runtime = _first([summary, wandb_meta, row], ("_runtime", "runtime", "Runtime"))
        start = _time(_first([row, meta], ("created_at", "createdAt", "Created", "startedAt")))
        if start is None and _number(summary.get("_timestamp")) is not None and _number(runtime) is not None:
            start = _time(float(summary["_timestamp"]) - float(runtime))
        key = str(_first([row], ("id", "run_id", "name")) or "")
        name = str(row.get("name") or key)
        accelerator = _accelerator(_first([meta, config, row], GPU_TYPE_KEYS))
        gpus = _gpus(_first([meta, config, row], GPU_COUNT_KEYS), accelerator)
        finals = _finals(summary)
        owner = _first([row, meta], ("user", "username", "User"))
        host = meta.get("host")
        state = row.get("state") or row.get("State")
    else:  # the W&B UI's runs table: reserved columns, then config keys and summary metrics side by side
        reserved = {"Name", "State", "Notes", "User", "Tags", "Created", "Runtime", "Sweep", "ID", "GPU Type",
                    "GPU Count", "Hostname", "Group", "Job Type"}
        rest = {k: v for k, v in row.items() if k not in reserved and v not in (None, "")}
        finals = _finals({k: v for k, v in rest.items() if "/" in k or "loss" in k.lower() or k in TOKEN_KEYS})
        config = {k: v for k, v in rest.items() if k not in finals}
        runtime, start = row.get("Runtime"), _time(row.get("Created"))
        key, name = str(row.get("ID") or row.get("Name") or ""), str(row.get("Name") or row.get("ID") or "")
        accelerator = _accelerator(_first([row, config], GPU_TYPE_KEYS))
        gpus = _gpus(_first([row, config], GPU_COUNT_KEYS), accelerator)
        owner, host, state = row.get("User"), row.get("Hostname"), row.get("State")
    if not key:
        raise RowProblem("no run id or name")
    wall = _wall(runtime, None, None)
    if start is None:
        raise RowProblem("no start time (created_at, metadata.startedAt, or summary _timestamp with _runtime)")
    model, method = _model_method(config)
    return Incoming(key=key, name=name, project=project, started_at=start, wall_s=wall,
                    status=_status(state), accelerator=accelerator, gpus=gpus, config=config, finals=finals,
                    owner=str(owner) if owner else None, hostname=str(host) if host else None,
                    cost_usd=_number(config.get("cost_usd")), usd_per_hour=_number(config.get("usd_per_hour")),
                    model=model, method=method)


def from_mlflow(row: dict[str, Any], project: str | None) -> Incoming:
    params = {k[len("params."):]: v for k, v in row.items() if k.startswith("params.") and v not in (None, "")}
    tags = {k[len("tags."):]: v for k, v in row.items() if k.startswith("tags.") and v not in (None, "")}
    metrics = {k[len("metrics."):]: v for k, v in row.items() if k.startswith("metrics.")}
    system = {k: v for k, v in metrics.items() if k.startswith("system/")}
    finals = _finals({k: v for k, v in metrics.items() if k not in system})
    key = str(row.get("run_id") or "")
    if not key:
        raise RowProblem("no run_id")
    start, end = _time(row.get("start_time")), _time(row.get("end_time"))
    if start is None:
        raise RowProblem("no start_time")
    accelerator = _accelerator(_first([params, tags], GPU_TYPE_KEYS))
    count = _first([params, tags], GPU_COUNT_KEYS)
    indices = {m.group(1) for k, v in system.items() if _number(v) is not None and (m := re.match(r"system/gpu_(\d+)_", k))}
    if count is None and indices:
        count = len(indices)
    gpus = _gpus(count, accelerator)
    used = [_number(v) for k, v in system.items() if re.match(r"system/gpu_\d+_memory_usage_megabytes$", k)]
    peak = max((u for u in used if u is not None), default=None)
    model, method = _model_method(params)
    return Incoming(key=key, name=str(tags.get("mlflow.runName") or key), project=project or row.get("experiment_id"),
                    started_at=start, wall_s=_wall(None, start, end), status=_status(row.get("status")),
                    accelerator=accelerator, gpus=gpus, config=params, finals=finals,
                    owner=tags.get("mlflow.user"), cost_usd=_number(params.get("cost_usd")),
                    usd_per_hour=_number(params.get("usd_per_hour")),
                    peak_gpu_mem_gib=None if peak is None else peak / 1024.0, model=model, method=method)


def from_table(row: dict[str, Any], project: str | None) -> Incoming:
    config = _mapping(row.get("config") if row.get("config") is not None else row.get("params"), "config")
    finals = _finals({k.split(".", 1)[1]: v for k, v in row.items() if k.startswith(("metrics.", "metric."))})
    key = str(_first([row], ("run_id", "id", "name")) or "")
    if not key:
        raise RowProblem("no run_id")
    start = _time(_first([row], ("started_at", "start_time", "created_at")))
    if start is None:
        raise RowProblem("no started_at")
    end = _time(_first([row], ("ended_at", "end_time")))
    accelerator = _accelerator(_first([row, config], ("accelerator", *GPU_TYPE_KEYS)))
    gpus = _gpus(_first([row, config], GPU_COUNT_KEYS), accelerator)
    model, method = _model_method(config)
    return Incoming(key=key, name=str(row.get("name") or key), project=row.get("project") or project,
                    started_at=start, wall_s=_wall(_first([row], ("wall_s", "runtime_s", "duration_s")), start, end),
                    status=_status(row.get("status") or row.get("state")), accelerator=accelerator, gpus=gpus,
                    config=config, finals=finals, owner=row.get("owner") or row.get("user"),
                    hostname=row.get("hostname"), cost_usd=_number(row.get("cost_usd")),
                    usd_per_hour=_number(row.get("usd_per_hour")), peak_gpu_mem_gib=_number(row.get("peak_gpu_mem_gib")),
                    model=row.get("model") or model, method=row.get("method") or method)


READERS = {"wandb": from_wandb, "mlflow": from_mlflow, "table": from_table}


# -- to records -------------------------------------------------------------------------------------
def estimates_for(run: Incoming) -> dict[str, Any]:
    """Returns the trial row's estimator numbers (est_memory_gib, est_wall_s, est_basis) of a run whose
    model, method and tokens are known; {} otherwise (the run then feeds reports, not calibration)."""
    tokens = _number(_first([run.finals], TOKEN_KEYS))
    if not run.model or run.method not in ("full", "lora", "qlora") or not tokens or run.gpus < 1 or not run.accelerator:
        return {}
    from pydantic import ValidationError

    from gpuledger.estimate import Workload, estimate, train_time_s

    cfg = run.config
    precision = "bf16" if str(cfg.get("bf16")).lower() == "true" else ("fp16" if str(cfg.get("fp16")).lower() == "true" else "bf16")
    batch = _number(_first([cfg], ("per_device_train_batch_size", "micro_batch", "batch_size")))
    seq = _number(_first([cfg], ("max_seq_length", "max_length", "seq_len", "block_size")))
    fields: dict[str, Any] = {"model": run.model, "method": run.method, "precision": precision, "gpus": run.gpus}
    if batch and batch >= 1:
        fields["micro_batch"] = int(batch)
    if seq and seq >= 1:
        fields["seq_len"] = int(seq)
    try:
        est = estimate(Workload(**fields))
        wall = train_time_s(est, tokens, run.accelerator, gpus=run.gpus, method=run.method, precision=precision)
    except (UserError, ValidationError, ValueError, KeyError):
        return {}
    return {"est_memory_gib": round(float(est.memory_gib["device"]), 4), "est_wall_s": round(float(wall), 3),
            "est_basis": "estimate"}


def to_external(run: Incoming, fmt: str, source: str) -> Any:
    """Returns the `gpuledger.runtime.external.ExternalRun` of an incoming run (deterministic: the same
    row gives the same record, so an import again changes nothing)."""
    from gpuledger import vocabulary
    from gpuledger.record import BillingLine, ResultRecord
    from gpuledger.runtime.adhoc import run_rate
    from gpuledger.runtime.external import ExternalRun, external_trial_id, slug

    project = str(run.project or "imported")
    sweep_id = f"import-{fmt}-{slug(project, 40)}" + (f"-{slug(run.model, 40)}-{run.method}" if run.model else "")
    run_id = f"{fmt}-{slug(project, 40)}-{slug(run.key, 100)}"[:200]
    hours = run.wall_s / 3600.0
    if run.cost_usd is not None and run.cost_usd >= 0:
        usd, line_source, words = run.cost_usd, "invoice", f"cost_usd given in the {fmt} export ({source})"
    else:
        rate = run_rate(run.accelerator, run.gpus, run.usd_per_hour)
        usd, line_source, words = rate.usd_per_hour * hours, rate.source, rate.description
    billing = [BillingLine(source=line_source, description=words[:500], usd_per_hour=usd / hours if hours else 0.0,
                           hours=hours, cost_usd=usd)]
    params = {k: (v if isinstance(v, bool | int | float | str) or v is None else str(v)[:500]) for k, v in run.config.items()}
    record = ResultRecord(
        run_id=run_id, sweep_id=sweep_id, trial_id=external_trial_id(sweep_id, run.key), attempt=1,
        launcher=vocabulary.LAUNCHER_EXTERNAL, accelerator=run.accelerator if run.gpus else None, gpus=run.gpus,
        spot=False, started_at=run.started_at, ended_at=run.started_at + timedelta(seconds=run.wall_s),
        wall_s=run.wall_s, exit_code=0 if run.status == "succeeded" else None, status=run.status,
        reason=None if run.status == "succeeded" else f"{run.status} in {fmt}",
        peak_gpu_mem_gib=run.peak_gpu_mem_gib, hostname=run.hostname, command=f"imported from {fmt}: {run.name}"[:2000],
        params=params, final_metrics=run.finals, billing=billing, purpose="trial")
    objective = "eval_loss" if "eval_loss" in run.finals else ("loss" if "loss" in run.finals else None)
    return ExternalRun(record=record, sweep_name=sweep_id, kind="import", project=project,
                       owner=str(run.owner) if run.owner else None, model=run.model, method=run.method,
                       objective_metric=objective, source=f"{fmt} export {source}", trial_extra=estimates_for(run))


def import_history(paths: Iterable[str | Path], *, fmt: str | None = None, project: str | None = None,
                   warehouse: Any = None) -> ImportReport:
    """Imports the runs of each export file (see the module); returns what was done. A row that cannot
    be imported is one message in `skipped` (`FILE row N (run ID): what it lacks`); a file that cannot
    be read at all raises UserError."""
    from gpuledger.runtime.external import store_external_runs

    if fmt is not None and fmt not in FORMATS:
        raise UserError(f"--format {fmt!r}: one of {', '.join(FORMATS)}")
    report = ImportReport()
    runs, sources = [], []
    for raw in paths:
        path = Path(raw)
        rows = read_rows(path)
        kind = fmt or detect_format(rows)
        report.sources.append(str(path))
        report.formats.append(kind)
        report.rows += len(rows)
        if kind == "record":
            runs += _records(rows, path, report)
            sources += [f"{path}[{i}]" for i in range(len(runs) - len(sources))]
            continue
        name = project or path.stem
        for i, row in enumerate(rows, start=1):
            label = f"{path} row {i}" + (f" (run {row.get('id') or row.get('run_id') or row.get('name') or row.get('Name')})"
                                          if any(row.get(k) for k in ("id", "run_id", "name", "Name")) else "")
            try:
                runs.append(to_external(READERS[kind](row, name), kind, path.name))
                sources.append(label)
            except RowProblem as err:
                report.skipped.append(f"{label}: {err}; not imported")
            except (ValueError, TypeError) as err:  # a record the model refuses (a negative number, ...)
                report.skipped.append(f"{label}: {str(err).splitlines()[0]}; not imported")
    stored = store_external_runs(runs, path=warehouse, sources=sources)
    report.stored, report.new, report.run_ids, report.sweeps = len(stored.stored), stored.new, stored.stored, stored.sweeps
    report.skipped += [f"{src}: {why}; not imported" for src, why in stored.rejected]
    report.calibrated = sum(1 for r in runs if r.trial_extra and r.record.run_id in set(stored.stored))
    return report


def _records(rows: list[dict[str, Any]], path: Path, report: ImportReport) -> list[Any]:
    """gpuledger's own record files (an ad-hoc run that could not reach the ledger)."""
    from pydantic import ValidationError

    from gpuledger.record import parse_record
    from gpuledger.runtime.external import ExternalRun

    out = []
    for i, row in enumerate(rows, start=1):
        try:
            record = parse_record(row)
        except ValidationError as err:
            first = err.errors()[0]
            report.skipped.append(f"{path} record {i}: {'.'.join(str(x) for x in first['loc'])}: {first['msg']}; not imported")
            continue
        if not str(record.sweep_id or "").startswith("adhoc-"):
            report.skipped.append(f"{path} record {i} (run {record.run_id}): not an ad-hoc run's record (sweep "
                                  f"{record.sweep_id}); a sweep's records are stored with `gpuledger ingest`")
            continue
        project = str(record.sweep_id).removeprefix("adhoc-")
        out.append(ExternalRun(record=record, sweep_name=str(record.sweep_id), kind="adhoc", project=project,
                               source=f"ad-hoc runs of project {project}"))
    return out
