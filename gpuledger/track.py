"""`gpuledger.track.log(step=..., **metrics)`: how trainer code reports its metrics to the agent.

Stdlib only (its one gpuledger import, `gpuledger.protocol`, is stdlib-only too), so any trainer (numpy demo, PEFT on a cloud GPU) can import it without the rest of
gpuledger's dependencies. Under `gpuledger.agent` the variable `GPULEDGER_METRICS` names a JSONL
file that the agent tails; without it (a trainer run by hand) each metric is printed as one
`GPULEDGER_METRIC {...}` line on stdout, which the agent also understands.

Probes (`gpuledger probe`, docs/probes.md): when `$GPULEDGER_PROBE_STEPS` (N) or
`$GPULEDGER_PROBE_SECONDS` (S) is set, `log` ends the process cleanly (`SystemExit(0)`, after the
point is written) once N distinct training steps (step >= 1) were logged, or at the first step logged
S seconds or more after the first training step. Any trainer that logs its steps through `log` can
be probed; a trainer reports `tokens` (cumulative training tokens at that step) so the probe measures
tokens per second directly (else steps x micro-batch x sequence length).
Under a probe each training step's point also carries `process_cpu_s` (`time.process_time()`: the
trainer process's CPU seconds, all its threads, not its child processes'), unless the trainer logs it
itself: `v_probes` tells from it how many cores the trainer used in its steady state (`cpu_cores`).

Each metric is one JSON object `{"name": str, "value": float, "step": int | null, "time": unix s}`.
Values that are not finite numbers (NaN, inf) are still written, as JSON null, so that a diverged
run is visible; the agent keeps them out of the record's numeric series.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from typing import Any

from gpuledger.protocol import ENV_METRICS as METRICS_ENV
from gpuledger.protocol import ENV_PROBE_SECONDS, ENV_PROBE_STEPS, METRIC_LINE_PREFIX, PROBE_CPU_METRIC

#: What this process has logged for a probe's stop rule: distinct training steps, and when the first was.
_probe_seen: dict[str, Any] = {"steps": set(), "first_time": None}


def _number(value: Any) -> float | None:
    """Returns `value` as a finite float, or None (NaN, inf, or not a number)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def metric_lines(step: int | None = None, **metrics: Any) -> list[str]:
    """Returns one JSON line (without newline) per metric, in the format the agent reads."""
    now = round(time.time(), 3)
    lines = []
    for name, value in metrics.items():
        point = {"name": name, "value": _number(value), "step": None if step is None else int(step), "time": now}
        lines.append(json.dumps(point, separators=(",", ":")))
    return lines


def _limit(name: str) -> float | None:
    """Returns the positive number in environment variable `name`, or None (unset or not a positive number)."""
    value = _number(os.environ.get(name))
    return value if value is not None and value > 0 else None


def probing() -> bool:
    """Returns True when this process runs as a probe (a stop rule is set: `$GPULEDGER_PROBE_STEPS` or
    `$GPULEDGER_PROBE_SECONDS`)."""
    return _limit(ENV_PROBE_STEPS) is not None or _limit(ENV_PROBE_SECONDS) is not None


def probe_limit_reached(step: int | None, now: float | None = None) -> bool:
    """Returns True when a probe's limit (`$GPULEDGER_PROBE_STEPS` / `$GPULEDGER_PROBE_SECONDS`) is reached
    with training step `step` logged now (steps < 1 and points without a step do not count)."""
    steps, seconds = _limit(ENV_PROBE_STEPS), _limit(ENV_PROBE_SECONDS)
    if (steps is None and seconds is None) or step is None or int(step) < 1:
        return False
    now = time.time() if now is None else now
    seen = _probe_seen
    seen["steps"].add(int(step))
    if seen["first_time"] is None:
        seen["first_time"] = now
    if steps is not None and len(seen["steps"]) >= steps:
        return True
    return seconds is not None and now - seen["first_time"] >= seconds


def log(step: int | None = None, **metrics: Any) -> None:
    """Reports `metrics` (name=value) at `step`; returns nothing.

    Appends to `$GPULEDGER_METRICS` when set (one flushed write per call, so a reader never sees
    half a batch), else prints `GPULEDGER_METRIC {...}` lines on stdout. Under a probe's limit
    (module docstring) raises `SystemExit(0)` once the limit is reached.
    """
    if step is not None and int(step) >= 1 and PROBE_CPU_METRIC not in metrics and probing():
        metrics[PROBE_CPU_METRIC] = round(time.process_time(), 4)
    lines = metric_lines(step, **metrics)
    if lines:
        path = os.environ.get(METRICS_ENV)
        if path:
            with open(path, "a", encoding="utf-8") as fh:
                fh.write("".join(line + "\n" for line in lines))
        else:
            sys.stdout.write("".join(METRIC_LINE_PREFIX + line + "\n" for line in lines))
            sys.stdout.flush()
    if probe_limit_reached(step):
        sys.stdout.flush()
        raise SystemExit(0)  # a probe measured enough: end the trainer cleanly (finally blocks run)
