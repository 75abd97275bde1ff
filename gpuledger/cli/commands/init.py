"""`gpuledger init [DIR] [--json]`: make DIR (default: the working directory) a gpuledger project.

Writes `gpuledger.toml`, `specs/` (with the spec schema), `trainers/`, `prefect.yaml`, `prefect.toml`
and a `.gitignore` line for the run-time folder; keeps every file that exists (never overwrites), so
running it again changes nothing. Prints what it wrote and what it kept (see gpuledger/scaffold).
"""

from __future__ import annotations

import argparse
import json


def run(args: argparse.Namespace) -> int:
    from gpuledger.scaffold import init_project

    result = init_project(args.dir)
    if getattr(args, "json", False):
        print(json.dumps(result.to_dict(), indent=2))
        return 0
    print(f"gpuledger project in {result.root}")
    for rel in result.written:
        print(f"  wrote {rel}")
    for rel in result.kept:
        print(f"  kept  {rel} (exists; not overwritten)")
    for rel in result.refused:
        print(f"  NOT written {rel}")
    if result.written:
        print("Next: `gpuledger doctor` checks the set-up; `gpuledger demo` runs the demo sweeps here.")
    return 0
