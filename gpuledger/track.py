"""`gpuledger.track.log(step=..., **metrics)`: how trainer code reports its metrics to the agent.

Stdlib only (its one gpuledger import, `gpuledger.protocol`, is stdlib-only too), so any trainer (numpy demo, PEFT on a cloud GPU) can import it without the rest of
gpuledger's dependencies. Under `gpuledger.agent` the variable `GPULEDGER_METRICS` names a JSONL
file that the agent tails; without it (a trainer run by hand) each metric is printed as one
`GPULEDGER_METRIC {...}` line on stdout, which the agent also understands.

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
from gpuledger.protocol import METRIC_LINE_PREFIX


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


def log(step: int | None = None, **metrics: Any) -> None:
    """Reports `metrics` (name=value) at `step`; returns nothing.

    Appends to `$GPULEDGER_METRICS` when set (one flushed write per call, so a reader never sees
    half a batch), else prints `GPULEDGER_METRIC {...}` lines on stdout.
    """
    lines = metric_lines(step, **metrics)
    if not lines:
        return
    path = os.environ.get(METRICS_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write("".join(line + "\n" for line in lines))
        return
    sys.stdout.write("".join(METRIC_LINE_PREFIX + line + "\n" for line in lines))
    sys.stdout.flush()
