"""`search.exclude`: the rule that takes a point out of a search, shared by the expansion of a
spec (`gpuledger.spec.expand`) and the adaptive search's sampling (`gpuledger.search`)."""

from __future__ import annotations

from typing import Any


def excluded(params: dict[str, Any], rules: list[dict[str, Any]]) -> bool:
    """True when `params` match every key of one of the `search.exclude` rules."""
    for rule in rules:
        if all(params.get(k) in (v if isinstance(v, list) else [v]) for k, v in rule.items()):
            return True
    return False
