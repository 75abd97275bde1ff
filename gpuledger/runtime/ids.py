"""Sweep ids of fresh runs: `gpuledger sweep --new` starts a new sweep of an unchanged spec.

A spec's sweep id is `NAME-XXXXXXXX` from the spec's hash (`gpuledger.spec.sweep_id_for`), so a
re-run continues it. A fresh sweep n of the same spec (n = 2, 3, ...: one more than the sweeps of
that name the warehouse holds) gets `NAME-YYYYYYYY` with YYYYYYYY = sha256("HASH#n")[:8]: same
shape, deterministic given the warehouse, never one the warehouse already has.

`sweep_to_run(spec, resume)` says which sweep a run of the spec is: `resume=True` continues the
spec's latest sweep (a re-run skips its succeeded trials), `False` starts a fresh one, `None` (the
Prefect deployment's default) continues the latest only while it is unfinished (registered but not
ended: `running`, `planned`, `interrupted`, `unrecorded`, `failed`) and starts a fresh one once it
ended (`succeeded`, `partial`, `budget-stopped`): `prefect deployment run sweep/lora-grid` twice is
two sweeps.
"""

from __future__ import annotations

import hashlib
from typing import Any

#: The statuses of a sweep that ended: a run with `resume` unset starts a fresh sweep after one of these.
ENDED_STATUSES = frozenset({"succeeded", "partial", "budget-stopped"})


def _spec_sweeps(spec: Any) -> list[tuple[str, str | None]]:
    """Returns (sweep_id, status) of the warehouse's sweeps of this very spec (its own id and the
    fresh ones `new_sweep_id` made of it), most recently started first."""
    from gpuledger.settings import warehouse_if_any
    from gpuledger.spec.ids import spec_hash, sweep_id_for

    if warehouse_if_any() is None:  # no warehouse yet, or outside a project (`gpuledger plan` anywhere)
        return []
    from gpuledger.warehouse import Warehouse

    with Warehouse.open(read_only=True) as wh:
        rows = wh.query_named("sweeps_of_name", {"name": spec.name}).rows()
    base = spec_hash(spec)
    ours = {sweep_id_for(spec)} | {f"{spec.name}-{hashlib.sha256(f'{base}#{n}'.encode()).hexdigest()[:8]}"
                                   for n in range(1, len(rows) + 2)}
    return [(str(sid), None if status is None else str(status)) for sid, status, _ in rows if sid in ours]


def sweep_to_run(spec: Any, resume: bool | None) -> tuple[str, str]:
    """Returns (sweep_id, why): the sweep a run of `spec` is (see the module docstring) and one line
    saying why that one (for the run's log)."""
    from gpuledger.spec.ids import sweep_id_for

    sweeps = _spec_sweeps(spec) if resume is not False else []
    if resume is False:
        sid = new_sweep_id(spec) if _spec_sweeps(spec) else sweep_id_for(spec)
        return sid, "a fresh sweep (resume=false)"
    if not sweeps:
        return sweep_id_for(spec), "the spec's first sweep"
    latest, status = sweeps[0]
    if resume:
        return latest, f"continuing {latest} ({status or 'no status'}; resume=true: its succeeded trials are skipped)"
    if status in ENDED_STATUSES:
        return new_sweep_id(spec), (f"a fresh sweep: the spec's last sweep {latest} ended ({status}); "
                                    "resume=true continues it instead")
    return latest, f"continuing {latest}: it did not finish ({status or 'no status'})"


def new_sweep_id(spec: Any) -> str:
    """Returns an id for a fresh sweep of `spec` that the warehouse does not hold yet."""
    from gpuledger import settings
    from gpuledger.spec.ids import spec_hash

    base = spec_hash(spec)
    known: set[str] = set()
    # the team warehouse (ducklake:...) always exists to ask; a file only once made
    if settings.current().warehouse.startswith("ducklake:") or settings.resolve_path().is_file():
        from gpuledger.warehouse import Warehouse

        with Warehouse.open(read_only=True) as wh:
            known = set(wh.query_named("sweep_ids_of_name", {"name": spec.name})["sweep_id"].to_list())
    n = len(known)  # the spec's own sweep is 1; fresh ones count from 2
    while True:
        n += 1
        candidate = f"{spec.name}-{hashlib.sha256(f'{base}#{n}'.encode()).hexdigest()[:8]}"
        if candidate not in known:
            return candidate
