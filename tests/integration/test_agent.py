"""The agent with real subprocesses: metrics, pass-through, exit codes, statuses, signals, timeout."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from gpuledger import track
from gpuledger.protocol import METRIC_LINE_PREFIX, RESULT_LINE_PREFIX
from gpuledger.record import parse_record

REPO = Path(__file__).resolve().parents[2]
PY = sys.executable


def _agent(tmp_path: Path, code: str, *args: str, env: dict | None = None, timeout: float = 60):
    """Runs the agent around `python -c code`; returns (completed process, record dict)."""
    result = tmp_path / "result.json"
    cmd = [PY, "-m", "gpuledger.agent", "--result", str(result), "--trial-id", "t1", "--run-id", "t1-a1-x",
           *args, "--", PY, "-c", textwrap.dedent(code)]
    full_env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    proc = subprocess.run(cmd, capture_output=True, timeout=timeout, env=full_env, cwd=tmp_path)
    record = json.loads(result.read_text())
    parse_record(record)  # valid for the shared contract
    return proc, record


def _result_line(stdout: bytes) -> dict:
    lines = [ln for ln in stdout.decode().splitlines() if ln.startswith(RESULT_LINE_PREFIX)]
    assert len(lines) == 1
    return json.loads(lines[0][len(RESULT_LINE_PREFIX):])


def test_success_metrics_passthrough_and_result_line(tmp_path):
    proc, record = _agent(tmp_path, """
        import sys, time
        from gpuledger import track
        print("hello out")
        print("hello err", file=sys.stderr)
        buf = bytearray(150 * 1024 * 1024)          # ~150 MB resident for a while
        for step in range(3):
            track.log(step=step, train_loss=3.0 - step)   # -> $GPULEDGER_METRICS
            time.sleep(0.2)
        print('GPULEDGER_METRIC {"name": "eval_loss", "value": 1.25, "step": 2}')
        time.sleep(0.3)
        print("no newline at the end", end="")
        """, "--params", '{"lora_r": 4}', "--sweep-id", "sw")
    assert proc.returncode == 0
    out = proc.stdout.decode()
    assert "hello out\n" in out and "hello err" in proc.stderr.decode()
    assert 'GPULEDGER_METRIC {"name": "eval_loss"' in out  # passed through unchanged
    assert _result_line(proc.stdout) == record
    assert record["status"] == "succeeded" and record["exit_code"] == 0 and record["reason"] is None
    assert record["trial_id"] == "t1" and record["run_id"] == "t1-a1-x" and record["sweep_id"] == "sw"
    assert record["params"] == {"lora_r": 4}
    assert record["stderr_tail"] is None  # only kept when it failed
    assert 0.14 < record["peak_rss_gib"] < 2
    assert record["peak_gpu_mem_gib"] is None or record["peak_gpu_mem_gib"] >= 0
    names = [m["name"] for m in record["metrics"]]
    assert names.count("train_loss") == 3 and names.count("eval_loss") == 1
    assert record["final_metrics"] == {"train_loss": 1.0, "eval_loss": 1.25}
    assert all(m["t_s"] is not None and m["t_s"] >= 0 for m in record["metrics"])
    assert record["wall_s"] > 0.9


def test_echo_metrics_prints_the_named_metric_bounded_and_its_last_point(tmp_path):
    # a trainer logging 5,000 points of the objective as fast as it can, plus another metric
    proc, record = _agent(tmp_path, """
        import time
        from gpuledger import track
        t0 = time.time()
        for step in range(1, 5001):
            track.log(step=step, eval_loss=1.0 + 1.0 / step, train_loss=2.0)
        time.sleep(1.8)  # the flood's last point is echoed meanwhile (coalesced), then one more point
        track.log(step=5001, eval_loss=0.5)
        time.sleep(0.6)
        """, "--echo-metrics", "eval_loss", "--echo-interval-s", "1.0")
    assert proc.returncode == 0 and record["status"] == "succeeded"
    out = proc.stdout.decode().splitlines()
    echoed = [json.loads(ln[len(METRIC_LINE_PREFIX):]) for ln in out if ln.startswith(METRIC_LINE_PREFIX)]
    # bounded: one line per metric per second at most, over a run of a few seconds
    assert 2 <= len(echoed) <= 2 + int(record["wall_s"]) + 1, echoed
    assert {e["name"] for e in echoed} == {"eval_loss"}  # only the named metric
    steps = [e["step"] for e in echoed]
    assert steps == sorted(steps) and steps[-1] == 5001 and echoed[-1]["value"] == 0.5
    assert 5000 in steps  # the flood's last point, echoed once the interval passed (coalesced)
    assert all(isinstance(e["time"], float) for e in echoed)
    # the record still has every point of the file; the echo adds nothing to it
    assert record["final_metrics"]["eval_loss"] == 0.5
    assert sum(m["name"] == "eval_loss" for m in record["metrics"]) == 5001
    assert out[-1].startswith(RESULT_LINE_PREFIX)


def test_echo_metrics_refuses_an_empty_name_list(tmp_path):
    proc = subprocess.run([PY, "-m", "gpuledger.agent", "--echo-metrics", ",", "--", "true"], capture_output=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=tmp_path, timeout=60)
    assert proc.returncode == 2 and b"give at least one metric name" in proc.stderr
    assert b"Traceback" not in proc.stderr


@pytest.mark.parametrize(("env", "says"), [
    ({"GPULEDGER_TIMEOUT_S": "ten"}, b"not a number: 'ten'"),
    ({"GPULEDGER_TIMEOUT_S": "0"}, b"--timeout-s must be > 0"),
    ({"GPULEDGER_GPUS": "two"}, b"not a whole number: 'two'"),
    ({"GPULEDGER_ATTEMPT": "1.5"}, b"not a whole number: '1.5'"),
    ({"GPULEDGER_ECHO_INTERVAL_S": "x"}, b"not a number: 'x'"),
])
def test_bad_environment_variables_are_one_usage_line(tmp_path, env, says):
    proc = subprocess.run([PY, "-m", "gpuledger.agent", "--", "true"], capture_output=True, timeout=60, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(REPO), **env})
    assert proc.returncode == 2 and says in proc.stderr, proc.stderr
    assert b"Traceback" not in proc.stderr


def test_crash_keeps_exit_code_and_stderr_tail(tmp_path):
    proc, record = _agent(tmp_path, """
        import sys
        for i in range(200):
            print(f"line {i}", file=sys.stderr)
        raise SystemExit(3)
        """)
    assert proc.returncode == 3
    assert record["status"] == "failed" and record["exit_code"] == 3 and record["reason"] == "exit code 3"
    tail = record["stderr_tail"]
    assert "line 199" in tail and "line 100" not in tail and tail.count("\n") <= 50


def test_memory_error_is_oom(tmp_path):
    proc, record = _agent(tmp_path, "raise MemoryError('boom')")
    assert proc.returncode == 1
    assert record["status"] == "oom" and "MemoryError" in record["stderr_tail"]


def test_killed_by_signal(tmp_path):
    proc, record = _agent(tmp_path, "import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    assert proc.returncode == 128 + 9
    assert record["exit_code"] == -9
    assert record["status"] in ("failed", "oom")
    if record["status"] == "failed":
        assert record["reason"] == "killed by signal SIGKILL"


def test_timeout_kills_the_group(tmp_path):
    t0 = time.monotonic()
    proc, record = _agent(tmp_path, "import subprocess; subprocess.run(['sleep', '1000'])",
                          "--timeout-s", "1", "--kill-grace-s", "1")
    assert time.monotonic() - t0 < 15
    assert record["status"] == "failed" and record["reason"] == "timeout after 1 s"
    assert proc.returncode != 0


def test_placement_from_env(tmp_path):
    _, record = _agent(tmp_path, "pass", env={"GPULEDGER_LAUNCHER": "skypilot", "GPULEDGER_CLOUD": "aws",
                                              "GPULEDGER_REGION": "us-east-1", "GPULEDGER_ACCELERATOR": "H100",
                                              "GPULEDGER_GPUS": "8", "GPULEDGER_SPOT": "1",
                                              "GPULEDGER_ATTEMPT": "2"})
    assert (record["launcher"], record["cloud"], record["region"]) == ("skypilot", "aws", "us-east-1")
    assert (record["accelerator"], record["gpus"], record["spot"], record["attempt"]) == ("H100", 8, True, 2)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signals_are_forwarded_to_the_child_group(tmp_path, sig):
    marker = tmp_path / "got"
    result = tmp_path / "result.json"
    child = textwrap.dedent(f"""
        import signal, sys, time, pathlib
        def handler(num, frame):
            pathlib.Path({str(marker)!r}).write_text(str(num))
            sys.exit(7)
        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)
        print("ready", flush=True)
        time.sleep(1000)
        """)
    # a long grace: this checks the forwarding, and a busy machine must not turn the child's own
    # handling of the signal into the SIGKILL that follows the grace period
    agent = subprocess.Popen([PY, "-m", "gpuledger.agent", "--result", str(result), "--trial-id", "t",
                              "--kill-grace-s", "60", "--", PY, "-c", child], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert agent.stdout.readline() == b"ready\n"
    agent.send_signal(sig)
    out, err = agent.communicate(timeout=90)
    assert marker.exists(), (agent.returncode, out[-2000:], err[-2000:])
    assert marker.read_text() == str(int(sig))
    assert agent.returncode == 7
    record = json.loads(result.read_text())
    assert record["status"] == "cancelled" and record["exit_code"] == 7
    assert record["reason"] == f"cancelled by {signal.Signals(sig).name}"
    assert _result_line(out) == record


def test_track_log_prints_lines_without_agent(capsys, monkeypatch):
    monkeypatch.delenv("GPULEDGER_METRICS", raising=False)
    track.log(step=5, eval_loss=1.5, bad=float("nan"))
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(ln.removeprefix("GPULEDGER_METRIC "))["name"] for ln in lines] == ["eval_loss", "bad"]
    first = json.loads(lines[0].removeprefix("GPULEDGER_METRIC "))
    assert first["value"] == 1.5 and first["step"] == 5
    assert json.loads(lines[1].removeprefix("GPULEDGER_METRIC "))["value"] is None


def test_track_log_appends_to_file(tmp_path, monkeypatch):
    path = tmp_path / "m.jsonl"
    monkeypatch.setenv("GPULEDGER_METRICS", str(path))
    track.log(step=1, a=1)
    track.log(b=2.5)
    rows = [json.loads(ln) for ln in path.read_text().splitlines()]
    assert [(r["name"], r["value"], r["step"]) for r in rows] == [("a", 1.0, 1), ("b", 2.5, None)]


@pytest.mark.parametrize(("nvml", "mem", "name"), [
    ("NVIDIA H200", 141, "H200"), ("NVIDIA H100 80GB HBM3", 80, "H100"), ("NVIDIA A100-SXM4-80GB", 80, "A100-80GB"),
    ("NVIDIA A100-SXM4-40GB", 40, "A100"), ("NVIDIA A10G", 24, "A10G"), ("NVIDIA A10", 24, "A10"),
    ("NVIDIA L40S", 48, "L40S"), ("NVIDIA L40", 48, "L40"), ("NVIDIA L4", 24, "L4"), ("Tesla T4", 16, "T4"), ("Tesla V100-SXM2-16GB", 16, "V100"),
    ("NVIDIA GeForce RTX 4090", 24, "RTX4090"), ("NVIDIA RTX A6000", 48, "A6000"), ("NVIDIA B200", 180, "B200"),
    ("Some Future GPU", 10, "Some Future GPU"),
])
def test_accelerator_names_follow_the_catalog(nvml, mem, name):
    from gpuledger.agent.measure import accelerator_name

    assert accelerator_name(nvml, mem) == name


def test_every_mapped_name_is_a_catalog_accelerator():
    from gpuledger.agent.measure import _NVML_NAMES
    from gpuledger.catalog import known_accelerators

    known = set(known_accelerators())
    assert {name for _, name in _NVML_NAMES} | {"A100-80GB"} <= known


def test_echo_numbers_points_without_a_step_and_coalesces_within_the_interval():
    from gpuledger.agent import Echo

    lines: list[str] = []
    echo = Echo({"eval_loss"}, interval_s=3600.0, started=1000.0, write=lines.append)
    echo.offer([{"name": "eval_loss", "value": 2.0, "step": None, "t_s": 1.0},
                {"name": "train_loss", "value": 9.0, "step": None, "t_s": 1.0}])
    echo.offer([{"name": "eval_loss", "value": 1.5, "step": None, "t_s": 2.0}])  # within the interval: held
    echo.offer([{"name": "eval_loss", "value": 1.25, "step": None, "t_s": 3.0}])  # replaces the held one
    assert len(lines) == 1
    echo.flush(force=True)  # the end: the latest held point goes out
    points = [json.loads(ln[len(METRIC_LINE_PREFIX):]) for ln in lines]
    assert [(p["name"], p["value"], p["step"], p["time"]) for p in points] == [
        ("eval_loss", 2.0, 1, 1001.0), ("eval_loss", 1.25, 3, 1003.0)]
    assert all(ln.endswith("\n") and ln.startswith(METRIC_LINE_PREFIX) for ln in lines) and echo.lines == 2
