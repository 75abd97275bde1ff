"""Durable writes: every file gpuledger generates (result records, landing files, reports, CSVs,
the machine file) is written to a temporary file in the same folder, fsynced, and renamed over its
name, so a full disk or a crash leaves the previous file whole, never a truncated one.

Stdlib only: the in-job agent uses it too.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any


def write_bytes_atomic(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Writes `data` to `path` durably: a temporary file in the same folder, written, fsynced,
    renamed over `path`, then the folder fsynced. On any error (a full disk: ENOSPC, a file-size
    limit: EFBIG) the temporary file is removed, `path` is left as it was, and the OSError raised.
    `mode`: the new file's permissions (0o600 for what only this user may read)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            view = memoryview(data)
            while view:  # os.write may write less than asked
                view = view[os.write(fh.fileno(), view):]
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):  # the rename itself durable (not every file system allows it)
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def write_json_atomic(path: Path, data: dict[str, Any], mode: int = 0o644) -> bytes:
    """Writes `data` as JSON to `path` durably (`write_bytes_atomic`); returns the bytes written."""
    text = json.dumps(data, indent=1, allow_nan=False) + "\n"
    raw = text.encode("utf-8")
    write_bytes_atomic(Path(path), raw, mode)
    return raw


def write_text_atomic(path: Path, text: str) -> None:
    """Writes `text` (UTF-8) to `path` durably (`write_bytes_atomic`)."""
    write_bytes_atomic(Path(path), text.encode("utf-8"))
