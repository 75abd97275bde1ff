"""What the in-job agent measures besides the exit code (`gpuledger.agent` runs these).

- `oom_kill_count()`: the cgroup's count of kernel OOM kills (a trial killed by the kernel is `oom`);
- `Gpus`: every visible GPU's used memory and utilisation through NVML (no driver: all None);
- `Metrics`: the trial's metric points, from `GPULEDGER_METRIC` lines and the `$GPULEDGER_METRICS` file;
- `FileTail`: follows the metrics file a trainer appends to.

Stdlib, psutil-free and (optionally) pynvml: it runs inside cloud jobs.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

GIB = 1024**3
MAX_METRIC_POINTS = 20_000  # beyond this only final_metrics keep being updated


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
_NVML_NAMES = (("H200", "H200"), ("H100", "H100"), ("B200", "B200"), ("A100", "A100"), ("A10G", "A10G"),
               ("A6000", "A6000"), ("A10", "A10"), ("L40S", "L40S"), ("L4", "L4"), ("T4", "T4"),
               ("V100", "V100"), ("4090", "RTX4090"))


def accelerator_name(nvml_name: str, memory_gib: float | None = None) -> str:
    """Returns the catalog name of an NVML product name ("NVIDIA H100 80GB HBM3" -> "H100"),
    or the NVML name unchanged when it is not in the catalog."""
    upper = nvml_name.upper()
    for fragment, name in _NVML_NAMES:
        if re.search(rf"(?<![A-Z0-9]){fragment}(?![0-9])", upper):
            if name == "A100" and ("80GB" in upper or (memory_gib or 0) > 50):
                return "A100-80GB"
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


class Metrics:
    """Thread-safe collector of metric points from stdout lines and the JSONL file."""

    def __init__(self, started: float) -> None:
        self.started = started
        self.points: list[dict[str, Any]] = []
        self.final: dict[str, float] = {}
        self.dropped = 0
        self.lock = threading.Lock()

    def add_json(self, text: str) -> list[dict[str, Any]]:
        """Adds the point(s) of one JSON line; returns them as stored (name, value, step, t_s)."""
        try:
            obj = json.loads(text)
        except ValueError:
            return []
        added = [self._add(item) for item in (obj if isinstance(obj, list) else [obj])]
        return [p for p in added if p is not None]

    def _add(self, obj: Any) -> dict[str, Any] | None:
        if not isinstance(obj, dict):
            return None
        name = obj.get("name")
        if not isinstance(name, str) or not name:
            return None
        try:
            value = float(obj.get("value"))
        except (TypeError, ValueError):
            return None
        if not math.isfinite(value):
            return None
        step = obj.get("step")
        try:
            step = None if step is None else int(step)
        except (TypeError, ValueError):
            step = None
        when = obj.get("time")
        t_s: float
        if isinstance(when, int | float) and math.isfinite(when):
            t_s = max(0.0, float(when) - self.started)
        elif isinstance(obj.get("t_s"), int | float):
            t_s = max(0.0, float(obj["t_s"]))
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
        self.lock = threading.Lock()

    def poll(self) -> None:
        with self.lock:
            try:
                with open(self.path, "rb") as fh:
                    fh.seek(self.offset)
                    chunk = fh.read()
            except OSError:
                return
            if not chunk:
                return
            self.offset += len(chunk)
            data = self.partial + chunk
            *lines, self.partial = data.split(b"\n")
            for line in lines:
                if line.strip():
                    self._add(line)

    def _add(self, line: bytes) -> None:
        points = self.metrics.add_json(line.decode("utf-8", "replace"))
        if points and self.on_points is not None:
            self.on_points(points)

    def finish(self) -> None:
        self.poll()
        with self.lock:
            if self.partial.strip():
                self._add(self.partial)
            self.partial = b""


# --------------------------------------------------------------------------------------------
# The run
