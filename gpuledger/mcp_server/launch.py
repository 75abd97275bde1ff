"""`python -m gpuledger.mcp_server.launch SPEC [--max-parallel N]`: the process the MCP `sweep` tool
starts for a sweep it admitted (after the agent budget's check): `Ledger.sweep` (the Prefect flow
run), its progress as one line per event on stdout (the launch's log), the summary at the end.
Exit codes as `gpuledger sweep`: 0, 1 (a trial failed or a record is not stored), 3 (the spec's
own budget guard refused), 130 (interrupted)."""

from __future__ import annotations

import argparse
import json
import sys

from gpuledger.api import Ledger
from gpuledger.errors import UserError


def _line(event: dict) -> None:
    kind = event.get("kind")
    if kind in ("planned", "result", "skipped-budget"):
        print(f"gpuledger sweep: {json.dumps(event, default=str)}", flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m gpuledger.mcp_server.launch")
    p.add_argument("spec")
    p.add_argument("--max-parallel", type=int, default=None)
    args = p.parse_args(argv)
    from gpuledger.runtime.events import progress_listener

    try:
        with progress_listener(_line):
            summary = Ledger().sweep(args.spec, max_parallel=args.max_parallel,
                                     say=lambda msg: print(f"gpuledger sweep: {msg}", flush=True))
    except UserError as err:
        print(f"gpuledger sweep: {err}", file=sys.stderr, flush=True)
        return err.exit_code
    except KeyboardInterrupt:
        print("gpuledger sweep: interrupted", file=sys.stderr, flush=True)
        return 130
    print(json.dumps(summary.to_dict(), indent=2, default=str), flush=True)
    return summary.exit_code()


if __name__ == "__main__":
    sys.exit(main())
