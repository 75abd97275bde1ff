"""`gpuledger validate SPEC...`: exit 0 when every spec is valid, 1 with one line per problem."""

from __future__ import annotations

import sys

from gpuledger.spec import SpecError, load_spec


def run(args) -> int:
    failed = False
    for path in args.specs:
        try:
            spec = load_spec(path)
        except SpecError as err:
            failed = True
            print(err, file=sys.stderr)
            continue
        extra = ""
        if spec.kind == "sweep":
            from gpuledger.spec import expand_trials

            extra = f", {len(expand_trials(spec))} trials"
        print(f"{path}: ok ({spec.kind} {spec.name}{extra})")
    return 1 if failed else 0
