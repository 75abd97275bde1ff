"""`gpuledger mcp`: gpuledger's verbs as Model Context Protocol tools, over stdio, behind the agent budget.

Tools: `validate`, `estimate`, `plan`, `prices`, `sweep`, `status`, `report`, `sql`; resources: the
documentation of the warehouse's views (`gpuledger://views.yml`, `gpuledger://views/{name}`).
Each tool returns concise text and structured content; a user error is a tool error carrying
gpuledger's one-line message. The reading verbs run the same code as the CLI (`gpuledger.cli.main`
with `--json`, in this process), so an agent and a person get the same numbers; `sweep` starts
`gpuledger sweep` as its own process and returns at once.

What an agent cannot step around:
- `sweep` launches only a spec it planned first (`plan_id`, unless `[agent] require_plan = false`),
  and only while the spec file is byte for byte the one that was planned: editing the spec's budget
  after planning means planning again;
- the agent budget (`[agent] budget_usd` or `GPULEDGER_AGENT_BUDGET_USD`, read once when the server
  starts) caps what all sweeps launched through any `gpuledger mcp` of this project may spend,
  counted from the ledger (`gpuledger.mcp_server.budget`); without it `sweep` refuses;
- the spec's own budget guard still applies (the plan must be within it).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from mcp_types import CallToolResult, TextContent

from gpuledger import settings
from gpuledger.errors import UserError
from gpuledger.mcp_server.budget import AgentBudget, agent_budget, check_launch

#: rows of a `sql` result put into the tool's text (the structured content holds up to SQL_MAX_ROWS)
SQL_TEXT_ROWS = 20
SQL_MAX_ROWS = 1000
#: longest text a tool returns (characters); longer output is cut with a note
MAX_TEXT_CHARS = 20_000

INSTRUCTIONS = (
    "gpuledger plans, prices, launches and accounts for GPU experiments. Work in this order: validate a "
    "spec, estimate or plan it (plan returns a plan_id and its cost), then sweep with that plan_id; the "
    "sweep is refused before anything launches when it would cross the agent budget. Follow a sweep with "
    "status, read its ROI with report, and query the ledger read-only with sql (views are documented in "
    "the resources gpuledger://views.yml).")

_cli_lock = threading.Lock()


@dataclass(frozen=True)
class CliResult:
    code: int
    out: str
    err: str


def run_cli(argv: list[str]) -> CliResult:
    """Runs `gpuledger ARGV` in this process, returning its exit code and what it printed.
    (One at a time: stdout and stderr are swapped for buffers while it runs.)"""
    from gpuledger.cli import main

    out, err = io.StringIO(), io.StringIO()
    with _cli_lock, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as stop:  # argparse: a bad argument (exit 2 with a usage line)
            code = stop.code if isinstance(stop.code, int) else 2
    return CliResult(code, out.getvalue(), err.getvalue())


def error_line(result: CliResult, fallback: str) -> str:
    """The one-line message of a failed command (its last stderr line), else `fallback`."""
    lines = [line for line in result.err.strip().splitlines() if line.strip()]
    return lines[-1] if lines else fallback


def _cut(text: str) -> str:
    return text if len(text) <= MAX_TEXT_CHARS else text[:MAX_TEXT_CHARS] + "\n... (cut)"


def _json_or_error(result: CliResult, what: str) -> Any:
    if result.code not in (0, 3):
        raise ToolError(error_line(result, f"{what} failed (exit {result.code})"))
    try:
        return json.loads(result.out)
    except json.JSONDecodeError:
        raise ToolError(f"{what}: gpuledger printed no JSON ({error_line(result, 'no output')})") from None


def _result(text: str, structured: dict[str, Any]) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=_cut(text))], structured_content=structured)


def spec_digest(path: Path) -> str:
    """sha256 of the spec file's bytes (what was planned is what is launched)."""
    from gpuledger.safeyaml import read_text_file

    return hashlib.sha256(read_text_file(path, 256 * 1024).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class PlannedSpec:
    plan_id: str
    spec_path: str
    spec_sha256: str
    sweep_id: str
    sweep_name: str
    planned_usd: float
    within_budget: bool


class GpuledgerTools:
    """The state behind the tools: the project, the agent budget read at start, the plans handed out."""

    def __init__(self, budget_usd: float | None, require_plan: bool) -> None:
        self.budget_usd = budget_usd
        self.require_plan = require_plan
        self.plans: dict[str, PlannedSpec] = {}
        self.host = socket.gethostname()

    # -- reading verbs --------------------------------------------------------------------------
    def validate(self, spec: str) -> CallToolResult:
        result = run_cli(["validate", spec])
        problems = [line for line in (result.out + result.err).splitlines() if line.strip()]
        ok = result.code == 0
        text = f"{spec}: valid" if ok else "\n".join(problems) or f"{spec}: invalid"
        return _result(text, {"spec": spec, "valid": ok, "problems": [] if ok else problems})

    def estimate(self, argv: list[str]) -> CallToolResult:
        data = _json_or_error(run_cli(["estimate", *argv, "--json"]), "estimate")
        mem = data.get("memory_gib", {}) if isinstance(data, dict) else {}
        text = (f"{argv[0]}: {data.get('params_total', '?')} parameters, peak {mem.get('allocated', '?')} GiB "
                f"allocated per GPU ({data.get('peak_phase', '?')}); full numbers in the structured content")
        return _result(text, data if isinstance(data, dict) else {"rows": data})

    def plan(self, spec: str) -> CallToolResult:
        path = Path(spec)
        digest = spec_digest(path) if path.is_file() else None
        result = run_cli(["plan", spec, "--json"])
        data = _json_or_error(result, "plan")
        pruning = data.get("pruning") or {}
        expected = pruning.get("expected_usd")
        # the spend the budget guard decided on, at the plan's confidence (budget.confidence, P90 by default)
        planned = float(data["decided_usd"] if data.get("decided_usd") is not None
                        else expected if expected is not None else data.get("total_est_cost_usd") or 0.0)
        conf = str(data.get("confidence") or "p50").upper()
        sweep_id = str(data.get("sweep") or "")
        name = sweep_id.rsplit("-", 1)[0] if "-" in sweep_id else sweep_id
        plan_id = hashlib.sha256(f"{digest}|{json.dumps(data, sort_keys=True, default=str)}".encode()).hexdigest()[:16]
        within = bool(data.get("within_budget", True)) and result.code == 0
        if digest is not None:
            self.plans[plan_id] = PlannedSpec(plan_id, str(path.resolve()), digest, sweep_id, name, planned, within)
        feasible = sum(1 for t in data.get("trials", []) if t.get("feasible", True))
        budget = self._budget_or_none()
        lines = [f"plan {plan_id}: sweep {name}, {feasible} of {len(data.get('trials', []))} trials feasible, "
                 f"planned ${planned:.2f} at {conf} (all trials ${float(data.get('total_est_cost_usd') or 0):.2f} at P50"
                 + (f", P10 ${data['total_cost_usd_p10']:.2f} - P90 ${data['total_cost_usd_p90']:.2f}"
                    if data.get("total_cost_usd_p90") is not None else "") + "), "
                 f"spec budget {'ok' if within else 'REFUSES: ' + error_line(result, 'over budget')}"]
        if budget is not None:
            lines.append(f"agent budget: ${budget.remaining_usd:.2f} of ${budget.budget_usd:.2f} left; "
                         f"this plan {'fits' if planned <= budget.remaining_usd + 1e-9 else 'does NOT fit'}")
        else:
            lines.append("agent budget: not set ([agent] budget_usd): sweep will refuse to launch")
        return _result("\n".join(lines), {"plan_id": plan_id, "planned_usd": planned, "within_budget": within,
                                          "agent_budget": budget.to_json() if budget else None, "plan": data})

    def prices(self, gpu: str | None, cloud: str | None) -> CallToolResult:
        argv = ["prices", "--json"] + (["--gpu", gpu] if gpu else []) + (["--cloud", cloud] if cloud else [])
        data = _json_or_error(run_cli(argv), "prices")
        rows = data if isinstance(data, list) else data.get("offers", [])
        head = "\n".join(f"{r.get('cloud')} {r.get('instance_type')} {r.get('accelerator')}x{r.get('accelerator_count', '')}: "
                         f"${r.get('usd_per_hour')}/h ({r.get('basis')}, {r.get('as_of')})" for r in rows[:15])
        return _result(f"{len(rows)} offer(s)\n{head}", {"offers": rows})

    def sql(self, query: str) -> CallToolResult:
        """The agent's SQL: the ledger only (no files, URLs, extensions), streamed and cut at SQL_MAX_ROWS
        rows and `LEDGER_MAX_BYTES` (`gpuledger.warehouse.ledger_sql`)."""
        from gpuledger.warehouse.ledger_sql import ledger_query

        timeout_s = float(settings.current().get("sql.timeout_s"))
        result = ledger_query(query, max_rows=SQL_MAX_ROWS, timeout_s=timeout_s if timeout_s > 0 else 300.0)
        rows = result.rows
        text_rows = "\n".join(json.dumps(r, default=str) for r in rows[:SQL_TEXT_ROWS])
        more = f"\n... {len(rows) - SQL_TEXT_ROWS} more row(s) in the structured content" if len(rows) > SQL_TEXT_ROWS else ""
        cut = (f"\n(cut at {len(rows)} row(s): the result is longer than the agent's limit of "
               f"{'rows' if result.cut_by == 'rows' else 'bytes'}; aggregate or add a LIMIT)" if result.truncated else "")
        return _result(f"{len(rows)} row(s)\n{text_rows}{more}{cut}",
                       {"rows": rows, "row_count": len(rows), "truncated": result.truncated, "cut_by": result.cut_by})

    def report(self, name: str) -> CallToolResult:
        result = run_cli(["report", "sweep", name])
        if result.code != 0:
            raise ToolError(error_line(result, "report failed"))
        roi = self._query("select * from v_sweep_roi where sweep_name = $name order by started_at desc limit 1",
                          {"name": name})
        row = roi[0] if roi else {}
        text = (f"sweep {name}: best {row.get('best_metric')} (trial {row.get('best_trial_id')}), "
                f"time to recipe {row.get('time_to_recipe_s')} s, cost to recipe ${row.get('cost_to_recipe_usd')}, "
                f"total ${row.get('total_cost_usd')}\n{result.out.strip()}")
        return _result(text, {"roi": row, "report": result.out.strip()})

    def status(self, sweep: str | None) -> CallToolResult:
        where = "" if sweep is None else "where s.sweep_id = $sweep or s.name = $sweep"
        rows = self._query(
            "select s.sweep_id, s.name, s.status, s.started_at, s.ended_at, s.budget_usd, "
            "(select count(*) from trials t where t.sweep_id = s.sweep_id) as trials, "
            "(select count(*) from trials t where t.sweep_id = s.sweep_id and t.status = 'succeeded') as succeeded, "
            "(select coalesce(sum(b.cost_usd), 0) from runs r join billing b using (run_id) "
            " where r.sweep_id = s.sweep_id) as spent_usd "
            f"from sweeps s {where} order by s.started_at desc limit 20", {"sweep": sweep} if sweep else None)
        budget = self._budget_or_none()
        lines = [f"{r['sweep_id']}: {r['status']}, {r['succeeded']}/{r['trials']} trials succeeded, "
                 f"spent ${float(r['spent_usd']):.4f}" for r in rows] or ["no sweep yet" if sweep is None
                                                                           else f"no sweep {sweep}"]
        if budget is not None:
            lines.append(f"agent budget: ${budget.committed_usd:.2f} held of ${budget.budget_usd:.2f} "
                         f"({budget.open_launches} launch(es) running)")
        return _result("\n".join(lines), {"sweeps": rows, "agent_budget": budget.to_json() if budget else None})

    # -- the one verb that spends ---------------------------------------------------------------
    def sweep(self, spec: str, plan_id: str | None, max_parallel: int | None) -> CallToolResult:
        if self.budget_usd is None:
            raise ToolError("refused: no agent budget is set; a person sets [agent] budget_usd in gpuledger.toml "
                            "(or GPULEDGER_AGENT_BUDGET_USD) and restarts `gpuledger mcp`")
        path = Path(spec)
        if not path.is_file():
            raise ToolError(f"{spec}: no such spec file")
        digest = spec_digest(path)
        planned = self.plans.get(plan_id) if plan_id else None
        if plan_id and planned is None:
            raise ToolError(f"refused: plan {plan_id} was not handed out by this server; call plan first")
        if planned is None:
            if self.require_plan:
                raise ToolError("refused: sweep needs the plan_id of a plan of this spec (call plan first, "
                                "so that what is launched is what was priced)")
            self.plan(spec)
            planned = next(p for p in reversed(list(self.plans.values())) if p.spec_sha256 == digest)
        if planned.spec_path != str(path.resolve()) or planned.spec_sha256 != digest:
            raise ToolError(f"refused: {spec} is not the spec plan {planned.plan_id} priced (the file changed "
                            "since, or it is another file); plan it again")
        if not planned.within_budget:
            raise ToolError(f"refused: plan {planned.plan_id} is over the spec's own budget or deadline")
        from gpuledger.warehouse import Warehouse

        with Warehouse.open() as wh, wh.transaction():
            budget = self._budget(wh)
            try:
                check_launch(budget, planned.planned_usd, planned.sweep_name)
            except UserError as err:
                raise ToolError(str(err)) from None
            launch_id = wh.record_agent_launch(sweep_id=planned.sweep_id, spec_path=planned.spec_path,
                                               spec_sha256=digest, plan_id=planned.plan_id,
                                               planned_usd=planned.planned_usd, budget_usd=self.budget_usd)
        log = settings.current().data_dir / "mcp" / f"{launch_id}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "gpuledger.cli", "sweep", planned.spec_path]
        if max_parallel:
            argv += ["--max-parallel", str(int(max_parallel))]
        with open(log, "ab") as fh:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT,
                                    start_new_session=True, env={**os.environ, "GPULEDGER_LAUNCHED_BY": "mcp"})
        with Warehouse.open() as wh:
            wh.set_agent_launch_pid(launch_id, proc.pid)
        left = budget.remaining_usd - planned.planned_usd
        return _result(f"launched sweep {planned.sweep_id} (plan {planned.plan_id}, ${planned.planned_usd:.2f}); "
                       f"agent budget left ${left:.2f}; follow it with status, log {log}",
                       {"sweep_id": planned.sweep_id, "launch_id": launch_id, "plan_id": planned.plan_id,
                        "planned_usd": planned.planned_usd, "agent_budget_left_usd": left, "log": str(log),
                        "pid": proc.pid})

    # -- helpers --------------------------------------------------------------------------------
    def _budget(self, wh: Any) -> AgentBudget:
        from gpuledger.launch.procs import pid_alive

        return agent_budget(self.budget_usd or 0.0, wh.agent_launches(), this_host=self.host, alive=pid_alive)

    def _budget_or_none(self) -> AgentBudget | None:
        if self.budget_usd is None:
            return None
        from gpuledger.warehouse import Warehouse

        if not settings.resolve_path().exists():
            return agent_budget(self.budget_usd, [], this_host=self.host, alive=lambda pid: False)
        with Warehouse.open(read_only=True) as wh:
            return self._budget(wh)

    def _query(self, sql: str, params: dict[str, Any] | None) -> list[dict[str, Any]]:
        from gpuledger.warehouse import Warehouse

        if not settings.resolve_path().exists():
            return []
        with Warehouse.open(read_only=True) as wh:
            return [{k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in row.items()}
                    for row in wh.query(sql, params).iter_rows(named=True)]


def _guard(fn):
    """Turns a user error into a tool error with gpuledger's one-line message."""
    def wrapped(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except ToolError:
            raise
        except UserError as err:
            raise ToolError(str(err)) from None
    wrapped.__name__, wrapped.__doc__, wrapped.__wrapped__ = fn.__name__, fn.__doc__, fn  # type: ignore[attr-defined]
    return wrapped


def build_server(tools: GpuledgerTools) -> MCPServer:
    """Returns the MCP server with gpuledger's tools and the views' documentation as resources."""
    from gpuledger import __version__

    server = MCPServer(name="gpuledger", version=__version__, instructions=INSTRUCTIONS)

    @server.tool(description="Check an experiment spec (YAML path) without running anything: every problem "
                             "the planner and the sweep would refuse on, one line each.")
    def validate(spec: str) -> CallToolResult:
        return _guard(tools.validate)(spec)

    @server.tool(description="Memory per GPU, parameters and FLOPs per token of one training or inference setup "
                             "(gpuledger estimate --json); with tokens, time and dollars per GPU type.")
    def estimate(model: str, method: str = "lora", precision: str = "bf16", batch: int = 1, seq: int = 2048,
                 gpus: int = 1, tokens: int | None = None, accelerator: str | None = None) -> CallToolResult:
        argv = [model, "--method", method, "--precision", precision, "--batch", str(batch), "--seq", str(seq),
                "--gpus", str(gpus)]
        if tokens is not None:
            argv += ["--tokens", str(tokens)]
        if accelerator:
            argv += ["--accelerator", accelerator]
        return _guard(tools.estimate)(argv)

    @server.tool(description="Plan a sweep spec: GPUs, spot, schedule and cost per trial, within the spec's budget. "
                             "Returns a plan_id to pass to sweep.")
    def plan(spec: str) -> CallToolResult:
        return _guard(tools.plan)(spec)

    @server.tool(description="What the planner would pay per offer: usd_per_hour, basis and date.")
    def prices(gpu: str | None = None, cloud: str | None = None) -> CallToolResult:
        return _guard(tools.prices)(gpu, cloud)

    @server.tool(description="Launch a planned sweep (needs plan_id from plan). Refused before anything launches "
                             "when it would cross the agent budget. Returns at once; follow with status.")
    def sweep(spec: str, plan_id: str | None = None, max_parallel: int | None = None) -> CallToolResult:
        return _guard(tools.sweep)(spec, plan_id, max_parallel)

    @server.tool(description="Progress and spend of sweeps (one sweep by id or name, else the latest), and the "
                             "agent budget held.")
    def status(sweep: str | None = None) -> CallToolResult:
        return _guard(tools.status)(sweep)

    @server.tool(description="Write a sweep's ROI report; returns the summary (best recipe, time and cost to it) "
                             "and the report's path.")
    def report(name: str) -> CallToolResult:
        return _guard(tools.report)(name)

    @server.tool(description="Read-only SQL (DuckDB) against the ledger only: writes, files, URLs and extensions "
                             "are refused; at most 1000 rows come back. Views are documented in the resource "
                             "gpuledger://views.yml.")
    def sql(query: str) -> CallToolResult:
        return _guard(tools.sql)(query)

    @server.resource("gpuledger://views.yml", name="views", mime_type="application/yaml",
                     description="Every warehouse view and column, with units")
    def views_doc() -> str:
        from gpuledger.warehouse.sqlfiles import VIEWS_DOC

        return VIEWS_DOC.read_text(encoding="utf-8")

    @server.resource("gpuledger://views/{name}", mime_type="application/json",
                     description="One warehouse view's documentation")
    def view_doc(name: str) -> str:
        from gpuledger.warehouse.sqlfiles import view_docs

        doc = view_docs()
        if name not in doc:
            raise ResourceNotFoundError(f"no view {name!r}; the views are {', '.join(sorted(doc))}")
        return json.dumps(doc[name], indent=2, default=str)

    return server


def serve_stdio() -> int:
    """Runs the server on stdin/stdout until the client closes it."""
    current = settings.current()
    budget = current.get("agent.budget_usd")
    server = build_server(GpuledgerTools(budget, current.get("agent.require_plan")))
    server.run("stdio")
    return 0
