"""`gpuledger validate SPEC... [--json]`: exit 0 when every spec is valid, 1 with one line per problem.

Valid means what `plan` and `sweep` accept: the schema and the spec's own checks (`load_spec`), then
what the planner needs beyond them (`gpuledger.plan.requirements.planning_problems`: the tokens of a
training trial, a model the estimator knows). Whether the plan fits the budget is `plan`'s answer,
not a problem of the spec. `--json` prints one object per spec: path, ok, kind, name, trials, problems.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from gpuledger.spec import SpecError, load_spec


def check(path: str) -> dict[str, Any]:
    """Returns {path, ok, kind, name, trials, problems} of one spec file."""
    out: dict[str, Any] = {"path": path, "ok": False, "kind": None, "name": None, "trials": None, "problems": []}
    try:
        spec = load_spec(path)
    except SpecError as err:
        out["problems"] = [str(p) for p in err.problems]
        return out
    out.update(kind=spec.kind, name=spec.name)
    if spec.kind == "sweep":
        from gpuledger.plan.requirements import planning_problems
        from gpuledger.spec import expand_trials

        trials = expand_trials(spec)
        out["trials"] = len(trials)
        out["problems"] = [str(p) for p in planning_problems(spec, trials)]
    out["ok"] = not out["problems"]
    return out


def run(args) -> int:
    results = [check(path) for path in args.specs]
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
