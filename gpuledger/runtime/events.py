"""Progress events of the sweeps run in this process (the CLI's progress bar listens).

Events are dicts with `kind`:
- `planned`: sweep_id, total, todo, done_before, max_parallel;
- `launched`: trial_id;
- `result`: trial_id, status, cost_usd, done, total, spent_usd (after its record is stored, or
  failed to be: `stored` says which);
- `skipped-budget`: trial_ids, reason;
- `finished`: summary (a dict of `SweepSummary`).
A listener that raises is ignored: progress never breaks a sweep.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

_listeners: list[Callable[[dict[str, Any]], None]] = []
_lock = threading.Lock()


@contextlib.contextmanager
def progress_listener(fn: Callable[[dict[str, Any]], None]) -> Iterator[None]:
    """Calls `fn(event)` for each progress event of sweeps run in this process while inside."""
    with _lock:
        _listeners.append(fn)
    try:
        yield
    finally:
        with _lock:
            _listeners.remove(fn)


def notify(kind: str, **data: Any) -> None:
    """Sends one event to every listener."""
    with _lock:
        listeners = list(_listeners)
    for fn in listeners:
        with contextlib.suppress(Exception):
            fn({"kind": kind, **data})
