"""`gpuledger render-task SPEC [--trial N]`: the SkyPilot task YAML that would be launched for trial N.

The placement comes from the planner (`gpuledger.plan.plan_sweep(spec, launcher="skypilot")`), so
a spec with `launcher: local` renders what `--launcher skypilot` would send. Where the planner is
not available, the spec's first accelerator and cloud are used (and said so on stderr).

No API server is started and no credentials are needed: the task is parsed by SkyPilot's own
`sky.Task.from_yaml_config` in-process (which reads SkyPilot's catalog to validate names).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from gpuledger.errors import UserError
from gpuledger.launch.base import LaunchRequest


def _planned_rows(spec) -> list[dict[str, Any]]:
    """Returns the planner's trial rows (placement per trial) for a SkyPilot launch."""
    from gpuledger.plan import plan_sweep

    return plan_sweep(spec, launcher="skypilot").trials


def launch_requests(spec, *, use_planner: bool = True) -> list[LaunchRequest]:
    """Returns one `LaunchRequest` per trial of `spec`, placed by the planner (or the spec's first choices).

    A trial the planner found no offer for gets no placement (accelerator None) and its reason is
    kept in `price_description`.
    """
    from gpuledger.spec import expand_trials, sweep_id_for

    trials = expand_trials(spec)
    rows = _planned_rows(spec) if use_planner else None
    by_id = {r.get("trial_id"): r for r in rows} if rows else {}
    res = spec.resources
    requests = []
    for trial in trials:
        row = by_id.get(trial.trial_id)
        if row is not None and row.get("feasible", True) and row.get("accelerator"):
            placement = dict(
                accelerator=row.get("accelerator"),
                gpus=int(row.get("gpus") or 1),
                cloud=row.get("cloud"),
                region=row.get("region"),
                instance_type=row.get("instance_type"),
                spot=bool(row.get("spot", False)),
                usd_per_hour=float(row.get("usd_per_hour", 0.0) or 0.0),
                on_demand_usd_per_hour=row.get("on_demand_usd_per_hour"),
                price_source="catalog",
                price_description=(
                    f"{row.get('cloud')} {row.get('instance_type')} {row.get('region')} "
                    f"{'spot' if row.get('spot') else 'on-demand'}, plan price "
                    f"({row.get('price_source', 'catalog')} {row.get('price_as_of', '')})".strip()
                ),
            )
        elif row is not None:
            placement = dict(price_description=f"infeasible: {row.get('reason', '')}")
        else:
            placement = dict(
                accelerator=res.accelerators[0] if res.accelerators else None,
                gpus=(res.gpus_per_trial if isinstance(res.gpus_per_trial, int) else 1) if res.accelerators else 0,
                cloud=res.clouds[0] if res.clouds else None,
                region=res.regions[0] if res.regions else None,
                spot=res.spot == "always",
                price_source="catalog",
                price_description="spec's first choices (no plan)",
            )
        requests.append(
            LaunchRequest(
                sweep_id=sweep_id_for(spec), sweep_name=spec.name, trial_id=trial.trial_id,
                params=dict(trial.params), run=trial.run, setup=trial.setup,
                workdir=Path(spec.task.workdir), env=dict(spec.task.env), **placement,
            )
        )
    return requests


def run(args: argparse.Namespace) -> int:
    from gpuledger.spec import SweepSpec, load_spec

    spec = load_spec(args.spec)
    if not isinstance(spec, SweepSpec):
        raise UserError(f"{args.spec}: render-task needs a `kind: sweep` spec (this one is kind: {spec.kind})")
    requests = launch_requests(spec)
    n = args.trial
    if not 0 <= n < len(requests):
        raise UserError(
            f"{args.spec}: no trial {n}: the spec has {len(requests)} trial(s), numbered 0 to "
            f"{len(requests) - 1}; pass --trial with one of those"
        )
    request = requests[n]
    if request.accelerator is None and request.price_description.startswith("infeasible"):
        raise UserError(f"{args.spec}: trial {n} ({request.trial_id}) fits no offer: "
                        f"{request.price_description.removeprefix('infeasible: ')}; see `gpuledger plan {args.spec}`")
    from gpuledger.launch.skypilot import build_task, task_yaml

    try:
        task = build_task(request)
    except ValueError as err:  # SkyPilot's own validation (unknown instance type, region, ...)
        raise UserError(f"{args.spec}: trial {n}: SkyPilot rejects the task: {err}") from None
    sys.stdout.write(f"# gpuledger render-task {args.spec} --trial {n}: trial {request.trial_id} "
                     f"{request.params}\n")
    sys.stdout.write(task_yaml(task))
    return 0
