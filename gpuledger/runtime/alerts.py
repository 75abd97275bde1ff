"""Alerts (`[[alerts]]` in gpuledger.toml or the user file; docs/budgets.md): a Slack-compatible webhook or a command.

    [[alerts]]
    webhook = "https://hooks.slack.com/services/T000/B000/XXX"   # JSON POST {"text": ..., "gpuledger": {...}}
    on = ["budget", "failed", "over_estimate", "idle"]

    [[alerts]]
    command = "notify-send gpuledger"       # the text as its last argument, the JSON on stdin
    on = ["failed"]

Kinds: `budget` (an envelope's soft threshold passed: the launch waits for approval), `failed` (a sweep
failed, had failed trials, or was refused before launch), `over_estimate` (a running trial's accrued
spend passed its estimate's P90), `idle` (a GPU idle for `idle_minutes`, from the agent's samples).
Each alert is sent once per target: it is claimed in the warehouse (`alerts_sent`) before it is sent,
so a retry, a second process or a restart never sends it twice. Sending never breaks a sweep: a
webhook that does not answer within `TIMEOUT_S` is recorded as failed.
"""

from __future__ import annotations

import contextlib
import json
import re
import shlex
import subprocess
import urllib.request
from dataclasses import dataclass
from typing import Any

from gpuledger.errors import UserError

ALERT_KINDS = ("budget", "failed", "over_estimate", "idle")
#: seconds a webhook or a command gets
TIMEOUT_S = 5.0


#: a GPU run whose agent never saw the GPU above this utilisation counts as idle (percent)
IDLE_MAX_UTIL_PCT = 1.0
DEFAULT_IDLE_MINUTES = 10.0


@dataclass(frozen=True)
class AlertTarget:
    webhook: str | None
    command: str | None
    on: tuple[str, ...]
    idle_minutes: float = DEFAULT_IDLE_MINUTES

    @property
    def label(self) -> str:
        """The target named without secrets (a webhook's path is its token)."""
        if self.webhook:
            m = re.match(r"^(https?://[^/]+)", self.webhook)
            return f"webhook {m.group(1) if m else 'URL'}"
        return f"command {shlex.split(self.command or '')[0] if self.command else ''}"


def parse_target(row: dict[str, Any], index: int) -> AlertTarget:
    where = f"{row.get('_where') or 'gpuledger.toml'}: [[alerts]] #{index + 1}"
    unknown = sorted(set(row) - {"webhook", "command", "on", "idle_minutes", "_where"})
    if unknown:
        raise UserError(f"{where}: unknown key(s) {', '.join(unknown)}; an alert has webhook or command, and on")
    webhook, command = row.get("webhook"), row.get("command")
    if (webhook is None) == (command is None):
        raise UserError(f"{where}: give exactly one of webhook (a URL) or command")
    if webhook is not None and (not isinstance(webhook, str) or not re.match(r"^https?://[^\s]+$", webhook)):
        raise UserError(f"{where}: webhook must be an http(s) URL, not {str(webhook)[:80]!r}")
    if command is not None:
        if not isinstance(command, str) or not command.strip():
            raise UserError(f"{where}: command must be a command line")
        try:
            shlex.split(command)
        except ValueError as err:
            raise UserError(f"{where}: command {command[:80]!r}: {err}") from None
    on = row.get("on", list(ALERT_KINDS))
    if not isinstance(on, list) or not on or not all(k in ALERT_KINDS for k in on):
        raise UserError(f"{where}: on must be a list of {', '.join(ALERT_KINDS)}, not {str(on)[:80]!r}")
    idle = row.get("idle_minutes", DEFAULT_IDLE_MINUTES)
    if isinstance(idle, bool) or not isinstance(idle, (int, float)) or not 0 < idle <= 10_000:
        raise UserError(f"{where}: idle_minutes must be a number of minutes > 0, not {str(idle)[:80]!r}")
    return AlertTarget(webhook, command, tuple(on), float(idle))


def configured_targets(settings: Any = None) -> list[AlertTarget]:
    from gpuledger import settings as settings_module

    s = settings or settings_module.current()
    return [parse_target(dict(row), i) for i, row in enumerate(s.get("alerts") or ())]


def payload(kind: str, subject: str, text: str, data: dict[str, Any]) -> dict[str, Any]:
    """The JSON sent: Slack's `text` (any Slack-compatible receiver shows it) and the facts under `gpuledger`."""
    return {"text": f"gpuledger {kind}: {text}", "gpuledger": {"kind": kind, "subject": subject, **data}}


def _deliver(target: AlertTarget, body: dict[str, Any]) -> tuple[bool, str]:
    data = json.dumps(body, default=str).encode("utf-8")
    if target.webhook:
        req = urllib.request.Request(target.webhook, data=data, method="POST",
                                     headers={"Content-Type": "application/json", "User-Agent": "gpuledger"})
        try:
            with urllib.request.urlopen(req, timeout=TIMEOUT_S) as resp:  # noqa: S310 - the team's own URL
                return 200 <= resp.status < 300, f"HTTP {resp.status}"
        except Exception as err:  # noqa: BLE001 - recorded, never raised
            return False, f"{type(err).__name__}: {str(err)[:300]}"
    try:
        proc = subprocess.run([*shlex.split(target.command or ""), body["text"]], input=data, capture_output=True,
                              timeout=TIMEOUT_S, check=False)
        return proc.returncode == 0, f"exit {proc.returncode}"
    except (OSError, subprocess.SubprocessError) as err:
        return False, f"{type(err).__name__}: {str(err)[:300]}"


def send(kind: str, subject: str, text: str, data: dict[str, Any] | None = None, *,
         targets: list[AlertTarget] | None = None) -> int:
    """Sends the alert `kind` about `subject` to every target that wants it, once each (claimed in
    the warehouse first); returns how many were sent now."""
    if kind not in ALERT_KINDS:
        raise ValueError(f"unknown alert kind {kind!r}")
    wanted = [t for t in (configured_targets() if targets is None else targets) if kind in t.on]
    if not wanted:
        return 0
    from gpuledger.warehouse import Warehouse

    body = payload(kind, subject, text, data or {})
    sent = 0
    for t in wanted:
        key = f"{kind}:{subject}:{t.webhook or t.command}"
        with Warehouse.open() as wh:
            claimed = wh.claim_alert(alert_key=key[:1000], kind=kind, subject=subject, target=t.label, payload=body)
        if not claimed:
            continue
        ok, detail = _deliver(t, body)
        with contextlib.suppress(Exception), Warehouse.open() as wh:
            wh.alert_done(key[:1000], ok, detail)
        sent += ok
    return sent


def alert_idle_gpus(sweep_id: str, targets: list[AlertTarget] | None = None) -> int:
    """Alert `idle` once per run of the sweep whose GPUs its agent never saw busy (peak utilisation below
    `IDLE_MAX_UTIL_PCT`) for at least the target's `idle_minutes`; returns how many were sent. (The agent
    reports a run's peak utilisation with its record: an idle GPU is told when its run ends.)"""
    wanted = [t for t in (configured_targets() if targets is None else targets) if "idle" in t.on]
    if not wanted:
        return 0
    from gpuledger.warehouse import Warehouse

    sent = 0
    for t in wanted:
        with Warehouse.open(read_only=True) as wh:
            rows = wh.query_named("runs_idle_gpus", {"sweep_id": sweep_id, "min_wall_s": t.idle_minutes * 60.0,
                                                     "max_util_pct": IDLE_MAX_UTIL_PCT}).to_dicts()
        for r in rows:
            text = (f"run {r['run_id']} of sweep {sweep_id} held {r['gpus']} x {r['accelerator']} for "
                    f"{r['wall_s'] / 60:.1f} min (${float(r['cost_usd']):.2f}) and its agent never saw a GPU above "
                    f"{float(r['peak_gpu_util_pct']):.1f}% busy")
            sent += send("idle", f"{sweep_id}:{r['run_id']}", text, {"sweep_id": sweep_id, **r}, targets=[t])
    return sent
