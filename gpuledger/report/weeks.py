"""ISO weeks, in one place: parsing and checking 'YYYY-Www', their dates, and the defaults.

A week is the ISO week 'YYYY-Www' (Monday to Sunday, UTC), the rule of `v_weekly_spend`
(`strftime(started_at, '%G-W%V')`). Years are bounded to MIN_YEAR..MAX_YEAR (1970 to 9998): no
run started before 1970, and the week after (or before) any accepted week still exists, so date
arithmetic on an accepted week never overflows (`9999-W52` or `0001-W01` are refused, in one line).
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time, timedelta

from gpuledger.errors import UserError

WEEK_RE = re.compile(r"^(\d{4})-W(\d{2})$")
MIN_YEAR = 1970
MAX_YEAR = 9998


def check_week(week: str) -> str:
    """Returns `week` when it is an ISO week 'YYYY-Www' that exists, of a year 1970..9998;
    else UserError saying why."""
    week_start(week)
    return week


def week_start(week: str) -> date:
    """Returns the Monday of ISO week 'YYYY-Www'; UserError for text that is not such a week, a
    week its year does not have (W53 of most years) or a year outside MIN_YEAR..MAX_YEAR."""
    m = WEEK_RE.match(week) if isinstance(week, str) else None
    if not m:
        raise UserError(f"week {week!r} is not an ISO week; use YYYY-Www, e.g. 2026-W05")
    year, number = int(m.group(1)), int(m.group(2))
    if not MIN_YEAR <= year <= MAX_YEAR:
        raise UserError(f"week {week}: the year must be {MIN_YEAR} to {MAX_YEAR}")
    try:
        return date.fromisocalendar(year, number, 1)
    except ValueError:
        weeks = date(year, 12, 28).isocalendar()[1]  # 28 December is always in the year's last week
        raise UserError(f"week {week} does not exist: ISO year {year} has weeks W01 to W{weeks:02d}") from None


def week_end(week: str) -> date:
    """Returns the Monday after ISO week `week` (the exclusive end of its dates)."""
    return week_start(week) + timedelta(days=7)


def week_bounds(week: str) -> dict[str, datetime]:
    """Returns {"week_start", "week_end"}: the half-open UTC range [Monday 00:00, next Monday 00:00) of
    ISO week `week`, as naive datetimes (the warehouse stores UTC as TIMESTAMP), for the named queries'
    `$week_start` / `$week_end`.

    `ts >= week_start AND ts < week_end` holds exactly when `strftime(ts, '%G-W%V') = week` (the rule of
    `v_weekly_spend`), and unlike that expression DuckDB can check it against a column's min/max per
    row group (zone maps), so a week's rows are found without computing the week of every row.
    """
    start = datetime.combine(week_start(week), time())
    return {"week_start": start, "week_end": start + timedelta(days=7)}


def iso_week(d: date | datetime) -> str:
    """Returns the ISO week 'YYYY-Www' of a date (of a datetime: its UTC date when aware)."""
    if isinstance(d, datetime):
        d = (d.astimezone(UTC) if d.tzinfo else d).date()
    year, number, _ = d.isocalendar()
    return f"{year}-W{number:02d}"


def previous_week(week: str) -> str:
    """Returns the ISO week before `week`."""
    return iso_week(week_start(week) - timedelta(days=7))


def current_week(today: date | None = None) -> str:
    """Returns the ISO week of `today` (UTC today by default): the week so far."""
    return iso_week(today or datetime.now(UTC).date())


def last_complete_week(today: date | None = None) -> str:
    """Returns the ISO week before the one `today` (UTC today by default) falls in."""
    return iso_week((today or datetime.now(UTC).date()) - timedelta(days=7))
