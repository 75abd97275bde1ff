"""A real S3-compatible server for tests: moto's server (PyPI `moto[server]`, a dev dependency) in its own
process on a free loopback port, with one bucket made through boto3. It speaks the S3 REST API as AWS
does (multipart uploads, listing, path-style URLs), so DuckDB's httpfs writes to it as to a bucket."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from helpers.ports import free_port


@dataclass(frozen=True)
class S3Server:
    endpoint: str  # http://127.0.0.1:PORT
    bucket: str
    key_id: str
    secret: str
    region: str

    def env(self) -> dict[str, str]:
        """The standard AWS variables that point a client at this server."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": self.key_id,
                "AWS_SECRET_ACCESS_KEY": self.secret, "AWS_REGION": self.region}

    def keys(self, prefix: str = "") -> list[str]:
        """Every object key in the bucket under `prefix`."""
        import boto3

        s3 = boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=self.key_id,
                          aws_secret_access_key=self.secret, region_name=self.region)
        out: list[str] = []
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
            out += [o["Key"] for o in page.get("Contents", [])]
        return out


@contextmanager
def s3_server(bucket: str = "team-ledger") -> Iterator[S3Server]:
    """Yields a running S3-compatible server with `bucket` made; stops it afterwards."""
    import boto3

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("moto's S3 server did not start") from None
                time.sleep(0.2)
        server = S3Server(f"http://127.0.0.1:{port}", bucket, "AKIAGPULEDGERTEST", "sk-test-9f3c1e7a5b2d4068", "us-east-1")
        boto3.client("s3", endpoint_url=server.endpoint, aws_access_key_id=server.key_id,
                     aws_secret_access_key=server.secret, region_name=server.region).create_bucket(Bucket=bucket)
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
