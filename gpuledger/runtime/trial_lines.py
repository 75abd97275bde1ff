"""One-line texts of a trial for the sweep's log, the CLI and the flow run: a reason or a metric escaped to
one line (a newline in a trial's output cannot forge a second log line), and what a failed attempt shows
of itself (its reason, log path and last stderr lines)."""

from __future__ import annotations

import json
from typing import Any

from gpuledger.record import ResultRecord

#: How many of a failed trial's last stderr lines the summary, the CLI and the flow's log show.
STDERR_LINES_SHOWN = 8


def failure_detail(rec: ResultRecord, lines: int = STDERR_LINES_SHOWN) -> dict[str, Any]:
    """Returns what a failed attempt shows of itself: trial_id, run_id, status, reason, its log's
    path (when the launcher kept one) and the last `lines` non-empty lines of its stderr (each
    escaped to one line and cut at 300 characters)."""
    tail = [ln for ln in (rec.stderr_tail or "").splitlines() if ln.strip()][-lines:]
    return {"trial_id": rec.trial_id, "run_id": rec.run_id, "status": rec.status, "reason": rec.reason,
            "log_path": rec.log_path, "stderr_lines": [_one_line(ln) for ln in tail]}


def _one_line(text: object, limit: int = 300) -> str:
    """Returns `text` for a log line: control characters escaped (a newline in a metric name or a
    reason cannot forge a second log line), cut at `limit` characters."""
    escaped = json.dumps(str(text), ensure_ascii=False)[1:-1]
    return escaped if len(escaped) <= limit else escaped[:limit] + "…"


def _fmt_metrics(metrics: dict[str, float]) -> str:
    if not metrics:
        return "no metrics"
    return _one_line(", ".join(f"{_one_line(k, 60)}={v:.4g}" for k, v in metrics.items()), 500)


def started_text(trial_id: str, row: Any, running: int, launched: int, spent_usd: float) -> str:
    """Returns the log line of a trial's launch: its planned cost and wall-clock (`row`: its PlannedTrial,
    or None), how many run now and were launched, the spend so far."""
    est = "" if row is None or row.est_cost_usd is None else f"; est. ${row.est_cost_usd:.4f}"
    est += "" if row is None or row.est_wall_s is None else f", {row.est_wall_s:.0f} s"
    return (f"Trial {trial_id} started ({running} running, {launched} launched this run{est}; "
            f"spent ${spent_usd:.4f} so far)")


def ended_text(rec: ResultRecord, spent_usd: float, detail: dict[str, Any] | None = None) -> str:
    """Returns the log line of an attempt's end: succeeded with its metrics, or its status and reason with
    `detail` (`failure_detail`: log path, last stderr lines); its cost and the spend so far."""
    money = f"cost ${rec.cost_usd:.4f}, spent ${spent_usd:.4f} so far"
    if detail is None:
        return f"Trial {rec.trial_id} succeeded in {rec.wall_s:.1f} s ({_fmt_metrics(rec.final_metrics)}); {money}"
    log = f"; log {detail['log_path']}" if detail.get("log_path") else ""
    tail = "".join(f"\n  | {line}" for line in detail["stderr_lines"])
    return f"Trial {rec.trial_id} {rec.status} after {rec.wall_s:.1f} s: {_one_line(rec.reason)}; {money}{log}{tail}"
