"""Team money end to end (docs/budgets.md): a weekly envelope with a soft threshold, sweeps by two owners (the
second refused before launch, with the numbers), one past the soft threshold that pauses its real Prefect flow
run until `gpuledger approve`, a long trial's spend visible while it runs, a local webhook receiving the
threshold and failure alerts once each, the envelope's ledger rows adding up to the measured spend, and
/metrics parsing as Prometheus text."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from helpers.ports import free_port
from helpers.sweep_specs import write_spec

from gpuledger.warehouse import Warehouse


class _Hook(BaseHTTPRequestHandler):
    received: list[dict] = []

    def do_POST(self):  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        type(self).received.append(json.loads(body))
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass


@pytest.fixture
def webhook():
    _Hook.received = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/T000", _Hook.received
    server.shutdown()


def _cli(args, cwd, env, timeout=600, **kw):
    return subprocess.run([sys.executable, "-m", "gpuledger.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout, **kw)


def _p90(spec: Path, capsys) -> float:
    """The plan's P90 cost, from `gpuledger plan --json` run in this process (its working directory and
    GPULEDGER_CONFIG are the sweeps'); the sweeps themselves are real `gpuledger sweep` processes."""
    from gpuledger.cli import main

    capsys.readouterr()
    code = main(["plan", str(spec), "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err[-2000:]
    plan = json.loads(out.out)
    return float(plan.get("total_cost_usd_p90") or plan["total_est_cost_usd"])


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_weekly_envelope_refuses_pauses_for_approval_accrues_and_alerts_once(tmp_path, _isolated_warehouse,
                                                                             prefect_api_url, webhook, monkeypatch,
                                                                             capsys):
    url, received = webhook
    monkeypatch.chdir(tmp_path)  # this process reads the sweeps' states (and plans) as the CLI does
    monkeypatch.setenv("GPULEDGER_CONFIG", str(tmp_path / "no-user-config.toml"))
    env = {**os.environ, "PREFECT_API_URL": prefect_api_url, "GPULEDGER_ACCRUE_INTERVAL_S": "0.5",
           "PYTHONUNBUFFERED": "1"}
    a = write_spec(tmp_path, "env-a", xs=(0.1,), usd_per_hour=36.0, max_parallel=1)
    b = write_spec(tmp_path, "env-b", xs=(0.1, 0.2), usd_per_hour=360.0, max_parallel=1)
    c = write_spec(tmp_path, "env-c", xs=(0.3,), sleep=12.0, usd_per_hour=36.0, max_parallel=1)
    pa, pb = (_p90(s, capsys) for s in (a, b))
    limit = 4 * pa  # a fits; b crosses it

    def config(soft: float) -> None:
        (tmp_path / "gpuledger.toml").write_text(
            f'[[budgets]]\nname = "tests-weekly"\nscope = "project:tests"\nwindow = "week"\nlimit_usd = {limit}\n'
            f'soft_usd = {soft}\n\n[[alerts]]\nwebhook = "{url}"\non = ["budget", "failed"]\n')

    config(soft=limit)
    first = _cli(["sweep", str(a)], tmp_path, {**env, "USER": "alice", "LOGNAME": "alice"})
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-3000:]
    with Warehouse.open(_isolated_warehouse, read_only=True) as wh:
        used = float(wh.scalar("select used_usd from v_budgets"))
    pc = _p90(c, capsys)
    assert pb > limit - used and used + pc < limit
    config(soft=used + pc / 2)  # the team lowers its soft threshold: c passes it, and still fits the limit

    refused = _cli(["sweep", str(b)], tmp_path, {**env, "USER": "bob", "LOGNAME": "bob"})
    assert refused.returncode == 3, refused.stdout[-2000:] + refused.stderr[-3000:]
    line = refused.stderr.strip().splitlines()[-1]
    for words in ("tests-weekly", "limit $", "spent $", "reserved $", "this plan $", "what would fit: $"):
        assert words in line, (words, line)
    assert "Traceback" not in refused.stderr

    paused = subprocess.Popen([sys.executable, "-m", "gpuledger.cli", "sweep", str(c)], cwd=tmp_path,
                              env={**env, "USER": "carol", "LOGNAME": "carol"}, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    try:
        _wait_for(lambda s: s["state"] == "awaiting_approval", "env-c", paused)
        shown = _cli(["status", "env-c", "--json"], tmp_path, env, timeout=120)
        state = json.loads(shown.stdout)["sweeps"][0]
        assert state["state"] == "awaiting_approval" and state["accrued_usd"] == 0
        assert "gpuledger approve env-c" in state["awaiting_approval"]["approve"]
        assert paused.poll() is None  # waiting, nothing launched
        approved = _cli(["approve", "env-c"], tmp_path, env, timeout=300)
        assert approved.returncode == 0, approved.stderr[-2000:]
        running = _wait_for(lambda s: s["running_trials"] >= 1 and s["running_accrued_usd"] > 0, "env-c", paused)
        assert running["state"] == "running" and running["accrued_usd"] > 0
        out, _ = paused.communicate(timeout=600)
    finally:
        if paused.poll() is None:
            paused.kill()
    assert paused.returncode == 0, out[-4000:]
    assert "waits for approval" in out

    with Warehouse.open(_isolated_warehouse, read_only=True) as wh:
        ledger = wh.query("select sweep_id, kind, owner, owner_claimed, spent_usd, reserved_usd from budget_ledger")
        runs = wh.query("select sweep_id, sum(cost_usd) as cost from runs group by sweep_id")
        budgets = wh.query("select * from v_budgets").to_dicts()
    spent = {r["sweep_id"]: 0.0 for r in runs.to_dicts()}
    for r in ledger.to_dicts():
        spent[r["sweep_id"]] = spent.get(r["sweep_id"], 0.0) + r["spent_usd"]
    assert spent == pytest.approx({r["sweep_id"]: r["cost"] for r in runs.to_dicts()})  # rows add up to the runs
    assert not any(r["sweep_id"].startswith("env-b") for r in ledger.to_dicts())  # refused: nothing written
    assert {r["owner"] for r in ledger.to_dicts()} == {"alice", "carol"}
    assert {r["owner_claimed"] for r in ledger.to_dicts()} == {"ci"}
    assert budgets[0]["reserved_usd"] == pytest.approx(0.0, abs=1e-9)
    assert budgets[0]["spent_usd"] == pytest.approx(sum(r["cost"] for r in runs.to_dicts()))

    kinds = sorted(body["gpuledger"]["kind"] for body in received)
    assert kinds == ["budget", "failed"], received  # the threshold once, the refusal once
    assert all(body["text"].startswith("gpuledger ") for body in received)

    from prometheus_client.parser import text_string_to_metric_families

    from gpuledger.runtime.metrics import serve_metrics

    server, _thread = serve_metrics(free_port())
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{server.server_port}/metrics", timeout=30).read().decode()
    finally:
        server.shutdown()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert families["gpuledger_warehouse_up"].samples[0].value == 1.0
    remaining = [s for s in families["gpuledger_envelope_remaining_usd"].samples if s.labels["budget"] == "tests-weekly"]
    assert remaining and remaining[0].value == pytest.approx(budgets[0]["remaining_usd"])


def _wait_for(ok, name: str, proc: subprocess.Popen, timeout_s: float = 400.0) -> dict:
    """Polls the sweep's state (gpuledger.runtime.sweep_states, what `status --json` prints) until `ok`."""
    from gpuledger.runtime.sweep_states import sweep_states

    end = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < end and proc.poll() is None:
        try:
            sweeps = [s for s in sweep_states(name) if s["name"] == name]
        except Exception:  # noqa: BLE001 - the sweep holds the file for a moment: ask again
            sweeps = []
        if sweeps:
            last = sweeps[0]
            if ok(last):
                return last
        time.sleep(0.3)
    out = proc.stdout.read()[-3000:] if proc.poll() is not None and proc.stdout else ""
    raise AssertionError(f"status of {name} never matched (sweep exit {proc.poll()}): last {last}\n{out}")
