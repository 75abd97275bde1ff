"""`python -m gpuledger.mcp_server`: the MCP server over stdio (what `gpuledger mcp` runs)."""

import sys

from gpuledger.mcp_server.server import serve_stdio

if __name__ == "__main__":
    sys.exit(serve_stdio())
