"""`gpuledger mcp`: gpuledger's verbs as Model Context Protocol tools, over stdio, behind the agent budget.

Tools: `validate`, `estimate`, `plan`, `prices`, `sweep`, `status`, `report`, `sql`; resources: the
documentation of the warehouse's views (`gpuledger://views.yml`, `gpuledger://views/{name}`).
Each tool returns concise text and structured content; a user error is a tool error carrying
gpuledger's one-line message, and arguments the SDK refuses (the tools' typed parameters) one line naming
the tool and each argument (`ToolServer`). Every tool calls the application layer (`gpuledger.api.Ledger`), as the
CLI does, so an agent and a person get the same numbers from the same functions (no face calls
another); tools take the vocabulary's words as typed parameters and say whether they only read
(`readOnlyHint`) or spend (`destructiveHint`). `sweep` starts the sweep as its own process
(`python -m gpuledger.mcp_server.launch`, which runs `Ledger.sweep`) and returns at once.

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

import hashlib
import json
import os
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError, UnexpectedToolError
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field, ValidationError

from gpuledger import settings, vocabulary
from gpuledger.api import Ledger
from gpuledger.errors import UserError
from gpuledger.mcp_server.budget import AgentBudget, agent_budget, check_launch
from gpuledger.spec.strict import MAX_COUNT

#: rows of a `sql` result put into the tool's text (the structured content holds up to SQL_MAX_ROWS)
SQL_TEXT_ROWS = 20
SQL_MAX_ROWS = 1000
#: longest text a tool returns (characters); longer output is cut with a note
MAX_TEXT_CHARS = 20_000
#: what each tool may do to the world (MCP tool annotations): the reading tools change nothing;
#: `report` writes its files (it adds, never destroys); `sweep` launches and spends
READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
WRITES_FILES = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
SPENDS = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=True)

#: the tools' parameter types (the MCP schema an agent sees; a bad value is refused before the tool runs)
SpecPath = Annotated[str, Field(min_length=1, max_length=4096, description="path of a spec YAML file")]
Whole = Annotated[int, Field(ge=1, le=MAX_COUNT)]  # the one limit of every face (gpuledger.spec.strict)
Tokens = Annotated[float, Field(gt=0, le=MAX_COUNT, description="training tokens")]
Parallel = Annotated[int, Field(ge=1, le=1024, description="at most this many trials at once")]

INSTRUCTIONS = (
    "gpuledger plans, prices, launches and accounts for GPU experiments. Work in this order: validate a "
    "spec, estimate or plan it (plan returns a plan_id and its cost), then sweep with that plan_id; the "
    "sweep is refused before anything launches when it would cross the agent budget. Follow a sweep with "
    "status, read its ROI with report, and query the ledger read-only with sql (views are documented in "
    "the resources gpuledger://views.yml).")


def _cut(text: str) -> str:
    return text if len(text) <= MAX_TEXT_CHARS else text[:MAX_TEXT_CHARS] + "\n... (cut)"


def _result(text: str, structured: dict[str, Any]) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=_cut(text))], structured_content=structured)


def _plain(value: Any) -> Any:
    """Returns `value` as plain JSON (dates as ISO text, NaN and inf as null, numpy numbers as numbers)."""
    from gpuledger.plan.model import _json_default

    return json.loads(json.dumps(value, default=_json_default).replace("NaN", "null").replace("Infinity", "null"))


def _offer_line(row: dict[str, Any]) -> str:
    """One offer of `Ledger.prices` in words: where, what, its on-demand and spot $/hour, basis and date."""
    def usd(x: Any) -> str:
        return "-" if x is None else f"${x:,.4g}/h"

    rate = row["usd_per_hour"]
    spot = usd(rate["spot"]) + (" (a spot price the planner never uses)" if row.get("spot_suspicious") else "")
    return (f"{row['cloud']} {row['region']} {row['instance_type']} {row['accelerator_count']}x {row['accelerator']}: "
            f"on demand {usd(rate['on_demand'])}{' REFUSED' if row.get('price_problem') else ''}, spot {spot} "
            f"({row['basis']}, {row['as_of']})")


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
    #: the bytes that were planned, kept in the server's folder: what the sweep process runs
    snapshot: str = ""


class GpuledgerTools:
    """The state behind the tools: the project's Ledger, the agent budget read at start, the plans handed out."""

    def __init__(self, budget_usd: float | None, require_plan: bool, ledger: Ledger | None = None,
                 pinned: Any = None) -> None:
        self.pinned = pinned  # gpuledger.mcp_server.agent_money.Pinned: what the server counts from, fixed at start
        self.budget_usd = budget_usd
        self.require_plan = require_plan
        self.ledger = ledger or Ledger()
        self.plans: dict[str, PlannedSpec] = {}
        self.host = socket.gethostname()

    # -- reading verbs --------------------------------------------------------------------------
    def validate(self, spec: str) -> CallToolResult:
        check = self.ledger.validate(spec)
        text = f"{spec}: valid" if check.ok else "\n".join(check.problems) or f"{spec}: invalid"
        return _result(text, {"spec": spec, "valid": check.ok, "problems": list(check.problems)})

    def estimate(self, model: str, *, method: str, precision: str, batch: int, seq: int, gpus: int,
                 tokens: float | None = None, accelerator: str | None = None) -> CallToolResult:
        workload = self.ledger.workload(model, method=method, precision=precision, micro_batch=batch, seq_len=seq,
                                        gpus=gpus)
        data = _plain(self.ledger.estimate_answer(workload, tokens=tokens,
                                                  accelerators=[accelerator] if accelerator else None))
        mem = data.get("memory_gib", {})
        text = (f"{model}: {data.get('params_total', '?')} parameters, peak {mem.get('allocated', '?')} GiB "
                f"allocated per GPU ({data.get('peak_phase', '?')}); full numbers in the structured content"
                + "".join(f"\nwarning: {line}" for line in data.get("warnings", [])))
        return _result(text, data)

    def plan(self, spec: str) -> CallToolResult:
        from gpuledger.mcp_server.agent_money import snapshot
        from gpuledger.spec import load_spec

        path = Path(spec)
        load_spec(path)  # a file that is no spec is refused here, never kept (a copy of /proc/self/environ would
        # put the server's environment, cloud credentials and all, in the project for the agent to read)
        copy, digest = snapshot(path, settings.current().data_dir)
        try:
            verdict = self.ledger.plan(str(copy))  # the bytes kept are the bytes priced
        except UserError as err:  # its message names the agent's spec, not the server's kept copy of it
            raise ToolError(str(err).replace(str(copy), spec)) from None
        data = _plain(verdict.plan.to_json())
        planned = verdict.decided_usd  # the one decided spend (`Plan.decided_usd`, at the plan's confidence)
        conf = verdict.plan.confidence.upper()
        sweep_id, name = verdict.sweep_id, verdict.sweep.spec.name
        plan_id = hashlib.sha256(f"{digest}|{json.dumps(data, sort_keys=True, default=str)}".encode()).hexdigest()[:16]
        self.plans[plan_id] = PlannedSpec(plan_id, str(path.resolve()), digest, sweep_id, name, planned,
                                          verdict.accepted, str(copy))
        trials = verdict.plan.planned_trials
        feasible = sum(1 for t in trials if t.feasible)
        refusal = (verdict.refusal or "over budget").splitlines()[0]
        lines = [f"plan {plan_id}: sweep {name}, {feasible} of {len(trials)} trials feasible, "
                 f"planned ${planned:.2f} at {conf} (all trials ${verdict.plan.total_est_cost_usd:.2f} at P50"
                 + (f", P10 ${data['total_cost_usd_p10']:.2f} - P90 ${data['total_cost_usd_p90']:.2f}"
                    if data.get("total_cost_usd_p90") is not None else "") + "), "
                 f"spec budget {'ok' if verdict.accepted else 'REFUSES: ' + refusal}"]
        budget = self._budget_or_none()
        if budget is not None:
            lines.append(f"agent budget: ${budget.remaining_usd:.2f} of ${budget.budget_usd:.2f} left; "
                         f"this plan {'fits' if planned <= budget.remaining_usd + 1e-9 else 'does NOT fit'}")
        else:
            lines.append("agent budget: not set ([agent] budget_usd): sweep will refuse to launch")
        return _result("\n".join(lines), {"plan_id": plan_id, "planned_usd": planned, "within_budget": verdict.accepted,
                                          "refusal": verdict.refusal,
                                          "agent_budget": budget.to_json() if budget else None, "plan": data})

    def prices(self, gpu: str | None, cloud: str | None) -> CallToolResult:
        rows = _plain(self.ledger.prices(gpu=gpu, cloud=cloud))
        head = "\n".join(_offer_line(r) for r in rows[:15])
        more = f"\n... {len(rows) - 15} more in the structured content" if len(rows) > 15 else ""
        return _result(f"{len(rows)} offer(s)\n{head}{more}", {"offers": rows})

    def sql(self, query: str) -> CallToolResult:
        """The agent's SQL: the ledger only (no files, URLs, extensions), streamed and cut at SQL_MAX_ROWS
        rows and `LEDGER_MAX_BYTES` (`gpuledger.warehouse.ledger_sql`)."""
        result = self.ledger.agent_sql(query, max_rows=SQL_MAX_ROWS)
        rows = result.rows
        text_rows = "\n".join(json.dumps(r, default=str) for r in rows[:SQL_TEXT_ROWS])
        more = f"\n... {len(rows) - SQL_TEXT_ROWS} more row(s) in the structured content" if len(rows) > SQL_TEXT_ROWS else ""
        cut = (f"\n(cut at {len(rows)} row(s): the result is longer than the agent's limit of "
               f"{'rows' if result.cut_by == 'rows' else 'bytes'}; aggregate or add a LIMIT)" if result.truncated else "")
        return _result(f"{len(rows)} row(s)\n{text_rows}{more}{cut}",
                       {"rows": rows, "row_count": len(rows), "truncated": result.truncated, "cut_by": result.cut_by})

    def report(self, name: str) -> CallToolResult:
        files = self.ledger.report_sweep(name)
        row = _plain(self.ledger.sweep_roi(name))
        where = f"html: {files.html}\nmarkdown: {files.markdown}"
        text = (f"sweep {name}: best {row.get('best_metric')} (trial {row.get('best_trial_id')}), "
                f"time to recipe {row.get('time_to_recipe_s')} s, cost to recipe ${row.get('cost_to_recipe_usd')}, "
                f"total ${row.get('total_cost_usd')}\n{where}")
        return _result(text, {"roi": row, "report": where, "html": str(files.html), "markdown": str(files.markdown)})

    def status(self, sweep: str | None) -> CallToolResult:
        from gpuledger.warehouse import WarehouseBusy

        try:
            rows = [s.to_json() for s in self.ledger.status(sweep)]
            budget = self._budget_or_none()
            states = {s["sweep_id"]: s for s in self.ledger.sweep_states(sweep)}  # state, accrued_usd (docs/budgets.md)
        except WarehouseBusy as err:  # a sweep is storing results: an answer to ask again, not a failure
            return _result(f"the ledger is busy ({str(err).splitlines()[0]}); ask again in a few seconds",
                           {"sweeps": [], "busy": True, "agent_budget": None})
        from gpuledger.runtime.sweep_states import finished

        ended = set()
        for r in rows:
            money = states.get(r["sweep_id"]) or {}
            r["state"], r["accrued_usd"] = money.get("state", r["status"]), money.get("accrued_usd")
            if money and finished(money):  # its spend is final: no "so far"
                ended.add(r["sweep_id"])
        lines = [f"{r['sweep_id']}: {r['state']}, {r['succeeded']}/{r['trials']} trials succeeded, "
                 f"spent ${float(r['spent_usd']):.4f}"
                 + (" in total (final)" if r["sweep_id"] in ended
                    else f" (so far, running trials included: ${r['accrued_usd']:.4f})" if r["accrued_usd"] is not None
                    else "")
                 for r in rows] or ["no sweep yet" if sweep is None else f"no sweep {sweep}"]
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
        from gpuledger.mcp_server.agent_money import Pinned, admit, launch_env
        from gpuledger.spec import load_spec
        from gpuledger.warehouse import Warehouse

        planned_spec = load_spec(Path(planned.snapshot))
        held: list[AgentBudget] = []

        def check_agent_budget(wh: Any) -> None:
            held.append(self._budget(wh))
            check_launch(held[0], planned.planned_usd, planned.sweep_name)

        try:
            launch_id, decision = admit(self.pinned or Pinned.at_start(), sweep_id=planned.sweep_id,
                                        sweep_name=planned.sweep_name, spec_path=planned.snapshot, digest=digest,
                                        plan_id=planned.plan_id, planned_usd=planned.planned_usd,
                                        project=planned_spec.project, owner_claimed=planned_spec.owner,
                                        check_agent_budget=check_agent_budget)
        except UserError as err:
            raise ToolError(str(err)) from None
        budget = held[0]
        log = settings.current().data_dir / "mcp" / f"{launch_id}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "gpuledger.mcp_server.launch", planned.snapshot]
        if max_parallel:
            argv += ["--max-parallel", str(int(max_parallel))]
        with open(log, "ab") as fh:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT,
                                    start_new_session=True, env={**os.environ, "GPULEDGER_LAUNCHED_BY": "mcp",
                                                                 **launch_env(launch_id, digest, planned.planned_usd,
                                                                              decision)})
        with Warehouse.open() as wh:
            wh.set_agent_launch_pid(launch_id, proc.pid)
        left = budget.remaining_usd - planned.planned_usd
        waits = (f"; it WAITS for a person's approval ({decision.approval_words()}): `gpuledger approve "
                 f"{planned.sweep_name}`" if decision.needs_approval else "")
        return _result(f"launched sweep {planned.sweep_id} (plan {planned.plan_id}, ${planned.planned_usd:.2f}); "
                       f"agent budget left ${left:.2f}; follow it with status, log {log}{waits}",
                       {"sweep_id": planned.sweep_id, "launch_id": launch_id, "plan_id": planned.plan_id,
                        "planned_usd": planned.planned_usd, "agent_budget_left_usd": left, "log": str(log),
                        "pid": proc.pid, "awaiting_approval": decision.needs_approval,
                        "envelopes": [u.to_json() for u in decision.uses]})

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


def _guard(fn):
    """Turns a user error into a tool error with gpuledger's one-line message; refuses every call once the
    configuration the server counts from changed (`agent_money.Pinned`)."""
    def wrapped(*args, **kwargs):
        try:
            pinned = getattr(getattr(fn, "__self__", None), "pinned", None)
            if pinned is not None:
                pinned.check()
            return fn(*args, **kwargs)
        except ToolError:
            raise
        except UserError as err:
            raise ToolError(str(err)) from None
    wrapped.__name__, wrapped.__doc__, wrapped.__wrapped__ = fn.__name__, fn.__doc__, fn  # type: ignore[attr-defined]
    return wrapped


def argument_problems(tool: str, err: ValidationError) -> str:
    """Returns the SDK's refusal of a tool's arguments (pydantic's several lines per argument, with links) as one
    line naming the tool and each argument: `Error executing tool estimate: argument seq: Input should be less
    than or equal to 1000000000000000 (got 10000000000000000)`."""
    said: dict[str, str] = {}
    for e in err.errors():
        name = str(e["loc"][0]) if e["loc"] else "arguments"
        if name in said:
            continue  # a union's members each refuse the value: one reason per argument
        got = "" if e["type"] == "missing" else f" (got {_shown(e.get('input'))})"
        said[name] = f"argument {name}: {'required' if e['type'] == 'missing' else e['msg']}{got}"
    return f"Error executing tool {tool}: " + "; ".join(said.values())


def _shown(value: Any, most: int = 80) -> str:
    text = " ".join(repr(value).split())
    return text if len(text) <= most else text[:most - 3] + "..."


class ToolServer(MCPServer):
    """The SDK's server, with its refusal of a tool's arguments said in one line (`argument_problems`); what
    the SDK logs and returns otherwise is its own."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as err:
            cause = err.__cause__
            if isinstance(err, UnexpectedToolError) or not isinstance(cause, ValidationError):
                raise
            raise ToolError(argument_problems(name, cause)) from cause  # the SDK logs the cause's field names


def build_server(tools: GpuledgerTools) -> MCPServer:
    """Returns the MCP server with gpuledger's tools and the views' documentation as resources."""
    from gpuledger import __version__

    server = ToolServer(name="gpuledger", version=__version__, instructions=INSTRUCTIONS)

    @server.tool(description="Check an experiment spec (YAML path) without running anything: every problem "
                             "the planner and the sweep would refuse on, one line each.", annotations=READ_ONLY)
    def validate(spec: SpecPath) -> CallToolResult:
        return _guard(tools.validate)(spec)

    @server.tool(description="Memory per GPU, parameters and FLOPs per token of one training or inference setup "
                             "(gpuledger estimate --json); with tokens, time and dollars per GPU type.",
                 annotations=READ_ONLY)
    def estimate(model: str, method: vocabulary.Method = "lora", precision: vocabulary.Precision = "bf16",
                 batch: Whole = 1, seq: Whole = 2048, gpus: Whole = 1, tokens: Tokens | None = None,
                 accelerator: str | None = None) -> CallToolResult:
        return _guard(tools.estimate)(model, method=method, precision=precision, batch=batch, seq=seq, gpus=gpus,
                                      tokens=tokens, accelerator=accelerator)

    @server.tool(description="Plan a sweep spec: GPUs, spot, schedule and cost per trial, within the spec's budget. "
                             "Returns a plan_id to pass to sweep.", annotations=READ_ONLY)
    def plan(spec: SpecPath) -> CallToolResult:
        return _guard(tools.plan)(spec)

    @server.tool(description="What the planner would pay per offer: usd_per_hour, basis and date.", annotations=READ_ONLY)
    def prices(gpu: str | None = None, cloud: str | None = None) -> CallToolResult:
        return _guard(tools.prices)(gpu, cloud)

    @server.tool(description="Launch a planned sweep (needs plan_id from plan). Refused before anything launches "
                             "when it would cross the agent budget. Returns at once; follow with status.",
                 annotations=SPENDS)
    def sweep(spec: SpecPath, plan_id: str | None = None, max_parallel: Parallel | None = None) -> CallToolResult:
        return _guard(tools.sweep)(spec, plan_id, max_parallel)

    @server.tool(description="Progress and spend of sweeps (one sweep by id or name, else the latest), and the "
                             "agent budget held.", annotations=READ_ONLY)
    def status(sweep: str | None = None) -> CallToolResult:
        return _guard(tools.status)(sweep)

    @server.tool(description="Write a sweep's ROI report; returns the summary (best recipe, time and cost to it) "
                             "and the report's path.", annotations=WRITES_FILES)
    def report(name: str) -> CallToolResult:
        return _guard(tools.report)(name)

    @server.tool(description="Read-only SQL (DuckDB) against the ledger only: writes, files, URLs and extensions "
                             "are refused; at most 1000 rows come back. Views are documented in the resource "
                             "gpuledger://views.yml.", annotations=READ_ONLY)
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
    from gpuledger.mcp_server.agent_money import Pinned

    pinned = Pinned.at_start()  # the warehouse, budget and envelopes counted from, whatever the files say later
    current = settings.current()
    server = build_server(GpuledgerTools(pinned.budget_usd, current.get("agent.require_plan"), pinned=pinned))
    server.run("stdio")
    return 0
