"""The package root holds at most 8 loose modules (every .py file but `__init__`) (docs/CONTRACTS.md, "Where things live"): a new
module goes into the room of its role; one that belongs at the root is folded into one there."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "gpuledger"
MAX_LOOSE_MODULES = 8


def test_the_package_root_keeps_at_most_eight_loose_modules():
    loose = sorted(p.stem for p in ROOT.glob("*.py") if p.stem != "__init__")
    assert len(loose) <= MAX_LOOSE_MODULES, (
        f"{len(loose)} loose modules at gpuledger/ ({', '.join(loose)}): at most {MAX_LOOSE_MODULES}; "
        "put the new one in the room of its role (docs/CONTRACTS.md) or fold it into one of these")
