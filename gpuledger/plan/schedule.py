"""The schedule: greedy list scheduling of trials on K identical slots."""

from __future__ import annotations

import heapq
from collections.abc import Sequence

import numpy as np

#: From this many slots on, `list_schedule` assigns jobs a round at a time (numpy) while rounds stay
#: long: longest-first orders fill a whole round of K jobs almost every time, ~12 µs a round against
#: ~0.4 µs a job for the heap (measured on the planner's 100,000-trial benchmark: 64 slots, ~20 ms vs ~45 ms).
ROUNDS_MIN_SLOTS = 48


def list_schedule(durations: Sequence[float] | np.ndarray, slots: int) -> tuple[np.ndarray, np.ndarray]:
    """Returns (start, slot) per job: greedy list scheduling of jobs in the given order on `slots`
    identical slots (each job starts on the slot that frees first; ties → lowest slot). Starts are
    in the durations' unit (seconds in the planner)."""
    d = np.asarray(durations, dtype=np.float64)
    n = len(d)
    k = max(1, int(slots))
    if n <= k:
        return np.zeros(n), np.arange(n, dtype=np.int64)
    if k == 1:
        return np.concatenate([[0.0], np.cumsum(d)[:-1]]), np.zeros(n, dtype=np.int64)
    start, slot = np.zeros(n), np.arange(n, dtype=np.int64)
    free, ids = d[:k].copy(), np.arange(k)
    j = k
    if k >= ROUNDS_MIN_SLOTS and np.isfinite(d).all():
        j, free, ids = _rounds(d, start, slot, free, ids)
    if j < n:
        heap = sorted(zip(free.tolist(), ids.tolist(), strict=True))  # a sorted list is a heap
        dl = d.tolist()
        starts, slots_ = [], []
        replace_ = heapq.heapreplace
        for x in dl[j:]:
            free_at, s_ = heap[0]
            starts.append(free_at)
            slots_.append(s_)
            replace_(heap, (free_at + x, s_))
        start[j:], slot[j:] = starts, slots_
    return start, slot


def _rounds(d: np.ndarray, start: np.ndarray, slot: np.ndarray, free: np.ndarray, ids: np.ndarray) -> tuple[int, np.ndarray, np.ndarray]:
    """Schedules jobs k, k+1, ... a round at a time into `start`/`slot`, exactly as the heap would, while
    rounds stay long; returns (the next job, the slots' free times and ids) for the heap to go on.

    The slots sorted by (free time, id), the next jobs take them in that order as long as each slot's
    free time is strictly below every end time the round has made so far (then it is the earliest
    (free time, id) left, the heap's pick); the round stops at the first job for which that fails."""
    n, k = len(d), len(free)
    order = np.lexsort((ids, free))
    free, ids = free[order], ids[order]
    j, rounds = k, 0
    while j < n:
        m = min(k, n - j)
        end = free[:m] + d[j:j + m]
        stop = np.flatnonzero(free[1:m] >= np.minimum.accumulate(end[:m - 1]))
        b = int(stop[0]) + 1 if stop.size else m
        start[j:j + b], slot[j:j + b] = free[:b], ids[:b]
        free, ids = np.concatenate([free[b:], end[:b]]), np.concatenate([ids[b:], ids[:b]])
        order = np.lexsort((ids, free))
        free, ids = free[order], ids[order]
        j, rounds = j + b, rounds + 1
        if rounds >= 16 and (j - k) < rounds * k // 4:  # short rounds: the heap is faster
            break
    return j, free, ids


def list_starts(durations: Sequence[float] | np.ndarray, slots: int, *, as_list: list[float] | None = None) -> np.ndarray:
    """Returns the start per job of `list_schedule(durations, slots)`, the same numbers, without the
    slots: a heap of bare free times (a job starts when the earliest slot frees, whichever slot that
    is), which is about twice as fast as the heap of (free time, slot) pairs. `as_list`: the durations
    as a Python list already (several slot counts over the same durations convert them once)."""
    d = np.asarray(durations, dtype=np.float64)
    n = len(d)
    k = max(1, int(slots))
    if n <= k:
        return np.zeros(n)
    if k == 1:
        return np.concatenate([[0.0], np.cumsum(d)[:-1]])
    dl = as_list if as_list is not None else d.tolist()
    heap = dl[:k]
    heapq.heapify(heap)
    replace_ = heapq.heapreplace  # pops the earliest free time (the job's start), pushes the job's end
    return np.asarray([0.0] * k + [replace_(heap, heap[0] + x) for x in dl[k:]])


def makespan_s(durations: Sequence[float] | np.ndarray, slots: int) -> float:
    """Returns when the last job of a list schedule on `slots` slots ends (0 for no jobs)."""
    d = np.asarray(durations, dtype=np.float64)
    return float((list_starts(d, slots) + d).max()) if len(d) else 0.0
