"""Fixtures of the integration tests only (tests/conftest.py holds what every test shares)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def _prefect_session_server():
    from helpers import prefect_server

    yield prefect_server
    prefect_server.stop()


@pytest.fixture
def prefect_api_url(_prefect_session_server, tmp_path_factory) -> str:
    """The API URL of the session's Prefect server (helpers/prefect_server.py), started on first use, for
    tests in which a server is needed but is not what they test; pass it on as PREFECT_API_URL."""
    home = tmp_path_factory.getbasetemp() / "prefect-session-home"
    home.mkdir(exist_ok=True)
    return _prefect_session_server.api_url(home)
