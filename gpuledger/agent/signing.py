"""Signed results: how a launcher tells its agent's record from a file or a line a trial wrote.

The launcher makes a key per attempt and passes it (and, for a sweep, the landing folder's key) on
a pipe (`--key-fd`) that the agent reads and closes before it starts the trial, so the trial, which
inherits no descriptors, never has them. The agent writes the record and `FILE.sig` beside it: one
`NAME HMAC-SHA256-HEX` line per key.

A launcher that reads the job's logs instead (SkyPilot) passes a key per job as
`$GPULEDGER_RESULT_KEY` (`take_env_key`); the agent signs its `GPULEDGER_RESULT` line with it
(`signed_result_line`) and the launcher believes only a line that verifies (`result_line_signed`).
Stdlib only: it runs inside cloud jobs.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
from pathlib import Path
from typing import Any

from gpuledger.files import write_bytes_atomic, write_json_atomic
from gpuledger.protocol import RESULT_LINE_PREFIX, RESULT_SIGNATURE_PREFIX


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


def signed_result_line(json_text: str, key: bytes | None) -> str:
    """Returns the agent's result line for the record `json_text` (one line, no newline): signed
    (`protocol.RESULT_SIGNATURE_PREFIX` + the HMAC-SHA256 of the exact text) when there is a key."""
    line = RESULT_LINE_PREFIX + json_text
    return f"{line} {RESULT_SIGNATURE_PREFIX}{sign(key, json_text.encode())}" if key else line


def result_line_signed(json_text: str, rest: str, key: bytes) -> bool:
    """Returns True when `rest` (what follows the JSON on its line) starts with a valid signature of
    `json_text` under `key`; whatever follows the signature (a terminal's colour reset) is ignored."""
    rest = rest.lstrip()
    if not rest.startswith(RESULT_SIGNATURE_PREFIX):
        return False
    value = rest[len(RESULT_SIGNATURE_PREFIX):len(RESULT_SIGNATURE_PREFIX) + 64]
    return hmac.compare_digest(value.encode("ascii", "replace"), sign(key, json_text.encode()).encode())


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


def take_env_key(name: str) -> bytes | None:
    """Returns the key in the environment variable `name` (None when unset or empty) and removes it:
    from `os.environ` (children never inherit it) and, on Linux, from this process's initial
    environment block too (its bytes overwritten), so `/proc/<agent pid>/environ` no longer shows it
    to the trial. Raises ValueError for a key shorter than 16 characters."""
    value = os.environ.get(name)
    if value is not None:
        _scrub_initial_environ(name)  # first: once unset, libc no longer points at the block
        os.environ.pop(name, None)
    if not value:
        return None
    key = value.strip().encode()
    if len(key) < 16:
        raise ValueError(f"${name}: expected a key of at least 16 characters")
    return key


def _scrub_initial_environ(name: str) -> None:
    """Overwrites the value of `name` in the environment block the process started with (what
    /proc/PID/environ reads); best effort: nothing happens where libc cannot be reached."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError, ValueError):
        libc = ctypes.CDLL(None)
        libc.getenv.restype = ctypes.c_void_p
        libc.getenv.argtypes = [ctypes.c_char_p]
        ptr = libc.getenv(name.encode())
        if ptr:
            ctypes.memset(ptr, ord("x"), len(ctypes.string_at(ptr)))
        libc.unsetenv(name.encode())
