"""Sweeps launched through `gpuledger mcp`: the ledger rows the agent budget is counted from
(table `agent_launches`, migration 012; named queries `agent_launch_*`, `agent_launches_spend`)."""

from __future__ import annotations

import socket
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from gpuledger.warehouse.connect import now


@dataclass(frozen=True)
class AgentLaunch:
    """One launch with its sweep's status and the measured spend of its runs so far (USD)."""

    launch_id: str
    sweep_id: str
    spec_path: str
    plan_id: str | None
    planned_usd: float
    budget_usd: float
    launched_at: datetime
    pid: int | None
    host: str | None
    sweep_status: str | None
    measured_usd: float


class AgentLaunchesMixin:
    """`Warehouse` methods for the agent's launches (see `gpuledger.warehouse.core.WarehouseBase`)."""

    _require_writer: Any
    _run: Any
    query_named: Any
    transaction: Any

    def record_agent_launch(self, *, sweep_id: str, spec_path: str, spec_sha256: str, plan_id: str | None,
                            planned_usd: float, budget_usd: float) -> str:
        """Stores one launch (before the sweep process starts); returns its launch id."""
        self._require_writer("record_agent_launch")
        launch_id = uuid.uuid4().hex
        self._run("agent_launch_insert", {
            "launch_id": launch_id, "sweep_id": sweep_id, "spec_path": spec_path, "spec_sha256": spec_sha256,
            "plan_id": plan_id, "planned_usd": float(planned_usd), "budget_usd": float(budget_usd),
            "launched_at": now(), "pid": None, "host": socket.gethostname()})
        return launch_id

    def set_agent_launch_pid(self, launch_id: str, pid: int) -> None:
        """Records the sweep process of a launch."""
        self._require_writer("set_agent_launch_pid")
        self._run("agent_launch_set_pid", {"launch_id": launch_id, "pid": int(pid)})

    def agent_launches(self) -> list[AgentLaunch]:
        """Returns every launch through `gpuledger mcp`, oldest first, with its measured spend."""
        df = self.query_named("agent_launches_spend")
        return [AgentLaunch(**row) for row in df.iter_rows(named=True)]
