"""Signed result files: how a launcher tells its agent's record from a file a trial wrote.

The launcher makes a key per attempt and passes it (and, for a sweep, the landing folder's key) on
a pipe (`--key-fd`) that the agent reads and closes before it starts the trial, so the trial, which
inherits no descriptors, never has them. The agent writes the record and `FILE.sig` beside it: one
`NAME HMAC-SHA256-HEX` line per key. Stdlib only: it runs inside cloud jobs.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
from pathlib import Path
from typing import Any

from gpuledger.files import write_bytes_atomic, write_json_atomic


def signature_path(result: Path) -> Path:
    """The file beside a result file that holds its signatures (`signatures`)."""
    return result.with_name(result.name + ".sig")


def sign(key: bytes, data: bytes) -> str:
    """Returns the HMAC-SHA256 of `data` under `key`, as hex."""
    return hmac.new(key, data, hashlib.sha256).hexdigest()


def signatures(keys: dict[str, bytes], data: bytes) -> str:
    """Returns the signature file's text: one `NAME HEX` line per key (`attempt`: the key the launcher
    made for this attempt; `landing`: the landing folder's, for a later run's recovery)."""
    return "".join(f"{name} {sign(key, data)}\n" for name, key in keys.items())


def signed_by(signature_text: str, name: str, key: bytes, data: bytes) -> bool:
    """Returns True when `signature_text` (a `signatures` file) holds a valid `name` signature of `data`."""
    want = sign(key, data)
    for line in signature_text.splitlines():
        label, _, value = line.strip().partition(" ")
        if label == name and hmac.compare_digest(value.strip(), want):
            return True
    return False


def write_signed(path: Path, record: dict[str, Any], keys: dict[str, bytes]) -> None:
    """Writes `record` to `path` durably, and its `signatures` under `keys` beside it (no keys: a
    signature file left from before is removed, since it no longer matches)."""
    data = write_json_atomic(path, record)
    if keys:
        write_bytes_atomic(signature_path(path), signatures(keys, data).encode(), mode=0o600)
    else:
        with contextlib.suppress(FileNotFoundError):
            signature_path(path).unlink()


#: The names of the keys on the `--key-fd` pipe, in order (one hex key per line).
KEY_NAMES = ("attempt", "landing")


def read_keys(fd: int) -> dict[str, bytes]:
    """Reads the signing keys from the pipe the launcher passed (`--key-fd`: one key per line, the
    attempt's first, then optionally the landing folder's) and closes it, so the trial (started
    later, inheriting no descriptors) never has them."""
    chunks: list[bytes] = []
    try:
        while sum(map(len, chunks)) <= 4096:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)
    keys = dict(zip(KEY_NAMES, (k.strip() for k in b"".join(chunks).splitlines() if k.strip()), strict=False))
    if len(keys.get("attempt", b"")) < 16:
        raise ValueError("expected a key of at least 16 bytes per line")
    return keys
