"""Packed trials (`resources.trials_per_gpu` k > 1): a slot is one job of up to k trials side by side.

    slot = open_slot(slots, max_parallel, k, sweep_id)     # the slot the next queued trial starts in
    hours, fields, description = slot.bill(handle, span, description)

A slot of the launcher's `max_parallel` runs up to k agents at once (k trial processes sharing the
slot's GPU, each its own agent, measured on its own: PLoRA-style packing of small trials that leave a
GPU mostly idle). A queued trial joins the slot still filling (fewer than k started and none ended),
else opens a new slot while fewer than `max_parallel` are busy; a slot is free again when all its trials
ended. Its bill: the job's wall-clock (its trials' first start to their last end, on the trials' own
clocks as their agents measured them: the clock that bills an unpacked trial) at the slot's price,
split by share: each trial's `LaunchRequest.pack_weight` (the planner's compute seconds of its work) over
the slot's, equal when a weight is missing. Each trial's record says `pack_slot`, `pack_share`, `pack_k`,
`pack_wall_s`, and its one billing line costs price × pack_wall_s × pack_share, so a slot's trials sum to
its cost (warehouse `runs.pack_*`, migration 045; the sweep report's "Packed trials"). Used by the local
launcher (gpuledger/launch/local.py).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class PackSlot:
    """One packed slot: a job of up to `k` trials side by side; `members` are launcher handles (with
    `state`, `request.pack_weight`)."""

    slot_id: str
    k: int
    members: list[Any] = field(default_factory=list)

    @property
    def filling(self) -> bool:
        return len(self.members) < self.k and all(m.state == "running" for m in self.members)

    @property
    def ended(self) -> bool:
        return all(m.state in ("done", "cancelled") for m in self.members)

    def join(self, handle: Any) -> None:
        handle.slot = self
        self.members.append(handle)

    def share(self, handle: Any) -> tuple[float, str]:
        """Returns (`handle`'s share of the slot, how it was taken)."""
        weights = [m.request.pack_weight for m in self.members]
        if all(w is not None and w > 0 for w in weights):
            return float(handle.request.pack_weight) / sum(float(w) for w in weights), "by planned compute seconds"
        return 1.0 / len(self.members), "equal"

    def bill(self, handle: Any, span: Callable[[Any], tuple[float | None, float | None]],
             description: str) -> tuple[float, dict[str, Any], str]:
        """Returns (the hours billed to `handle`: the job's wall-clock × its share / 3600, the record's
        pack_* fields, the billing line's description). `span(member)`: its (start, end), epoch seconds."""
        spans = [span(m) for m in self.members]
        started = [a for a, _ in spans if a is not None]
        ended = [b for _, b in spans if b is not None]
        wall = round(max(0.0, max(ended) - min(started)), 3) if started and ended else 0.0
        share, how = self.share(handle)
        fields = {"pack_slot": self.slot_id, "pack_share": round(share, 9), "pack_k": len(self.members),
                  "pack_wall_s": wall}
        return (wall * share / 3600.0, fields,
                f"{description}; packed slot {self.slot_id} ({len(self.members)} trial(s) in one job): "
                f"share {share:.4f} ({how}) of its {wall:.1f} s")


def open_slot(slots: list[PackSlot], max_parallel: int, k: int, sweep_id: str, handle: Any) -> PackSlot | None:
    """Returns the slot `handle` (the next queued trial) joins: the one still filling, else a new one
    (appended to `slots`) while fewer than `max_parallel` are busy; None: every slot is busy and full."""
    slot = next((s for s in slots if s.filling), None)
    if slot is None and len(slots) < max_parallel:
        slot = PackSlot(f"{sweep_id}-slot{len(slots) + 1}-{secrets.token_hex(3)}", k)
        slots.append(slot)
    if slot is not None:
        slot.join(handle)
    return slot


def trial_span(record: dict[str, Any] | None, handle: Any) -> tuple[float | None, float | None]:
    """Returns (start, end) of a trial, epoch seconds: as its agent's `record` says (the clock that bills
    an unpacked trial: `wall_s`), else as the launcher saw its agent (`handle.started_at`, `ended_at`)."""
    from datetime import datetime

    try:
        return (datetime.fromisoformat(record["started_at"]).timestamp(),  # type: ignore[index]
                datetime.fromisoformat(record["ended_at"]).timestamp())  # type: ignore[index]
    except (TypeError, KeyError, ValueError):
        return handle.started_at, handle.ended_at
