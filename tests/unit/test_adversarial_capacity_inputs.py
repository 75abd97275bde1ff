"""Issue 43 item 7: a capacity spec's traffic, lengths and counts are bounded and checked. `qps: 1e12`
answered at once (it looped once per replica), `qps: 1e308` one line (it was an OverflowError
traceback); beside them the shipped example and a big-but-real fleet still plan."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuledger.capacity.elastic import committed_use
from gpuledger.errors import UserError
from gpuledger.spec import parse_spec

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = (REPO / "gpuledger" / "scaffold" / "specs" / "chat-capacity.yaml").read_text(encoding="utf-8")


def _with_traffic(line: str) -> str:
    return re.sub(r"^  hourly_qps: .*$", line, EXAMPLE, flags=re.M)


@pytest.mark.parametrize("line, field", [
    ("  qps: 1e12", "traffic.qps"),
    ("  qps: 1e308", "traffic.qps"),
    ("  qps: .inf", "traffic.qps"),
    ("  hourly_qps: [" + ", ".join(["1e308"] * 24) + "]", "traffic.hourly_qps"),
    ("  qps: 10\n  prompt_tokens: 1e15", "traffic.prompt_tokens"),
])
def test_traffic_past_every_real_service_is_one_line_at_once(line, field):
    text = _with_traffic(line)
    if "prompt_tokens: 1e15" in line:
        text = text.replace("  prompt_tokens: 1500\n", "")
    started = time.monotonic()
    with pytest.raises(UserError) as info:
        parse_spec(text, "cap.yaml")
    assert time.monotonic() - started < 5
    assert field in str(info.value) and "Traceback" not in str(info.value)


def test_measured_points_past_physics_are_refused():
    text = EXAMPLE.replace("resources:\n", "measured:\n  H100: {tokens_per_s_per_gpu: 1e30}\nresources:\n")
    with pytest.raises(UserError, match="tokens_per_s_per_gpu"):
        parse_spec(text, "cap.yaml")


def test_the_example_and_a_big_real_fleet_still_parse():
    assert parse_spec(EXAMPLE, "cap.yaml").traffic.qps == 20
    assert parse_spec(_with_traffic("  qps: 1000000"), "cap.yaml").traffic.qps == 1_000_000


def test_committed_use_is_one_pass_over_the_hours_not_one_per_replica():
    reps = [10**9] * 100 + [10**8] * 68  # a week of a fleet no loop per replica would finish
    started = time.monotonic()
    out = committed_use(reps, 8, 2.0, {"1y": 37, "3y": 55})
    assert time.monotonic() - started < 1
    # 100 of 168 hours (59.5%) have 1e9: below 1y's break-even (63%), above 3y's (45%)
    assert out["1y"]["committed_replicas"] == 10**8 and out["3y"]["committed_replicas"] == 10**9
    # control: the exact answer on a small day (the k-th replica is up in the hours with >= k)
    day = [1] * 12 + [3] * 8 + [5] * 4
    assert committed_use(day, 1, 1.0, {"1y": 37})["1y"]["committed_replicas"] == 1  # 3 is up 12/24 = 50% < 63%
    assert committed_use(day, 1, 1.0, {"x": 60})["x"]["committed_replicas"] == 3  # 50% >= 40%


@pytest.mark.slow
def test_capacity_cli_answers_qps_1e12_and_1e308_in_one_line(tmp_path):
    for value in ("1e12", "1e308"):
        spec = tmp_path / f"cap-{value}.yaml"
        spec.write_text(_with_traffic(f"  qps: {value}"), encoding="utf-8")
        started = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "gpuledger.cli", "capacity", str(spec)], capture_output=True,
                              text=True, timeout=60, cwd=tmp_path)
        assert proc.returncode == 1 and time.monotonic() - started < 30, proc.stderr
        assert "traffic.qps" in proc.stderr and "Traceback" not in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
