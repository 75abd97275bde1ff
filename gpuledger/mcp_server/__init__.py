"""`gpuledger mcp`: the Model Context Protocol server (`server`) and the agent budget it enforces
(`budget`, counted from the ledger's `agent_launches`). See docs/agents.md."""
