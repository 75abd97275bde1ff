"""The ingest service's landing: where sweeps put result records for `ingest/team` to store
(`gpuledger.warehouse.ingest_service`). A prefix on object storage (S3, GCS, any S3-compatible endpoint)
or a local folder, chosen by `[warehouse] landing` (default: beside the data path, `<data_path>-landing/`;
for a DuckDB file, `.gpuledger/ingest-landing/`).

Writes are atomic: an object-storage PUT appears whole or not at all; a folder write goes through
`gpuledger.files.write_bytes_atomic` (temporary file, fsync, rename). Keys are `records/<name>.json`;
a record the service refused moves to `rejected/<name>.json` with `rejected/<name>.json.reason.txt`.
The bucket's keys come from the same place as the data path's (`gpuledger.warehouse.objectstore`) and
reach boto3 only as arguments: never printed (`connect.redact`).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuledger.files import write_bytes_atomic
from gpuledger.warehouse import objectstore
from gpuledger.warehouse.connect import redact

RECORDS = "records/"
REJECTED = "rejected/"


@dataclass(frozen=True)
class Landed:
    key: str  # relative to the landing (records/NAME.json)
    size: int


class FolderLanding:
    """A landing on a local (or shared) folder."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.where = str(self.root)

    def put(self, key: str, data: bytes) -> None:
        try:
            write_bytes_atomic(self.root / key, data)
        except OSError as err:
            raise objectstore.ObjectStoreError(f"cannot write {self.root / key}: {err.strerror or err}") from None

    def list(self, prefix: str, limit: int) -> list[Landed]:
        folder = self.root / prefix
        if not folder.is_dir():
            return []
        out = []
        for p in sorted(folder.glob("*.json")):  # names start with the landing time: oldest first
            with contextlib.suppress(OSError):
                if p.is_file():
                    out.append(Landed(f"{prefix}{p.name}", p.stat().st_size))
            if len(out) >= limit:
                break
        return out

    def get(self, key: str) -> bytes:
        return (self.root / key).read_bytes()

    def delete(self, keys: list[str]) -> None:
        for key in keys:
            with contextlib.suppress(FileNotFoundError):
                (self.root / key).unlink()


class S3Landing:
    """A landing under `s3://BUCKET/PREFIX` (or gs://, through GCS's S3-compatible XML API with HMAC keys)."""

    def __init__(self, cfg: objectstore.StoreConfig, *, timeout_s: float | None = None,
                 label: str = "ingest landing") -> None:
        """`timeout_s`: connect and read timeouts with no retry (`doctor`'s probe); default 10/60 s, 5 attempts.
        `label`: what messages call this prefix."""
        import boto3
        from botocore.config import Config

        self.cfg = cfg
        self.label = label
        self.prefix = cfg.prefix if not cfg.prefix or cfg.prefix.endswith("/") else cfg.prefix + "/"
        self.where = f"{cfg.scheme}://{cfg.bucket}/{self.prefix}"
        endpoint = None
        if cfg.endpoint is not None:
            endpoint = f"{'https' if cfg.endpoint.use_ssl else 'http'}://{cfg.endpoint.host}"
        elif cfg.scheme in objectstore.GCS_SCHEMES:
            endpoint = "https://storage.googleapis.com"
        creds: dict[str, Any] = {}
        if cfg.credentials is not None:
            creds = {"aws_access_key_id": cfg.credentials.key_id, "aws_secret_access_key": cfg.credentials.secret,
                     "aws_session_token": cfg.credentials.session_token}
        style = {"addressing_style": cfg.url_style if cfg.url_style == "path" else "auto"}
        self._s3 = boto3.session.Session().client(
            "s3", endpoint_url=endpoint, region_name=cfg.region or "us-east-1",
            config=Config(connect_timeout=timeout_s or 10, read_timeout=timeout_s or 60,
                          retries={"max_attempts": 1 if timeout_s else 5, "mode": "standard"}, s3=style), **creds)

    def _fail(self, what: str, err: BaseException) -> objectstore.ObjectStoreError:
        return objectstore.ObjectStoreError(f"{self.label} {self.where} ({self.cfg.describe()}): {what}: "
                                            f"{redact(' '.join(str(err).split()))[:300]}")

    def put(self, key: str, data: bytes) -> None:
        try:
            self._s3.put_object(Bucket=self.cfg.bucket, Key=self.prefix + key, Body=data,
                                ContentType="application/json")
        except Exception as err:  # noqa: BLE001 - botocore's errors: one line, no key
            raise self._fail(f"cannot write {key}", err) from None

    def list(self, prefix: str, limit: int) -> list[Landed]:
        out: list[Landed] = []
        try:
            pages = self._s3.get_paginator("list_objects_v2").paginate(
                Bucket=self.cfg.bucket, Prefix=self.prefix + prefix, PaginationConfig={"PageSize": min(limit, 1000)})
            for page in pages:  # S3 lists keys in UTF-8 binary order: the landing time first, oldest first
                for obj in page.get("Contents", []):
                    if obj["Key"].endswith(".json"):
                        out.append(Landed(obj["Key"][len(self.prefix):], int(obj["Size"])))
                    if len(out) >= limit:
                        return out
        except Exception as err:  # noqa: BLE001
            raise self._fail("cannot list the records", err) from None
        return out

    def get(self, key: str) -> bytes:
        try:
            return self._s3.get_object(Bucket=self.cfg.bucket, Key=self.prefix + key)["Body"].read()
        except Exception as err:  # noqa: BLE001
            raise self._fail(f"cannot read {key}", err) from None

    def delete(self, keys: list[str]) -> None:
        try:
            for i in range(0, len(keys), 1000):
                chunk = [{"Key": self.prefix + k} for k in keys[i:i + 1000]]
                if chunk:
                    self._s3.delete_objects(Bucket=self.cfg.bucket, Delete={"Objects": chunk, "Quiet": True})
        except Exception as err:  # noqa: BLE001
            raise self._fail("cannot remove stored records", err) from None


def default_landing() -> str:
    """`[warehouse] landing`, else beside the data path (`<data_path>-landing/`), else the project's
    `.gpuledger/ingest-landing/` (a DuckDB file, or a DuckLake whose data path is not set here)."""
    from gpuledger import settings
    from gpuledger.warehouse import lake

    s = settings.current()
    explicit = s.values.get("warehouse.landing")
    if explicit:
        return str(explicit)
    data = lake.data_path_setting() if lake.is_lake(s.warehouse) else None
    if data:
        return data.rstrip("/") + "-landing/"
    return str(s.run_dir / "ingest-landing")


def open_landing(where: str | None = None, *, timeout_s: float | None = None) -> FolderLanding | S3Landing:
    """The landing at `where` (default `default_landing()`): an object-storage URL or a folder.
    `timeout_s`: an object store's timeouts, without retries (see `S3Landing`)."""
    where = where or default_landing()
    if objectstore.is_object_store(where):
        from gpuledger.warehouse import lake

        cfg = lake.store_for(where)
        assert cfg is not None
        return S3Landing(cfg, timeout_s=timeout_s)
    return FolderLanding(where)


def probe_write(store: FolderLanding | S3Landing) -> None:
    """Writes a small probe object (outside records/: the service never sees it) and removes it again;
    raises ObjectStoreError (one line, no key) when either cannot be done."""
    probe = f"{PROBE_PREFIX}{os.getpid()}-{os.urandom(4).hex()}.txt"
    store.put(probe, b"gpuledger doctor: a write probe, removed at once\n")
    store.delete([probe])


#: the most landed records `health` lists (a bigger backlog is reported as "at least")
HEALTH_LIST_LIMIT = 10_000
#: the probe object `health` writes and removes again (outside records/: the service never sees it)
PROBE_PREFIX = "doctor-probe-"


@dataclass(frozen=True)
class Health:
    """What `health` found: where the landing is, whether a write went through, the backlog."""

    where: str
    kind: str  # "object store" | "folder"
    exists: bool  # a folder that is there (an object-store prefix: always True)
    waiting: int  # records under records/ (at most HEALTH_LIST_LIMIT)
    more: bool  # True when the listing stopped at HEALTH_LIST_LIMIT
    oldest_key: str | None  # the oldest waiting record's key (its name starts with its landing time)
    rejected: int  # records the service refused (rejected/)


def health(where: str | None = None, *, timeout_s: float | None = None) -> Health:
    """Checks the landing at `where` (default `default_landing()`): a probe object written and removed
    (a folder that does not exist yet: its nearest existing parent must be writable, nothing is made),
    then the records waiting and rejected. Raises ObjectStoreError (one line, no key) when it cannot."""
    store = open_landing(where, timeout_s=timeout_s)
    if isinstance(store, FolderLanding):
        if not store.root.is_dir():
            existing = store.root
            while not existing.exists() and existing != existing.parent:
                existing = existing.parent
            if not (existing.is_dir() and os.access(existing, os.W_OK | os.X_OK)):
                raise objectstore.ObjectStoreError(
                    f"ingest landing {store.root} does not exist and cannot be made (nearest folder: {existing})")
            return Health(store.where, "folder", False, 0, False, None, 0)
        if not os.access(store.root, os.W_OK | os.X_OK):
            raise objectstore.ObjectStoreError(f"ingest landing {store.root} is not writable by this user")
    probe_write(store)
    records = store.list(RECORDS, HEALTH_LIST_LIMIT)
    rejected = store.list(REJECTED, HEALTH_LIST_LIMIT)
    kind = "folder" if isinstance(store, FolderLanding) else "object store"
    return Health(store.where, kind, True, len(records), len(records) >= HEALTH_LIST_LIMIT,
                  records[0].key if records else None, len(rejected))
