"""`gpuledger render-task SPEC [--trial N]`: the SkyPilot task YAML that would be launched for trial N.

The placement comes from the planner (`gpuledger.plan.plan_sweep(spec, launcher="skypilot")`), so
a spec with `launcher: local` renders what `--launcher skypilot` would send; the plan row becomes a
`LaunchRequest` in `gpuledger.runtime.requests`, as in a sweep.

No API server is started, no credentials are needed and nothing is downloaded. Where SkyPilot's
own catalog of the trial's cloud is cached (`~/.sky/catalogs/v8/<cloud>/vms.csv`), the task is
parsed and validated by SkyPilot's `sky.Task.from_yaml_config` in-process; otherwise (offline, a
fresh machine) it is validated against gpuledger's bundled catalog (gpuledger/catalog/offers.csv)
without importing SkyPilot, which would try to download its catalog. Either way stdout carries only
the YAML (`render-task ... > task.yaml`): whatever SkyPilot prints while validating goes to stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from gpuledger.errors import UserError
from gpuledger.launch.base import LaunchRequest

if TYPE_CHECKING:
    from gpuledger.plan.model import PlannedTrial
    from gpuledger.spec.expand import Trial


def planned_trials(spec, *, use_planner: bool = True) -> tuple[list[Trial], dict[str, PlannedTrial] | None]:
    """Returns the trials of `spec` and, unless `use_planner` is False, their planned trials for SkyPilot."""
    from gpuledger.spec import expand_trials

    trials = expand_trials(spec)
    if not use_planner:
        return trials, None
    from gpuledger.plan import plan_sweep

    return trials, {t.trial_id: t for t in plan_sweep(spec, trials, launcher="skypilot").planned_trials}


def launch_requests(spec, *, use_planner: bool = True) -> list[LaunchRequest]:
    """Returns one `LaunchRequest` per trial of `spec`, placed by the planner for SkyPilot (or, with
    `use_planner=False`, on the spec's first choices); built by `gpuledger.runtime.requests`, the
    same code the sweep uses. A trial the planner found no offer for gets no placement."""
    from gpuledger.runtime import requests
    from gpuledger.spec import sweep_id_for

    trials, rows = planned_trials(spec, use_planner=use_planner)
    return list(requests.launch_requests(spec, trials, rows, sweep_id=sweep_id_for(spec), launcher="skypilot",
                                         resolve_workdir=False).values())


def run(args: argparse.Namespace) -> int:
    from gpuledger.spec import SweepSpec, load_spec

    spec = load_spec(args.spec)
    if not isinstance(spec, SweepSpec):
        raise UserError(f"{args.spec}: render-task needs a `kind: sweep` spec (this one is kind: {spec.kind})")
    from gpuledger.runtime.requests import launch_request
    from gpuledger.spec import sweep_id_for

    trials, rows = planned_trials(spec)
    n = args.trial
    if not 0 <= n < len(trials):
        raise UserError(
            f"{args.spec}: no trial {n}: the spec has {len(trials)} trial(s), numbered 0 to "
            f"{len(trials) - 1}; pass --trial with one of those"
        )
    trial = trials[n]
    planned = (rows or {}).get(trial.trial_id)
    if planned is not None and not planned.feasible:
        raise UserError(f"{args.spec}: trial {n} ({trial.trial_id}) fits no offer: "
                        f"{planned.reason or 'no offer fits'}; see `gpuledger plan {args.spec}`")
    request = launch_request(spec, trial, planned, sweep_id=sweep_id_for(spec), launcher="skypilot",
                             workdir=Path(spec.task.workdir))
    from gpuledger.catalog.skypilot import cached_clouds

    if request.rollout is not None:  # train.rollout_gpu: the trainer's and the rollouts' tasks, one job group
        from gpuledger.launch.skypilot_group import group_configs, group_yaml

        text = group_yaml(group_configs(request))
        how = ("a SkyPilot job group: the trainer's task and the rollouts' (task.rollout_run), "
               "gpuledger/launch/skypilot_group.py")
    elif request.cloud and cached_clouds((request.cloud,)):
        from gpuledger.launch.skypilot_task import build_task, task_yaml

        try:
            with stdout_to_stderr():
                text = task_yaml(build_task(request))
        except ValueError as err:  # SkyPilot's own validation (unknown instance type, region, ...)
            raise UserError(f"{args.spec}: trial {n}: SkyPilot rejects the task: {err}") from None
        how = "validated by SkyPilot against its cached catalog"
    else:
        text = bundled_task_yaml(request, where=f"{args.spec}: trial {n}")
        how = (f"SkyPilot's catalog of {request.cloud} is not cached here: validated against gpuledger's "
               "bundled catalog (gpuledger/catalog/offers.csv)")
    sys.stdout.write(f"# gpuledger render-task {args.spec} --trial {n}: trial {request.trial_id} "
                     f"{request.params}\n# {how}\n")
    sys.stdout.write(text)
    sys.stdout.flush()
    return 0


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Sends everything written to stdout inside the block to stderr: Python's `sys.stdout` and
    file descriptor 1 (SkyPilot's logging handlers and `<sky-payload>` lines may hold either)."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved, 1)
        os.close(saved)


def bundled_task_yaml(request: LaunchRequest, *, where: str) -> str:
    """Returns the task YAML of `request` (`task_config`, no SkyPilot import) after checking its
    cloud, region, instance type and accelerator count against the bundled offers; raises
    `UserError` naming what the bundled catalog does not have."""
    import polars as pl
    import yaml

    from gpuledger.catalog.pricing import load_offers
    from gpuledger.launch.skypilot_task import task_config

    offers = load_offers(clouds=[request.cloud] if request.cloud else None)
    rows = offers.filter(pl.col("instance_type") == request.instance_type) if request.instance_type else offers
    if request.region:
        rows = rows.filter(pl.col("region") == request.region)
    if request.accelerator:
        rows = rows.filter((pl.col("accelerator") == request.accelerator) & (pl.col("accelerator_count") >= max(1, request.gpus)))
    if rows.is_empty():
        raise UserError(f"{where}: {request.cloud} {request.instance_type or ''} {request.region or ''} with "
                        f"{request.gpus}x {request.accelerator} is not in the bundled catalog (gpuledger/catalog/offers.csv); "
                        "fill SkyPilot's catalog (`sky check`, online) to validate against it instead")

    class _NoAliases(yaml.SafeDumper):
        def ignore_aliases(self, data):  # noqa: ARG002 - yaml's signature
            return True

    return yaml.dump(task_config(request), Dumper=_NoAliases, sort_keys=False, default_flow_style=False)
