"""`gpuledger mcp`: the Model Context Protocol server over stdio (gpuledger/mcp_server/server.py).

Runs until the client closes stdin. Everything it prints on stdout is protocol; diagnostics go to
stderr. The agent budget (`[agent] budget_usd`, `GPULEDGER_AGENT_BUDGET_USD`) is read once, when the
server starts. The server is its own program (`python -m gpuledger.mcp_server`), which this command
becomes: one face never imports another (the CLI and the MCP server both call `gpuledger.api`).
"""

from __future__ import annotations

import os
import sys


def run(args) -> int:
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, [sys.executable, "-m", "gpuledger.mcp_server"])
    return 0  # not reached: the process is now the server
