"""Sweep ids of fresh runs: `gpuledger sweep --new` starts a new sweep of an unchanged spec.

A spec's sweep id is `NAME-XXXXXXXX` from the spec's hash (`gpuledger.spec.sweep_id_for`), so a
re-run continues it. A fresh sweep n of the same spec (n = 2, 3, ...: one more than the sweeps of
that name the warehouse holds) gets `NAME-YYYYYYYY` with YYYYYYYY = sha256("HASH#n")[:8]: same
shape, deterministic given the warehouse, never one the warehouse already has.
"""

from __future__ import annotations

import hashlib
from typing import Any


def new_sweep_id(spec: Any) -> str:
    """Returns an id for a fresh sweep of `spec` that the warehouse does not hold yet."""
    from gpuledger.settings import resolve_path
    from gpuledger.spec.ids import spec_hash

    base = spec_hash(spec)
    known: set[str] = set()
    if resolve_path().is_file():
        from gpuledger.warehouse import Warehouse

        with Warehouse.open(read_only=True) as wh:
            known = set(wh.query_named("sweep_ids_of_name", {"name": spec.name})["sweep_id"].to_list())
    n = len(known)  # the spec's own sweep is 1; fresh ones count from 2
    while True:
        n += 1
        candidate = f"{spec.name}-{hashlib.sha256(f'{base}#{n}'.encode()).hexdigest()[:8]}"
        if candidate not in known:
            return candidate
