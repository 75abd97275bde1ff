"""One Prefect API server for a test session (integration tests only), for tests that need a server but
do not test it: a `gpuledger sweep --dry-run`, the sweeps an MCP server starts. Each such sweep would
otherwise start (and migrate) a temporary server of its own: 10-15 s each on the 2-core machine.

It is the server `gpuledger sweep` starts for itself (`gpuledger.flows.server.start_temporary_server`),
started on first use and stopped at the session's end; a test hands its URL to the CLI as
PREFECT_API_URL, which `gpuledger sweep` uses when it answers (`prefect_api`). The temporary-server path
stays tested where it is the point: tests/integration/test_e2e_sweep.py's killed sweep (its server dies
with it) and tests/integration/test_installed.py (a user's first sweep).
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

from gpuledger.flows.server import api_healthy, start_temporary_server, stop_process

_server: tuple[subprocess.Popen, str] | None = None


def api_url(home: Path) -> str:
    """Returns the session server's API URL, starting it (state in `home`) on first call; a server that
    stopped answering is replaced."""
    global _server
    if _server is not None and (_server[0].poll() is not None or not api_healthy(_server[1], timeout_s=5.0)):
        stop()
    if _server is None:
        _server = start_temporary_server(home=home)
    return _server[1]


def stop() -> None:
    """Stops the session server, if one was started."""
    global _server
    if _server is not None:
        stop_process(_server[0], grace_s=10.0, first=signal.SIGTERM)
        _server = None
