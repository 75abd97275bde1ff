"""`gpuledger mcp`: the Model Context Protocol server over stdio (gpuledger/mcp_server/server.py).

Runs until the client closes stdin. Everything it prints on stdout is protocol; diagnostics go to
stderr. The agent budget (`[agent] budget_usd`, `GPULEDGER_AGENT_BUDGET_USD`) is read once, here.
"""

from __future__ import annotations


def run(args) -> int:
    from gpuledger.mcp_server.server import serve_stdio

    return serve_stdio()
