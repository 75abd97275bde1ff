"""Object storage as the team warehouse's data path: S3 (and any S3-compatible endpoint) or GCS.

DuckLake writes its Parquet data files through DuckDB's httpfs extension; DuckDB needs the bucket's
credentials and endpoint as a SECRET. `secret_statement(data_path)` builds it from, in order:
- the standard AWS variables: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`,
  `AWS_REGION` / `AWS_DEFAULT_REGION`, `AWS_ENDPOINT_URL_S3` / `AWS_ENDPOINT_URL` (the AWS CLI's
  names, https://docs.aws.amazon.com/sdkref/latest/guide/feature-ss-endpoints.html);
- else the shared credentials file (`AWS_SHARED_CREDENTIALS_FILE`, default `~/.aws/credentials`,
  profile `AWS_PROFILE` or `default`), read here with configparser (DuckDB's credential_chain
  provider needs the `aws` extension, which is not shipped);
- GCS (`gs://`, `gcs://`): HMAC keys in `GCS_ACCESS_KEY_ID` / `GCS_SECRET_ACCESS_KEY` (DuckDB's
  `TYPE gcs` secret, https://duckdb.org/docs/stable/core_extensions/httpfs/s3api);
and the project's `[warehouse]` settings `s3_endpoint`, `s3_region`, `s3_url_style` (keys never live
in gpuledger.toml: it is committed). A custom endpoint (MinIO, moto, R2, Ceph) defaults to
path-style URLs; `http://` turns TLS off.

Every secret value is handed to `connect.remember_secrets_values`, so no message gpuledger prints,
DuckDB's own error text included, ever shows it (`redact`).
"""

from __future__ import annotations

import configparser
import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from gpuledger.errors import UserError
from gpuledger.warehouse import sqlfiles
from gpuledger.warehouse.connect import remember_secret_values

#: URL schemes DuckDB's httpfs reads and writes as object storage
S3_SCHEMES = ("s3", "s3a", "s3n", "r2")
GCS_SCHEMES = ("gs", "gcs")


class ObjectStoreError(UserError):
    """The object-storage data path is not usable as given (no credentials, a bad endpoint)."""


def is_object_store(data_path: str | None) -> bool:
    """True when `data_path` is an object-storage URL (s3://, gs://, ...), not a folder."""
    if not data_path or "://" not in data_path:
        return False
    return urlparse(data_path).scheme.lower() in S3_SCHEMES + GCS_SCHEMES


def bucket_and_prefix(data_path: str) -> tuple[str, str, str]:
    """Returns (scheme, bucket, prefix) of an object-storage URL; raises ObjectStoreError on a bad one."""
    u = urlparse(data_path)
    scheme = u.scheme.lower()
    if scheme not in S3_SCHEMES + GCS_SCHEMES:
        raise ObjectStoreError(f"warehouse data path {data_path!r}: not an object-storage URL "
                               f"(s3://BUCKET/PREFIX or gs://BUCKET/PREFIX)")
    if not u.netloc or any(c in u.netloc for c in "/\\ '\""):
        raise ObjectStoreError(f"warehouse data path {data_path!r}: no bucket name (s3://BUCKET/PREFIX)")
    return scheme, u.netloc, u.path.lstrip("/")


@dataclass(frozen=True)
class Endpoint:
    host: str  # host[:port], as DuckDB's ENDPOINT wants it (no scheme)
    use_ssl: bool


def parse_endpoint(url: str, where: str) -> Endpoint:
    """Returns the endpoint of `url` (`http://127.0.0.1:9000`, `https://s3.example.com`, or a bare host)."""
    text = url.strip()
    if "://" not in text:
        text = "https://" + text
    u = urlparse(text)
    if u.scheme not in ("http", "https") or not u.hostname or any(c in u.netloc for c in " '\"\\"):
        raise ObjectStoreError(f"{where}={url!r}: not an endpoint URL (e.g. http://127.0.0.1:9000 or "
                               "https://s3.us-east-1.amazonaws.com)")
    try:
        port = u.port
    except ValueError:
        raise ObjectStoreError(f"{where}={url!r}: the port is not a number 1-65535") from None
    host = u.hostname if port is None else f"{u.hostname}:{port}"
    return Endpoint(host=host, use_ssl=u.scheme == "https")


@dataclass(frozen=True)
class Credentials:
    key_id: str
    secret: str
    session_token: str | None
    source: str  # where they came from, in words (never the values)


def _from_credentials_file(env: dict[str, str]) -> Credentials | None:
    path = Path(env.get("AWS_SHARED_CREDENTIALS_FILE") or Path.home() / ".aws" / "credentials").expanduser()
    profile = env.get("AWS_PROFILE") or "default"
    parser = configparser.ConfigParser(interpolation=None)
    try:
        if not path.is_file() or path.stat().st_size > 1_000_000:
            return None
        parser.read(path, encoding="utf-8")
    except (OSError, configparser.Error, UnicodeDecodeError):
        return None
    if not parser.has_section(profile):
        return None
    sec = parser[profile]
    key, secret = sec.get("aws_access_key_id"), sec.get("aws_secret_access_key")
    if not key or not secret:
        return None
    return Credentials(key.strip(), secret.strip(), (sec.get("aws_session_token") or "").strip() or None,
                       f"{path} [{profile}]")


def credentials(scheme: str, env: dict[str, str] | None = None) -> Credentials | None:
    """The keys for `scheme` from the standard variables (or the AWS credentials file), or None."""
    env = dict(os.environ if env is None else env)
    if scheme in GCS_SCHEMES:
        key, secret = env.get("GCS_ACCESS_KEY_ID"), env.get("GCS_SECRET_ACCESS_KEY")
        return Credentials(key, secret, None, "GCS_ACCESS_KEY_ID/GCS_SECRET_ACCESS_KEY") if key and secret else None
    key, secret = env.get("AWS_ACCESS_KEY_ID"), env.get("AWS_SECRET_ACCESS_KEY")
    if key and secret:
        return Credentials(key, secret, env.get("AWS_SESSION_TOKEN") or None,
                           "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY")
    return _from_credentials_file(env)


@dataclass(frozen=True)
class StoreConfig:
    """What DuckDB is told about the bucket (no secret values: those are in `credentials`)."""

    scheme: str
    bucket: str
    prefix: str
    region: str | None
    endpoint: Endpoint | None
    url_style: str | None
    credentials: Credentials | None

    def describe(self) -> str:
        """One line for `doctor` and messages: bucket, endpoint, region, where the keys came from."""
        where = f"{self.scheme}://{self.bucket}/{self.prefix}"
        parts = [where]
        if self.endpoint:
            parts.append(f"endpoint {'https' if self.endpoint.use_ssl else 'http'}://{self.endpoint.host}")
        if self.region:
            parts.append(f"region {self.region}")
        parts.append(f"keys from {self.credentials.source}" if self.credentials else "no keys (public bucket?)")
        return ", ".join(parts)


def store_config(data_path: str, *, endpoint: str | None = None, region: str | None = None,
                 url_style: str | None = None, env: dict[str, str] | None = None) -> StoreConfig:
    """Returns how to reach `data_path`: settings (`endpoint`, `region`, `url_style`) over the AWS
    variables for endpoint and region; the keys from the variables or the credentials file."""
    env = dict(os.environ if env is None else env)
    scheme, bucket, prefix = bucket_and_prefix(data_path)
    ep_where = "[warehouse] s3_endpoint"
    if not endpoint:
        for name in ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"):
            if env.get(name):
                endpoint, ep_where = env[name], name
                break
    ep = parse_endpoint(endpoint, ep_where) if endpoint and scheme in S3_SCHEMES else None
    region = region or env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or None
    if url_style is not None and url_style not in ("path", "vhost"):
        raise ObjectStoreError(f"[warehouse] s3_url_style={url_style!r}: give 'path' or 'vhost'")
    style = url_style or ("path" if ep is not None else None)
    creds = credentials(scheme, env)
    if creds is not None:
        remember_secret_values([creds.secret, *( [creds.session_token] if creds.session_token else [])])
    return StoreConfig(scheme, bucket, prefix, region, ep, style, creds)


def secret_statement(cfg: StoreConfig, name: str = "gpuledger_store") -> str:
    """The `CREATE OR REPLACE SECRET` statement for `cfg` (TEMPORARY: it lives in this connection only,
    never in DuckDB's persistent secret folder). Contains key values: never print it."""
    lit = sqlfiles.literal
    kind = "gcs" if cfg.scheme in GCS_SCHEMES else "s3"
    opts = [f"TYPE {kind}", f"SCOPE {lit(f'{cfg.scheme}://{cfg.bucket}')}"]
    if cfg.credentials:
        opts += [f"KEY_ID {lit(cfg.credentials.key_id)}", f"SECRET {lit(cfg.credentials.secret)}"]
        if cfg.credentials.session_token:
            opts.append(f"SESSION_TOKEN {lit(cfg.credentials.session_token)}")
    if cfg.region and kind == "s3":
        opts.append(f"REGION {lit(cfg.region)}")
    if cfg.endpoint:
        opts += [f"ENDPOINT {lit(cfg.endpoint.host)}", f"USE_SSL {'true' if cfg.endpoint.use_ssl else 'false'}"]
    if cfg.url_style and kind == "s3":
        opts.append(f"URL_STYLE {lit(cfg.url_style)}")
    return f"CREATE OR REPLACE TEMPORARY SECRET {sqlfiles.ident(name)} ({', '.join(opts)})"
