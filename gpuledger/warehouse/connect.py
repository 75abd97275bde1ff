"""Opening the DuckDB file: one writing process XOR any number of readers, with a bounded wait.

DuckDB takes an OS file lock when it opens a database file: a shared (read) lock for a read-only
connection, an exclusive (write) lock for a read-write one. A writer therefore cannot open the file
while ANY reader holds it (`duckdb -readonly`, a notebook, a long `gpuledger sql`), and a reader
cannot open it while a writer holds it. `connect` retries with backoff until the holder lets go,
for at most `GPULEDGER_LOCK_TIMEOUT_S` seconds (default `DEFAULT_LOCK_TIMEOUT_S`), then raises
`WarehouseBusy` naming the holder as what it is: a reader or a writer, its pid and command line
(from `/proc/locks` where the OS has one, else from DuckDB's own message).
"""

from __future__ import annotations

import os
import re
import stat
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from gpuledger.errors import UserError
from gpuledger.settings import ENV_PATH

ENV_LOCK_TIMEOUT = "GPULEDGER_LOCK_TIMEOUT_S"
#: seconds a connection waits for the process holding the file to let go (env overrides)
DEFAULT_LOCK_TIMEOUT_S = 10.0
#: longest sleep between two attempts while waiting
MAX_RETRY_SLEEP_S = 0.25

_LOCK_PID_RE = re.compile(r"\(PID (\d+)\)")
_READONLY_HINT = "would be able to open this database in read-only mode"


class WarehouseBusy(UserError):
    """The warehouse file stayed locked by another process for the whole wait."""

    def __init__(self, message: str, *, holder_pid: int | None, holder_mode: str | None):
        super().__init__(message)
        self.holder_pid = holder_pid
        self.holder_mode = holder_mode  # "reader" | "writer" | None (unknown)


def now() -> datetime:
    """Returns the current time as naive UTC (the warehouse's timestamps)."""
    return datetime.now(UTC).replace(tzinfo=None)


def utc_naive(value: datetime | str | None) -> datetime | None:
    """Returns `value` as a naive UTC datetime (aware values are converted; naive ones taken as UTC)."""
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if value.tzinfo is not None:
        value = value.astimezone(UTC).replace(tzinfo=None)
    return value


#: secrets seen in connection strings this process opened (`remember_secrets`): `redact` removes them
#: from every message, DuckDB's own error text included (it quotes the connection string)
_SECRETS: set[str] = set()
_PASSWORD_RES = (re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.I),  # libpq key=value
                 re.compile(r"(://[^:/@\s]+:)([^@\s]+)(@)"))  # postgresql://user:password@host


def remember_secrets(target: str) -> None:
    """Remembers the passwords of a connection string, so that `redact` hides them wherever they appear."""
    for pattern in _PASSWORD_RES:
        for m in pattern.finditer(target):
            value = m.group(2).strip("'")
            if len(value) >= 3:
                _SECRETS.add(value)


def remember_secret_values(values: list[str]) -> None:
    """Remembers secret values (an object store's keys) so that `redact` hides them wherever they appear."""
    for value in values:
        if value and len(value) >= 3:
            _SECRETS.add(value)


def redact(text: str) -> str:
    """Returns `text` without passwords: `password=...` and `://user:...@` forms, and every secret
    `remember_secrets` saw, wherever it appears."""
    text = _PASSWORD_RES[0].sub(r"\1***", text)
    text = _PASSWORD_RES[1].sub(r"\1***\3", text)
    for secret in sorted(_SECRETS, key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def one_line(err: BaseException) -> str:
    """Returns the first line of a DuckDB error (e.g. 'Binder Error: column "x" not found ...'),
    passwords redacted (`redact`)."""
    text = str(err).strip()
    first = text.splitlines()[0] if text else type(err).__name__
    # DuckDB adds 'LINE 1: ...' context on later lines; keep the first line, plus a candidate hint
    hint = next((ln.strip() for ln in text.splitlines()[1:] if ln.strip().startswith("Candidate")), "")
    return redact(f"{first} {hint}".strip())


#: every DuckDB connection gpuledger opens: no extension is ever fetched from the network or
#: loaded by itself (the ones needed come from the duckdb-ext-* packages and are LOADed by name)
NO_EXTENSION_DOWNLOADS: dict[str, Any] = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}

#: DuckDB's file header: the magic bytes at offset 8 (DuckDB's storage format, `MainHeader::MAGIC_BYTES`)
_DUCKDB_MAGIC = b"DUCK"
#: headers of files that are often mistaken for a warehouse
_OTHER_MAGIC = ((b"SQLite format 3\x00", "an SQLite database"), (b"PAR1", "a Parquet file"),
                (b"PK\x03\x04", "a zip archive"), (b"\x1f\x8b", "a gzip file"))


#: what a path that is not a regular file is, in words (`special_file_problem`)
_SPECIAL_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
                  (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder"))


def special_file_problem(path: Path) -> str | None:
    """Returns why `path` (links followed) is not a regular file when it exists as something else (a FIFO,
    a device, a socket, a folder), judged by `stat` alone: nothing is opened, so nothing blocks."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    for test, what in _SPECIAL_KINDS:
        if test(mode):
            return f"is {what}, not a DuckDB file"
    return None


def file_kind_problem(path: Path) -> str | None:
    """Returns why the existing file at `path` is not a DuckDB database (judged by its header, before
    DuckDB reads it: an SQLite file would make DuckDB reach for its sqlite extension), or None."""
    special = special_file_problem(path)
    if special is not None:
        return special
    try:
        # O_NONBLOCK: a FIFO swapped in after the check must not block the open
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except (FileNotFoundError, IsADirectoryError):
        return None
    except OSError as err:
        return f"cannot be read ({err.strerror or err})"
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "is not a regular file"
        head = os.read(fd, 16)
    finally:
        os.close(fd)
    if not head:
        return None  # an empty file: DuckDB makes a database of it
    for magic, what in _OTHER_MAGIC:
        if head.startswith(magic):
            return f"is {what}, not a DuckDB warehouse"
    if head[8:12] != _DUCKDB_MAGIC:
        return f"is not a DuckDB database (its first bytes are {head[:12]!r})"
    return None


class DiskFull(UserError):
    """The disk holding the warehouse filled up while writing: the transaction was rolled back."""


_DISK_FULL = re.compile(r"No space left on device|disk (is )?full|ENOSPC|Disk quota exceeded", re.I)


def disk_full(err: BaseException, where: str | os.PathLike[str] | None = None) -> DiskFull | None:
    """Returns the one-line `DiskFull` for an error that says the disk is full (DuckDB's text, or an
    OSError ENOSPC/EDQUOT), else None."""
    import errno

    if isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT):
        said = err.strerror or "No space left on device"
    elif isinstance(err, duckdb.Error) and _DISK_FULL.search(str(err)):
        said = "No space left on device"
    else:
        return None
    place = f"the disk holding the warehouse {where}" if where else "the warehouse's disk"
    return DiskFull(f"{place} is full ({said}, ENOSPC): the write was rolled back and nothing of it was "
                    "stored; free some space and run the command again")


def _is_lock_conflict(text: str) -> bool:
    """True when DuckDB's error says another process holds the file's lock (not merely a message
    that contains 'lock', such as a corrupt 'block')."""
    return bool(re.search(r"Could not set lock on file|Conflicting lock", text, re.I))


def lock_timeout_s(given: float | None = None) -> float:
    """Returns the wait bound: `given`, else the setting `warehouse.lock_timeout_s`
    (`$GPULEDGER_LOCK_TIMEOUT_S`; a bad value is one clear error naming it), else the default."""
    if given is not None:
        return max(0.0, float(given))
    from gpuledger import settings

    value = settings.current().get("warehouse.lock_timeout_s")
    return DEFAULT_LOCK_TIMEOUT_S if value is None else float(value)


def _lock_modes(path: Path) -> dict[int, str]:
    """Returns {pid: 'reader'|'writer'} of the POSIX locks on `path` listed in /proc/locks (Linux)."""
    try:
        st = path.stat()
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return {}
    out: dict[int, str] = {}
    for line in lines:
        parts = line.split()
        # "1: POSIX  ADVISORY  READ 11997 fe:00:2146639 0 EOF"
        if len(parts) < 6 or parts[1] == "->":
            continue
        dev_ino = parts[5].split(":")
        if len(dev_ino) != 3 or not dev_ino[2].isdigit() or int(dev_ino[2]) != st.st_ino:
            continue
        with_pid = parts[4]
        if with_pid.isdigit():
            out[int(with_pid)] = "reader" if parts[3] == "READ" else "writer"
    return out


def _describe(pid: int) -> str:
    try:
        import psutil

        proc = psutil.Process(pid)
        cmd = " ".join(proc.cmdline()) or proc.name()
        return f" ({cmd[:160]})"
    except Exception:  # gone, or not ours to inspect
        return ""


def lock_holder(path: Path, message: str) -> tuple[int | None, str | None, str]:
    """Returns (pid, 'reader'|'writer'|None, words) of the process holding `path`."""
    m = _LOCK_PID_RE.search(message)
    pid = int(m.group(1)) if m else None
    modes = _lock_modes(path)
    if pid is None and len(modes) == 1:
        pid = next(iter(modes))
    mode = modes.get(pid) if pid is not None else None
    if mode is None and modes:
        mode = "writer" if "writer" in modes.values() else "reader"
    if mode is None:  # no /proc/locks: DuckDB says a read-only open would work when the holder reads
        mode = "reader" if _READONLY_HINT in message else None
    who = f"process {pid}{_describe(pid)}" if pid is not None else "another process"
    return pid, mode, who


def connect(path: Path, *, read_only: bool, timeout_s: float | None = None,
            config: dict[str, Any] | None = None) -> duckdb.DuckDBPyConnection:
    """Returns a DuckDB connection to `path`, waiting (bounded) while another process holds it."""
    wait_s = lock_timeout_s(timeout_s)
    problem = file_kind_problem(path)
    if problem is not None:
        raise UserError(f"warehouse {path} {problem}; point {ENV_PATH} at a DuckDB file gpuledger made "
                        "(or move this one away)")
    deadline = time.monotonic() + wait_s
    delay = 0.02
    while True:
        try:
            return duckdb.connect(str(path), read_only=read_only, config={**NO_EXTENSION_DOWNLOADS, **(config or {})})
        except duckdb.Error as err:
            text = str(err)
            locked = _is_lock_conflict(text)
            if locked and time.monotonic() < deadline:
                time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
                delay = min(delay * 2, MAX_RETRY_SLEEP_S)
                continue
            if locked:
                pid, mode, who = lock_holder(path, text)
                doing = {"reader": "which has it open read-only",
                         "writer": "which is writing to it"}.get(mode or "", "which has it open")
                want = "read" if read_only else "write"
                raise WarehouseBusy(
                    f"warehouse {path} is locked by {who}, {doing}; cannot {want} it "
                    f"(waited {wait_s:g} s, {ENV_LOCK_TIMEOUT} sets the wait); wait for it to finish and "
                    f"retry, or close/stop that process", holder_pid=pid, holder_mode=mode) from None
            if "different configuration" in text:
                raise UserError(f"warehouse {path} is already open in this process with another mode "
                                f"(read-only vs read-write); close it first") from None
            if re.search(r"corrupt|checksum|not a valid DuckDB|invalid.*header|unable to read|Serialization", text,
                         re.I):
                raise UserError(f"warehouse {path} is damaged and cannot be opened ({one_line(err)}); restore it "
                                "from a copy (`gpuledger export` writes one) or move it away") from None
            raise UserError(f"cannot open warehouse {path}: {one_line(err)}") from None
