"""What a SkyPilot job's logs say: its `GPULEDGER_RESULT` records and `GPULEDGER_METRIC` points.

No `sky` import: pure text parsing, shared by `SkyPilotLauncher.collect` (result lines) and
`SkyPilotLauncher.progress` (a running trial's metric points for the pruner), and the queue's
`cluster_resources` and time stamps (`parse_cluster_resources`, `_ts`). Both tolerate
SkyPilot's log prefixes (`(task, pid=123) GPULEDGER_RESULT {...}`) and whatever follows the JSON on
its line (colour codes), and skip bad JSON. A result line is believed only when it carries the
agent's signature under the job's key (`signed_result_lines`; the line format is in
`gpuledger.agent.signing`).

`new_points(logs, offset, names)` is the pruning watch's read of a log that is re-read (or
tailed) in full each time. `offset` is not a position in the text but a step watermark: the
next step not returned yet (0 at first). It returns the points of `names` whose step is at
least the watermark, in log order, each step once (a step logged twice: its first point), and
the new watermark (the last step returned + 1). So

- re-reading the same log returns nothing new; tailing only its last lines loses nothing that
  is still in the window;
- a managed job's recovery restarts the trainer on a new cluster whose log starts empty (or, for
  a finished job, the controller's copy holds several attempts): the restarted trainer's steps
  below the watermark are skipped and reporting resumes where the last attempt stopped, so the
  pruner counts each step once and its resource (the number of values reported) stays the
  trainer's progress, not the number of attempts;
- a point without an integer step cannot be placed and is skipped (the agent's `--echo-metrics`
  numbers such points itself, 1, 2, ... per attempt).
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Iterator
from datetime import UTC, datetime
from typing import Any

from gpuledger.agent.signing import result_line_signed
from gpuledger.protocol import METRIC_LINE_PREFIX, RESULT_LINE_PREFIX

_DECODER = json.JSONDecoder()


def _prefixed_json(logs: str, prefix: str) -> Iterator[tuple[Any, str, str]]:
    """Yields (the JSON value, its exact text, the rest of the line) after `prefix` on each line that
    has it; what follows the value on the line (a signature, a colour reset) is the rest."""
    for line in logs.splitlines():
        pos = line.find(prefix)
        if pos < 0:
            continue
        text = line[pos + len(prefix):].lstrip()
        try:
            value, end = _DECODER.raw_decode(text)
        except json.JSONDecodeError:
            continue
        yield value, text[:end], text[end:]


def parse_result_lines(logs: str) -> list[dict[str, Any]]:
    """Returns every `GPULEDGER_RESULT {json}` record in `logs`, in order (bad JSON skipped), signed
    or not: what the lines say, not what is believed (`signed_result_lines`)."""
    return [data for data, _text, _rest in _prefixed_json(logs, RESULT_LINE_PREFIX) if isinstance(data, dict)]


def signed_result_lines(logs: str, key: bytes) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Returns (the records of the result lines signed with `key`, the records of those that are not),
    each in log order. Only the first are the agent's: it signs its line with the job's key
    (`gpuledger.agent.signing.signed_result_line`); an unsigned or wrongly signed line was printed
    by something else (a trial that bypassed the agent's neutralising, an agent without the key)."""
    signed: list[dict[str, Any]] = []
    unsigned: list[dict[str, Any]] = []
    for data, text, rest in _prefixed_json(logs, RESULT_LINE_PREFIX):
        if isinstance(data, dict):
            (signed if result_line_signed(text, rest, key) else unsigned).append(data)
    return signed, unsigned


def unsigned_note(count: int) -> str:
    """Says how many result lines in a job's logs claimed an attempt without the agent's signature."""
    return (f"{count} {RESULT_LINE_PREFIX.strip()} line(s) in the job's logs are not signed by its agent "
            "(printed by something else; ignored)")


def parse_metric_lines(logs: str) -> list[dict[str, Any]]:
    """Returns every `GPULEDGER_METRIC {json}` point in `logs`, in order (a line may hold a list)."""
    points = []
    for data, _text, _rest in _prefixed_json(logs, METRIC_LINE_PREFIX):
        points.extend(p for p in (data if isinstance(data, list) else [data]) if isinstance(p, dict))
    return points


def new_points(logs: str, offset: int, names: Collection[str]) -> tuple[list[dict[str, Any]], int]:
    """Returns (the points of `names` at steps >= `offset`, each step once, the new watermark);
    see the module docstring."""
    out: list[dict[str, Any]] = []
    watermark = offset
    for p in parse_metric_lines(logs):
        step, value = p.get("step"), p.get("value")
        if p.get("name") not in names or not isinstance(step, int) or isinstance(step, bool):
            continue
        if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
            continue
        if step < watermark:  # returned before, or re-logged by a restarted attempt
            continue
        out.append({"name": p["name"], "value": float(value), "step": step, "time": p.get("time")})
        watermark = step + 1
    return out, watermark


def parse_cluster_resources(text: str | None) -> tuple[str | None, bool | None]:
    """Returns (instance_type, spot) from the queue's `cluster_resources[_full]` string.

    SkyPilot formats it as `[spot](gpus=A100:8, cpus=96, mem=1152, p4d.24xlarge, ...)`, possibly
    prefixed by the node count (`1x`); the instance type is the element that is not `key=value`.
    """
    if not text or "(" not in text:
        return None, None
    spot = "[spot]" in text
    inner = text[text.index("(") + 1:text.rindex(")") if ")" in text else len(text)]
    for element in (e.strip() for e in inner.split(",")):
        if element and "=" not in element and element != "..." and not element.endswith("..."):
            return element, spot
    return None, spot


def _clean(value: Any) -> str | None:
    if value in (None, "", "-"):
        return None
    return str(value)


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat()


def _ts(value: Any) -> float | None:
    if value in (None, ""):
        return None
    if isinstance(value, int | float):
        return float(value)
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
