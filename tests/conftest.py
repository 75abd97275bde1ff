"""Shared test settings: every test gets its own warehouse and never talks to the network."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")


@pytest.fixture(autouse=True)
def _isolated_warehouse(tmp_path_factory, monkeypatch):
    """Points GPULEDGER_WAREHOUSE at a fresh temporary file so no test touches warehouse/ledger.duckdb."""
    path = tmp_path_factory.mktemp("wh") / "ledger.duckdb"
    monkeypatch.setenv("GPULEDGER_WAREHOUSE", str(path))
    yield path


@pytest.fixture
def repo_root() -> Path:
    return REPO


@pytest.fixture
def shared_dir() -> Path:
    """`../shared` beside the checkout (reference data); tests needing it skip on a user's machine."""
    if not SHARED.is_dir():
        pytest.skip(f"{SHARED} is absent (it exists only beside the project's own checkout)")
    return SHARED
