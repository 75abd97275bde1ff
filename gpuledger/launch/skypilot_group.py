"""An RL trial whose rollouts run on an instance of their own (`train.rollout_gpu`, docs/rl.md) as one
SkyPilot job group (SkyPilot 0.14.1, `sky/utils/dag_utils.py` `load_job_group_from_yaml_str`): a
multi-document task YAML whose header says `execution: parallel`, with two tasks started together on
their own resources:

- `trainer`: the trial's own task (`skypilot_task.task_config`: the agent wrapping `task.run`, the
  trial's GPUs, its signed result line, `gpuledger-role: trainer` on its instances);
- `rollout`: `task.rollout_run` (e.g. `trl vllm-serve --model ... --port $GPULEDGER_ROLLOUT_PORT`) on
  `train.rollout_gpus` GPUs of `train.rollout_gpu`, labelled `gpuledger-role: rollout`; not measured by
  an agent (a server that runs until the trainer ends).

The header names `primary_tasks: [trainer]` (SkyPilot ends the rollout task when the trainer ends) and
`inter_connection: true`: each task reaches the other by the hostname SkyPilot gives it,
`<task>-0.<group name>` (`sky/jobs/job_group_networking.py` `_get_job_address`). Both tasks get
`GPULEDGER_ROLE` (trainer | rollout), `GPULEDGER_ROLLOUT_HOST`/`GPULEDGER_ROLLOUT_PORT` (where the
rollouts' server listens; trainers/grpo.py defaults its `--vllm-server-host/--vllm-server-port` to them)
and `GPULEDGER_TRAINER_HOST`.

SkyPilot 0.14.1 gives a job group's tasks those hostnames on Kubernetes only: its optimizer keeps only
Kubernetes placements for a group with `inter_connection: true` and, unset, degrades a group placed on a
VM cloud to no networking ("in-group service discovery (hostname-based networking) is only supported on
Kubernetes", `sky/optimizer.py` `_optimize_same_infra`). So a group is built for `kubernetes` only and
`refuse_vm_cloud` refuses any other cloud with one message saying why, before anything is launched.
"""

from __future__ import annotations

import copy
from typing import Any

from gpuledger import protocol
from gpuledger.billing.labels import launch_labels
from gpuledger.launch.base import LaunchRequest

#: the trainer's and the rollouts' task names (hostnames `<name>-0.<group>`; also their billing roles)
TRAINER, ROLLOUT = "trainer", "rollout"
#: where the rollouts' vLLM server listens unless the request says otherwise (`trl vllm-serve`'s default)
DEFAULT_ROLLOUT_PORT = 8000
#: the one cloud SkyPilot (0.14.1) networks a job group's tasks on
GROUP_CLOUD = "kubernetes"


def refuse_vm_cloud(cloud: str | None, where: str = "the plan") -> None:
    """Raises one UserError unless `cloud` is Kubernetes (see the module)."""
    if (cloud or "").lower() == GROUP_CLOUD:
        return
    from gpuledger.errors import UserError

    raise UserError(
        f"train.rollout_gpu: {where} puts this trial on {cloud or 'no cloud'}, but its trainer and rollouts run as "
        "two tasks of one SkyPilot job group that reach each other by hostname, and SkyPilot 0.14.1 gives a job "
        "group's tasks hostnames only on Kubernetes (on a VM cloud the trainer could not reach the rollouts' "
        "vLLM server); put kubernetes in resources.clouds (your GPUs priced in gpuledger.toml [[gpus]]), or drop "
        "train.rollout_gpu (rollouts on rollout_gpus of the trial's own GPUs) to launch on this cloud")


def host(task: str, group: str) -> str:
    """Returns the hostname SkyPilot gives a job group's task (its head node)."""
    return f"{task}-0.{group}"


def role_envs(role: str, group: str, port: int) -> dict[str, str]:
    """Returns the variables of one task of the group: its role, the rollouts' host and port, the trainer's host."""
    return {protocol.ENV_ROLE: role, protocol.ENV_ROLLOUT_HOST: host(ROLLOUT, group),
            protocol.ENV_ROLLOUT_PORT: str(port), protocol.ENV_TRAINER_HOST: host(TRAINER, group)}


def refuse_split_infra(trainer: tuple[str | None, str | None], rollout: tuple[str | None, str | None],
                       trial_id: str) -> None:
    """Raises one UserError unless the plan put the trainer's and the rollouts' instances on one Kubernetes cluster
    (`(cloud, region)` each; region: the context, "default" the current one): SkyPilot places a job group with
    in-group networking on one infrastructure (`sky/optimizer.py` `_optimize_same_infra`)."""
    refuse_vm_cloud(rollout[0], f"the plan's rollout instance of trial {trial_id}")
    norm = [(str(c or "").lower(), r or "default") for c, r in (trainer, rollout)]
    if norm[0] != norm[1]:
        from gpuledger.errors import UserError

        raise UserError(f"train.rollout_gpu: the plan puts trial {trial_id}'s trainer on {'/'.join(norm[0])} and its "
                        f"rollouts on {'/'.join(norm[1])}, but SkyPilot places a job group with in-group networking on "
                        "one infrastructure (one Kubernetes context); price both GPU kinds in one [[gpus]] region, "
                        "or list one cluster in resources.clouds and resources.regions")


def _resources(request: LaunchRequest, role: str, accelerator: str, gpus: int, spot: bool) -> dict[str, Any]:
    """Kubernetes resources of one task (per node: `gpus` is a node's): the context (a region other than
    gpuledger's "default"), the GPUs, spot as planned, and the launch labels with the role (no instance
    type: SkyPilot sizes the pod)."""
    region = request.region
    res: dict[str, Any] = {"infra": f"{GROUP_CLOUD}/{region}" if region and region != "default" else GROUP_CLOUD,
                           "accelerators": {accelerator: max(1, int(gpus))}, "use_spot": bool(spot)}
    res["labels"] = launch_labels(sweep_id=request.sweep_id, trial_id=request.trial_id,
                                  sweep_name=request.sweep_name, role=role)
    return res


def group_configs(request: LaunchRequest, *, result_key: str | None = None, **options: Any) -> list[dict[str, Any]]:
    """Returns the job group of one trial as YAML documents: the header, the trainer's task, the rollouts' task.

    Pure: no `sky` import. `options`: those of `skypilot_task.task_config` (agent set-up, restarts). The trainer
    is the trial's own task (its nodes, each with `gpus / num_nodes` GPUs, its spot and job recovery as planned);
    the rollouts run on demand (as the plan priced them). Raises UserError for a request off Kubernetes
    (`refuse_vm_cloud`, `refuse_split_infra`), on a pool (SkyPilot refuses job groups on pools) or without a
    rollout task."""
    from gpuledger.errors import UserError
    from gpuledger.launch.skypilot_task import job_name, task_config, task_envs

    ro = request.rollout
    if ro is None:
        raise UserError(f"trial {request.trial_id}: no rollout task to launch beside the trainer (train.rollout_gpu "
                        "and task.rollout_run)")
    refuse_vm_cloud(request.cloud)
    refuse_split_infra((request.cloud, request.region), (ro.cloud, ro.region), request.trial_id)
    if request.pool is not None:
        raise UserError(f"trial {request.trial_id}: train.rollout_gpu launches as a SkyPilot job group, which cannot "
                        f"run on pool {request.pool} (SkyPilot: Job Groups do not support pools)")
    group = job_name(request)
    port = int(ro.port or DEFAULT_ROLLOUT_PORT)
    trainer = task_config(request, result_key=result_key, **{k: v for k, v in options.items() if k != "alternatives"})
    trainer["name"] = TRAINER
    planned = trainer["resources"].get("ordered", [trainer["resources"]])[0]
    per_node = request.gpus // max(1, request.num_nodes)
    trainer["resources"] = _resources(request, TRAINER, request.accelerator or "", per_node, request.spot)
    if planned.get("job_recovery"):  # a spot trainer recovers as task_config says
        trainer["resources"]["job_recovery"] = planned["job_recovery"]
    trainer["envs"] = {**trainer["envs"], **role_envs(TRAINER, group, port)}
    envs = {k: v for k, v in task_envs(request).items() if k != protocol.ENV_TIMEOUT_S}
    envs.update({protocol.ENV_ACCELERATOR: ro.accelerator, protocol.ENV_GPUS: str(ro.gpus)})  # its own GPUs
    envs.pop(protocol.ENV_INSTANCE_TYPE, None)
    if ro.instance_type:
        envs[protocol.ENV_INSTANCE_TYPE] = ro.instance_type
    rollout: dict[str, Any] = {"name": ROLLOUT, "workdir": trainer["workdir"],
                               "resources": _resources(request, ROLLOUT, ro.accelerator, ro.gpus, False),
                               "envs": {**envs, **role_envs(ROLLOUT, group, port)}, "run": ro.run}
    if request.setup:
        rollout["setup"] = request.setup
    header = {"name": group, "execution": "parallel", "primary_tasks": [TRAINER], "inter_connection": True}
    return [header, trainer, rollout]


def group_yaml(docs: list[dict[str, Any]]) -> str:
    """Returns the job group's multi-document YAML text (what `sky jobs launch` of a group file reads)."""
    import yaml

    return yaml.safe_dump_all(copy.deepcopy(docs), sort_keys=False, default_flow_style=False)


def build_group(docs: list[dict[str, Any]]):
    """Returns the job group as a `sky.Dag`, parsed and validated by SkyPilot's own job-group loader
    (`load_job_group_from_yaml_str`: header fields, task names, each task by `Task.from_yaml_config`)."""
    from sky.utils import dag_utils

    return dag_utils.load_job_group_from_yaml_str(group_yaml(docs))


def group_task(launcher: Any, request: LaunchRequest, key: bytes):
    """Returns what `SkyPilotLauncher.submit` launches for a job group: the `sky.Dag` SkyPilot's job-group loader
    parsed (`build_group`), or the YAML documents themselves where the launcher builds plain task dicts (its
    `task_builder` is `task_config`: tests at the SDK boundary)."""
    from gpuledger.launch.skypilot_task import task_config

    opts = {k: v for k, v in launcher._task_options(request).items() if k != "alternatives"}
    docs = group_configs(request, result_key=key.decode(), **opts)
    return docs if launcher.task_builder is task_config else build_group(docs)


def trainer_row(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Returns the trainer task's row of a job group's queue records (one per task; the trial is the trainer's)."""
    named = [r for r in records if r.get("task_name") == TRAINER]
    return named[-1] if named else min(records, key=lambda r: int(r.get("task_id") or 0))


def trial_logs(sdk: Any, job_id: int, request: LaunchRequest, tail: int | None = None) -> str:
    """Returns a trial's job log through `sdk` (`SkySDK.tail_logs`; `tail`: its last lines): of a job group,
    the trainer task's (where its agent prints the signed result line), else the job's."""
    if request.rollout is not None:
        return sdk.tail_logs(job_id, tail=tail, task=TRAINER)
    return sdk.tail_logs(job_id) if tail is None else sdk.tail_logs(job_id, tail=tail)


def group_billing(request: LaunchRequest, line: dict[str, Any], wall_s: float) -> list[dict[str, Any]]:
    """Returns a group's billing lines from the trainer's `line` (the launcher's, at the trainer's price):
    the trainer's with its role, and the rollouts' instance at the plan's price for the same wall time (the
    group's tasks start together and the rollouts end with the trainer, `primary_tasks`)."""
    ro = request.rollout
    trainer = {**line, "role": TRAINER}
    if ro is None:
        return [trainer]
    hours = wall_s / 3600.0
    return [trainer, {"source": "catalog", "description": ro.price_description or f"{ro.gpus}x {ro.accelerator} "
                      "rollout instance, plan price", "usd_per_hour": float(ro.usd_per_hour), "hours": hours,
                      "cost_usd": float(ro.usd_per_hour) * hours, "spot": False,
                      "on_demand_usd_per_hour": float(ro.usd_per_hour), "role": ROLLOUT,
                      "instance_type": ro.instance_type, "accelerator": ro.accelerator, "gpus": int(ro.gpus)}]
