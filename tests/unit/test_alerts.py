"""Alerts (gpuledger/runtime/alerts.py): a Slack-compatible JSON POST to a real local HTTP server and a command,
each alert sent once however often it is raised, a bad [[alerts]] row one line naming it."""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from helpers.warehouse_template import fresh_warehouse

from gpuledger.errors import UserError
from gpuledger.runtime.alerts import parse_target, send
from gpuledger.warehouse import Warehouse


@pytest.fixture(autouse=True)
def _migrated(_isolated_warehouse):
    fresh_warehouse(_isolated_warehouse)


@pytest.mark.slow  # over ~1 s (a whole report, replay, plan or warehouse): make test runs it, make test-fast does not
def test_each_alert_reaches_the_webhook_and_the_command_once(tmp_path):
    got: list[dict] = []

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            got.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    out = tmp_path / "cmd.jsonl"
    script = tmp_path / "cmd.py"
    script.write_text(f"import sys\nopen({str(out)!r}, 'a').write(sys.stdin.read() + '\\n')\n")
    targets = [parse_target({"webhook": f"http://127.0.0.1:{server.server_address[1]}/T000", "on": ["budget", "failed"]}, 0),
               parse_target({"command": f"{sys.executable} {script}", "on": ["failed"]}, 1)]
    try:
        assert send("budget", "team:2026-11-30:soft:s-1", "s-1 waits", {"sweep_id": "s-1"}, targets=targets) == 1
        assert send("failed", "s-2:refused", "s-2 refused", {"sweep_id": "s-2"}, targets=targets) == 2
        for _ in range(3):  # raised again (a retry, a second process): never sent again
            assert send("failed", "s-2:refused", "s-2 refused", {"sweep_id": "s-2"}, targets=targets) == 0
        assert send("over_estimate", "s-1:t:1", "past", {}, targets=targets) == 0  # nobody asked for it
    finally:
        server.shutdown()
    assert [b["gpuledger"]["kind"] for b in got] == ["budget", "failed"]
    assert got[0]["text"] == "gpuledger budget: s-1 waits" and got[0]["gpuledger"]["sweep_id"] == "s-1"
    assert [json.loads(line)["gpuledger"]["subject"] for line in out.read_text().splitlines()] == ["s-2:refused"]
    with Warehouse.open(read_only=True) as wh:
        assert wh.scalar("select count(*) from alerts_sent where ok") == 3


@pytest.mark.parametrize("row, words", [
    ({"on": ["failed"]}, "exactly one of webhook"),
    ({"webhook": "ftp://x", "on": ["failed"]}, "http"),
    ({"webhook": "http://x", "on": ["fire"]}, "on must be"),
])
def test_a_bad_alert_row_is_one_line(row, words):
    with pytest.raises(UserError, match=words):
        parse_target({**row, "_where": "gpuledger.toml"}, 0)


@pytest.mark.slow  # over ~1 s (a whole report, replay, plan or warehouse): make test runs it, make test-fast does not
def test_a_gpu_run_its_agent_never_saw_busy_is_alerted_idle_once(tmp_path):
    from helpers.record_fixtures import example_record

    from gpuledger.runtime.alerts import alert_idle_gpus

    with Warehouse.open() as wh:
        wh.register_sweep(sweep_id="idle-1", name="idle", project="p", owner="o", launcher="skypilot")
        wh.upsert_trials("idle-1", [{"trial_id": "aaaaaaaaaaaa", "index": 0, "params": {}},
                                    {"trial_id": "bbbbbbbbbbbb", "index": 1, "params": {}}])
        result = wh.ingest_records([
            example_record("run-idle", "aaaaaaaaaaaa", sweep_id="idle-1", wall_s=1200, launcher="skypilot", cloud="aws",
                           accelerator="A100", gpus=1, usd_per_hour=4.0, peak_gpu_util_pct=0.0),
            example_record("run-busy", "bbbbbbbbbbbb", sweep_id="idle-1", wall_s=1200, launcher="skypilot", cloud="aws",
                           accelerator="A100", gpus=1, usd_per_hour=4.0, peak_gpu_util_pct=87.0)])
        assert not result.rejected, result.rejected
    got: list[dict] = []
    out = tmp_path / "idle.jsonl"
    script = tmp_path / "cmd.py"
    script.write_text(f"import sys\nopen({str(out)!r}, 'a').write(sys.stdin.read() + '\\n')\n")
    targets = [parse_target({"command": f"{sys.executable} {script}", "on": ["idle"], "idle_minutes": 15}, 0)]
    assert alert_idle_gpus("idle-1", targets) == 1
    assert alert_idle_gpus("idle-1", targets) == 0  # once
    got = [json.loads(line) for line in out.read_text().splitlines()]
    assert [g["gpuledger"]["run_id"] for g in got] == ["run-idle"] and "never saw a GPU" in got[0]["text"]
    assert alert_idle_gpus("idle-1", [parse_target({"command": "true", "on": ["idle"], "idle_minutes": 30}, 0)]) == 0
