"""`Ledger`: one object per project with gpuledger's verbs, typed. Every face calls it: the CLI
commands, the MCP tools, the Prefect flows and the Python API people use in notebooks and pipelines.

    import gpuledger as gl

    ledger = gl.Ledger()                          # the project of the working directory (gpuledger.settings)
    verdict = ledger.plan("specs/lora-grid.yaml")   # PlanVerdict: plan, accepted, decided_usd, refusal
    frame = ledger.runs()                         # polars.DataFrame of v_runs

Each method is a thin delegation to the function of the feature's own module (the planner, the
runtime, the warehouse, the reports), so a new feature adds its verb here in a few lines. Imports
are lazy: building a Ledger imports nothing heavy, and each verb imports only what it needs.

`Ledger(project=..., warehouse=...)`: another project folder or warehouse than the working
directory's; while one of its verbs runs, `GPULEDGER_PROJECT` / `GPULEDGER_WAREHOUSE` name them for
this process (one verb of such a Ledger at a time).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuledger.api.arguments import check_arguments
from gpuledger.api.types import PlanVerdict, SpecCheck, SweepStatus

if TYPE_CHECKING:
    import polars as pl

    from gpuledger.estimate import Estimate, Workload
    from gpuledger.report.common import ReportFiles
    from gpuledger.runtime.probe import ProbeSummary
    from gpuledger.runtime.summary import SweepSummary
    from gpuledger.settings import Settings

#: the module that runs a sweep as a Prefect flow run and serves the deployments (`sweep`, `serve`).
#: The flows are a face that calls this Ledger, so the Ledger names the module it hands a flow run to
#: instead of importing it (an import would run back up from the application layer to a face).
PREFECT_RUNNER = "gpuledger.flows.run"

_scope_lock = threading.RLock()


@check_arguments
class Ledger:
    """gpuledger's verbs over one project: plan, run and account for GPU experiments."""

    def __init__(self, project: str | os.PathLike[str] | None = None, *,
                 warehouse: str | os.PathLike[str] | None = None) -> None:
        for name, given in (("project", project), ("warehouse", warehouse)):
            if given is not None and "\x00" in os.fspath(given):
                from gpuledger.errors import UserError

                raise UserError(f"Ledger({name}={os.fspath(given)!r}): no such path (it holds a NUL character)")
        self.project = Path(project).expanduser().resolve() if project is not None else None
        self.warehouse = os.fspath(warehouse) if warehouse is not None else None
        if self.project is not None:
            from gpuledger.settings import PROJECT_FILE

            if not (self.project / PROJECT_FILE).is_file():  # said now, as given (not as GPULEDGER_PROJECT)
                from gpuledger.errors import UserError

                raise UserError(f"Ledger(project={str(project)!r}): there is no {PROJECT_FILE} in {self.project}; "
                                f"`gpuledger init {self.project}` makes one")

    def __repr__(self) -> str:
        where = f"project={str(self.project)!r}" if self.project else "project of the working directory"
        return f"Ledger({where}{', warehouse=' + repr(self.warehouse) if self.warehouse else ''})"

    @contextlib.contextmanager
    def _scope(self) -> Iterator[None]:
        """Runs a verb with this Ledger's project and warehouse in force (nothing changes without them)."""
        if self.project is None and self.warehouse is None:
            yield
            return
        wanted = {"GPULEDGER_PROJECT": str(self.project) if self.project else None,
                  "GPULEDGER_WAREHOUSE": self.warehouse}
        with _scope_lock:
            saved = {k: os.environ.get(k) for k in wanted}
            try:
                for k, v in wanted.items():
                    if v is not None:
                        os.environ[k] = v
                yield
            finally:
                for k, v in saved.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v

    # -- settings ------------------------------------------------------------------------------
    @property
    def settings(self) -> Settings:
        """The settings in force for this Ledger (`gpuledger.settings.current()`)."""
        from gpuledger import settings

        with self._scope():
            return settings.current()

    # -- specs and estimates (no project needed) -------------------------------------------------
    def validate(self, spec: str | os.PathLike[str]) -> SpecCheck:
        """Returns what `gpuledger validate` says of one spec file (never raises for a bad spec)."""
        from gpuledger.plan.requirements import check_spec

        with self._scope():
            out = check_spec(spec)
        return SpecCheck(path=out["path"], ok=out["ok"], kind=out["kind"], name=out["name"], trials=out["trials"],
                         problems=tuple(out["problems"]))

    def workload(self, model: str, **fields: Any) -> Workload:
        """Returns the `gpuledger.estimate.Workload` of `model` and the estimator's options (`method`,
        `precision`, `micro_batch`, `seq_len`, `gpus`, ...); UserError naming a bad field."""
        from pydantic import ValidationError

        from gpuledger.errors import UserError, validation_message
        from gpuledger.estimate import Workload

        try:
            return Workload(model=model, **fields)
        except ValidationError as err:
            problems = [f"{'.'.join(str(x) for x in e['loc']) or 'options'}: {validation_message(e)}"
                        for e in err.errors()]
            raise UserError("; ".join(problems)) from None

    def estimate(self, model: str | Workload, **fields: Any) -> Estimate:
        """Returns the memory, parameters and FLOPs estimate of one setup (`gpuledger estimate`):
        `model` a registry name or config.json path with Workload fields, or a `Workload`."""
        from gpuledger.estimate import estimate

        workload = model if not isinstance(model, str) else self.workload(model, **fields)
        with self._scope():
            return estimate(workload)

    def gpu_options(self, workload: Workload, tokens: float, *, accelerators: list[str] | None = None,
                    calibration: bool = True, warehouse: str | os.PathLike[str] | None = None) -> list[dict[str, Any]]:
        """Returns, for `tokens` training tokens, one option per GPU kind x count (fits, peak memory,
        time, $ on demand and spot; cheapest and fastest marked): `gpuledger estimate --tokens`'s table,
        its times corrected and its bands widened by what the project's runs taught (unless `calibration`
        is False)."""
        from gpuledger.plan.estimate_answer import gpu_options_for

        with self._scope():
            return gpu_options_for(workload, tokens, accelerators, calibration, warehouse)

    def estimate_answer(self, model: str | Workload, *, tokens: float | None = None,
                        accelerators: list[str] | None = None, calibration: bool = True,
                        warehouse: str | os.PathLike[str] | None = None, **fields: Any) -> dict[str, Any]:
        """Returns what `gpuledger estimate --json` prints (the MCP tool `estimate` too): the estimate's
        JSON with `warnings`, `memory_band` and `calibration` (on the first of `accelerators`), and with
        `tokens` the GPU table (`options`, `sample_lengths`, `run_costs`)."""
        from gpuledger.plan.estimate_answer import estimate_answer

        est = self.estimate(model, **fields)
        with self._scope():
            return estimate_answer(est, tokens=tokens, accelerators=accelerators, calibration=calibration,
                                   warehouse=warehouse)

    # -- plans ------------------------------------------------------------------------------------
    def plan(self, spec: str | os.PathLike[str], *, launcher: str | None = None, max_parallel: int | None = None,
             new: bool = False, resume: bool | None = True, sweep_id: str | None = None, with_probes: bool = False,
             inputs: Any = None) -> PlanVerdict:
        """Plans a sweep spec and asks the budget guard; returns the verdict (never raises for a
        refusal: `verdict.accepted`, `verdict.refusal`; `verdict.raise_if_refused()`).

        `with_probes`: the guard adds what the sweep's probes spent already (what `sweep` does);
        `gpuledger plan` does not. `resume`: which sweep of the spec (`gpuledger.runtime.accepted.prepare`:
        True its latest, None its latest while unfinished, False a fresh one; `new` as False).
        `inputs`: planning inputs instead of this machine's and the ledger's."""
        from gpuledger.errors import BudgetExceeded
        from gpuledger.plan import budget_guard
        from gpuledger.runtime.accepted import prepare

        with self._scope():
            accepted = prepare(spec, launcher=launcher, max_parallel=max_parallel, new=new, resume=resume,
                               sweep_id=sweep_id, inputs=inputs)
            probes_usd = self.sweep_spend(accepted.sweep_id)[1] if with_probes else 0.0
            try:
                budget_guard(accepted.plan, probes_usd=probes_usd)
                refusal = None
            except BudgetExceeded as err:
                refusal = str(err)
        return PlanVerdict(plan=accepted.plan, accepted=refusal is None, decided_usd=accepted.plan.decided_usd,
                           refusal=refusal, sweep=accepted, probes_usd=probes_usd)

    def sweep_spend(self, sweep_id: str) -> tuple[float, float]:
        """Returns (what the sweep spent so far, all runs; of it, its probes' part) in USD."""
        from gpuledger.runtime.probe import sweep_spend_usd

        with self._scope():
            return sweep_spend_usd(sweep_id)

    # -- running ---------------------------------------------------------------------------------
    def run(self, spec: str | os.PathLike[str], *, launcher: str | None = None, max_parallel: int | None = None,
            dry_run: bool = False, force: bool = False, resume: bool | None = True, hooks: Any = None,
            launcher_factory: Callable[..., Any] | None = None, report: bool = True) -> SweepSummary:
        """Runs a sweep in this process, without Prefect: plan, budget guard (`BudgetExceeded` unless
        `force`), the team's envelopes (a launch that needs approval is refused: approvals wait in
        `sweep`), the trials (`gpuledger.runtime.engine.execute`), the ROI report; returns its summary.
        `resume`: as `plan` (True: continue the spec's latest sweep, False: a fresh one)."""
        from gpuledger.api.sweeps import run_sweep

        with self._scope():
            return run_sweep(self, spec, launcher=launcher, max_parallel=max_parallel, dry_run=dry_run, force=force,
                             resume=resume, hooks=hooks, launcher_factory=launcher_factory, report=report)

    def run_trials(self, run: Any, hooks: Any = None) -> SweepSummary:
        """Runs the trials of an accepted sweep (`gpuledger.runtime.engine.SweepRun`: lease, register,
        launch, store, budget stop); returns the filled summary. The step the flow and `run` share."""
        from gpuledger.runtime.engine import Hooks, execute

        with self._scope():
            return execute(run, hooks or Hooks())

    def sweep(self, spec: str | os.PathLike[str], *, launcher: str | None = None, max_parallel: int | None = None,
              dry_run: bool = False, force: bool = False, resume: bool | None = True, prefect_port: int | None = None,
              say: Callable[[str], None] | None = None) -> SweepSummary:
        """Runs a sweep as the Prefect flow `sweep` (this project's server, `PREFECT_API_URL`, else a
        temporary one); returns its summary. Raises `BudgetExceeded` (exit 3) when the guard refuses,
        `UserError` for a spec it cannot run. What `gpuledger sweep` does (`resume`: True continues the
        spec's latest sweep, False starts a fresh one: `--new`)."""
        runner = importlib.import_module(PREFECT_RUNNER)
        with self._scope():
            return runner.run_sweep_flow(spec, launcher=launcher, max_parallel=max_parallel, dry_run=dry_run,
                                         force=force, resume=resume, prefect_port=prefect_port, say=say)

    def serve(self, port: int | None = None, metrics_port: int | None = None) -> int:
        """Runs this project's local Prefect server, worker and deployments until interrupted (`gpuledger serve`)."""
        runner = importlib.import_module(PREFECT_RUNNER)
        with self._scope():
            return runner.serve(port=port, metrics_port=metrics_port)

    def serve_worker(self, *, limit: int | None = None) -> int:
        """Runs one more process worker on the pool of the (team) Prefect server PREFECT_API_URL names until
        interrupted (`gpuledger serve --worker-only`)."""
        runner = importlib.import_module(PREFECT_RUNNER)
        with self._scope():
            return runner.serve_worker(limit=limit)

    def maintain_warehouse(self, *, metrics_older_than_days: float = 30.0, every: int = 10,
                           expire_older_than_days: float = 7.0) -> Any:
        """Compacts the warehouse, expires old DuckLake snapshots and downsamples old metric points;
        returns `MaintenanceResult` (`gpuledger warehouse maintain`, docs/warehouse.md)."""
        from gpuledger.warehouse import Warehouse
        from gpuledger.warehouse.maintenance import maintain

        with self._scope(), Warehouse.open() as wh:
            return maintain(wh, metrics_older_than_days=metrics_older_than_days, every=every,
                            expire_older_than_days=expire_older_than_days)

    def ingest_service(self, *, seconds: float = 0.0, poll_s: float = 5.0, max_records: int | None = None,
                       landing: str | None = None) -> Any:
        """Stores the result records sweeps landed for the ingest service (`[warehouse] ingest = "service"`)
        in batches, one commit each, until none are waiting (with `seconds`: polling that long); returns
        `ServiceResult` (`gpuledger warehouse ingest`, the deployment ingest/team; docs/warehouse.md)."""
        from gpuledger.warehouse import ingest_service

        with self._scope():
            return ingest_service.run_service(landing=landing, seconds=seconds, poll_s=poll_s,
                                              max_records=max_records or ingest_service.MAX_RECORDS)

    def approve(self, sweep: str, *, approve: bool = True, note: str = "") -> dict[str, Any]:
        """Approves (or, `approve=False`, rejects) a sweep waiting for approval past an envelope's soft
        threshold: resumes its paused Prefect flow run (`gpuledger approve|reject`, docs/budgets.md)."""
        runner = importlib.import_module(PREFECT_RUNNER)
        with self._scope():
            return runner.decide_approval(sweep, approve=approve, note=note)

    def sweep_states(self, sweep: str | None = None, *, limit: int = 20) -> list[dict[str, Any]]:
        """Each sweep's state (running, awaiting_approval, ...) and spend so far (`accrued_usd`; `gpuledger status`)."""
        from gpuledger.runtime.sweep_states import sweep_states

        with self._scope():
            return sweep_states(sweep, limit=limit)

    def envelopes(self) -> list[dict[str, Any]]:
        """Every budget envelope's current window: limit, spent, reserved, accrued, remaining (view v_budgets)."""
        from gpuledger.runtime.money import envelope_rows

        with self._scope():
            return envelope_rows()

    def probe(self, spec: str | os.PathLike[str], *, trial_ids: list[str] | None = None, steps: int | None = None,
              seconds: float | None = None, launcher: str | None = None, max_parallel: int | None = None,
              say: Callable[[str], None] = print, launcher_factory: Callable[..., Any] | None = None) -> ProbeSummary:
        """Runs one brief probe per shape of the sweep and stores them (`gpuledger probe`); returns the summary."""
        from gpuledger.runtime.probe import run_probes
        from gpuledger.spec import load_spec

        with self._scope():
            loaded = load_spec(spec)
            return run_probes(loaded, Path(spec), launcher=launcher, trial_ids=trial_ids, steps=steps, seconds=seconds,
                              max_parallel=max_parallel, say=say, launcher_factory=launcher_factory)

    # -- reading the ledger ------------------------------------------------------------------------
    def status(self, sweep: str | None = None, *, limit: int = 20) -> list[SweepStatus]:
        """Returns the progress and spend of the sweeps (one by id or name; else the latest `limit`);
        an empty list while there is no warehouse."""
        from gpuledger.settings import warehouse_if_any

        with self._scope():
            path = warehouse_if_any()
            if path is None:
                return []
            from gpuledger.warehouse import Warehouse

            with Warehouse.open(path, read_only=True) as wh:
                rows = wh.query_named("sweep_status", {"sweep": sweep, "limit": int(limit)}).to_dicts()
        return [SweepStatus.from_row(r) for r in rows]

    def best_recipe(self, sweep_id: str) -> dict[str, Any] | None:
        """Returns the sweep's best recipe (trial_id, params, metric_name, best_metric, time_to_recipe_s,
        cost_to_recipe_usd, total_cost_usd; view v_sweep_roi), None when no trial has the metric."""
        from gpuledger.runtime.engine import best_recipe

        with self._scope():
            return best_recipe(sweep_id)

    def trial_results(self, sweep_id: str) -> pl.DataFrame:
        """Returns the sweep's trials with their outcome and metric (view v_trial_results)."""
        from gpuledger.warehouse import Warehouse

        with self._scope(), Warehouse.open(read_only=True) as wh:
            return wh.query_named("trial_results_of_sweep", {"sweep_id": sweep_id})

    def sweep_roi(self, name: str) -> dict[str, Any]:
        """Returns the ROI row (view v_sweep_roi) of the latest sweep called `name`, {} when none."""
        from gpuledger.settings import warehouse_if_any

        with self._scope():
            path = warehouse_if_any()
            if path is None:
                return {}
            from gpuledger.warehouse import Warehouse

            with Warehouse.open(path, read_only=True) as wh:
                rows = wh.query_named("sweep_roi_latest", {"name": name}).to_dicts()
        return rows[0] if rows else {}

    def runs(self, sweep: str | None = None, *, purpose: str | None = None, limit: int = 100_000) -> pl.DataFrame:
        """Returns the runs (view v_runs: one row per attempt with wall-clock, GPUs, peak memory, cost and
        objective; and `final_metrics`, every metric's last value as JSON text), newest first; `sweep` an
        id or a name, `purpose` 'trial' or 'probe'."""
        from gpuledger.warehouse import Warehouse

        with self._scope(), Warehouse.open(read_only=True) as wh:
            return wh.query_named("runs_of", {"sweep": sweep, "purpose": purpose, "limit": int(limit)})

    def final_metrics(self, run_id: str) -> dict[str, float]:
        """Returns the last value of every metric run `run_id` reported ({name: value}: loss, tokens,
        eval_loss, ...; {} for an unknown run)."""
        from gpuledger.warehouse import Warehouse

        with self._scope(), Warehouse.open(read_only=True) as wh:
            rows = wh.query_named("final_metrics_of_run", {"run_id": run_id}).rows()
        return {str(name): float(value) for name, value in rows if value is not None}

    def sql(self, query: str, *, write: bool = False, timeout_s: float | None = None,
            rows: bool = False) -> pl.DataFrame | Any:
        """Returns the result of a SQL query against the ledger (DuckDB) as a polars frame (`SqlRows`, its
        columns and plain rows, when `rows`: no polars imported); read-only unless `write` (a statement
        that would write anything anywhere is refused)."""
        from gpuledger.warehouse.adhoc import run_query

        with self._scope():
            return run_query(query, write=write, timeout_s=timeout_s, rows=rows)

    def agent_sql(self, query: str, *, max_rows: int = 1000, timeout_s: float | None = None) -> Any:
        """Returns `LedgerRows` of a query run as an agent's (the MCP `sql` tool): the ledger only, DuckDB's
        external access off (no files, URLs, ATTACH, COPY, extensions), streamed and cut at `max_rows`
        rows and 4 MiB (`gpuledger.warehouse.ledger_sql.ledger_query`)."""
        from gpuledger.warehouse.adhoc import sql_timeout_s
        from gpuledger.warehouse.ledger_sql import ledger_query

        with self._scope():
            return ledger_query(query, max_rows=max_rows, timeout_s=sql_timeout_s(timeout_s))

    def report_sweep(self, name: str | None, *, sweep_id: str | None = None,
                     out: str | os.PathLike[str] | None = None) -> ReportFiles:
        """Writes the ROI report of the latest sweep `name` (or of `sweep_id`); returns its files."""
        from gpuledger.report.sweep import write_sweep_report
        from gpuledger.warehouse import Warehouse

        with self._scope(), Warehouse.open(read_only=True) as wh:
            return write_sweep_report(wh, name=name, sweep_id=sweep_id, out_dir=out)

    def report_weekly(self, week: str | None = None, *, out: str | os.PathLike[str] | None = None) -> ReportFiles:
        """Writes the weekly cost report of ISO week `week` (default: the report picks it and says which)."""
        from gpuledger.report.weekly import write_weekly_report
        from gpuledger.warehouse import Warehouse

        with self._scope(), Warehouse.open(read_only=True) as wh:
            return write_weekly_report(wh, week=week, out_dir=out)

    def report_capacity(self, spec: str | os.PathLike[str], *, out: str | os.PathLike[str] | None = None) -> ReportFiles:
        """Writes the capacity report of a `kind: capacity` spec."""
        from gpuledger.report.capacity import write_capacity_report

        with self._scope():
            return write_capacity_report(self.capacity(spec), out_dir=out)

    def import_history(self, paths: list[str | os.PathLike[str]], *, fmt: str | None = None,
                       project: str | None = None) -> Any:
        """Imports past runs (a W&B or MLflow export, a Parquet/CSV table, gpuledger record files) into
        the ledger (`gpuledger import`, docs/import.md); returns the `ImportReport` (stored, new, one
        message per row not imported)."""
        from gpuledger.inputs.history import import_history

        with self._scope():
            return import_history(paths, fmt=fmt, project=project)

    # -- prices and serving ------------------------------------------------------------------------
    def prices(self, gpu: str | None = None, cloud: str | None = None) -> list[dict[str, Any]]:
        """Returns what the planner would pay per offer (`gpuledger prices --json` rows: usd_per_hour
        {on_demand, spot}, basis, source, as_of, ...); UserError when no offer matches."""
        from gpuledger.catalog.pricing import load_offers, offer_price_rows
        from gpuledger.errors import UserError
        from gpuledger.inputs.ledger import billed_rates

        with self._scope():
            offers = load_offers(clouds=[cloud] if cloud else None, accelerators=[gpu] if gpu else None,
                                 usable_only=False)  # every offer, the ones the planner never uses marked
            if offers.is_empty():
                what = " ".join(f"{k} {v}" for k, v in (("GPU", gpu), ("cloud", cloud)) if v)
                raise UserError(f"no offer for {what or 'any GPU'}; `gpuledger prices` lists every offer")
            return offer_price_rows(offers, billed_rates())

    def capacity(self, spec: str | os.PathLike[str]) -> dict[str, Any]:
        """Returns the capacity plan of a `kind: capacity` spec (`gpuledger capacity --json`)."""
        from gpuledger.errors import UserError
        from gpuledger.serving.capacity_from_sweep import plan_capacity_measured
        from gpuledger.spec import load_spec

        with self._scope():
            loaded = load_spec(spec)
            if loaded.kind != "capacity":
                raise UserError(f"{spec} is a `kind: {loaded.kind}` spec; `gpuledger capacity` needs `kind: capacity` "
                                f"(traffic, slo, resources). For a sweep use `gpuledger plan {spec}`.")
            return plan_capacity_measured(loaded)
