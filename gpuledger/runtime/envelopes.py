"""Spending envelopes: "team X may spend $5,000 this month", "each person $300 a week", the agent's budget.

An envelope (`[[budgets]]` in gpuledger.toml or the user file; docs/budgets.md) has a scope (`project:X`,
`owner:X`, `agent`, `all`), a window (`day`, `week` (ISO, Monday 00:00 UTC), `month`, or a date range
`"2026-12-01..2026-12-31"`, both days included), a limit and an optional soft threshold. The agent
budget (`[agent] budget_usd`) is the envelope `agent` (scope `agent`, window `all`: the server's
whole life, across restarts).

The money of an envelope is counted from the warehouse's `budget_ledger` (view `v_budgets`,
`gpuledger/warehouse/budget_ledger.py`): a launch reserves its planned spend, its runs commit what they
measure, the rest is released when it ends. This module is pure: which envelopes a launch falls
under, their windows, and the decision (refuse, ask for approval, go) with the numbers.
"""

from __future__ import annotations

import getpass
import math
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from gpuledger.errors import UserError

#: the windows an envelope may have (besides a date range "YYYY-MM-DD..YYYY-MM-DD")
WINDOWS = ("day", "week", "month", "all")
SCOPE_KINDS = ("project", "owner", "agent", "all")
#: the name of the agent budget's envelope
AGENT_ENVELOPE = "agent"
#: money below this is rounding
EPSILON_USD = 1e-9
_RANGE = re.compile(r"^(\d{4}-\d{2}-\d{2})\.\.(\d{4}-\d{2}-\d{2})$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
#: the start of window "all" (no window: every launch ever)
ALL_START = datetime(1970, 1, 1)
ALL_END = datetime(9999, 1, 1)


@dataclass(frozen=True)
class Envelope:
    """One envelope as configured (`limit_usd`, `soft_usd` in US dollars)."""

    name: str
    scope: str
    window: str
    limit_usd: float
    soft_usd: float | None = None
    approvers: tuple[str, ...] = ()
    where: str = ""

    @property
    def scope_kind(self) -> str:
        return self.scope.split(":", 1)[0]

    @property
    def scope_value(self) -> str | None:
        return self.scope.split(":", 1)[1] if ":" in self.scope else None

    def bounds(self, at: datetime) -> tuple[datetime, datetime]:
        """Returns the window [start, end) that holds `at` (naive UTC)."""
        return window_bounds(self.window, at)

    def applies(self, spender: Spender) -> bool:
        """Returns whether a launch by `spender` falls under this envelope."""
        kind, value = self.scope_kind, self.scope_value
        if kind == "all":
            return True
        if kind == "agent":
            return spender.agent
        if kind == "project":
            return spender.project == value
        return spender.owner == value  # the observed owner, never the spec's claim

    def who_approves(self) -> str:
        """The people who must approve a launch over the soft threshold, in words."""
        if self.approvers:
            return ", ".join(self.approvers)
        return "anyone who can run `gpuledger approve` in this project (no `approvers` set)"

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "scope": self.scope, "window": self.window, "limit_usd": self.limit_usd,
                "soft_usd": self.soft_usd, "approvers": list(self.approvers)}


@dataclass(frozen=True)
class Spender:
    """Who launches: the project, the owner observed from the machine (and the spec's claim beside it),
    whether an agent launched it (through `gpuledger mcp`)."""

    project: str | None
    owner: str
    owner_claimed: str | None = None
    owner_source: str = "OS user"
    agent: bool = False

    @property
    def launched_by(self) -> str:
        return "mcp" if self.agent else "cli"


def window_bounds(window: str, at: datetime) -> tuple[datetime, datetime]:
    """Returns [start, end) of the window `window` that holds `at` (naive UTC datetimes)."""
    day = datetime(at.year, at.month, at.day)
    if window == "day":
        return day, day + timedelta(days=1)
    if window == "week":
        start = day - timedelta(days=day.weekday())
        return start, start + timedelta(days=7)
    if window == "month":
        start = datetime(at.year, at.month, 1)
        nxt = datetime(at.year + (at.month == 12), at.month % 12 + 1, 1)
        return start, nxt
    if window == "all":
        return ALL_START, ALL_END
    m = _RANGE.match(window)
    if m is None:
        raise UserError(f"budget window {window!r}: use day, week, month or a date range YYYY-MM-DD..YYYY-MM-DD")
    first, last = date.fromisoformat(m.group(1)), date.fromisoformat(m.group(2))
    return datetime(first.year, first.month, first.day), datetime(last.year, last.month, last.day) + timedelta(days=1)


def _money(row: Mapping[str, Any], key: str, where: str, required: bool) -> float | None:
    value = row.get(key)
    if value is None:
        if required:
            raise UserError(f"{where}: {key} is required (US dollars)")
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise UserError(f"{where}: {key} must be a finite number of US dollars >= 0, not {str(value)[:80]!r}")
    return float(value)


def parse_envelope(row: Mapping[str, Any], index: int = 0) -> Envelope:
    """Returns the envelope of one `[[budgets]]` row; a UserError naming the file and row otherwise."""
    file = str(row.get("_where") or "gpuledger.toml")
    where = f"{file}: [[budgets]] #{index + 1}"
    known = {"name", "scope", "window", "limit_usd", "soft_usd", "approvers", "_where"}
    unknown = sorted(set(row) - known)
    if unknown:
        raise UserError(f"{where}: unknown key(s) {', '.join(unknown)}; a budget has name, scope, window, "
                        "limit_usd, soft_usd, approvers")
    name = row.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise UserError(f"{where}: name must be a short name (letters, digits, - _ .), not {str(name)[:80]!r}")
    where = f"{file}: [[budgets]] {name}"
    scope = row.get("scope", "all")
    kind = scope.split(":", 1)[0] if isinstance(scope, str) else None
    if kind not in SCOPE_KINDS or (kind in ("project", "owner") and not scope.split(":", 1)[-1].strip()) \
            or (kind in ("agent", "all") and scope != kind):
        raise UserError(f"{where}: scope must be project:NAME, owner:NAME, agent or all, not {str(scope)[:80]!r}")
    window = row.get("window", "month")
    if not isinstance(window, str) or (window not in WINDOWS and not _RANGE.match(window)):
        raise UserError(f"{where}: window must be day, week, month or a date range YYYY-MM-DD..YYYY-MM-DD, "
                        f"not {str(window)[:80]!r}")
    if _RANGE.match(window):
        try:
            start, end = window_bounds(window, datetime(2000, 1, 1))
        except ValueError as err:
            raise UserError(f"{where}: window {window!r}: {err}") from None
        if end <= start:
            raise UserError(f"{where}: window {window!r} ends before it starts")
    limit = _money(row, "limit_usd", where, required=True)
    soft = _money(row, "soft_usd", where, required=False)
    if soft is not None and limit is not None and soft > limit:
        raise UserError(f"{where}: soft_usd {usd(soft)} is above limit_usd {usd(limit)}")
    approvers = row.get("approvers", [])
    if isinstance(approvers, str):
        approvers = [approvers]
    if not isinstance(approvers, list) or not all(isinstance(a, str) and 0 < len(a) <= 100 for a in approvers):
        raise UserError(f"{where}: approvers must be a list of user names")
    return Envelope(name=name, scope=scope, window=window, limit_usd=float(limit), soft_usd=soft,
                    approvers=tuple(approvers), where=file)


def configured_envelopes(rows: Iterable[Mapping[str, Any]], agent_budget_usd: float | None = None) -> list[Envelope]:
    """Returns the envelopes of `[[budgets]]` rows (a project's row replaces a user file's of the same
    name), plus the agent budget's envelope when `agent_budget_usd` is set."""
    by_name: dict[str, Envelope] = {}
    for i, row in enumerate(rows):
        env = parse_envelope(row, i)
        by_name[env.name] = env  # later layer (the project file) wins
    if agent_budget_usd is not None and AGENT_ENVELOPE not in by_name:
        by_name[AGENT_ENVELOPE] = Envelope(AGENT_ENVELOPE, "agent", "all", float(agent_budget_usd),
                                           where="[agent] budget_usd")
    return list(by_name.values())


def current_envelopes(settings: Any = None) -> list[Envelope]:
    """Returns the envelopes of the settings in force (`gpuledger.settings.current()`)."""
    from gpuledger import settings as settings_module

    s = settings or settings_module.current()
    return configured_envelopes(s.get("budgets") or (), s.get("agent.budget_usd"))


def observed_owner() -> tuple[str, str]:
    """Returns (the user this process runs as, where that came from): the OS user (`getpass.getuser`:
    $LOGNAME / $USER, else the password database). A SkyPilot API server's or a Prefect Cloud user
    would come first where they exist; open-source Prefect and a local SkyPilot have none."""
    try:
        return getpass.getuser(), "OS user"
    except (KeyError, OSError):
        return f"uid-{os.getuid()}", "OS uid"


def spender_for(spec: Any, *, agent: bool | None = None) -> Spender:
    """Returns who launches a sweep of `spec`: the observed owner, the spec's owner as claimed."""
    owner, source = observed_owner()
    by_agent = os.environ.get("GPULEDGER_LAUNCHED_BY") == "mcp" if agent is None else agent
    return Spender(project=getattr(spec, "project", None), owner=owner,
                   owner_claimed=getattr(spec, "owner", None), owner_source=source, agent=by_agent)


@dataclass(frozen=True)
class EnvelopeUse:
    """An envelope's window now: what is spent, held (reserved, or accrued where more) and left."""

    envelope: Envelope
    window_start: datetime
    window_end: datetime
    spent_usd: float = 0.0
    reserved_usd: float = 0.0
    accrued_usd: float = 0.0
    used_usd: float = 0.0

    @property
    def remaining_usd(self) -> float:
        return self.envelope.limit_usd - self.used_usd

    def to_json(self) -> dict[str, Any]:
        return {"budget": self.envelope.name, "scope": self.envelope.scope, "window": self.envelope.window,
                "window_start": self.window_start.isoformat(), "window_end": self.window_end.isoformat(),
                "limit_usd": self.envelope.limit_usd, "soft_usd": self.envelope.soft_usd,
                "spent_usd": round(self.spent_usd, 6), "reserved_usd": round(self.reserved_usd, 6),
                "accrued_usd": round(self.accrued_usd, 6), "used_usd": round(self.used_usd, 6),
                "remaining_usd": round(self.remaining_usd, 6)}


@dataclass(frozen=True)
class Decision:
    """What a reservation of `plan_usd` meets: envelopes it would cross (refused), those whose soft
    threshold it would pass (approval), and every envelope it falls under."""

    plan_usd: float
    basis: str
    uses: tuple[EnvelopeUse, ...]
    refused: tuple[EnvelopeUse, ...]
    soft: tuple[EnvelopeUse, ...]

    @property
    def needs_approval(self) -> bool:
        return not self.refused and bool(self.soft)

    def refusal(self, what: str) -> str:
        """The refusal's one message: which envelope, spent, reserved, this plan, what would fit."""
        parts = []
        for u in self.refused:
            fit = max(0.0, u.remaining_usd)
            parts.append(
                f"envelope {u.envelope.name} ({u.envelope.scope}, {window_words(u)}): limit {usd(u.envelope.limit_usd)}, "
                f"spent {usd(u.spent_usd)}, reserved {usd(u.reserved_usd)}"
                + (f" (accrued {usd(u.accrued_usd)})" if u.accrued_usd > EPSILON_USD else "")
                + f", this plan {usd(self.plan_usd)} ({self.basis}): over by "
                f"{usd(self.plan_usd - u.remaining_usd)}; what would fit: {usd(fit)}")
        return (f"refused before launch: {what} would cross {len(self.refused)} budget envelope(s): "
                + "; ".join(parts) + ". Make it cheaper, wait for the window to turn, or ask for a higher limit_usd")

    def approval_words(self) -> str:
        u = self.soft[0]
        return (f"envelope {u.envelope.name} ({u.envelope.scope}, {window_words(u)}): used {usd(u.used_usd)} + this "
                f"plan {usd(self.plan_usd)} ({self.basis}) passes the soft threshold {usd(float(u.envelope.soft_usd or 0))} "
                f"of {usd(u.envelope.limit_usd)}; approval needed from {u.envelope.who_approves()}")

    def approvers(self) -> list[str]:
        names: list[str] = []
        for u in self.soft:
            names += [a for a in u.envelope.approvers if a not in names]
        return names


def usd(x: float) -> str:
    """Dollars for a refusal: cents from $1 up, four decimals below (a local trial's cents do not vanish)."""
    return f"{'-' if x < 0 else ''}${abs(x):,.2f}" if abs(x) >= 1 else f"{'-' if x < 0 else ''}${abs(x):.4f}"


def window_words(u: EnvelopeUse) -> str:
    if u.envelope.window == "all":
        return "all time"
    last = u.window_end - timedelta(days=1)
    return f"{u.envelope.window} {u.window_start.date().isoformat()}..{last.date().isoformat()}"


def decide(plan_usd: float, basis: str, uses: Iterable[EnvelopeUse]) -> Decision:
    """Returns the decision on reserving `plan_usd` against the envelopes' current use."""
    uses = tuple(uses)
    refused = tuple(u for u in uses if u.used_usd + plan_usd > u.envelope.limit_usd + EPSILON_USD)
    soft = tuple(u for u in uses if u.envelope.soft_usd is not None
                 and u.used_usd + plan_usd > u.envelope.soft_usd + EPSILON_USD)
    return Decision(plan_usd=plan_usd, basis=basis, uses=uses, refused=refused, soft=soft)


def plan_reservation_usd(plan_json: Mapping[str, Any]) -> tuple[float, str]:
    """Returns (what a launch of this plan reserves, its basis): the plan's P90 total
    (`total_cost_usd_p90`) when the plan has one, else its expected spend (pruned when known, as the
    budget guard decides), else the P50 total."""
    p90 = plan_json.get("total_cost_usd_p90")
    if isinstance(p90, (int, float)) and not isinstance(p90, bool) and math.isfinite(p90) and p90 >= 0:
        return float(p90), "plan P90"
    expected = (plan_json.get("pruning") or {}).get("expected_usd")
    if isinstance(expected, (int, float)) and math.isfinite(expected):
        return float(expected), "plan expected under pruning (P50)"
    return float(plan_json.get("total_est_cost_usd") or 0.0), "plan P50"


def now_utc() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)
