"""SkyPilotLauncher against a fake at the SDK boundary: scripted job states, attempts, billing.

No `sky` import here: the launcher builds plain task dicts (`task_config`) so these tests run
everywhere, fast, and can never reach an API server. Billing is hand-computed from the literal
price table below (the real catalog prices of these rows, `gpuledger/catalog/offers.csv`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from gpuledger.agent.signing import signed_result_line
from gpuledger.launch.base import LaunchRequest
from gpuledger.launch.skypilot import (
    STATUS_MAP,
    SkyPilotLauncher,
    offers_catalog_price,
    parse_cluster_resources,
)
from gpuledger.launch.skypilot_logs import parse_metric_lines, parse_result_lines
from gpuledger.launch.skypilot_task import AGENT_RUN_PREFIX, task_config
from gpuledger.protocol import ENV_RESULT_KEY, RESULT_LINE_PREFIX
from gpuledger.record import parse_record

# (cloud, region, instance, spot) -> $/h ; on-demand by (cloud, region, instance)
PRICES = {
    ("aws", "us-east-1", "g5.xlarge", True): 0.4591,
    ("aws", "us-west-2", "g5.xlarge", True): 0.5326,
    ("aws", "us-east-1", "g5.xlarge", False): 1.006,
    ("aws", "us-west-2", "g5.xlarge", False): 1.006,
}


def table_price(cloud, region, instance, spot):
    if (cloud, region, instance, spot) not in PRICES:
        return None
    return PRICES[(cloud, region, instance, spot)], PRICES[(cloud, region, instance, False)], f"{cloud} {instance} {region} test"


@dataclass
class Clock:
    now: float = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


T0 = Clock().now


@dataclass
class FakeSky:
    """Plays one scripted list of queue records per launched job; records every call.

    A script step is a dict of queue fields plus `t` (seconds after T0, when the poll happens).
    After `cancel`, the job follows `on_cancel` instead.
    """

    clock: Clock
    scripts: list[list[dict]]
    logs: list[str] = field(default_factory=list)
    on_cancel: list[dict] = field(default_factory=list)
    calls: list[tuple] = field(default_factory=list)
    keys: dict[int, str | None] = field(default_factory=dict)
    _steps: dict[int, list[dict]] = field(default_factory=dict)

    def launch(self, task, name):
        job_id = len(self._steps) + 1
        self.calls.append(("launch", task, name))
        self._steps[job_id] = list(self.scripts[job_id - 1])
        # the job's agent gets the task's secret as SkyPilot sets it: an environment variable
        self.keys[job_id] = (task.get("secrets") or {}).get(ENV_RESULT_KEY)
        return job_id

    def queue(self, job_ids=None):
        self.calls.append(("queue", list(job_ids or [])))
        out = []
        for job_id in job_ids or list(self._steps):
            steps = self._steps[job_id]
            step = steps.pop(0) if len(steps) > 1 else steps[0]
            self.clock.now = T0 + step.get("t", 0)
            rec = {k: (T0 + v if k in ("start_at", "end_at", "last_recovered_at", "submitted_at") else v)
                   for k, v in step.items() if k != "t"}
            out.append({"job_id": job_id, **rec})
        return out

    def tail_logs(self, job_id, tail=None):
        self.calls.append(("tail_logs", job_id) if tail is None else ("tail_logs", job_id, tail))
        text = self.logs[job_id - 1] if job_id - 1 < len(self.logs) else ""
        text = agent_signs(text, self.keys.get(job_id))
        return text if tail is None else "".join(text.splitlines(keepends=True)[-tail:])

    def cancel(self, job_id):
        self.calls.append(("cancel", job_id))
        self._steps[job_id] = list(self.on_cancel)

    # pools (`SkySDK.pool_*`): none here; tests/unit/test_skypilot_pool.py plays them
    def pool_status(self, name):
        self.calls.append(("pool_status", name))
        return []

    def pool_apply(self, task, name, workers):
        raise AssertionError("no pool was planned")

    def pool_down(self, name):
        raise AssertionError("no pool exists")


def request(**overrides) -> LaunchRequest:
    base = dict(
        sweep_id="llama3-8b-lora-abcdef12", sweep_name="llama3-8b-lora", trial_id="0123456789ab",
        params={"lora_r": 16, "learning_rate": 0.0001}, run="python trainers/peft_lora.py --lora-r 16",
        setup="pip install -r trainers/requirements.txt", workdir=Path("."),
        accelerator="A10G", gpus=1, cloud="aws", region="us-east-1", instance_type="g5.xlarge", spot=True,
        usd_per_hour=0.4591, on_demand_usd_per_hour=1.006, price_source="catalog",
    )
    base.update(overrides)
    return LaunchRequest(**base)


#: Ends a `result_line` the job's agent printed: the fake signs it with the job's key as the agent does.
AGENT_SIGNS = "<signed by the job's agent>"


def agent_signs(text: str, key: str | None) -> str:
    """Returns `text` with each agent line (`AGENT_SIGNS`) signed as the real agent signs it
    (`signed_result_line` with the key the launcher put in the task's secrets); no key: unsigned."""
    def sign(match: re.Match) -> str:
        return signed_result_line(match.group(1), key.encode() if key else None)

    return re.sub(re.escape(RESULT_LINE_PREFIX) + r"(\{.*\})" + re.escape(AGENT_SIGNS), sign, text)


def result_line(started: float, ended: float, status="succeeded", exit_code=0, signed=True, **extra) -> str:
    """A result line as the job's log holds it; `signed=False`: a line printed by something else."""
    from datetime import UTC, datetime

    rec = {
        "schema": "gpuledger.result/1", "run_id": "agent-run", "trial_id": "0123456789ab", "attempt": 1,
        "launcher": "skypilot", "started_at": datetime.fromtimestamp(T0 + started, UTC).isoformat(),
        "ended_at": datetime.fromtimestamp(T0 + ended, UTC).isoformat(), "wall_s": ended - started,
        "exit_code": exit_code, "status": status, "peak_rss_gib": 3.5, "peak_gpu_mem_gib": 17.25,
        "final_metrics": {"eval_loss": 1.07}, **extra,
    }
    return "(task, pid=4242) GPULEDGER_RESULT " + json.dumps(rec) + (AGENT_SIGNS if signed else "")


def run_to_end(launcher, handle, max_polls=50):
    seen = []
    for _ in range(max_polls):
        status = launcher.poll(handle)
        seen.append(status)
        if status in ("succeeded", "failed", "cancelled"):
            return seen
    raise AssertionError(f"never terminal: {seen}")


def launcher_for(fake, clock, **kw):
    return SkyPilotLauncher(sdk=fake, catalog_price=kw.pop("catalog_price", table_price), task_builder=task_config,
                            clock=clock, poll_interval_s=0, **kw)


PREEMPTED_THEN_SUCCEEDED = [
    {"t": 0, "status": "PENDING", "recovery_count": 0},
    {"t": 60, "status": "STARTING", "recovery_count": 0},
    {"t": 300, "status": "RUNNING", "start_at": 300, "recovery_count": 0, "cloud": "AWS", "region": "us-east-1",
     "cluster_resources_full": "[spot](gpus=A10G:1, cpus=4, mem=16, g5.xlarge, disk=256)"},
    {"t": 2100, "status": "RUNNING", "start_at": 300, "recovery_count": 0, "cloud": "AWS", "region": "us-east-1",
     "cluster_resources_full": "[spot](gpus=A10G:1, cpus=4, mem=16, g5.xlarge, disk=256)"},
    {"t": 3900, "status": "RECOVERING", "start_at": 300, "recovery_count": 0, "cloud": "AWS", "region": "us-east-1"},
    {"t": 4500, "status": "RUNNING", "start_at": 300, "last_recovered_at": 4400, "recovery_count": 1,
     "cloud": "AWS", "region": "us-west-2",
     "cluster_resources_full": "[spot](gpus=A10G:1, cpus=4, mem=16, g5.xlarge, disk=256)"},
    {"t": 8100, "status": "SUCCEEDED", "start_at": 300, "last_recovered_at": 4400, "end_at": 8000,
     "recovery_count": 1, "cloud": "AWS", "region": "us-west-2"},
]


def test_preempted_then_succeeded_gives_two_attempts_billed_per_attempt():
    clock = Clock()
    logs = "setup...\nGPULEDGER_METRIC {}\n" + result_line(4450, 7990, final_metrics={"eval_loss": 1.07}) + "\n"
    fake = FakeSky(clock, [PREEMPTED_THEN_SUCCEEDED], logs=[logs])
    launcher = launcher_for(fake, clock)
    handle = launcher.submit(request())
    seen = run_to_end(launcher, handle)
    assert seen == ["pending", "pending", "running", "running", "recovering", "running", "succeeded"]
    records = [r.to_json() for r in launcher.collect(handle)]
    assert [r["attempt"] for r in records] == [1, 2]
    assert [r["status"] for r in records] == ["preempted", "succeeded"]
    assert [r["preemptions"] for r in records] == [1, 0]
    assert [r["recoveries"] for r in records] == [0, 1]
    assert sum(r["recoveries"] for r in records) == handle.recovery_count == 1
    assert [r["region"] for r in records] == ["us-east-1", "us-west-2"]
    assert all(r["cloud"] == "aws" and r["instance_type"] == "g5.xlarge" and r["spot"] for r in records)
    # attempt 1: RUNNING seen at 300 (start_at) until RECOVERING seen at 3900 -> exactly 1 h
    # attempt 2: last_recovered_at 4400 until end_at 8000 -> exactly 1 h
    b1, b2 = records[0]["billing"][0], records[1]["billing"][0]
    assert b1["hours"] == pytest.approx(1.0) and b2["hours"] == pytest.approx(1.0)
    assert b1["usd_per_hour"] == 0.4591 and b2["usd_per_hour"] == 0.5326
    assert b1["cost_usd"] == pytest.approx(0.4591) and b2["cost_usd"] == pytest.approx(0.5326)
    total = sum(r["billing"][0]["cost_usd"] for r in records)
    on_demand = sum(r["billing"][0]["hours"] * r["billing"][0]["on_demand_usd_per_hour"] for r in records)
    assert total == pytest.approx(0.9917)
    assert on_demand - total == pytest.approx(2 * 1.006 - 0.9917)  # realised savings, positive
    assert on_demand - total > 0
    assert all(b["source"] == "catalog" and b["spot"] for r in records for b in r["billing"])
    # the agent's measurements survive on the attempt they belong to
    assert records[1]["final_metrics"] == {"eval_loss": 1.07}
    assert records[1]["peak_gpu_mem_gib"] == 17.25
    assert records[0]["final_metrics"] == {}
    assert records[0]["exit_code"] is None
    for r in records:
        parsed = parse_record(r)
        assert parsed.launcher == "skypilot" and parsed.accelerator == "A10G" and parsed.gpus == 1
    assert len({r["run_id"] for r in records}) == 2
    kinds = [c[0] for c in fake.calls if c[0] != "pool_status"]  # pool_status: a leftover pool of the sweep?
    assert kinds[0] == "launch" and kinds[-1] == "tail_logs" and "cancel" not in kinds


def test_submit_sends_the_planned_task_once():
    clock = Clock()
    fake = FakeSky(clock, [PREEMPTED_THEN_SUCCEEDED])
    launcher = launcher_for(fake, clock)
    launcher.submit(request())
    (_, task, name), = [c for c in fake.calls if c[0] == "launch"]
    assert name == "gl-llama3-8b-lora-0123456789ab"
    res = task["resources"]
    assert res["accelerators"] == {"A10G": 1} and res["use_spot"] is True
    assert res["infra"] == "aws/us-east-1" and res["instance_type"] == "g5.xlarge"
    assert res["job_recovery"] == {"strategy": "FAILOVER", "max_restarts_on_errors": 1}
    assert task["envs"]["GPULEDGER_PARAM_LORA_R"] == "16"
    assert task["envs"]["GPULEDGER_TRIAL_ID"] == "0123456789ab"
    assert task["run"].startswith(AGENT_RUN_PREFIX + "python3 -m gpuledger.agent --result /tmp/gpuledger-result.json -- bash -c ")
    # the job gets this installed gpuledger (agent and track), not whatever the synced workdir holds
    (mount, source), = task["file_mounts"].items()
    assert mount == "~/.gpuledger/lib/gpuledger" and (Path(source) / "agent" / "__main__.py").is_file()
    assert (Path(source) / "track.py").is_file()


def test_failed_job_without_result_line_is_failed_with_reason_and_billed_on_demand():
    clock = Clock()
    script = [
        {"t": 0, "status": "STARTING"},
        {"t": 100, "status": "RUNNING", "start_at": 100, "cloud": "AWS", "region": "us-east-1",
         "cluster_resources": "(gpus=A10G:1, g5.xlarge, ...)"},
        {"t": 1000, "status": "FAILED", "start_at": 100, "end_at": 1000, "failure_reason": "exit code 137"},
    ]
    fake = FakeSky(clock, [script], logs=["Traceback...\nKilled\n"])
    launcher = launcher_for(fake, clock)
    handle = launcher.submit(request(spot=False, usd_per_hour=1.006))
    assert run_to_end(launcher, handle)[-1] == "failed"
    (rec,) = [r.to_json() for r in launcher.collect(handle)]
    assert rec["status"] == "failed" and "exit code 137" in rec["reason"]
    assert rec["preemptions"] == 0 and rec["recoveries"] == 0 and rec["spot"] is False
    line = rec["billing"][0]
    assert line["hours"] == pytest.approx(0.25)
    assert line["cost_usd"] == pytest.approx(0.2515) and line["on_demand_usd_per_hour"] == 1.006
    parse_record(rec)


def test_failed_job_with_result_line_keeps_the_agents_exit_code():
    clock = Clock()
    script = [
        {"t": 0, "status": "RUNNING", "start_at": 0, "cloud": "AWS", "region": "us-east-1"},
        {"t": 720, "status": "FAILED", "start_at": 0, "end_at": 720},
    ]
    logs = result_line(30, 700, status="oom", exit_code=1, reason="CUDA out of memory",
                       stderr_tail="torch.OutOfMemoryError")
    fake = FakeSky(clock, [script], logs=[logs])
    launcher = launcher_for(fake, clock)
    handle = launcher.submit(request())
    run_to_end(launcher, handle)
    (rec,) = [r.to_json() for r in launcher.collect(handle)]
    assert rec["status"] == "oom" and rec["exit_code"] == 1 and rec["stderr_tail"] == "torch.OutOfMemoryError"
    assert rec["billing"][0]["hours"] == pytest.approx(0.2)
    assert rec["billing"][0]["cost_usd"] == pytest.approx(0.2 * 0.4591)
    parse_record(rec)


def test_cancel_while_running_ends_cancelled_and_bills_the_time_used():
    clock = Clock()
    script = [{"t": 0, "status": "PENDING"}, {"t": 600, "status": "RUNNING", "start_at": 600}]
    fake = FakeSky(clock, [script], on_cancel=[
        {"t": 2400, "status": "CANCELLING", "start_at": 600},
        {"t": 2500, "status": "CANCELLED", "start_at": 600, "end_at": 2400},
    ])
    launcher = launcher_for(fake, clock)
    handle = launcher.submit(request())
    assert launcher.poll(handle) == "pending"
    assert launcher.poll(handle) == "running"
    launcher.cancel(handle)
    launcher.cancel(handle)  # idempotent
    assert [c for c in fake.calls if c[0] == "cancel"] == [("cancel", 1)]
    assert run_to_end(launcher, handle)[-1] == "cancelled"
    (rec,) = [r.to_json() for r in launcher.collect(handle)]
    assert rec["status"] == "cancelled" and rec["billing"][0]["hours"] == pytest.approx(0.5)
    launcher.cancel(handle)  # after the end: nothing sent
    assert len([c for c in fake.calls if c[0] == "cancel"]) == 1
    parse_record(rec)


def test_cancelled_while_pending_costs_nothing():
    clock = Clock()
    fake = FakeSky(clock, [[{"t": 0, "status": "PENDING"}, {"t": 50, "status": "CANCELLED", "end_at": 50}]])
    launcher = launcher_for(fake, clock)
    handle = launcher.submit(request())
    run_to_end(launcher, handle)
    (rec,) = [r.to_json() for r in launcher.collect(handle)]
    assert rec["status"] == "cancelled" and rec["wall_s"] == 0 and rec["billing"][0]["cost_usd"] == 0
    parse_record(rec)


def test_recovery_between_two_polls_is_split_at_skypilots_stamp():
    clock = Clock()
    script = [
        {"t": 0, "status": "RUNNING", "start_at": 0, "recovery_count": 0},
        {"t": 5400, "status": "RUNNING", "start_at": 0, "recovery_count": 1, "last_recovered_at": 3600},
        {"t": 7300, "status": "SUCCEEDED", "start_at": 0, "recovery_count": 1, "last_recovered_at": 3600,
         "end_at": 7200},
    ]
    fake = FakeSky(clock, [script], logs=[result_line(3700, 7100)])
    launcher = launcher_for(fake, clock)
    handle = launcher.submit(request())
    run_to_end(launcher, handle)
    records = [r.to_json() for r in launcher.collect(handle)]
    assert [r["status"] for r in records] == ["preempted", "succeeded"]
    assert [r["billing"][0]["hours"] for r in records] == [pytest.approx(1.0), pytest.approx(1.0)]


def test_recoveries_unseen_by_any_poll_are_counted_on_the_last_attempt():
    clock = Clock()
    script = [
        {"t": 0, "status": "STARTING"},
        {"t": 3600, "status": "SUCCEEDED", "start_at": 0, "end_at": 3600, "recovery_count": 2},
    ]
    fake = FakeSky(clock, [script], logs=[result_line(10, 3590)])
    launcher = launcher_for(fake, clock)
    handle = launcher.submit(request())
    run_to_end(launcher, handle)
    (rec,) = [r.to_json() for r in launcher.collect(handle)]
    assert rec["status"] == "succeeded" and rec["recoveries"] == 2 and rec["preemptions"] == 2
    assert rec["billing"][0]["hours"] == pytest.approx(1.0)
    parse_record(rec)


def test_a_restart_on_the_trials_own_error_is_failed_not_preempted():
    clock = Clock()
    script = [
        {"t": 0, "status": "RUNNING", "start_at": 0},
        {"t": 600, "status": "RECOVERING", "start_at": 0},
        {"t": 900, "status": "RUNNING", "start_at": 0, "recovery_count": 1, "last_recovered_at": 900},
        {"t": 1800, "status": "SUCCEEDED", "start_at": 0, "end_at": 1800, "recovery_count": 1},
    ]
    logs = "\n".join([result_line(20, 590, status="failed", exit_code=1, reason="exit code 1"),
                      result_line(920, 1790)])
    fake = FakeSky(clock, [script], logs=[logs])
    launcher = launcher_for(fake, clock)
    handle = launcher.submit(request())
    run_to_end(launcher, handle)
    records = [r.to_json() for r in launcher.collect(handle)]
    assert [r["status"] for r in records] == ["failed", "succeeded"]
    assert records[0]["preemptions"] == 0 and "restarted" in records[0]["reason"]
    for r in records:
        parse_record(r)


def test_succeeded_without_result_line_is_still_recorded():
    clock = Clock()
    script = [{"t": 0, "status": "RUNNING", "start_at": 0},
              {"t": 1800, "status": "SUCCEEDED", "start_at": 0, "end_at": 1800}]
    fake = FakeSky(clock, [script], logs=[""])
    launcher = launcher_for(fake, clock)
    handle = launcher.submit(request())
    run_to_end(launcher, handle)
    (rec,) = [r.to_json() for r in launcher.collect(handle)]
    assert rec["status"] == "succeeded" and "no GPULEDGER_RESULT" in rec["reason"]
    parse_record(rec)


def test_price_falls_back_to_the_plan_when_the_catalog_has_no_row():
    clock = Clock()
    script = [{"t": 0, "status": "RUNNING", "start_at": 0, "cloud": "lambda", "region": "us-east-1"},
              {"t": 3600, "status": "SUCCEEDED", "start_at": 0, "end_at": 3600}]
    fake = FakeSky(clock, [script], logs=[result_line(5, 3500)])
    launcher = launcher_for(fake, clock)
    handle = launcher.submit(request(cloud="lambda", instance_type="gpu_1x_a10", spot=False,
                                     usd_per_hour=0.75, on_demand_usd_per_hour=0.75,
                                     price_description="lambda gpu_1x_a10 plan"))
    run_to_end(launcher, handle)
    (rec,) = [r.to_json() for r in launcher.collect(handle)]
    assert rec["billing"][0]["usd_per_hour"] == 0.75 and rec["billing"][0]["description"] == "lambda gpu_1x_a10 plan"


def test_default_price_comes_from_the_bundled_offers():
    usd, od, desc = offers_catalog_price("aws", "us-east-1", "g5.xlarge", True)
    assert (usd, od) == (0.4591, 1.006) and "spot" in desc
    usd, od, _ = offers_catalog_price("aws", "us-east-1", "g5.xlarge", False)
    assert usd == od == 1.006
    assert offers_catalog_price("aws", "us-east-1", "no-such.type", True) is None


def test_status_map_covers_every_protocol_status():
    assert set(STATUS_MAP.values()) == {"pending", "running", "recovering", "succeeded", "failed", "cancelled"}


def test_parse_helpers():
    assert parse_cluster_resources("1x[spot](gpus=H100:8, cpus=192, mem=2048, p5.48xlarge, disk=256)") == (
        "p5.48xlarge", True)
    assert parse_cluster_resources("(gpus=L4:1, g2-standard-4, ...)") == ("g2-standard-4", False)
    assert parse_cluster_resources(None) == (None, None)
    text = "noise\nGPULEDGER_RESULT {bad json\n(task, pid=1) GPULEDGER_RESULT {\"a\": 1}\n"
    assert parse_result_lines(text) == [{"a": 1}]
    coloured = '\x1b[36m(task, pid=1)\x1b[0m GPULEDGER_METRIC {"name": "eval_loss", "value": 1.5, "step": 4}\x1b[0m\r\n'
    assert parse_metric_lines(coloured) == [{"name": "eval_loss", "value": 1.5, "step": 4}]
    assert parse_metric_lines('GPULEDGER_METRIC [{"name": "a", "value": 1}, 3]\n') == [{"name": "a", "value": 1}]


def metric_line(step, value, name="eval_loss") -> str:
    return "(task, pid=4242) GPULEDGER_METRIC " + json.dumps({"name": name, "value": value, "step": step,
                                                              "time": T0 + step})


def test_progress_reads_the_echoed_objective_from_the_logs_with_a_step_watermark():
    clock = Clock()
    script = [{"t": 0, "status": "PENDING"}, {"t": 60, "status": "RUNNING", "start_at": 60},
              {"t": 120, "status": "RUNNING", "start_at": 60}]
    fake = FakeSky(clock, [script, script], logs=[""])
    launcher = launcher_for(fake, clock, progress_tail_lines=50)
    handle = launcher.submit(request(echo_metrics=("eval_loss",)))
    launcher.poll(handle)
    assert launcher.progress(handle, 0) == ([], 0)  # pending: no API call at all
    assert not [c for c in fake.calls if c[0] == "tail_logs"]
    launcher.poll(handle)
    fake.logs[0] = "\n".join(["setup ...", metric_line(1, 2.5), metric_line(1, 2.5, "train_loss"),
                              "GPULEDGER_METRIC {bad json", metric_line(2, 2.0)]) + "\n"
    points, offset = launcher.progress(handle, 0)
    assert [(p["name"], p["step"], p["value"]) for p in points] == [("eval_loss", 1, 2.5), ("eval_loss", 2, 2.0)]
    assert offset == 3
    assert fake.calls[-1] == ("tail_logs", 1, 50)  # only the log's last lines
    assert launcher.progress(handle, offset) == ([], 3)  # the same log read again: nothing new
    fake.logs[0] += metric_line(2, 1.9) + "\n" + metric_line(3, 1.5) + "\n"  # step 2 twice: read once
    points, offset = launcher.progress(handle, offset)
    assert [(p["step"], p["value"]) for p in points] == [(3, 1.5)] and offset == 4
    # a sweep that does not prune echoes nothing: nothing is read
    other = launcher.submit(request(trial_id="feedfacecafe"))
    assert launcher.progress(other, 0) == ([], 0)


def test_progress_after_a_recovery_resumes_at_the_step_the_last_attempt_reached():
    clock = Clock()
    script = [{"t": 0, "status": "RUNNING", "start_at": 0},
              {"t": 600, "status": "RECOVERING", "start_at": 0},
              {"t": 900, "status": "RUNNING", "start_at": 0, "recovery_count": 1, "last_recovered_at": 900},
              {"t": 1800, "status": "RUNNING", "start_at": 0, "recovery_count": 1, "last_recovered_at": 900}]
    attempt1 = "".join(metric_line(s, 3.0 - 0.1 * s) + "\n" for s in (1, 2, 3))
    fake = FakeSky(clock, [script], logs=[attempt1])
    launcher = launcher_for(fake, clock)
    handle = launcher.submit(request(echo_metrics=("eval_loss",)))
    launcher.poll(handle)
    points, offset = launcher.progress(handle, 0)
    assert [p["step"] for p in points] == [1, 2, 3] and offset == 4
    assert launcher.poll(handle) == "recovering"
    calls = len(fake.calls)
    assert launcher.progress(handle, offset) == ([], 4) and len(fake.calls) == calls  # recovering: not read
    # the new cluster's log starts over: the restarted trainer logs steps 1, 2 again (not counted twice)
    fake.logs[0] = "".join(metric_line(s, 3.0 - 0.1 * s) + "\n" for s in (1, 2))
    launcher.poll(handle)
    assert launcher.progress(handle, offset) == ([], 4)
    fake.logs[0] += "".join(metric_line(s, 3.0 - 0.1 * s) + "\n" for s in (3, 4, 5))
    launcher.poll(handle)
    points, offset = launcher.progress(handle, offset)
    assert [p["step"] for p in points] == [4, 5] and offset == 6
    # a log that holds both attempts (a finished job's copy) gives the same answer
    fake.logs[0] = attempt1 + "".join(metric_line(s, 3.0 - 0.1 * s) + "\n" for s in range(1, 6))
    assert [p["step"] for p in launcher.progress(handle, 0)[0]] == [1, 2, 3, 4, 5]


def test_progress_at_the_end_reads_the_whole_log_once_and_collect_reuses_it():
    clock = Clock()
    script = [{"t": 0, "status": "RUNNING", "start_at": 0},
              {"t": 700, "status": "SUCCEEDED", "start_at": 0, "end_at": 700}]
    logs = metric_line(1, 2.0) + "\n" + metric_line(2, 1.5) + "\n" + result_line(5, 690) + "\n"
    fake = FakeSky(clock, [script], logs=[logs])
    launcher = launcher_for(fake, clock, progress_tail_lines=1)
    handle = launcher.submit(request(echo_metrics=("eval_loss",)))
    run_to_end(launcher, handle)
    points, offset = launcher.progress(handle, 2)
    assert [(p["step"], p["value"]) for p in points] == [(2, 1.5)] and offset == 3
    (rec,) = launcher.collect(handle)
    assert rec.status == "succeeded" and rec.final_metrics == {"eval_loss": 1.07}
    assert [c for c in fake.calls if c[0] == "tail_logs"] == [("tail_logs", 1)]  # one read, whole log


def test_progress_when_the_logs_cannot_be_read_gives_nothing_new():
    clock = Clock()

    class Broken(FakeSky):
        def tail_logs(self, job_id, tail=None):
            raise ConnectionError("API server unreachable")

    fake = Broken(clock, [[{"t": 0, "status": "RUNNING", "start_at": 0}]])
    launcher = launcher_for(fake, clock)
    handle = launcher.submit(request(echo_metrics=("eval_loss",)))
    launcher.poll(handle)
    assert launcher.progress(handle, 7) == ([], 7)


def test_the_task_echoes_the_objective_only_when_asked():
    assert "--echo-metrics" not in task_config(request())["run"]
    run = task_config(request(echo_metrics=("eval_loss",)))["run"]
    assert run.startswith(AGENT_RUN_PREFIX + "python3 -m gpuledger.agent --result /tmp/gpuledger-result.json --echo-metrics eval_loss -- ")


def test_the_watch_reads_skypilot_logs_every_progress_interval_not_every_poll(tmp_path):
    from gpuledger.launch.local import LocalLauncher
    from gpuledger.runtime.launching import WATCH_INTERVAL_S, watch_interval_s

    assert watch_interval_s(SkyPilotLauncher(sdk=object())) == 60.0
    assert watch_interval_s(SkyPilotLauncher(sdk=object(), progress_interval_s=5)) == 5.0
    assert watch_interval_s(LocalLauncher(landing_dir=tmp_path)) == WATCH_INTERVAL_S
