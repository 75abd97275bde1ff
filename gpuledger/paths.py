"""Where the warehouse file is, without importing DuckDB (commands that only may read it ask here
first, so that `gpuledger plan` stays free of DuckDB when there is no warehouse yet)."""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_PATH = Path("warehouse") / "ledger.duckdb"
ENV_PATH = "GPULEDGER_WAREHOUSE"


def resolve_path(path: str | os.PathLike[str] | None = None) -> Path:
    """Returns the warehouse file: `path`, else `$GPULEDGER_WAREHOUSE`, else ./warehouse/ledger.duckdb."""
    if path is not None:
        return Path(path)
    env = os.environ.get(ENV_PATH)
    return Path(env) if env else DEFAULT_PATH
