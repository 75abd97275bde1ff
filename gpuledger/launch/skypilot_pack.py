"""Packed trials on SkyPilot (`resources.trials_per_gpu` k > 1): one managed job runs k agents side by side.

    packer = Packer(k, wait_s=5.0)                        # SkyPilotLauncher(pack=k) holds one
    handle = packer.submit(request, launch)               # blocks until its group is launched

The engine submits each trial from its own thread. The first trial of a group waits up to `wait_s` for
k − 1 more (a sweep's k slots-worth of trials arrive together); the group is then one task
(`packed_task_config`): the first trial's resources (its planned GPU, price and fallbacks), parsed and
validated by SkyPilot's own `sky.Task.from_yaml_config` and optimizer like any launch, whose run starts
k agents in the background (`&`) and waits for them. Each agent runs in a subshell with its own trial's
variables (ids, params, `GPULEDGER_PARAM_*`) and its own signing key (task secrets
`GPULEDGER_RESULT_KEY_1..k`; each subshell exports its own as `GPULEDGER_RESULT_KEY` and unsets every
other, so no trial sees another's key) and its own result file; the job exits 0 once all have ended (a
trial's status is its own signed result line, never the job's). Every trial's handle shares the job id:
it sees the job's attempts (preemptions, recoveries) and its record is the result line signed with its
own key. Billing: each attempt of the job (its cluster's time) at the catalog price × the trial's share
(its `pack_weight`, the planner's compute seconds, over the group's; equal without weights); the record
says `pack_slot` (the job), `pack_share`, `pack_k`, `pack_wall_s` (the attempt's), so the group's
records sum to the job's cost. Cancelling one trial of a group cancels the job only when every trial of
it was cancelled (the others keep the GPU busy). Not done for packed jobs: the objective is not echoed
to the logs (the k agents' points would interleave), so the pruning watch sees nothing and packed trials
on SkyPilot run to their end; a pool (`resources.pool`) is not packed.
"""

from __future__ import annotations

import shlex
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuledger import protocol
from gpuledger.launch.base import LaunchRequest

#: how long the first trial of a group waits for the rest (seconds)
PACK_WAIT_S = 5.0


def _key_env(i: int) -> str:
    return f"{protocol.ENV_RESULT_KEY}_{i}"


def packed_task_config(requests: Sequence[LaunchRequest], keys: Sequence[bytes], **options: Any) -> dict[str, Any]:
    """Returns the YAML-shaped task running `requests` side by side (see the module's docstring)."""
    from gpuledger.launch.skypilot_task import RESULT_PATH, job_name, task_config, task_envs, wrapped_run

    first = requests[0]
    config = task_config(first, **{k: v for k, v in options.items() if k != "result_key"})
    per = [task_envs(r) for r in requests]
    shared = {k: v for k, v in per[0].items() if all(p.get(k) == v for p in per[1:])}
    config["envs"] = shared
    config["name"] = f"{job_name(first)}-pack{len(requests)}"
    config["secrets"] = {_key_env(i + 1): key.decode() for i, key in enumerate(keys)}
    unset_all = " ".join(_key_env(i + 1) for i in range(len(requests)))
    if config.get("setup"):  # set-up commands never see a key
        config["setup"] = f"unset {unset_all}\n{config['setup']}"
    lines = []
    for i, (req, env) in enumerate(zip(requests, per, strict=True), start=1):
        own = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items() if k not in shared)
        result = RESULT_PATH.replace(".json", f"-{i}.json")
        lines.append(f"( export {own} {protocol.ENV_RESULT_KEY}=\"${_key_env(i)}\"; unset {unset_all}; "
                     f"{wrapped_run(req.run, result, ())} ) &")
    config["run"] = "\n".join([*lines, "wait", "exit 0"])
    return config


@dataclass
class PackGroup:
    """Trials launched as one job: (request, key) per trial, the job's handles once launched."""

    slot: int
    members: list[tuple[LaunchRequest, bytes]] = field(default_factory=list)
    sealed: bool = False
    full: threading.Event = field(default_factory=threading.Event)
    launched: threading.Event = field(default_factory=threading.Event)
    handles: list[Any] = field(default_factory=list)
    error: BaseException | None = None

    def share(self, i: int) -> float:
        weights = [r.pack_weight for r, _ in self.members]
        if all(w is not None and w > 0 for w in weights):
            return float(weights[i]) / sum(float(w) for w in weights)  # type: ignore[arg-type]
        return 1.0 / len(self.members)


class Packer:
    """Groups a launcher's submissions k at a time (see the module's docstring)."""

    def __init__(self, k: int, wait_s: float = PACK_WAIT_S):
        self.k, self.wait_s = int(k), float(wait_s)
        self._lock = threading.Lock()
        self._open: PackGroup | None = None
        self._slots = 0

    def submit(self, request: LaunchRequest, key: bytes,
               launch: Callable[[PackGroup], list[Any]]) -> Any:
        """Returns `request`'s handle once its group is launched; `launch(group)` (called once, by the
        group's first trial) launches the job and returns every member's handle, in order."""
        with self._lock:
            group = self._open
            if group is None or group.sealed:
                self._slots += 1
                group = self._open = PackGroup(self._slots)
            group.members.append((request, key))
            index = len(group.members) - 1
            if len(group.members) >= self.k:
                group.sealed = True
                self._open = None
                group.full.set()
        if index == 0:
            group.full.wait(self.wait_s)
            with self._lock:
                group.sealed = True
                if self._open is group:
                    self._open = None
            try:
                group.handles = launch(group)
            except BaseException as err:
                group.error = err
                raise
            finally:
                group.launched.set()
        else:
            group.launched.wait()
            if group.error is not None:
                raise RuntimeError(f"the packed job of {request.trial_id} could not be launched: {group.error}")
        return group.handles[index]


def bill_share(rec: dict[str, Any], slot: str, share: float, k: int) -> None:
    """Scales `rec`'s billing lines (an attempt of the job, its cluster's whole time) to the trial's share
    and records the packing (`pack_slot`, `pack_share`, `pack_k`, `pack_wall_s`)."""
    lines = rec.get("billing") or []
    wall = sum(float(line["hours"]) for line in lines) * 3600.0
    for line in lines:
        line["hours"] = float(line["hours"]) * share
        line["cost_usd"] = float(line["cost_usd"]) * share
        line["description"] = f"{line['description']}; packed job {slot} ({k} trials): share {share:.4f}"
    rec.update(pack_slot=slot, pack_share=round(share, 9), pack_k=k, pack_wall_s=round(wall, 3))
