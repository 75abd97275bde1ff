"""`PlannedTrial` -> `LaunchRequest`: the one place a planned trial becomes what a launcher runs.

Used by the sweep (`gpuledger.runtime.engine`) and by `gpuledger render-task`. A planned trial is one
of `Plan.planned_trials` (placement, price and estimates of one trial, `gpuledger.plan.model`).

- `launcher == "local"`: no placement (this machine), the plan row's hourly rate (the spec's
  `local.usd_per_hour`, or the planner's stated reference rate) and the spec's `local.trial_timeout`;
- any other launcher: the row's accelerator, GPU count (at least 1 when it names an accelerator),
  cloud, region, instance type, spot and price, described with the price's source and date, and the
  SkyPilot pool it runs on when the plan chose one (`pool`, `pool_workers`: gpuledger/plan/pools.py);
- a trial the planner found infeasible (`feasible` False): no placement, its `reason` in
  `price_description` (callers read `PlannedTrial.feasible`: the sweep does not launch it);
- no row at all (no plan): the spec's first accelerator, cloud and region, said so.

When the sweep prunes (`gpuledger.search.prunes`: asha, or tpe with `pruning`), the request names the
objective metric in `echo_metrics`: the SkyPilot job's agent echoes it to the logs, where the pruning
watch reads it (`SkyPilotLauncher.progress`).

The working folder is resolved against the current directory (where the spec is run from).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from gpuledger.launch import plans_as
from gpuledger.launch.base import LaunchRequest, RolloutRequest
from gpuledger.plan.model import PlannedTrial


def _price_description(row: PlannedTrial | None, local: bool) -> str:
    source = (row.price_source if row else None) or ("local" if local else "catalog")
    as_of = (row.price_as_of if row else None) or ""
    if local:
        rate = float((row.usd_per_hour if row else None) or 0.0)
        return f"local machine at ${rate:g}/h ({source} {as_of})".replace(" )", ")")
    assert row is not None
    return (f"{row.cloud} {row.instance_type} {row.region} "
            f"{'spot' if row.spot else 'on-demand'}, plan price ({source} {as_of})").replace(" )", ")")


def _placement(spec: Any, row: PlannedTrial | None, launcher: str) -> dict[str, Any]:
    local = plans_as(launcher) == "local"
    if row is not None and not row.feasible:
        return dict(price_description=f"not placed: {row.reason or 'no offer fits'}")
    if local:
        return dict(usd_per_hour=float((row.usd_per_hour if row else None) or spec.local.usd_per_hour or 0.0),
                    price_source="local", price_description=_price_description(row, True),
                    timeout_s=spec.local.trial_timeout)
    if row is not None and row.accelerator:
        from gpuledger.estimate.coefficients import nodes_for

        gpus = max(1, int(row.gpus or 1))
        return dict(
            accelerator=row.accelerator, gpus=gpus, num_nodes=nodes_for(gpus, getattr(spec.train, "nodes", None)),
            cloud=row.cloud,
            region=row.region, instance_type=row.instance_type, spot=bool(row.spot),
            usd_per_hour=float(row.usd_per_hour or 0.0),
            on_demand_usd_per_hour=row.on_demand_usd_per_hour,
            price_source="catalog", price_description=_price_description(row, False),
            pool=row.pool, pool_workers=int(row.pool_workers or 0),
        )
    res = spec.resources
    return dict(
        accelerator=res.accelerators[0] if res.accelerators else None,
        gpus=(res.gpus_per_trial if isinstance(res.gpus_per_trial, int) else 1) if res.accelerators else 0,
        cloud=res.clouds[0] if res.clouds else None,
        region=res.regions[0] if res.regions else None,
        spot=res.spot == "always",
        price_source="catalog",
        price_description="spec's first choices (no plan)",
    )


def launch_request(spec: Any, trial: Any, row: PlannedTrial | None, *, sweep_id: str, launcher: str,
                   workdir: Path | None = None) -> LaunchRequest:
    """Returns the request that runs `trial` of `spec` as planned in `row` (None: no plan)."""
    from gpuledger.runtime.launching import refuse_rollout_instance
    from gpuledger.search import prunes

    # two instances per trial: one SkyPilot job group, on Kubernetes only (docs/rl.md)
    refuse_rollout_instance(spec, launcher, row.cloud if row is not None and row.feasible else None)
    placement = _placement(spec, row, launcher)
    rollout = _rollout(spec, trial, row, launcher)
    if rollout is not None and placement.get("pool"):
        from gpuledger.errors import UserError

        raise UserError(f"train.rollout_gpu: trial {trial.trial_id} is planned on SkyPilot pool {placement['pool']}, "
                        "but its trainer and rollouts launch as one job group, which SkyPilot cannot run on a pool; "
                        "set resources.pool: never")
    if rollout is not None and placement.get("usd_per_hour") is not None:  # the plan's sum: the trainer's alone
        for key in ("usd_per_hour", "on_demand_usd_per_hour"):
            if placement.get(key) is not None:
                placement[key] = max(0.0, float(placement[key]) - rollout.usd_per_hour)
    base = Path(spec.task.workdir) if workdir is None else workdir
    return LaunchRequest(
        sweep_id=sweep_id, sweep_name=spec.name, trial_id=trial.trial_id, params=dict(trial.params),
        run=trial.run, setup=trial.setup, workdir=base, env=dict(spec.task.env),
        echo_metrics=(spec.search.objective.metric,) if prunes(spec) else (),
        pack_weight=float(row.compute_s) if row is not None and row.compute_s else None,
        rollout=rollout, **placement,
    )


def _rollout(spec: Any, trial: Any, row: PlannedTrial | None, launcher: str) -> RolloutRequest | None:
    """Returns the rollouts' own task of a trial of a spec with `train.rollout_gpu` launched on a cloud (the plan's
    rollout instance, `PlannedTrial.rollout`), else None. A placed trial without the plan's rollout instance (no
    plan, or a plan that did not time the trial by role) is one UserError: a trainer alone would wait on a vLLM
    server nobody started."""
    if launcher == "local" or not getattr(spec.train, "rollout_gpu", None) or not trial.rollout_run:
        return None
    if row is not None and not row.feasible:
        return None  # not placed: the sweep does not launch it
    ro = row.rollout if row is not None else None
    if not ro:
        from gpuledger.errors import UserError

        raise UserError(f"train.rollout_gpu {spec.train.rollout_gpu}: trial {trial.trial_id} has no rollout instance "
                        "from the plan (the job group's rollout task is placed and priced by the planner); "
                        "plan the sweep (gpuledger plan) and launch it from that plan")
    from gpuledger.launch.skypilot_group import refuse_split_infra

    refuse_split_infra((row.cloud, row.region), (ro.get("cloud"), ro.get("region")), trial.trial_id)
    return RolloutRequest(run=trial.rollout_run, accelerator=ro["accelerator"], gpus=int(ro["gpus"]),
                          usd_per_hour=float(ro["usd_per_hour"]), instance_type=ro.get("instance_type"),
                          cloud=ro.get("cloud"), region=ro.get("region"),
                          price_description=f"{ro.get('cloud')} {ro.get('instance_type')} rollout instance, "
                                            f"{ro.get('price_source') or 'catalog'} (plan)")


def launch_requests(spec: Any, trials: Iterable[Any], rows: Mapping[str, PlannedTrial] | None, *, sweep_id: str,
                    launcher: str, resolve_workdir: bool = True) -> dict[str, LaunchRequest]:
    """Returns {trial_id: request} for `trials`; `rows` maps trial ids to planned trials (None: no plan).

    `resolve_workdir`: the spec's `task.workdir` made absolute against the project's root (the folder
    of its gpuledger.toml, so a sweep started from a subfolder runs its trials where one started at
    the root does; outside a project the current directory); False keeps it as written (what
    `render-task` prints).
    """
    if resolve_workdir:
        from gpuledger.settings import find_project

        workdir = ((find_project() or Path.cwd()) / spec.task.workdir).resolve()
    else:
        workdir = Path(spec.task.workdir)
    return {t.trial_id: launch_request(spec, t, None if rows is None else rows.get(t.trial_id), sweep_id=sweep_id,
                                       launcher=launcher, workdir=workdir)
            for t in trials}
