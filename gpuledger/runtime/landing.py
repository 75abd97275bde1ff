"""The sweep's landing folder: where each result record waits, as `<run_id>.json`, until it is stored.

`landing/SWEEP_ID/` beside the warehouse file. A record a launcher returns is kept there (the
local and fake launchers write it themselves; others' records are written here), moved to
`ingested/` once the warehouse committed it, or to `rejected/` with `<file>.reason.txt` when the
warehouse refused it. So whatever is still at the top of the folder when a run ends was not
stored: the run counts and names it, and the next run of the sweep (or `gpuledger ingest FOLDER`)
stores it.

Trust: a trial runs as the same user and may write into this folder. A record file is believed
only when it is signed with the folder's key (`landing_key`, a 0600 file `.key` the runtime makes,
the agent signs with it, `keep` re-signs): `quarantine_unsigned` moves any other `*.json` to
`rejected/` with the reason, before a run recovers leftovers and when it ends. A run stores the
records its launcher returned (in memory), never what it finds in the folder.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
from pathlib import Path

from gpuledger.agent.signing import signature_path, signed_by, write_signed
from gpuledger.record import ResultRecord

INGESTED = "ingested"
REJECTED = "rejected"
KEY_FILE = ".key"


def landing_dir_for(sweep_id: str) -> Path:
    """Returns the sweep's landing folder: `landing/SWEEP_ID/` beside the warehouse file
    (`gpuledger.settings.Settings.landing_dir`)."""
    from gpuledger import settings

    return settings.current().landing_dir / sweep_id


def record_path(landing: Path, run_id: str) -> Path:
    return landing / f"{run_id}.json"


def landing_key(landing: Path) -> bytes:
    """Returns the landing folder's signing key, made once (32 random bytes as hex, mode 0600)."""
    landing.mkdir(parents=True, exist_ok=True)
    path = landing / KEY_FILE
    with contextlib.suppress(FileExistsError):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, secrets.token_hex(32).encode())
            os.fsync(fd)
        finally:
            os.close(fd)
    return path.read_bytes().strip()


def keep(landing: Path, record: ResultRecord, key: bytes | None = None) -> Path:
    """Writes the record to the landing folder durably (written, fsynced, renamed; whatever a
    trial put under that name is replaced), signed with `key` (default: the folder's); returns
    its path. Raises OSError when it cannot (a full disk): the record is then NOT kept."""
    path = record_path(landing, record.run_id)
    write_signed(path, record.to_json(), {"landing": key if key is not None else landing_key(landing)})
    return path


def is_signed(path: Path, key: bytes) -> bool:
    """Returns True when the landing file `path` carries a valid signature under the folder's `key`."""
    try:
        data = path.read_bytes()
        sig = signature_path(path).read_text(encoding="ascii")
    except (OSError, ValueError):
        return False
    return signed_by(sig, "landing", key, data)


UNSIGNED_REASON = ("not written by gpuledger's launcher for this sweep (no valid signature of this landing folder): "
                   "not stored; a trial may have put it there. `gpuledger ingest FILE` stores it if you trust it")


def quarantine_unsigned(landing: Path, key: bytes | None = None) -> list[str]:
    """Moves every record file at the top of `landing` that is not signed with its key to
    `rejected/` (reason beside it); returns their names."""
    if not landing.is_dir():
        return []
    key = key if key is not None else landing_key(landing)
    moved = []
    for path in waiting(landing):
        if is_signed(path, key):
            continue
        with contextlib.suppress(OSError):
            _move(path, landing / REJECTED)
            (landing / REJECTED / f"{path.name}.reason.txt").write_text(UNSIGNED_REASON + "\n", encoding="utf-8")
            moved.append(path.name)
    return moved


def _move(src: Path, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    shutil.move(str(src), str(folder / src.name))
    with contextlib.suppress(FileNotFoundError):  # its signature goes with it
        shutil.move(str(signature_path(src)), str(folder / signature_path(src).name))


def settle(landing: Path, stored: list[str], rejected: dict[str, str]) -> None:
    """Moves the files of stored run ids to `ingested/`, and of rejected ones (run id -> reason)
    to `rejected/` with the reason beside them. A file already gone is fine."""
    for run_id in stored:
        with contextlib.suppress(FileNotFoundError):
            _move(record_path(landing, run_id), landing / INGESTED)
    for run_id, reason in rejected.items():
        with contextlib.suppress(FileNotFoundError):
            _move(record_path(landing, run_id), landing / REJECTED)
            (landing / REJECTED / f"{run_id}.json.reason.txt").write_text(reason + "\n", encoding="utf-8")


def waiting(landing: Path) -> list[Path]:
    """Returns the records still waiting to be stored (the top level `*.json` files), sorted."""
    if not landing.is_dir():
        return []
    return sorted(p for p in landing.glob("*.json") if p.is_file())
