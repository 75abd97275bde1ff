"""Ingest: result records (dicts, `ResultRecord`s or the JSON files of a landing folder) into the
warehouse, validated (pydantic record model, then the pandera frames) and upserted in ONE
transaction per batch. Idempotent by run_id."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from gpuledger.errors import UserError
from gpuledger.warehouse.connect import now
from gpuledger.warehouse.records import frames_module as fr
from gpuledger.warehouse.records import record_reason, records_to_frames


@dataclass
class Rejection:
    """A record that was not ingested: where it came from and why."""

    source: str  # file path, or "record[3]" for an in-memory record
    reason: str


@dataclass
class IngestResult:
    """What one `ingest_records` / `ingest_landing` call did.

    `ingested`: records written (new or replaced); `new`: of those, run ids not in the warehouse
    before; `rejected`: the records refused, each with its reason; `metric_rows`, `billing_rows`:
    rows written to `metrics`/`billing`.
    """

    ingested: int = 0
    new: int = 0
    metric_rows: int = 0
    billing_rows: int = 0
    rejected: list[Rejection] = field(default_factory=list)
    run_ids: list[str] = field(default_factory=list)

    def summary(self) -> str:
        """Returns one line of counts, e.g. `3 records ingested (2 new), 1 rejected`."""
        return (f"{self.ingested} records ingested ({self.new} new, {self.metric_rows} metric rows), "
                f"{len(self.rejected)} rejected")


class IngestMixin:
    """`Warehouse` methods that ingest result records (see `gpuledger.warehouse.core.WarehouseBase`)."""

    _con: Any
    path: Path
    _require_writer: Any
    _run: Any
    _hook: Any
    _insert: Any
    _upsert: Any
    _delete_in: Any
    _unregister: Any
    transaction: Any

    def ingest_records(self, records: Iterable[Any], *, sources: Sequence[str] | None = None) -> IngestResult:
        """Validates and upserts result records (dicts or `ResultRecord`s) in ONE transaction.

        Idempotent by run_id: a record ingested again replaces its run row and its metrics,
        final metrics and billing lines (nothing is duplicated). A record that fails validation
        (pydantic record model, then the pandera frame schemas) is left out and listed in
        `rejected` with its reason; the others are written. Also sets the status of each
        registered trial that got a run to the status of its latest attempt.
        """
        self._require_writer("ingest")
        result = IngestResult()
        good: dict[str, Any] = {}  # run_id -> record (last one wins within a batch)
        origin: dict[str, str] = {}
        for i, data in enumerate(records):
            src = sources[i] if sources is not None else f"record[{i}]"
            rec, reason = record_reason(data)
            if rec is None:
                result.rejected.append(Rejection(src, reason or "invalid"))
                continue
            good[rec.run_id] = rec
            origin[rec.run_id] = src
        if not good:
            return result
        built = self._validated_frames(list(good.values()), origin, result)
        if built is None:
            return result
        run_ids = built["runs"]["run_id"].to_list()
        with self.transaction():
            self._con.register("_in_ids", pl.DataFrame({"run_id": run_ids}))
            try:
                existing = self._run("runs_existing_count")[0][0]
                for child in ("metrics", "billing", "final_metrics"):
                    self._delete_in(child, "run_id", "_in_ids")
            finally:
                self._unregister("_in_ids")
            self._upsert("runs", built["runs"])
            for child in ("final_metrics", "metrics", "billing"):
                if built[child].height:
                    self._insert(child, built[child])
            self._run("trials_status_from_runs", {"now": now()})
            self._hook("ingest_records")
        result.ingested = len(run_ids)
        result.new = len(run_ids) - int(existing)
        result.metric_rows = built["metrics"].height
        result.billing_rows = built["billing"].height
        result.run_ids = run_ids
        return result

    def _validated_frames(self, recs: list[Any], origin: dict[str, str],
                          result: IngestResult) -> dict[str, pl.DataFrame] | None:
        """Returns the validated frames of `recs`; records whose frames fail go to `result.rejected`."""
        try:
            built = records_to_frames(recs)
            return {t: fr().validate_frame(t, df) for t, df in built.items()}
        except fr().FrameError:
            pass
        # find the culprits one by one (rare path), keep the rest
        keep = []
        for rec in recs:
            try:
                for t, df in records_to_frames([rec]).items():
                    fr().validate_frame(t, df)
                keep.append(rec)
            except fr().FrameError as err:
                result.rejected.append(Rejection(origin[rec.run_id], f"invalid result record: {err}"))
        if not keep:
            return None
        built = records_to_frames(keep)
        return {t: fr().validate_frame(t, df) for t, df in built.items()}

    def ingest_metrics_frame(self, df: pl.DataFrame) -> int:
        """Validates a metrics frame (run_id, name, seq, step, t_s, value) and replaces the metrics of
        its runs in one transaction; returns the rows written. (Bulk path; `benchmarks/ingest.py`.)"""
        self._require_writer("ingest")
        df = fr().validate_frame("metrics", df)
        with self.transaction():
            self._con.register("_in_ids", df.select("run_id").unique())
            try:
                self._delete_in("metrics", "run_id", "_in_ids")
            finally:
                self._unregister("_in_ids")
            self._insert("metrics", df)
            self._hook("ingest_metrics_frame")
        return df.height

    def ingest_landing(self, landing: str | os.PathLike[str] | None = None) -> IngestResult:
        """Ingests every `*.json` of a landing folder (default `warehouse/landing/` beside the file).

        A file holds one record (an object) or several (a list). Records that fail are moved to
        `landing/rejected/` with `<file>.reason.txt` beside them; the others are ingested in one
        transaction and their files then moved to `landing/ingested/` (a crash between the commit
        and the move only means the next ingest re-reads them, which is idempotent).
        """
        self._require_writer("ingest")
        land = Path(landing) if landing is not None else self.path.parent / "landing"
        if not land.is_dir():
            raise UserError(f"no landing folder at {land}; pass the folder that holds the result records")
        files = sorted(p for p in land.glob("*.json") if p.is_file())
        records: list[Any] = []
        sources: list[str] = []
        per_file: dict[str, list[int]] = {}
        file_errors: dict[Path, str] = {}
        for f in files:
            try:
                data = json.loads(f.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
                file_errors[f] = f"not valid JSON: {err}"
                continue
            items = data if isinstance(data, list) else [data]
            for j, item in enumerate(items):
                per_file.setdefault(str(f), []).append(len(records))
                records.append(item)
                sources.append(str(f) if len(items) == 1 else f"{f}[{j}]")
        result = self.ingest_records(records, sources=sources) if records else IngestResult()
        for f, reason in file_errors.items():
            result.rejected.append(Rejection(str(f), reason))
        reasons: dict[Path, list[str]] = {}
        for rej in result.rejected:
            path = Path(re.sub(r"\[\d+\]$", "", rej.source))
            reasons.setdefault(path, []).append(f"{rej.source}: {rej.reason}")
        for f in files:
            if f in reasons:
                _move(f, land / "rejected")
                (land / "rejected" / (f.name + ".reason.txt")).write_text("\n".join(reasons[f]) + "\n",
                                                                        encoding="utf-8")
            else:
                _move(f, land / "ingested")
        return result


def _move(src: Path, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    shutil.move(str(src), str(folder / src.name))
