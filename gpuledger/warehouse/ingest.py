"""Ingest: result records (dicts, `ResultRecord`s or the JSON files of a landing folder) into the
warehouse, validated (pydantic record model, then the pandera frames) and upserted in ONE
transaction per batch. Idempotent by run_id."""

from __future__ import annotations

import json
import os
import shutil
import stat
from collections.abc import Callable, Iterable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuledger.errors import UserError
from gpuledger.files import write_text_atomic
from gpuledger.warehouse import sqlfiles
from gpuledger.warehouse.checks import MAX_RECORD_FILE_BYTES, precheck, record_problem
from gpuledger.warehouse.connect import now
from gpuledger.warehouse.lazy import polars as pl
from gpuledger.warehouse.records import frames_module, record_reason, records_to_frames


def _same(column: str, stored: Any, new: Any) -> bool:
    """Returns True when a stored runs value equals the new one (JSON compared as values)."""
    if column == "params":
        try:
            return json.loads(stored or "null") == json.loads(new or "null")
        except (TypeError, ValueError):
            return stored == new
    return stored == new


#: landing files taken per transaction (bytes on disk; at least one file per batch)
LANDING_BATCH_BYTES = 16 * 1024 * 1024


@dataclass
class Rejection:
    """A record that was not ingested: where it came from and why."""

    source: str  # file path, "file[2]" for an item of a list file, or "record[3]" for an in-memory record
    reason: str
    position: int | None = None  # index of the record in the `ingest_records` input


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
    #: files of a folder that are not result records (`package.json`, a JSON Schema): left where they are
    skipped: list[str] = field(default_factory=list)

    def summary(self) -> str:
        """Returns one line of counts, e.g. `3 records ingested (2 new), 1 rejected`."""
        left = f", {len(self.skipped)} file(s) that are not result records left in place" if self.skipped else ""
        return (f"{self.ingested} records ingested ({self.new} new, {self.metric_rows} metric rows), "
                f"{len(self.rejected)} rejected{left}")


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

    def ingest_records(self, records: Iterable[Any], *, sources: Sequence[str] | None = None,
                       inside: Callable[[IngestResult], None] | None = None) -> IngestResult:
        """Validates and upserts result records (dicts or `ResultRecord`s) in ONE transaction.

        Idempotent by run_id: a record ingested again replaces its run row and its metrics,
        final metrics and billing lines (nothing is duplicated). A record that fails validation
        (pydantic record model, the checks of `gpuledger.warehouse.checks`: registered sweep and
        planned trial, cost = rate x hours, finite numbers, size caps; then the pandera frame
        schemas) is left out and listed in `rejected` with its reason; the others are written. Also sets the status of each
        registered trial that got a run to the status of its latest attempt.

        `inside(result)`: called in the same transaction just before COMMIT (the ingest service's batch
        bookkeeping, `gpuledger.warehouse.ingest_service`), in a transaction of its own when nothing is
        written. Run ids not stored yet (the common case) are appended without first deleting their
        child rows: on DuckLake that delete reads every data file of `metrics` from the bucket.
        """
        self._require_writer("ingest")
        result = IngestResult()
        good: dict[str, Any] = {}  # run_id -> record (last one wins within a batch)
        origin: dict[str, str] = {}
        position: dict[str, int] = {}
        parsed: list[tuple[int, str, Any]] = []
        for i, data in enumerate(records):
            src = sources[i] if sources is not None else f"record[{i}]"
            reason = precheck(data)
            rec = None
            if reason is None:
                rec, reason = record_reason(data)
            if rec is None:
                result.rejected.append(Rejection(src, reason or "invalid", i))
                continue
            parsed.append((i, src, rec))
        sweep_ids = sorted({rec.sweep_id for _, _, rec in parsed if rec.sweep_id is not None})
        known_sweeps = {r[0] for r in self._run("sweeps_known", {"sweep_ids": sweep_ids})} if sweep_ids else set()
        known_trials = ({(a, b) for a, b in self._run("trials_known", {"sweep_ids": sweep_ids})}
                        if sweep_ids else set())
        for i, src, rec in parsed:
            problem = record_problem(rec, known_trials, known_sweeps)
            if problem is not None:
                result.rejected.append(Rejection(src, problem, i))
                continue
            good[rec.run_id] = rec
            origin[rec.run_id] = src
            position[rec.run_id] = i
        built = None
        if good:
            built = self._validated_frames(list(good.values()), origin, position, result)
            if built is not None:
                built = self._without_replacements(built, origin, position, result)
        if built is None:
            if inside is not None:
                with self.transaction():
                    inside(result)
            return result
        run_ids = built["runs"]["run_id"].to_list()
        with self.transaction():
            self._con.register("_in_ids", pl.DataFrame({"run_id": run_ids}))
            try:
                # read inside the transaction (after the writer lock): a run another writer stored meanwhile counts
                existing = int(self._run("runs_existing_count")[0][0])
                if existing:
                    for child in ("metrics", "billing", "final_metrics"):
                        self._delete_in(child, "run_id", "_in_ids")
            finally:
                self._unregister("_in_ids")
            if existing or self.backend != "ducklake":
                self._upsert("runs", built["runs"])
            else:  # none of them stored: append (DuckLake's replace deletes by key first, reading the files)
                self._insert("runs", built["runs"])
            for child in ("final_metrics", "metrics", "billing"):
                if built[child].height:
                    self._insert(child, built[child])
            self._run("trials_status_from_runs", {"now": now()})
            self._commit_money(built["runs"])
            result.ingested = len(run_ids)
            result.new = len(run_ids) - existing
            result.metric_rows = built["metrics"].height
            result.billing_rows = built["billing"].height
            result.run_ids = run_ids
            if inside is not None:
                inside(result)
            self._hook("ingest_records")
        return result

    def _commit_money(self, runs: pl.DataFrame) -> None:
        """Each stored run's measured cost commits to the envelopes its sweep reserved in, and its
        trial stops accruing (gpuledger/warehouse/budget_ledger.py), in the ingest's transaction."""
        by_sweep: dict[str, list[tuple[str, float]]] = {}
        for row in runs.select("run_id", "sweep_id", "trial_id", "cost_usd").iter_rows(named=True):
            if row["sweep_id"] is not None:
                by_sweep.setdefault(row["sweep_id"], []).append((row["run_id"], float(row["cost_usd"] or 0.0)))
                self._run("accrual_end_trial", {"sweep_id": row["sweep_id"], "trial_id": row["trial_id"]})
        for sweep_id, pairs in by_sweep.items():
            self.commit_budget_runs(sweep_id, pairs)  # type: ignore[attr-defined]  (BudgetLedgerMixin)

    def _validated_frames(self, recs: list[Any], origin: dict[str, str], position: dict[str, int],
                          result: IngestResult) -> dict[str, pl.DataFrame] | None:
        """Returns the validated frames of `recs`; records whose frames fail go to `result.rejected`."""
        try:
            built = records_to_frames(recs)
            return {t: frames_module().validate_frame(t, df) for t, df in built.items()}
        except frames_module().FrameError:
            pass
        # find the culprits one by one (rare path), keep the rest
        keep = []
        for rec in recs:
            try:
                for t, df in records_to_frames([rec]).items():
                    frames_module().validate_frame(t, df)
                keep.append(rec)
            except frames_module().FrameError as err:
                result.rejected.append(Rejection(origin[rec.run_id], f"invalid result record: {err}",
                                                  position[rec.run_id]))
        if not keep:
            return None
        built = records_to_frames(keep)
        return {t: frames_module().validate_frame(t, df) for t, df in built.items()}

    def _without_replacements(self, built: dict[str, pl.DataFrame], origin: dict[str, str],
                              position: dict[str, int], result: IngestResult) -> dict[str, pl.DataFrame] | None:
        """Returns `built` without the records that would replace a stored run with something else:
        a run id already stored is taken again only when the record is the same (its runs row but
        `ingested_at`, and its final metrics); otherwise it goes to `result.rejected`. A measured run
        is never silently replaced (a forged or re-used run id cannot rewrite history)."""
        self._con.register("_in_ids", built["runs"].select("run_id"))
        try:
            cur = sqlfiles.run(self._con, "runs_stored_rows")
            names = [d[0] for d in cur.description]
            stored = {row[0]: dict(zip(names, row, strict=True)) for row in cur.fetchall()}
            finals: dict[str, dict[str, float]] = {}
            for run_id, name, value in self._run("final_metrics_stored"):
                finals.setdefault(run_id, {})[name] = value
            points: dict[str, list[tuple[Any, ...]]] = {}
            for run_id, *point in (self._run("metrics_stored") if stored else []):
                points.setdefault(run_id, []).append(tuple(point))
        finally:
            self._unregister("_in_ids")
        if not stored:
            return built
        new_finals: dict[str, dict[str, float]] = {}
        for row in built["final_metrics"].iter_rows(named=True):
            new_finals.setdefault(row["run_id"], {})[row["name"]] = row["value"]
        new_points: dict[str, list[tuple[Any, ...]]] = {}
        for run_id, *point in built["metrics"].sort(["run_id", "name", "seq"]).select(
                "run_id", "name", "seq", "step", "t_s", "value").iter_rows():
            new_points.setdefault(run_id, []).append(tuple(point))
        refused = []
        for row in built["runs"].iter_rows(named=True):
            old = stored.get(row["run_id"])
            if old is None:
                continue
            differs = sorted(k for k in old if k != "run_id" and not _same(k, old[k], row.get(k)))
            if finals.get(row["run_id"], {}) != new_finals.get(row["run_id"], {}):
                differs.append("final_metrics")
            if points.get(row["run_id"], []) != new_points.get(row["run_id"], []):
                differs.append("metrics")
            if differs:
                refused.append(row["run_id"])
                result.rejected.append(Rejection(origin[row["run_id"]], (
                    f"run id {row['run_id']!r} is already stored with other values ({', '.join(differs[:6])}): a "
                    "record never replaces a stored run; give the new attempt its own run id"), position[row["run_id"]]))
        if not refused:
            return built
        if len(refused) == built["runs"].height:
            return None
        return {t: df.filter(~pl.col("run_id").is_in(refused)) for t, df in built.items()}

    def stored_hashes(self, hashes: list[str]) -> set[str]:
        """Returns the record hashes of `hashes` the ingest service already stored (`ingested_records`)."""
        if not hashes:
            return set()
        self._con.register("_in_hashes", pl.DataFrame({"record_hash": hashes}, schema={"record_hash": pl.String}))
        try:
            return {h for (h,) in self._run("ingested_hashes")}
        finally:
            self._unregister("_in_hashes")

    def stored_run_ids(self, run_ids: list[str]) -> set[str]:
        """Returns the run ids of `run_ids` the warehouse holds."""
        if not run_ids:
            return set()
        self._con.register("_in_ids", pl.DataFrame({"run_id": run_ids}, schema={"run_id": pl.String}))
        try:
            return {r for (r,) in self._run("runs_stored_of")}
        finally:
            self._unregister("_in_ids")

    def _write_ingest_batch(self, batch: dict[str, Any], records: pl.DataFrame) -> None:
        """Inside the batch's transaction: its `ingest_batches` row and its records' `ingested_records`
        rows (appended; replaced by hash only when another service stored one of them meanwhile)."""
        self._insert("ingest_batches", pl.DataFrame([batch]))
        if not records.height:
            return
        again = self.stored_hashes(records["record_hash"].to_list())
        if again or self.backend != "ducklake":
            self._upsert("ingested_records", records)
        else:
            self._insert("ingested_records", records)

    def ingest_metrics_frame(self, df: pl.DataFrame) -> int:
        """Validates a metrics frame (run_id, name, seq, step, t_s, value) and replaces the metrics of
        its runs in one transaction; returns the rows written. (Bulk path; `benchmarks/ingest.py`.)"""
        self._require_writer("ingest")
        df = frames_module().validate_frame("metrics", df)
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
        """Ingests every result record `*.json` of a landing folder (default `landing/` beside the file: the project's `.gpuledger/landing/`).

        Only result records are touched, by name (`*.json`) AND content (`is_record_shaped`; a file that
        does not parse, by the record's marks, `sniffs_like_record`): any other file (`package.json`,
        `specs/gpuledger.schema.json`) stays where it is, listed in `IngestResult.skipped`.

        A file holds one record (an object) or several (a list), at most `MAX_RECORD_FILE_BYTES`
        (checked before and while reading). Files are taken in batches of at most
        `LANDING_BATCH_BYTES`, one transaction each. A file whose records all land moves to
        `landing/ingested/`; one whose records were all refused moves to `landing/rejected/` with
        `<file>.reason.txt`; a list file with some refused items is split: its stored items go to
        `ingested/<file>`, only the refused ones to `rejected/<file>` (with the reasons). A crash
        between a commit and the moves only means the next ingest re-reads those files (idempotent).
        """
        self._require_writer("ingest")
        land = Path(landing) if landing is not None else self.path.parent / "landing"
        if not land.is_dir():
            raise UserError(f"no landing folder at {land}; pass the folder that holds the result records")
        # everything named *.json but folders: a FIFO or a device there is refused, not skipped
        files = sorted(p for p in land.glob("*.json") if not p.is_dir())
        total = IngestResult()
        batch: list[Path] = []
        size = 0
        for f in files:
            with suppress(OSError):
                size += f.stat().st_size
            batch.append(f)
            if size >= LANDING_BATCH_BYTES:
                _add(total, self._ingest_files(land, batch))
                batch, size = [], 0
        if batch:
            _add(total, self._ingest_files(land, batch))
        return total

    def _ingest_files(self, land: Path, files: list[Path]) -> IngestResult:
        """Ingests one batch of landing files in one transaction, then files each where it belongs."""
        records: list[Any] = []
        sources: list[str] = []
        owner: list[tuple[Path, int]] = []  # per record: its file and its index in the file
        items_of: dict[Path, list[Any]] = {}
        is_list: dict[Path, bool] = {}
        file_errors: dict[Path, str] = {}
        skipped: list[str] = []
        for f in files:
            data, error = read_record_file(f)
            if error is not None:
                if error == NOT_REGULAR or sniffs_like_record(f):
                    file_errors[f] = error
                else:  # not JSON, or too big, and nothing in it of a record: someone else's file
                    skipped.append(str(f))
                continue
            if not is_record_shaped(data):  # package.json, a JSON Schema, a config: not ours to move
                skipped.append(str(f))
                continue
            items = data if isinstance(data, list) else [data]
            items_of[f] = items
            is_list[f] = isinstance(data, list)
            for j, item in enumerate(items):
                owner.append((f, j))
                records.append(item)
                sources.append(f"{f}[{j}]" if is_list[f] else str(f))
        result = self.ingest_records(records, sources=sources) if records else IngestResult()
        result.skipped.extend(skipped)
        refused: dict[Path, dict[int, str]] = {}
        for rej in result.rejected:
            if rej.position is not None:
                f, j = owner[rej.position]
                refused.setdefault(f, {})[j] = f"{rej.source}: {rej.reason}"
        for f, reason in file_errors.items():
            result.rejected.append(Rejection(str(f), reason))
            _reject(land, f, [f"{f}: {reason}"])
        for f, items in items_of.items():
            bad = refused.get(f, {})
            if not bad:
                _move(f, land / "ingested")
            elif len(bad) == len(items) or not is_list[f]:
                _reject(land, f, list(bad.values()))
            else:  # a list file with some refused items: split it
                kept = [it for j, it in enumerate(items) if j not in bad]
                _write_json(land / "ingested" / f.name, kept)
                _write_json(land / "rejected" / f.name, [it for j, it in enumerate(items) if j in bad])
                _write_text(land / "rejected" / (f.name + ".reason.txt"), "\n".join(bad.values()) + "\n")
                f.unlink()
        return result


NOT_REGULAR = "not a regular file"
#: bytes of a file that did not parse looked at for a record's marks (`sniffs_like_record`)
SNIFF_BYTES = 64 * 1024
_RECORD_MARKS = (b'"gpuledger.result/', b'"run_id"')


def is_record_shaped(data: Any) -> bool:
    """True when decoded JSON is meant as a result record (valid or not): an object with the record's
    `schema` or a `run_id`, or a list holding one. `package.json`, a JSON Schema, a tool's config are
    not: `ingest DIR` leaves them where they are."""
    def one(item: Any) -> bool:
        return isinstance(item, dict) and (
            "run_id" in item or (isinstance(item.get("schema"), str) and item["schema"].startswith("gpuledger.result/")))

    if isinstance(data, list):
        return any(one(item) for item in data[:10_000])
    return one(data)


def sniffs_like_record(path: Path) -> bool:
    """True when a file that did not parse (cut, too big, not UTF-8) carries a record's marks in its
    first `SNIFF_BYTES`: it is a damaged record (refused, moved to rejected/), not someone else's file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                return True
            head = fh.read(SNIFF_BYTES)
    except OSError:
        return True  # unreadable: refused with its reason, as before
    return any(mark in head for mark in _RECORD_MARKS)


def read_record_file(path: Path) -> tuple[Any, str | None]:
    """Returns (decoded JSON, None) or (None, why not) for a landing file, reading at most
    `MAX_RECORD_FILE_BYTES` + 1 bytes whatever the file claims."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO put in its place must not block the open
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                return None, NOT_REGULAR
            raw = fh.read(MAX_RECORD_FILE_BYTES + 1)
    except OSError as err:
        return None, f"cannot read: {err.strerror or err}"
    return read_record_bytes(raw)


def read_record_bytes(raw: bytes) -> tuple[Any, str | None]:
    """Returns (decoded JSON, None) or (None, why not) for the bytes of a landed record."""
    if len(raw) > MAX_RECORD_FILE_BYTES:
        return None, (f"file is over {MAX_RECORD_FILE_BYTES // (1024 * 1024)} MiB, the most a landing file may "
                      "hold (a record at the agent's metric cap is a few MB); not read")
    try:
        return json.loads(raw.decode("utf-8")), None
    except UnicodeDecodeError as err:
        return None, f"not UTF-8 text: {err.reason} at byte {err.start}"
    except json.JSONDecodeError as err:
        return None, f"not valid JSON: {err.msg} (line {err.lineno}, column {err.colno})"
    except RecursionError:
        return None, "not valid JSON: nested too deeply"


def _add(total: IngestResult, part: IngestResult) -> None:
    total.ingested += part.ingested
    total.new += part.new
    total.metric_rows += part.metric_rows
    total.billing_rows += part.billing_rows
    total.rejected.extend(part.rejected)
    total.run_ids.extend(part.run_ids)
    total.skipped.extend(part.skipped)


def _write_text(path: Path, text: str) -> None:
    write_text_atomic(path, text)


def _write_json(path: Path, value: Any) -> None:
    _write_text(path, json.dumps(value, indent=1, default=str) + "\n")


def _reject(land: Path, f: Path, reasons: list[str]) -> None:
    _move(f, land / "rejected")
    _write_text(land / "rejected" / (f.name + ".reason.txt"), "\n".join(reasons) + "\n")


def _move(src: Path, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    shutil.move(str(src), str(folder / src.name))
