"""The ingest service: sweeps land result records, one process stores them in batches.

With `[warehouse] ingest = "service"` a sweep does not write its trials' result records into the warehouse
itself: it lands each one (`land`) under `records/` of the landing (`gpuledger.warehouse.landing_store`:
a prefix on object storage or a folder), written atomically, and the deployment `ingest/team`
(`gpuledger.flows.ingest`, or `gpuledger warehouse ingest`) stores them:

- `ingest_batch` takes the oldest landed records (at most `max_records`, `max_bytes`), drops those whose
  record hash (sha256 of the record's canonical JSON) is already in `ingested_records` or twice in the
  batch (a record landed twice is stored once), and writes the rest through `Warehouse.ingest_records`
  (the one record -> warehouse write: validation, idempotence by run id, budgets) in ONE transaction,
  together with the batch's `ingest_batches` row and its records' `ingested_records` rows;
- a commit that conflicts with another writer is retried from the start with exponential backoff and
  full jitter (`RETRIES`, `BACKOFF_S`);
- only after the commit are the batch's landed files removed (stored and duplicate ones) or moved to
  `rejected/` with the reason (refused ones). A crash between commit and removal leaves files whose
  hashes are stored: the next batch removes them without writing anything.

Ingest lag (landing to commit) and batch sizes are in `v_ingest_batches`. Sweeps in service mode wait
at their end (`[warehouse] ingest_wait_s`) until the service has stored their records (`wait_stored`).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import polars as pl

from gpuledger.errors import UserError
from gpuledger.warehouse import lake, landing_store
from gpuledger.warehouse.connect import now, redact
from gpuledger.warehouse.ingest import read_record_bytes

MODES = ("direct", "service")
#: commit attempts of one batch before the service gives up on it (its files stay for the next run)
RETRIES = 8
#: the first retry's backoff ceiling; doubled each attempt up to `BACKOFF_MAX_S` (full jitter: uniform 0..ceiling)
BACKOFF_S = 0.2
BACKOFF_MAX_S = 10.0
#: a batch's limits: records and bytes of landed files
MAX_RECORDS = 2000
MAX_BYTES = 64 * 1024 * 1024
#: parallel reads of landed objects (object storage answers each GET in tens of milliseconds)
READERS = 8


def mode() -> str:
    """`[warehouse] ingest`: 'direct' (the default) or 'service'; a UserError for anything else."""
    from gpuledger import settings

    value = str(settings.current().values.get("warehouse.ingest") or "direct").strip().lower()
    if value not in MODES:
        raise UserError(f"[warehouse] ingest = {value!r} (GPULEDGER_INGEST): give 'direct' or 'service'")
    return value


def canonical(data: dict[str, Any]) -> bytes:
    """The record's canonical JSON (sorted keys, no spaces): what is landed and hashed."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=False, default=str).encode("utf-8")


def record_hash(data: dict[str, Any]) -> str:
    return hashlib.sha256(canonical(data)).hexdigest()


def landing_key(run_id: str, digest: str, at: datetime | None = None) -> str:
    """`records/<landing time, ms since the epoch>-<run id>-<hash>.json`: listed oldest first."""
    at = at or datetime.now(UTC)
    ms = int(at.timestamp() * 1000)
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", str(run_id))[:120]
    return f"{landing_store.RECORDS}{ms:013d}-{safe}-{digest[:16]}.json"


def landed_at(key: str) -> datetime | None:
    """The landing time a key carries (naive UTC), or None for a name that does not start with one."""
    name = key.rsplit("/", 1)[-1]
    head = name.split("-", 1)[0]
    if not head.isdigit() or len(head) != 13:
        return None
    return datetime.fromtimestamp(int(head) / 1000, UTC).replace(tzinfo=None)


def land(records: list[Any], landing: Any = None) -> list[str]:
    """Lands result records (`ResultRecord`s or dicts) for the service, each written atomically; returns
    their keys. Raises `ObjectStoreError` (one line, no key) when the landing cannot take one: the
    caller keeps the record (a sweep's local landing folder) and says so."""
    store = landing if landing is not None else landing_store.open_landing()
    keys = []
    for rec in records:
        data = rec.to_json() if hasattr(rec, "to_json") else dict(rec)
        raw = canonical(data)
        key = landing_key(str(data.get("run_id")), hashlib.sha256(raw).hexdigest())
        store.put(key, raw)
        keys.append(key)
    return keys


@dataclass
class BatchResult:
    """What one `ingest_batch` did (its row of `v_ingest_batches`, plus the refused files' reasons)."""

    batch_id: str
    landed: int = 0
    stored: int = 0
    new_runs: int = 0
    duplicates: int = 0
    metric_rows: int = 0
    bytes: int = 0
    attempts: int = 0
    read_s: float = 0.0
    commit_s: float = 0.0
    lag_s: list[float] = field(default_factory=list)
    rejected: list[tuple[str, str]] = field(default_factory=list)  # (key, reason)

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k not in ("lag_s", "rejected")}
        out["rejected"] = [{"key": k, "reason": r} for k, r in self.rejected]
        out["lag_s_max"] = max(self.lag_s) if self.lag_s else None
        return out


@dataclass
class _Landed:
    key: str
    size: int
    data: Any = None
    digest: str = ""
    at: datetime | None = None
    problem: str | None = None


def _read(store: Any, items: list[landing_store.Landed]) -> list[_Landed]:
    def one(item: landing_store.Landed) -> _Landed:
        out = _Landed(item.key, item.size, at=landed_at(item.key))
        try:
            raw = store.get(item.key)
        except FileNotFoundError:
            out.problem = "gone"  # another service took it: not ours
            return out
        except (OSError, UserError) as err:
            out.problem = f"cannot read: {redact(str(err))[:300]}"
            return out
        data, problem = read_record_bytes(raw)
        if problem is not None or not isinstance(data, dict):
            out.problem = problem or "not one result record (a JSON object)"
            return out
        out.data, out.digest = data, record_hash(data)
        return out

    if len(items) <= 1:
        return [one(i) for i in items]
    with ThreadPoolExecutor(max_workers=min(READERS, len(items))) as pool:
        return list(pool.map(one, items))


def _sleep_backoff(attempt: int) -> None:
    ceiling = min(BACKOFF_MAX_S, BACKOFF_S * 2 ** (attempt - 1))
    time.sleep(random.uniform(0.0, ceiling))  # full jitter: concurrent retries spread out


def ingest_batch(wh: Any, store: Any, *, max_records: int = MAX_RECORDS, max_bytes: int = MAX_BYTES,
                 host: str | None = None) -> BatchResult | None:
    """Stores the oldest landed records in one commit (see the module doc); None when none are waiting."""
    t0 = time.monotonic()
    started = now()
    items = store.list(landing_store.RECORDS, max_records)
    if not items:
        return None
    taken, size = [], 0
    for item in items:
        if taken and size + item.size > max_bytes:
            break
        taken.append(item)
        size += item.size
    landed = [x for x in _read(store, taken) if x.problem != "gone"]
    host = host or lake.holder_name()
    batch = BatchResult(batch_id=f"{started:%Y%m%dT%H%M%S%f}-{host}"[:200], landed=len(landed),
                        bytes=sum(x.size for x in landed))
    batch.rejected = [(x.key, x.problem) for x in landed if x.problem]
    good = [x for x in landed if not x.problem]
    first: dict[str, _Landed] = {}
    for x in good:
        first.setdefault(x.digest, x)
    batch.read_s = time.monotonic() - t0
    todo: list[_Landed] = []
    committed_at = started
    c0 = time.monotonic()
    while True:
        batch.attempts += 1
        try:
            known = wh.stored_hashes(list(first))
            todo = [x for x in first.values() if x.digest not in known]
            refused: dict[int, str] = {}

            def inside(result: Any, todo: list[_Landed] = todo, refused: dict[int, str] = refused) -> None:
                nonlocal committed_at
                committed_at = now()
                refused.update({r.position: r.reason for r in result.rejected if r.position is not None})
                rows = [{"record_hash": x.digest, "run_id": str(x.data.get("run_id")), "batch_id": batch.batch_id,
                         "landed_at": x.at, "stored_at": committed_at}
                        for i, x in enumerate(todo) if i not in refused]
                frame = pl.DataFrame(rows, schema={"record_hash": pl.String, "run_id": pl.String, "batch_id": pl.String,
                                                   "landed_at": pl.Datetime("us"), "stored_at": pl.Datetime("us")})
                wh._write_ingest_batch({
                    "batch_id": batch.batch_id, "host": host, "started_at": started, "committed_at": committed_at,
                    "landed": batch.landed, "stored": result.ingested, "new_runs": result.new,
                    "duplicates": len(good) - len(todo), "rejected": len(batch.rejected) + len(refused),
                    "metric_rows": result.metric_rows, "bytes": batch.bytes, "attempts": batch.attempts,
                    "read_s": batch.read_s, "commit_s": time.monotonic() - c0}, frame)

            result = wh.ingest_records([x.data for x in todo], sources=[x.key for x in todo], inside=inside)
            break
        except Exception as err:  # noqa: BLE001 - a conflict is retried; anything else leaves the files in place
            if not lake.retryable(err) or batch.attempts >= RETRIES:
                raise
            _sleep_backoff(batch.attempts)
    batch.commit_s = time.monotonic() - c0
    batch.stored, batch.new_runs, batch.metric_rows = result.ingested, result.new, result.metric_rows
    batch.duplicates = len(good) - len(todo)
    batch.rejected += [(todo[i].key, reason) for i, reason in refused.items()]
    done = datetime.now(UTC).replace(tzinfo=None)
    batch.lag_s = [max(0.0, (done - x.at).total_seconds()) for i, x in enumerate(todo) if i not in refused and x.at]
    # only now, after the commit: the stored and duplicate files go, the refused ones move aside with their reason
    refused_keys = {k for k, _ in batch.rejected}
    for key, reason in batch.rejected:
        name = key.rsplit("/", 1)[-1]
        try:
            store.put(f"{landing_store.REJECTED}{name}", store.get(key))
            store.put(f"{landing_store.REJECTED}{name}.reason.txt", (reason + "\n").encode("utf-8"))
        except (OSError, UserError):
            continue  # left in place: the next batch refuses it again
        store.delete([key])
    store.delete([x.key for x in landed if x.key not in refused_keys])
    return batch


@dataclass
class ServiceResult:
    """What one run of the service did: its batches, and the records still waiting when it stopped."""

    landing: str
    batches: list[BatchResult] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def stored(self) -> int:
        return sum(b.stored for b in self.batches)

    def summary(self) -> str:
        if not self.batches:
            return f"ingest: nothing waiting in {self.landing}"
        lags = sorted(v for b in self.batches for v in b.lag_s)
        lag = f", lag P50 {_pct(lags, 0.5):.1f} s / P99 {_pct(lags, 0.99):.1f} s" if lags else ""
        rejected = sum(len(b.rejected) for b in self.batches)
        return (f"ingest: {len(self.batches)} batch(es) from {self.landing}: {self.stored} record(s) stored "
                f"({sum(b.new_runs for b in self.batches)} new runs, {sum(b.metric_rows for b in self.batches)} metric "
                f"rows), {sum(b.duplicates for b in self.batches)} duplicate(s), {rejected} refused (moved to "
                f"rejected/){lag}; {self.seconds:.1f} s")

    def to_dict(self) -> dict[str, Any]:
        lags = sorted(v for b in self.batches for v in b.lag_s)
        return {"landing": self.landing, "batches": [b.to_dict() for b in self.batches], "stored": self.stored,
                "lag_s_p50": _pct(lags, 0.5), "lag_s_p99": _pct(lags, 0.99), "seconds": self.seconds}


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def run_service(*, landing: str | None = None, seconds: float = 0.0, poll_s: float = 5.0,
                max_records: int = MAX_RECORDS) -> ServiceResult:
    """Stores landed records batch after batch until none are waiting; with `seconds` > 0 keeps polling
    the landing every `poll_s` for that long (a long-running service). The team warehouse stays open
    between batches (one catalog connection and writer lock for the whole run); a DuckDB file is opened
    per batch only, so that sweeps' own writes (trials, leases) get in between."""
    from gpuledger.warehouse import Warehouse

    store = landing_store.open_landing(landing)
    out = ServiceResult(landing=store.where)
    t0 = time.monotonic()
    wh = None
    try:
        while True:
            batch = None
            if wh is not None or store.list(landing_store.RECORDS, 1):
                wh = wh if wh is not None else Warehouse.open()
                batch = ingest_batch(wh, store, max_records=max_records)
                if wh.backend != "ducklake":
                    wh.close()
                    wh = None
            if batch is not None:
                out.batches.append(batch)
                continue
            if time.monotonic() - t0 + poll_s > seconds:
                break
            time.sleep(poll_s)
    finally:
        if wh is not None:
            wh.close()
    out.seconds = time.monotonic() - t0
    return out


def wait_stored(run_ids: list[str], timeout_s: float, poll_s: float = 2.0) -> set[str]:
    """Waits until the warehouse holds every run id of `run_ids` (the service stored them), at most
    `timeout_s`; returns those still missing."""
    from gpuledger.warehouse import Warehouse

    missing = set(run_ids)
    deadline = time.monotonic() + timeout_s
    while missing:
        try:
            with Warehouse.open(read_only=True) as wh:
                missing -= wh.stored_run_ids(sorted(missing))
        except UserError:
            pass  # a reader that cannot open now: try again
        if not missing or time.monotonic() + poll_s > deadline:
            break
        time.sleep(poll_s)
    return missing


__all__ = ["BatchResult", "ServiceResult", "canonical", "ingest_batch", "land", "landed_at", "landing_key", "mode",
           "record_hash", "run_service", "wait_stored"]
