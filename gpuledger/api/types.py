"""What the Ledger's verbs return, typed (each with `to_json()` and a notebook display).

Light on purpose: the heavy types they hold (`Plan`, `AcceptedSweep`) are imported for type
checking only, so `import gpuledger.api` stays cheap.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpuledger.plan.model import Plan
    from gpuledger.runtime.accepted import AcceptedSweep


def html_table(rows: list[tuple[str, Any]], title: str | None = None) -> str:
    """Returns a small two-column HTML table (what `_repr_html_` shows in a notebook), values escaped."""
    import html  # in a notebook only: the prompt's commands do not pay for html.entities

    head = f"<b>{html.escape(title)}</b>" if title else ""
    cells = "".join(f"<tr><th style='text-align:left'>{html.escape(str(k))}</th>"
                    f"<td style='text-align:left'>{html.escape('-' if v is None else str(v))}</td></tr>"
                    for k, v in rows)
    return f"<div>{head}<table>{cells}</table></div>"


def usd(value: float | None) -> str:
    return "-" if value is None else f"${value:,.4f}"


@dataclass(frozen=True)
class SpecCheck:
    """What `validate` says of one spec file: ok, its kind and name, how many trials, every problem
    (`FILE:LINE:COL: field: message`, one each)."""

    path: str
    ok: bool
    kind: str | None = None
    name: str | None = None
    trials: int | None = None
    problems: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "problems": list(self.problems)}

    def _repr_html_(self) -> str:
        rows = [("spec", self.path), ("valid", self.ok), ("kind", self.kind), ("name", self.name),
                ("trials", self.trials)] + [("problem", p) for p in self.problems]
        return html_table(rows, f"validate {self.path}")


@dataclass(frozen=True)
class PlanVerdict:
    """A planned sweep and the budget guard's answer.

    `decided_usd`: the spend the budget guard decided on (`Plan.decided_usd`: at the plan's confidence,
    `budget.confidence` P90 by default; the expected spend under pruning when known, else the plan's
    total), the number `gpuledger plan --json` calls `decided_usd`;
    `probes_usd`: what the sweep's probes spent already (added by the guard when asked for);
    `accepted`: the guard lets it run; `refusal`: the guard's message when not (exit code 3);
    `sweep`: what the runtime runs (`gpuledger.runtime.accepted.AcceptedSweep`)."""

    plan: Plan
    accepted: bool
    decided_usd: float
    refusal: str | None
    sweep: AcceptedSweep = field(repr=False)
    probes_usd: float = 0.0

    @property
    def sweep_id(self) -> str:
        return self.sweep.sweep_id

    @property
    def budget_usd(self) -> float | None:
        return self.plan.budget_usd

    @property
    def exit_code(self) -> int:
        """0 when accepted, 3 (`BudgetExceeded`) when the budget guard refuses."""
        return 0 if self.accepted else 3

    def raise_if_refused(self) -> None:
        """Raises `BudgetExceeded` with the guard's message when the plan was refused."""
        if not self.accepted:
            from gpuledger.errors import BudgetExceeded

            raise BudgetExceeded(self.refusal or "refused by the budget guard")

    def to_json(self) -> dict[str, Any]:
        """The plan's JSON (`Plan.to_json()`, what `plan --json` prints) with the verdict beside it."""
        return {**self.plan.to_json(), "accepted": self.accepted, "refusal": self.refusal,
                "probes_usd": round(self.probes_usd, 6)}

    def _repr_html_(self) -> str:
        p = self.plan
        feasible = len(p.feasible_trials)
        rows = [("sweep", self.sweep_id), ("verdict", "accepted" if self.accepted else "REFUSED (exit 3)"),
                (f"decided spend (at {p.confidence.upper()}, budget.confidence)", usd(self.decided_usd)),
                ("total of all trials (P50)", usd(p.total_est_cost_usd)),
                ("total P10 - P90", f"{usd(p.bands.total_cost_usd_p10)} - {usd(p.bands.total_cost_usd_p90)}"
                 if p.bands is not None else "-"),
                ("budget", usd(self.budget_usd)), ("trials feasible", f"{feasible} of {len(p.trials)}"),
                ("makespan", f"{p.makespan_s:,.0f} s on {p.max_parallel} slot(s)"), ("prices", p.price_snapshot)]
        if self.probes_usd:
            rows.append(("probes spent", usd(self.probes_usd)))
        if self.refusal:
            rows.append(("refusal", self.refusal.splitlines()[0]))
        import html

        trials = "".join(
            "<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in (
                t.trial_id, t.params, f"{t.gpus}x {t.accelerator}" if t.feasible else "-",
                "spot" if t.spot else ("on-demand" if t.feasible else "-"),
                "-" if t.est_wall_s is None else f"{t.est_wall_s:,.0f} s", usd(t.est_cost_usd), t.est_basis or "",
                "" if t.feasible else f"INFEASIBLE: {t.reason}")) + "</tr>"
            for t in p.planned_trials[:50])
        head = "".join(f"<th>{h}</th>" for h in ("trial", "params", "GPU", "spot", "time", "cost", "basis", "note"))
        return html_table(rows, f"plan of {self.sweep_id}") + f"<table><tr>{head}</tr>{trials}</table>"


@dataclass(frozen=True)
class SweepStatus:
    """One sweep's progress and spend (`Ledger.status`): `spent_usd` is every run's cost, probes
    included (the definition the budget meter uses, named query `sweep_spent`)."""

    sweep_id: str
    name: str
    status: str | None
    started_at: datetime | None
    ended_at: datetime | None
    budget_usd: float | None
    trials: int
    succeeded: int
    spent_usd: float

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> SweepStatus:
        return cls(sweep_id=row["sweep_id"], name=row["name"], status=row["status"], started_at=row["started_at"],
                   ended_at=row["ended_at"], budget_usd=row["budget_usd"], trials=int(row["trials"] or 0),
                   succeeded=int(row["succeeded"] or 0), spent_usd=float(row["spent_usd"] or 0.0))

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        for key in ("started_at", "ended_at"):
            out[key] = out[key].isoformat() if out[key] is not None else None
        return out

    def _repr_html_(self) -> str:
        return html_table([(k, v) for k, v in self.to_json().items()], f"sweep {self.sweep_id}")
