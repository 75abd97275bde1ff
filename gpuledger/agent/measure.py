"""What the in-job agent measures besides the exit code (`gpuledger.agent` runs these).

- `oom_kill_count()`: the cgroup's count of kernel OOM kills (a trial killed by the kernel is `oom`);
- `Gpus`: every visible GPU's used memory and utilisation through NVML (no driver: all None);
- `Metrics`: the trial's metric points, from `GPULEDGER_METRIC` lines and the `$GPULEDGER_METRICS` file;
- `FileTail`: follows the metrics file a trainer appends to;
- `Echo`: the agent's `--echo-metrics` (named metrics to stdout, bounded);
- `become_subreaper()`: the trial's orphans stay below the agent (measured, ended with the trial).

Stdlib, psutil-free and (optionally) pynvml: it runs inside cloud jobs.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpuledger.protocol import METRIC_LINE_PREFIX

GIB = 1024**3
MAX_METRIC_POINTS = 20_000  # beyond this only final_metrics keep being updated
#: the longest metric name kept (characters); a name is also a key of the warehouse's metrics tables
#: (DuckDB's index keys are bounded) and a word in log lines
MAX_METRIC_NAME_CHARS = 200
#: the longest line of the trial's output or metrics file that is parsed (bytes); longer lines are
#: passed through (stdout) or skipped (metrics file) without being held in memory
MAX_LINE_BYTES = 64 * 1024
#: the largest step number kept (a BIGINT column); a larger or non-finite one is dropped from the point
MAX_STEP = 2**62

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def metric_name_problem(name: Any) -> str | None:
    """Returns why `name` cannot be a metric name (not text, empty, over `MAX_METRIC_NAME_CHARS`,
    control characters such as a newline that would forge log lines, not valid Unicode), or None."""
    if not isinstance(name, str) or not name:
        return "a metric name must be non-empty text"
    if len(name) > MAX_METRIC_NAME_CHARS:
        return f"a metric name of {len(name)} characters; at most {MAX_METRIC_NAME_CHARS}"
    if _CONTROL.search(name):
        return f"the metric name {name[:60]!r} holds a control character (newline, tab, ...)"
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return f"the metric name {name[:60]!r} is not valid Unicode (a lone surrogate)"
    return None


def oom_kill_count() -> int | None:
    """Returns the cgroup's count of kernel OOM kills (cgroup v2 memory.events), None if unreadable."""
    for path in ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control"):
        try:
            text = Path(path).read_text()
        except OSError:
            continue
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                with contextlib.suppress(ValueError):
                    return int(value)
    return None


# --------------------------------------------------------------------------------------------
# GPU sampling (NVML)

#: NVML product-name fragments -> the catalog's accelerator names (gpuledger/catalog/gpus.csv),
#: most specific first ("A100" before "A10", "L40S" before "L4").
_NVML_NAMES = (("GH200", "GH200"), ("GB200", "GB200"), ("H200", "H200"), ("H100", "H100"), ("H800", "H800"),
               ("H20", "H20"), ("B200", "B200"), ("A100", "A100"), ("A800", "A800"), ("A10G", "A10G"),
               ("RTX 6000 ADA", "RTX6000-Ada"), ("A6000", "A6000"), ("A10", "A10"), ("A40", "A40"), ("L40S", "L40S"),
               ("L40", "L40"), ("L4", "L4"), ("T4", "T4"), ("V100", "V100"), ("4090", "RTX4090"))


def accelerator_name(nvml_name: str, memory_gib: float | None = None) -> str:
    """Returns the catalog name of an NVML product name ("NVIDIA H100 80GB HBM3" -> "H100"),
    or the NVML name unchanged when it is not in the catalog."""
    upper = nvml_name.upper()
    for fragment, name in _NVML_NAMES:
        if re.search(rf"(?<![A-Z0-9]){fragment}(?![0-9])", upper):
            if name == "A100" and ("80GB" in upper or (memory_gib or 0) > 50):
                return "A100-80GB"
            if name == "A800" and not ("80GB" in upper or (memory_gib or 0) > 50):
                return nvml_name  # the 40 GB A800s are not the catalog's (80 GB) A800
            if name == "H800" and "PCIE" in upper:
                return nvml_name  # the H800 PCIe (2 TB/s) is not the catalog's SXM part
            return name
    return nvml_name


class Gpus:
    """NVML handles of the visible GPUs; empty when there is no driver (then everything is None)."""

    def __init__(self) -> None:
        self.handles: list[Any] = []
        self.nvml: Any = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self.nvml = pynvml
            count = pynvml.nvmlDeviceGetCount()
            indices = list(range(count))
            visible = os.environ.get("CUDA_VISIBLE_DEVICES")
            if visible is not None and all(p.strip().isdigit() for p in visible.split(",") if p.strip()):
                wanted = [int(p) for p in visible.split(",") if p.strip()]
                indices = [i for i in wanted if i < count]
            self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in indices]
            self.name = None
            if self.handles:
                raw = pynvml.nvmlDeviceGetName(self.handles[0])
                raw = raw.decode() if isinstance(raw, bytes) else str(raw)
                total = pynvml.nvmlDeviceGetMemoryInfo(self.handles[0]).total / GIB
                self.name = accelerator_name(raw, total)
        except Exception:  # no driver, no library, no permission: GPU fields stay null
            self.handles = []
            self.name = None

    def sample(self) -> tuple[list[float], list[float]]:
        """Returns (used memory GiB per GPU, utilisation % per GPU); empty lists without GPUs."""
        mem: list[float] = []
        util: list[float] = []
        for handle in self.handles:
            try:
                mem.append(self.nvml.nvmlDeviceGetMemoryInfo(handle).used / GIB)
                util.append(float(self.nvml.nvmlDeviceGetUtilizationRates(handle).gpu))
            except Exception:
                continue
        return mem, util

    def close(self) -> None:
        if self.nvml is not None:
            with contextlib.suppress(Exception):
                self.nvml.nvmlShutdown()


# --------------------------------------------------------------------------------------------
# Metrics


#: the latest time of a point kept (seconds after the start): a year; a later one is clamped
MAX_T_S = 366 * 86_400.0


def _finite_float(value: Any) -> float | None:
    """Returns `value` as a finite float, or None (not a number, a bool, NaN, inf, too large)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:  # an int of hundreds of digits
        return None
    return number if math.isfinite(number) else None


class Metrics:
    """Thread-safe collector of metric points from stdout lines and the JSONL file."""

    def __init__(self, started: float) -> None:
        self.started = started
        self.points: list[dict[str, Any]] = []
        self.final: dict[str, float] = {}
        self.dropped = 0
        self.refused = 0  # lines or points not taken (bad JSON, numbers out of range, bad names)
        self.lock = threading.Lock()

    def add_json(self, text: str) -> list[dict[str, Any]]:
        """Adds the point(s) of one JSON line; returns them as stored (name, value, step, t_s). Never
        raises: a line it cannot take (bad JSON, a 400-digit number, `1e999`, a bad name) adds
        nothing and is counted in `refused`, so the threads that read lines keep running."""
        try:
            obj = json.loads(text)
            added = [self._add(item) for item in (obj if isinstance(obj, list) else [obj])]
        except (ValueError, TypeError, OverflowError, RecursionError):
            self.refused += 1
            return []
        return [p for p in added if p is not None]

    def _add(self, obj: Any) -> dict[str, Any] | None:
        if not isinstance(obj, dict) or metric_name_problem(obj.get("name")) is not None:
            self.refused += 1
            return None
        name = obj["name"]
        value = _finite_float(obj.get("value"))
        if value is None:
            self.refused += 1
            return None
        step = _finite_float(obj.get("step"))
        step = int(step) if step is not None and abs(step) <= MAX_STEP else None
        when = _finite_float(obj.get("time"))
        given_t_s = _finite_float(obj.get("t_s"))
        t_s: float
        if when is not None:
            t_s = min(max(0.0, when - self.started), MAX_T_S)
        elif given_t_s is not None:
            t_s = min(max(0.0, given_t_s), MAX_T_S)
        else:
            t_s = max(0.0, time.time() - self.started)
        point = {"name": name, "value": value, "step": step, "t_s": round(t_s, 3)}
        with self.lock:
            self.final[name] = value
            if len(self.points) < MAX_METRIC_POINTS:
                self.points.append(point)
            else:
                self.dropped += 1
        return point


class FileTail:
    """Reads complete new lines of the metrics JSONL file as it grows; `on_points(points)`, if
    given, is called with the points of each line read (the agent's `--echo-metrics`)."""

    def __init__(self, path: Path, metrics: Metrics, on_points: Callable[[list[dict[str, Any]]], None] | None = None) -> None:
        self.path = path
        self.metrics = metrics
        self.on_points = on_points
        self.offset = 0
        self.partial = b""
        self.skipping = False  # inside a line longer than MAX_LINE_BYTES
        self.lock = threading.Lock()

    def poll(self) -> int:
        """Reads what was appended since the last poll (at most 4 x `MAX_LINE_BYTES`); returns the bytes read."""
        with self.lock:
            try:
                with open(self.path, "rb") as fh:
                    fh.seek(self.offset)
                    chunk = fh.read(4 * MAX_LINE_BYTES)  # bounded per poll; the rest next time
            except OSError:
                return 0
            if not chunk:
                return 0
            self.offset += len(chunk)
            data = self.partial + chunk
            *lines, self.partial = data.split(b"\n")
            for line in lines:
                if self.skipping:  # the end of a line too long to parse
                    self.skipping = False
                    continue
                if line.strip():
                    self._add(line)
            if len(self.partial) > MAX_LINE_BYTES:  # never hold more than one line's worth
                self.partial, self.skipping = b"", True
                self.metrics.refused += 1
            return len(chunk)

    def _add(self, line: bytes) -> None:
        points = self.metrics.add_json(line.decode("utf-8", "replace"))
        if points and self.on_points is not None:
            self.on_points(points)

    def finish(self) -> None:
        while self.poll():
            pass
        with self.lock:
            if self.partial.strip() and not self.skipping:
                self._add(self.partial)
            self.partial = b""


# --------------------------------------------------------------------------------------------
# The run


class Echo:
    """`--echo-metrics`: writes the named metrics' new points to stdout as `GPULEDGER_METRIC` lines,
    at most one line per metric per `interval_s` (faster points coalesced to the latest)."""

    def __init__(self, names: set[str], interval_s: float, started: float, write: Any) -> None:
        self.names, self.interval_s, self.started, self.write = names, interval_s, started, write
        self.last: dict[str, float] = {}  # name -> monotonic time of its last echo
        self.pending: dict[str, dict[str, Any]] = {}  # name -> the latest point not echoed yet
        self.seen: dict[str, int] = {}  # name -> points read so far
        self.lines = 0
        self.lock = threading.Lock()

    def offer(self, points: list[dict[str, Any]]) -> None:
        with self.lock:
            for p in points:
                if p["name"] in self.names:
                    self.seen[p["name"]] = n = self.seen.get(p["name"], 0) + 1
                    # a point without a step is numbered (1, 2, ... per metric) so a reader can place it
                    self.pending[p["name"]] = p if p["step"] is not None else {**p, "step": n}
        self.flush()

    def flush(self, force: bool = False) -> None:
        now = time.monotonic()
        with self.lock:
            due = [n for n in self.pending if force or now - self.last.get(n, -1e18) >= self.interval_s]
            points = [self.pending.pop(n) for n in due]
            for n in due:
                self.last[n] = now
            self.lines += len(points)
        for p in points:
            line = {"name": p["name"], "value": p["value"], "step": p["step"],
                    "time": round(self.started + p["t_s"], 3)}
            self.write(METRIC_LINE_PREFIX + json.dumps(line, separators=(",", ":")) + "\n")


#: prctl(2) option: orphaned descendants re-parent to this process instead of init (Linux >= 3.4)
PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Makes the agent the reaper of the trial's orphans (Linux `prctl(PR_SET_CHILD_SUBREAPER)`), so
    a daemon the trial double-forks stays below the agent, is measured and ends with the trial;
    returns False where the system has no such call (the process group still ends)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False
