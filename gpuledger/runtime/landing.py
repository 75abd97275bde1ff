"""The sweep's landing folder: where each result record waits, as `<run_id>.json`, until it is stored.

`landing/SWEEP_ID/` beside the warehouse file. A record a launcher returns is kept there (the
local and fake launchers write it themselves; others' records are written here), moved to
`ingested/` once the warehouse committed it, or to `rejected/` with `<file>.reason.txt` when the
warehouse refused it. So whatever is still at the top of the folder when a run ends was not
stored: the run counts and names it, and the next run of the sweep (or `gpuledger ingest FOLDER`)
stores it.
"""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

from gpuledger.record import ResultRecord

INGESTED = "ingested"
REJECTED = "rejected"


def landing_dir_for(sweep_id: str) -> Path:
    """Returns the sweep's landing folder: `landing/SWEEP_ID/` beside the warehouse file
    (`gpuledger.settings.Settings.landing_dir`)."""
    from gpuledger import settings

    return settings.current().landing_dir / sweep_id


def record_path(landing: Path, run_id: str) -> Path:
    return landing / f"{run_id}.json"


def keep(landing: Path, record: ResultRecord) -> Path:
    """Makes sure the record is in the landing folder (written atomically when absent); returns its path."""
    path = record_path(landing, record.run_id)
    if not path.is_file():
        from gpuledger.agent import write_json_atomic

        write_json_atomic(path, record.to_json())
    return path


def _move(src: Path, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    shutil.move(str(src), str(folder / src.name))


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
