"""gpuledger's application layer: `Ledger` and the typed values its verbs return.

Every face goes through it: the CLI commands (`gpuledger/cli/`), the MCP tools
(`gpuledger/mcp_server/`), the Prefect flows (`gpuledger/flows/`) and the Python API (docs/api.md).
No face imports another (tests/unit/test_faces_layering.py).
"""

from gpuledger.api.ledger import Ledger
from gpuledger.api.types import PlanVerdict, SpecCheck, SweepStatus

__all__ = ["Ledger", "PlanVerdict", "SpecCheck", "SweepStatus"]
