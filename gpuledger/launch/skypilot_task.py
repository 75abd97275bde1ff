"""The SkyPilot task of one trial: `task_config(request)` (pure, a YAML-shaped dict) and `build_task`
(parsed by SkyPilot's own `sky.Task.from_yaml_config`). Part 1 of `gpuledger.launch.skypilot`'s
docstring describes the task; the launcher module re-exports these names.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuledger import protocol
from gpuledger.billing.labels import launch_labels
from gpuledger.launch.base import LaunchRequest

#: Where the agent writes its record inside the job (the record also goes to the logs).
RESULT_PATH = "/tmp/gpuledger-result.json"
PARAM_ENV_PREFIX = protocol.ENV_PARAM_PREFIX
#: Installs what the in-job agent needs; the agent itself (this installed gpuledger package) is
#: mounted into the job (`PACKAGE_MOUNT`), so a job from a user's own repository has it too.
AGENT_SETUP = "python3 -m pip install --quiet 'psutil>=5.9' 'pydantic>=2,<3' 'nvidia-ml-py>=12'"
#: Where the job finds this gpuledger package: `file_mounts` copies the installed package there and
#: the agent (and the trial it runs, for `gpuledger.track`) import it through PYTHONPATH.
PACKAGE_PARENT = "~/.gpuledger/lib"
PACKAGE_MOUNT = f"{PACKAGE_PARENT}/gpuledger"
#: what a trial's `run` starts with: the mounted package first on the path, then the agent
AGENT_RUN_PREFIX = f'PYTHONPATH="$HOME/{PACKAGE_PARENT[2:]}${{PYTHONPATH:+:$PYTHONPATH}}" '


def package_dir() -> Path:
    """Returns the folder of this installed gpuledger package (what the job gets as `PACKAGE_MOUNT`)."""
    return Path(__file__).resolve().parents[1]  # gpuledger/launch/skypilot_task.py -> gpuledger/
#: Spot: restart on the trial's own errors this often (besides preemption recoveries, unlimited).
DEFAULT_MAX_RESTARTS_ON_ERRORS = 1


# --------------------------------------------------------------------------------------------
# The task


@dataclass(frozen=True)
class Placement:
    """One candidate placement: where a trial may run (a fallback to the planned one)."""

    cloud: str | None = None
    region: str | None = None
    instance_type: str | None = None


def job_name(request: LaunchRequest) -> str:
    """Returns the managed job's name: `gl-<sweep name>-<trial id>` (SkyPilot-safe characters)."""
    name = f"gl-{request.sweep_name}-{request.trial_id}".lower()
    return re.sub(r"[^a-z0-9-]", "-", name)[:63].rstrip("-")


def param_env_name(name: str) -> str:
    """Returns `GPULEDGER_PARAM_<NAME>` with the name upper-cased and non-identifier characters as `_`."""
    return PARAM_ENV_PREFIX + re.sub(r"[^A-Z0-9_]", "_", name.upper())


def _env_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    return json.dumps(value, sort_keys=True)


def task_envs(request: LaunchRequest) -> dict[str, str]:
    """Returns the job's environment: the spec's own env (never a `GPULEDGER_*` name: those are
    gpuledger's, refused by spec validation and dropped here too), then params, ids and the planned
    placement, which nothing in the spec can override."""
    envs = {str(k): str(v) for k, v in request.env.items() if not protocol.ledger_env_names([str(k)])}
    envs.update({param_env_name(k): _env_value(v) for k, v in request.params.items()})
    envs.update(
        {protocol.ENV_PARAMS: json.dumps(request.params, sort_keys=True, default=str),
         protocol.ENV_TRIAL_ID: request.trial_id,
         protocol.ENV_SWEEP_ID: request.sweep_id,
         protocol.ENV_SWEEP_NAME: request.sweep_name,
         protocol.ENV_LAUNCHER: "skypilot",
         protocol.ENV_SPOT: "true" if request.spot else "false"}
    )
    for key, value in ((protocol.ENV_CLOUD, request.cloud), (protocol.ENV_REGION, request.region),
                       (protocol.ENV_INSTANCE_TYPE, request.instance_type),
                       (protocol.ENV_ACCELERATOR, request.accelerator)):
        if value:
            envs[key] = value
    if request.accelerator:
        envs[protocol.ENV_GPUS] = str(request.gpus)
    if request.timeout_s:
        envs[protocol.ENV_TIMEOUT_S] = str(request.timeout_s)
    envs.update({str(k): str(v) for k, v in request.probe_env.items()})  # a probe's purpose and stop rule
    return envs


def wrapped_run(run: str, result_path: str = RESULT_PATH, echo_metrics: Sequence[str] = ()) -> str:
    """Returns the trial command wrapped by the agent (`bash -c` of the shell-quoted command).

    `echo_metrics`: the agent echoes these metrics to the job's logs as it reads them (at most one
    line per metric per second), where `SkyPilotLauncher.progress` reads them for the pruner.
    """
    echo = f" --echo-metrics {shlex.quote(','.join(echo_metrics))}" if echo_metrics else ""
    return (f"{AGENT_RUN_PREFIX}python3 -m gpuledger.agent --result {shlex.quote(result_path)}{echo} "
            f"-- bash -c {shlex.quote(run)}")


def _resource(request: LaunchRequest, place: Placement, recovery: dict | None) -> dict[str, Any]:
    res: dict[str, Any] = {}
    if place.cloud:
        res["infra"] = f"{place.cloud}/{place.region}" if place.region else place.cloud
    if place.instance_type:
        res["instance_type"] = place.instance_type
    if request.accelerator:  # per node: a trial of several nodes splits its GPUs evenly over them
        res["accelerators"] = {request.accelerator: max(1, request.gpus // max(1, request.num_nodes))}
    res["use_spot"] = bool(request.spot)
    # the bill names the run: FOCUS Tags carry these labels (gpuledger.billing.labels)
    res["labels"] = launch_labels(sweep_id=request.sweep_id, trial_id=request.trial_id,
                                  sweep_name=request.sweep_name)
    if recovery:
        res["job_recovery"] = dict(recovery)
    return res


def task_config(
    request: LaunchRequest,
    *,
    alternatives: Sequence[Placement] = (),
    region_failover: bool = False,
    agent_setup: str | None = AGENT_SETUP,
    max_restarts_on_errors: int = DEFAULT_MAX_RESTARTS_ON_ERRORS,
    result_path: str = RESULT_PATH,
    result_key: str | None = None,
) -> dict[str, Any]:
    """Returns the SkyPilot task of one trial as a YAML-shaped dict (what `sky.Task.from_yaml_config` reads).

    Pure: no `sky` import. `alternatives` are fallback placements after the planned one;
    `region_failover` adds "same cloud and instance type, any region" as the last fallback (spot).
    `result_key`: the key the job's agent signs its result line with, passed as a task secret
    (`secrets: {GPULEDGER_RESULT_KEY: ...}`: SkyPilot sets it for set-up and run like `envs` but
    redacts it from the YAML it shows and logs); the set-up unsets it first, the agent removes it
    before the trial starts.
    """
    planned = Placement(request.cloud, request.region, request.instance_type)
    places = [planned, *[p for p in alternatives if p != planned]]
    if region_failover and request.cloud and request.region:
        anywhere = Placement(request.cloud, None, request.instance_type)
        if anywhere not in places:
            places.append(anywhere)
    recovery = None
    if request.spot:
        movable = len(places) > 1 or not request.region
        recovery = {
            "strategy": "EAGER_NEXT_REGION" if movable else "FAILOVER",
            "max_restarts_on_errors": int(max_restarts_on_errors),
        }
    resources = [_resource(request, p, recovery) for p in places]
    setup = "\n".join(s for s in (agent_setup, request.setup) if s) or None
    if setup and result_key:  # set-up commands (pip installs run packages' code) never see the key
        setup = f"unset {protocol.ENV_RESULT_KEY}\n{setup}"
    config: dict[str, Any] = {"name": job_name(request)}
    config["workdir"] = str(request.workdir)
    config["file_mounts"] = {PACKAGE_MOUNT: str(package_dir())}
    config["resources"] = resources[0] if len(resources) == 1 else {"ordered": resources}
    config["envs"] = task_envs(request)
    if result_key:
        config["secrets"] = {protocol.ENV_RESULT_KEY: result_key}
    if setup:
        config["setup"] = setup
    config["run"] = wrapped_run(request.run, result_path, request.echo_metrics)
    if request.num_nodes > 1:
        config["num_nodes"] = int(request.num_nodes)
        config["run"] = multi_node_run(request.run, config["run"])
    return config


def multi_node_run(run: str, wrapped: str) -> str:
    """Returns the run of a task of several nodes: the agent (`wrapped`) on the head node (SkyPilot's
    SKYPILOT_NODE_RANK 0), which measures and reports the trial once; the trial's own command on the others
    (it reads SKYPILOT_NODE_RANK, SKYPILOT_NODE_IPS and SKYPILOT_NUM_NODES for torchrun / accelerate)."""
    return (f'if [ "${{SKYPILOT_NODE_RANK:-0}}" = "0" ]; then\n  {wrapped}\n'
            f"else\n  {AGENT_RUN_PREFIX}bash -c {shlex.quote(run)}\nfi")


def build_task(request: LaunchRequest, **options):
    """Returns the `sky.Task` of one trial, parsed and validated by SkyPilot (see `task_config`).

    Side effect: SkyPilot reads its catalog (`~/.sky/catalogs/v8`) to validate instance types and
    regions, and downloads a missing catalog file.
    """
    import sky

    return sky.Task.from_yaml_config(task_config(request, **options))


def build_config(config: dict[str, Any]):
    """Returns the `sky.Task` of a YAML-shaped task dict (a pool's, or a trial's job on a pool), parsed and
    validated by SkyPilot's own `sky.Task.from_yaml_config` (see `build_task` for what it reads)."""
    import sky

    return sky.Task.from_yaml_config(config)


class _NoAliasDumper:
    """Builds a yaml Dumper that never writes anchors/aliases (SkyPilot shares one job_recovery dict)."""

    @staticmethod
    def make():
        import yaml

        class Dumper(yaml.SafeDumper):
            def ignore_aliases(self, data):  # noqa: ARG002 - yaml's signature
                return True

        return Dumper


def task_yaml(task) -> str:
    """Returns the YAML text of a `sky.Task` (its `to_yaml_config()`), keys in SkyPilot's order."""
    import yaml

    config = {k: v for k, v in task.to_yaml_config().items() if not k.startswith("_")}  # internal keys
    return yaml.dump(config, Dumper=_NoAliasDumper.make(), sort_keys=False,
                     default_flow_style=False)
