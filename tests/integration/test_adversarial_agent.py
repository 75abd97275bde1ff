"""Adversarial trainer output against the real agent (issue 31): valid JSON numbers the agent could
not hold (`1e999`, `Infinity`, a 400-digit number), hostile metric names, a line longer than memory
should hold, and a result file that cannot be written. Each is reproduced (the trial really prints
it) beside a positive control in the same run: the good points are still measured."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from gpuledger.protocol import RESULT_LINE_PREFIX
from gpuledger.record import parse_record

REPO = Path(__file__).resolve().parents[2]


def _agent(tmp_path: Path, code: str, *args: str, timeout: float = 60, preexec=None):
    result = tmp_path / "result.json"
    cmd = [sys.executable, "-m", "gpuledger.agent", "--result", str(result), "--trial-id", "t1", "--run-id", "r1",
           *args, "--", sys.executable, "-c", textwrap.dedent(code)]
    started = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, timeout=timeout, cwd=tmp_path, preexec_fn=preexec,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    return proc, result, time.monotonic() - started


def test_an_infinite_step_does_not_kill_the_timeout(tmp_path):
    proc, result, took = _agent(tmp_path, """
        import os, time
        print('GPULEDGER_METRIC {"name": "loss", "value": 1.0, "step": 1e999}', flush=True)
        with open(os.environ["GPULEDGER_METRICS"], "a") as fh:  # the file the sampler reads
            fh.write('{"name": "loss", "value": 2.0, "step": 1e999}\\n{"name": "loss", "value": 0.5, "step": 3}\\n')
        time.sleep(25)
        """, "--timeout-s", "3", "--kill-grace-s", "1")
    record = parse_record(json.loads(result.read_text()))
    assert took < 15 and record.status == "failed" and record.reason == "timeout after 3 s", record.stderr_tail
    # the points are kept without their impossible step; the good one whole (positive control)
    assert [(p.step, p.value) for p in record.metrics] == [(None, 1.0), (None, 2.0), (3, 0.5)]


def test_infinite_times_huge_numbers_and_bad_names_leave_a_record(tmp_path):
    proc, result, _ = _agent(tmp_path, """
        import json, os
        big = "9" * 400
        lines = ['{"name": "a", "value": 1.0, "t_s": Infinity}',
                 '{"name": "b", "value": ' + big + '}',
                 '{"name": "c", "value": NaN}',
                 '{"name": "bad\\\\nname", "value": 3.0}',
                 '{"name": "' + "n" * 200_000 + '", "value": 4.0}',
                 '{"name": "d", "value": 2.0, "step": ' + big + '}',
                 '{"name": "e", "value": 5.0, "step": 7}']
        with open(os.environ["GPULEDGER_METRICS"], "a") as fh:
            fh.write("\\n".join(lines) + "\\n")
        print("GPULEDGER_METRIC " + lines[1], flush=True)   # kills a naive stdout pump
        print("after the big number", flush=True)          # the pump still passes output through
        """)
    assert proc.returncode == 0 and b"after the big number" in proc.stdout
    record = parse_record(json.loads(result.read_text()))
    assert record.status == "succeeded"
    kept = {p.name: (p.value, p.step) for p in record.metrics}
    assert kept == {"a": (1.0, None), "d": (2.0, None), "e": (5.0, 7)}
    assert all(p.t_s is not None and p.t_s < 3600 for p in record.metrics)


def test_a_line_longer_than_memory_should_hold_is_passed_through_unparsed(tmp_path):
    # 300 MB on one stdout line, then a metric: the agent must not hold the line (500 MiB data limit)
    def limit():
        resource.setrlimit(resource.RLIMIT_DATA, (500 * 2**20, 500 * 2**20))

    proc, result, _ = _agent(tmp_path, """
        import sys
        chunk = b"x" * (1 << 20)
        out = sys.stdout.buffer
        out.write(b"GPULEDGER_METRIC ")
        for _ in range(300):
            out.write(chunk)
        out.write(b"\\n")
        out.write(b'GPULEDGER_METRIC {"name": "eval_loss", "value": 0.25}\\n')
        out.flush()
        """, preexec=limit, timeout=120)
    record = parse_record(json.loads(result.read_text()))
    assert record.status == "succeeded" and record.final_metrics == {"eval_loss": 0.25}
    assert len(proc.stdout) > 300 * 2**20  # passed through whole


def test_a_result_file_that_cannot_be_written_is_said_and_the_record_is_on_stdout(tmp_path):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "result.json").mkdir()  # a directory where the file should go: the write fails
    cmd = [sys.executable, "-m", "gpuledger.agent", "--result", str(tmp_path / "full" / "result.json"),
           "--trial-id", "t1", "--run-id", "r1", "--", sys.executable, "-c", "print('hi')"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "could not write the result record" in proc.stderr
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith(RESULT_LINE_PREFIX)]
    assert parse_record(json.loads(line[0][len(RESULT_LINE_PREFIX):])).status == "succeeded"


def test_a_double_forked_daemon_ends_with_its_trial(tmp_path):
    pid_file = tmp_path / "daemon.pid"
    proc, result, took = _agent(tmp_path, f"""
        import os, sys, time
        if os.fork() == 0:          # child: leave the group and the session, fork again, exit
            os.setsid()
            if os.fork() == 0:      # the daemon: orphaned, in its own session
                os.close(1); os.close(2)
                open({str(pid_file)!r}, "w").write(str(os.getpid()))
                time.sleep(120)
            os._exit(0)
        while not os.path.exists({str(pid_file)!r}) or not open({str(pid_file)!r}).read():
            time.sleep(0.05)
        print("main done", flush=True)
        """, timeout=60)
    record = parse_record(json.loads(result.read_text()))
    daemon = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _alive(daemon):
        time.sleep(0.1)
    assert not _alive(daemon), "the daemon outlived its trial"
    assert record.status == "succeeded" and b"main done" in proc.stdout and took < 30  # positive control


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_a_trial_cannot_print_the_agents_result_line_nor_read_its_key(tmp_path):
    # the SkyPilot path: the job's log (stdout + stderr) is where the launcher reads the record, and the
    # key comes to the agent as $GPULEDGER_RESULT_KEY (a task secret)
    from gpuledger.launch.skypilot_logs import signed_result_lines

    key = "a1b2c3d4" * 8
    result = tmp_path / "result.json"
    code = textwrap.dedent("""
        import os, sys
        forged = 'GPULEDGER_RESULT {"run_id": "r1", "status": "succeeded", "gpus": 0, "final_metrics": {"eval_loss": -1e9}}'
        print(forged, flush=True)                                  # at a line start
        print("(task, pid=1) " + forged, file=sys.stderr, flush=True)  # on stderr, after SkyPilot's prefix
        sys.stdout.write("10%\\r" + forged[:9]); sys.stdout.flush()  # split across two writes, after a \\r
        sys.stdout.write(forged[9:] + "\\n"); sys.stdout.flush()
        seen = os.environ.get("GPULEDGER_RESULT_KEY", "")
        with open(f"/proc/{os.getppid()}/environ", "rb") as fh:      # the agent's environment block
            seen += fh.read().decode("utf-8", "replace")
        print("key seen: " + str("a1b2c3d4" * 8 in seen), flush=True)
        print('GPULEDGER_METRIC {"name": "eval_loss", "value": 1.25}', flush=True)
        """)
    cmd = [sys.executable, "-m", "gpuledger.agent", "--result", str(result), "--trial-id", "t1", "--run-id", "r1",
           "--", sys.executable, "-c", code]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO), "GPULEDGER_RESULT_KEY": key})
    assert proc.returncode == 0, proc.stderr
    assert "key seen: False\n" in proc.stdout and "key seen: True" not in proc.stdout
    signed, unsigned = signed_result_lines(proc.stdout + proc.stderr, key.encode())
    assert unsigned == []  # every line the trial printed was neutralised
    (record,) = signed  # positive control: the agent's own line, signed, with what it measured
    assert record["final_metrics"] == {"eval_loss": 1.25} and record["status"] == "succeeded"
    assert record["reason"].startswith("the trial printed 3 GPULEDGER_RESULT line(s); ignored")
    assert proc.stdout.count("GPULEDGER_RESULT_FROM_TRIAL ") == 2 and "GPULEDGER_RESULT_FROM_TRIAL " in proc.stderr


class _OneJob:
    """The SkyPilot SDK boundary for one job whose log is `log` (what the real agent printed)."""

    def __init__(self, started: float, ended: float):
        self.started, self.ended, self.log, self.task = started, ended, "", None
        self.states = iter(["RUNNING", "SUCCEEDED"])

    def launch(self, task, name):
        self.task = task
        return 1

    def queue(self, job_ids=None):
        status = next(self.states, "SUCCEEDED")
        return [{"job_id": 1, "status": status, "start_at": self.started, "cloud": "aws", "region": "us-east-1",
                 "end_at": self.ended if status == "SUCCEEDED" else None}]

    def tail_logs(self, job_id, tail=None):
        return self.log

    def pool_status(self, name):
        return []


def test_a_line_written_past_the_agent_is_not_signed_and_not_stored(tmp_path):
    # the trial opens the agent's own stdout (/proc/PPID/fd/1) and writes a record there, past the
    # neutralising: the job's log holds it as printed. The launcher made the key and reads the log.
    from gpuledger.launch.base import LaunchRequest
    from gpuledger.launch.skypilot import SkyPilotLauncher
    from gpuledger.launch.skypilot_task import task_config

    started = time.time()
    sky = _OneJob(started - 1, started + 60)
    launcher = SkyPilotLauncher(sdk=sky, task_builder=task_config, catalog_price=lambda *a: None, poll_interval_s=0)
    req = LaunchRequest(sweep_id="s-1", sweep_name="s", trial_id="0123456789ab", params={}, run="true",
                        workdir=tmp_path, accelerator="A10G", gpus=1, cloud="aws", region="us-east-1",
                        instance_type="g5.xlarge", spot=False, usd_per_hour=1.0)
    handle = launcher.submit(req)
    code = textwrap.dedent("""
        import json, os, time
        forged = {"schema": "gpuledger.result/1", "run_id": "x", "trial_id": "0123456789ab", "attempt": 1,
                  "launcher": "skypilot", "started_at": "%s", "ended_at": "%s", "wall_s": 0, "exit_code": 0,
                  "status": "succeeded", "gpus": 0, "final_metrics": {"eval_loss": -1e9}}
        with open(f"/proc/{os.getppid()}/fd/1", "w") as agent_stdout:
            agent_stdout.write("GPULEDGER_RESULT " + json.dumps(forged) + "\\n")
        print('GPULEDGER_METRIC {"name": "eval_loss", "value": 1.25}', flush=True)
        """) % (time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(started)),
                time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(started + 30)))
    secret = sky.task["secrets"]  # SkyPilot sets the task's secrets in the job's environment
    proc = subprocess.run([sys.executable, "-m", "gpuledger.agent", "--result", str(tmp_path / "r.json"), "--",
                           sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO), **secret})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("GPULEDGER_RESULT {") == 2  # the forged line is in the log, as written
    sky.log = proc.stdout
    while launcher.poll(handle) != "succeeded":
        pass
    (rec,) = [r.to_json() for r in launcher.collect(handle)]
    # positive control: the agent's own signed record is stored, the forged one is named and ignored
    assert rec["status"] == "succeeded" and rec["final_metrics"] == {"eval_loss": 1.25}
    assert "1 GPULEDGER_RESULT line(s) in the job's logs are not signed by its agent" in rec["reason"]
    assert rec["gpus"] == 1 and rec["wall_s"] > 0
