"""What one run of a sweep did (`SweepSummary`, the flow's return value as a dict) and the rule
that names its final status (`gpuledger.vocabulary.SWEEP_STATUSES`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from gpuledger import vocabulary


@dataclass
class SweepSummary:
    sweep_id: str
    name: str
    dry_run: bool = False
    forced: bool = False
    trials: int = 0
    max_parallel: int = 0
    skipped_done: int = 0  # succeeded in an earlier run of the same sweep
    launched: int = 0
    succeeded: int = 0
    failed: int = 0
    not_asked: int = 0  # candidates the adaptive search ended without asking for (`not-asked`)
    pruned: int = 0  # stopped early by the adaptive search's pruner (their records say `cancelled`)
    #: attempts stopped at an undecided rung to be relaunched (gpuledger/search/suspension.py; `cancelled`,
    #: billed); the trial's later attempt is counted as it ends
    suspended: int = 0
    launcher_errors: int = 0
    skipped_budget: int = 0
    #: running trials a team envelope stopped (gpuledger/runtime/accrual.py; their records say `cancelled`)
    budget_cancelled: int = 0
    not_feasible: int = 0
    spent_usd: float = 0.0
    budget_usd: float | None = None
    budget_stopped: bool = False
    interrupted: bool = False
    #: records that exist (in the landing folder) but could not be stored in the warehouse
    unrecorded: int = 0
    unrecorded_files: list[str] = field(default_factory=list)
    #: records neither stored nor kept in landing (a full disk): "run_id: why"; counted in `unrecorded`
    lost: list[str] = field(default_factory=list)
    landing: str | None = None
    #: `[warehouse] ingest = "service"`: where the records were landed for ingest/team, and how many of
    #: them it had not stored when the sweep stopped waiting (counted in `unrecorded`; they stay landed)
    ingest_landing: str | None = None
    awaiting_ingest: int = 0
    status: str = vocabulary.SWEEP_PLANNED
    report_html: str | None = None
    report_markdown: str | None = None
    warehouse: str | None = None
    failures: list[str] = field(default_factory=list)
    #: each failed attempt: trial_id, run_id, status, reason, log_path, stderr_lines (its last stderr lines)
    failure_details: list[dict[str, Any]] = field(default_factory=list)
    best: dict[str, Any] | None = None  # the best recipe: trial_id, params, metric, value, time/cost to it
    #: SkyPilot pools the run used (`gpuledger.launch.skypilot_pool.PoolUsage.to_json()`): worker-seconds,
    #: the trials' busy seconds, the idle tail (start-up and idle, the sweep's), the saving against per-trial jobs
    pools: list[dict[str, Any]] = field(default_factory=list)

    def final_status(self) -> str:
        """Returns the run's status: the worst thing that happened wins (unrecorded results, an
        interruption, then a budget stop, failures, success)."""
        if self.unrecorded:
            return vocabulary.SWEEP_UNRECORDED
        if self.interrupted:
            return vocabulary.SWEEP_INTERRUPTED
        if self.budget_stopped:
            return vocabulary.SWEEP_BUDGET_STOPPED
        if self.failed or self.launcher_errors or self.not_feasible:
            return vocabulary.SWEEP_PARTIAL
        return vocabulary.SWEEP_SUCCEEDED

    def exit_code(self) -> int:
        """0: every launched trial succeeded and every record is stored (also after a budget stop);
        1: a trial failed or a record could not be stored; 130: interrupted."""
        if self.interrupted:
            return 130
        return 1 if (self.failed or self.launcher_errors or self.unrecorded) else 0

    def counts_line(self) -> str:
        """Returns the one line of counts and spend that the CLI, the flow's log and its state message share."""
        budget = "" if self.budget_usd is None else f" of ${self.budget_usd:.2f}"
        return (f"{self.sweep_id} {self.status}: {self.launched} launched, {self.succeeded} succeeded, "
                f"{self.failed + self.launcher_errors} failed, {self.skipped_budget} skipped (budget), "
                f"{self.skipped_done} done before; spent ${self.spent_usd:.4f}{budget}")

    def outcome(self) -> tuple[str, str]:
        """Returns (state, message): the Prefect state the flow run ends in, by the same rule as
        `exit_code` (0 `COMPLETED`, 1 `FAILED`, 130 `CANCELLED`), and its message: the counts, the
        first failure, the records not stored."""
        code = self.exit_code()
        message = self.counts_line()
        if self.failures:
            message += f"; first failure: {self.failures[0][:300]}"
        if self.awaiting_ingest:
            message += (f"; {self.awaiting_ingest} result record(s) landed in {self.ingest_landing} not yet stored by "
                        "ingest/team")
        if self.unrecorded > self.awaiting_ingest:
            message += f"; {self.unrecorded - self.awaiting_ingest} result record(s) not stored (kept in {self.landing})"
        if code == 130:
            return "CANCELLED", f"interrupted: {message}"
        return ("FAILED" if code else "COMPLETED"), message

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def _repr_html_(self) -> str:
        """The summary as a notebook shows it: status, counts, spend, the best recipe, the report."""
        import html

        best = self.best or {}
        rows = [("sweep", self.sweep_id), ("status", self.status),
                ("trials", f"{self.launched} launched, {self.succeeded} succeeded, {self.failed + self.launcher_errors} "
                           f"failed, {self.pruned} pruned, {self.skipped_budget} skipped (budget), {self.skipped_done} done before"),
                ("spent", f"${self.spent_usd:,.4f}" + (f" of ${self.budget_usd:,.2f}" if self.budget_usd is not None else "")),
                ("best recipe", f"{best.get('trial_id')} {best.get('params') or ''}: {best.get('metric_name')} = "
                                f"{best.get('best_metric')}" if best else "none yet"),
                ("report", self.report_html or "-")]
        cells = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>"
                        for k, v in rows)
        return f"<div><b>sweep {html.escape(self.sweep_id)}</b><table>{cells}</table></div>"
