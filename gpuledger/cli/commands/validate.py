"""`gpuledger validate SPEC... [--json]`: exit 0 when every spec is valid, 1 with one line per problem.

Valid means what `plan` and `sweep` accept: the schema and the spec's own checks (`load_spec`), then
what the planner needs beyond them (`gpuledger.plan.requirements.planning_problems`: the tokens of a
training trial, a model the estimator knows). Whether the plan fits the budget is `plan`'s answer,
not a problem of the spec. `--json` prints one object per spec: path, ok, kind, name, trials, problems.
"""

from __future__ import annotations

import json
import sys


def run(args) -> int:
    from gpuledger.api import Ledger

    ledger = Ledger()
    results = [ledger.validate(path).to_json() for path in args.specs]
    if getattr(args, "json", False):
        print(json.dumps(results, indent=2))
    else:
        for r in results:
            if r["ok"]:
                extra = f", {r['trials']} trials" if r["trials"] is not None else ""
                print(f"{r['path']}: ok ({r['kind']} {r['name']}{extra})")
            for line in r["problems"]:
                print(line, file=sys.stderr)
    return 0 if all(r["ok"] for r in results) else 1
