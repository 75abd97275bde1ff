"""Stable ids: a trial's from its spec name and params, a sweep's from what makes it the same experiment."""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpuledger.spec.capacity_models import CapacitySpec
    from gpuledger.spec.models import SweepSpec


def trial_id_for(name: str, params: dict[str, Any]) -> str:
    """Returns a stable trial id: 12 hex of sha256(spec name + canonical JSON of params)."""
    blob = name + "\0" + json.dumps(params, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def spec_hash(spec: SweepSpec | CapacitySpec) -> str:
    """Returns sha256 of what makes a sweep the same experiment (not its budget or parallelism)."""
    data = spec.model_dump(mode="json")
    for volatile in ("budget", "resources", "launcher", "local", "owner", "project"):
        data.pop(volatile, None)
    for how in ("probe", "probe_above_usd"):  # whether to probe first is not the experiment
        (data.get("search") or {}).pop(how, None)
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def sweep_id_for(spec: SweepSpec | CapacitySpec) -> str:
    """Returns the stable sweep id `NAME-XXXXXXXX`: a re-run of the same spec continues it."""
    return f"{spec.name}-{spec_hash(spec)[:8]}"
