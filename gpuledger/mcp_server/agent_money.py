"""The agent budget as a limit (issue 43 items 1 and 5; docs/agents.md, docs/budgets.md).

- `Pinned.at_start()`: the warehouse, the agent budget, the envelopes and the project the server counts
  from are fixed when `gpuledger mcp` starts: written into this process's environment (so the in-process
  commands and the sweep processes it starts use them whatever the files say later), and compared with
  the files at every tool call: an agent that rewrites ~/.config/gpuledger/config.toml (or gpuledger.toml)
  to point the warehouse elsewhere or raise its budget gets every call refused, naming the change,
  until a person restarts the server.
- `snapshot(path)`: the spec's bytes as planned, kept in the server's own folder; the sweep process runs
  that copy, and checks its sha256 (`GPULEDGER_AGENT_SPEC_SHA256`) before planning: what launches is
  exactly what was priced.
- `admit(...)`: the agent budget's check, every envelope's reservation (the agent budget is the envelope
  `agent`) and the launch record, in ONE transaction under the warehouse's money lock
  (`gpuledger.runtime.money.reserve`): four calls at once, threads or servers, cannot both take the
  last dollar. The running sweep is held to the same envelopes by its `MoneyWatch`
  (gpuledger/runtime/accrual.py): measured + accrued spend about to cross one stops it.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuledger.errors import UserError
from gpuledger.runtime.envelopes import Decision, Envelope, Spender, configured_envelopes, observed_owner
from gpuledger.runtime.money import ENV_LAUNCH_ID, ENV_NEEDS_APPROVAL, ENV_PLANNED_USD, ENV_SPEC_SHA256


@dataclass(frozen=True)
class Pinned:
    """The configuration the server counts from, fixed at its start."""

    warehouse: str
    budget_usd: float | None
    envelopes: tuple[Envelope, ...]
    project_root: str | None
    environ: Mapping[str, str]  # the variables as they were at start (the files are re-read against them)

    @classmethod
    def at_start(cls) -> Pinned:
        """Reads the settings once and pins them into this process's environment."""
        from gpuledger import settings

        before = dict(os.environ)
        s = settings.current()
        budget = s.get("agent.budget_usd")
        target = s.warehouse if s.warehouse.startswith("ducklake:") else str(Path(s.warehouse).resolve())
        pinned = cls(warehouse=target, budget_usd=budget,
                     envelopes=tuple(configured_envelopes(s.get("budgets") or (), budget)),
                     project_root=str(s.project_root) if s.project_root else None, environ=before)
        os.environ[settings.ENV_PATH] = target
        if budget is not None:
            os.environ["GPULEDGER_AGENT_BUDGET_USD"] = repr(float(budget))
        if s.project_root is not None:
            os.environ[settings.ENV_PROJECT] = str(s.project_root)
        return pinned

    def changed(self) -> str | None:
        """Says what of the pinned configuration the files (as they are now) would change, else None."""
        from gpuledger import settings

        try:
            now = settings.load_settings(environ=self.environ)
        except UserError as err:
            return f"the settings files no longer read ({err})"
        target = now.warehouse if now.warehouse.startswith("ducklake:") else str(Path(now.warehouse).resolve())
        if target != self.warehouse:
            return f"the warehouse would be {target}, not {self.warehouse}"
        if now.get("agent.budget_usd") != self.budget_usd:
            return f"[agent] budget_usd would be {now.get('agent.budget_usd')}, not {self.budget_usd}"
        try:
            envelopes = tuple(configured_envelopes(now.get("budgets") or (), now.get("agent.budget_usd")))
        except UserError as err:
            return f"[[budgets]] no longer read ({err})"
        if envelopes != self.envelopes:
            return "the [[budgets]] envelopes changed"
        return None

    def check(self) -> None:
        """Raises a UserError naming the change when the configuration moved since the server started."""
        why = self.changed()
        if why is not None:
            raise UserError(f"refused: the configuration gpuledger mcp counts from changed since it started ({why}); "
                            f"it keeps counting from the warehouse {self.warehouse} and the agent budget "
                            f"{self.budget_usd}. A person restarts `gpuledger mcp` to change them")


def snapshot(path: Path, data_dir: Path) -> tuple[Path, str]:
    """Keeps the spec's bytes as read now in the server's folder; returns (the copy, its sha256)."""
    from gpuledger.files import write_bytes_atomic
    from gpuledger.safeyaml import read_text_file

    data = read_text_file(path, 256 * 1024).encode("utf-8")
    digest = hashlib.sha256(data).hexdigest()
    folder = data_dir / "mcp" / "specs"
    folder.mkdir(parents=True, exist_ok=True)
    copy = folder / f"{digest[:16]}-{path.name}"
    if not copy.is_file() or hashlib.sha256(copy.read_bytes()).hexdigest() != digest:
        write_bytes_atomic(copy, data)
        os.chmod(copy, 0o400)
    return copy, digest


def admit(pinned: Pinned, *, sweep_id: str, sweep_name: str, spec_path: str, digest: str, plan_id: str | None,
          planned_usd: float, project: str | None, owner_claimed: str | None,
          check_agent_budget: Callable[[Any], None]) -> tuple[str, Decision]:
    """Checks and reserves the launch in every envelope and records it, in one transaction; returns
    (launch id, the decision: `needs_approval` when a soft threshold is passed). Raises BudgetExceeded."""
    from gpuledger.runtime import money

    owner, source = observed_owner()
    spender = Spender(project=project, owner=owner, owner_claimed=owner_claimed, owner_source=source, agent=True)
    launched: list[str] = []

    def record(wh: Any) -> None:
        launched.append(wh.record_agent_launch(sweep_id=sweep_id, spec_path=spec_path, spec_sha256=digest,
                                               plan_id=plan_id, planned_usd=planned_usd,
                                               budget_usd=float(pinned.budget_usd or 0.0)))

    decision = money.reserve(sweep_id, f"agent sweep {sweep_name}", {}, spender, envelopes=pinned.envelopes,
                             plan_usd=planned_usd, basis="the plan the agent fetched", before=check_agent_budget,
                             also=record)
    return launched[0], decision


def launch_env(launch_id: str, digest: str, planned_usd: float, decision: Decision) -> dict[str, str]:
    """The variables the sweep process gets (besides GPULEDGER_LAUNCHED_BY=mcp)."""
    return {ENV_LAUNCH_ID: launch_id, ENV_SPEC_SHA256: digest, ENV_PLANNED_USD: repr(float(planned_usd)),
            ENV_NEEDS_APPROVAL: "1" if decision.needs_approval else "0"}
