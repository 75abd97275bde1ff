"""The sweep's SkyPilot pool (the plan chose one: gpuledger/plan/pools.py): created or reused before the
first trial, trials launched onto it, torn down when the sweep ends, and what its workers cost.

No `sky` import here: the tasks are YAML-shaped dicts (`pool_task_config`, `pool_job_config`) that the
launcher's task builder parses with SkyPilot's own parser, and every call goes through the SDK boundary
(`gpuledger.launch.skypilot_sdk.SkySDK`: `pool_apply`, `pool_status`, `pool_down`, `launch(pool=)`).

- The pool task: the trial's task (`skypilot_task.task_config`) without `run`, with `pool: {workers: K}`:
  the workers' resources (the planned instance, spot or not), workdir, envs and set-up, applied once.
- A trial's job on the pool: the trial's task without `setup` (the worker ran it) and with only the
  accelerators it needs as resources (the worker is the placement), launched with `pool=`.
- `PoolKeeper.ensure(request)`: the first trial of a pool finds it with `pool_status`; a pool of that
  name left by an earlier run of the sweep (Ctrl-C, a crash) is reused, its workers set to this plan's
  count; otherwise it is created with `pool_apply`. A request without a pool tears down a leftover pool
  of its sweep (`gpuledger.plan.pools.pool_name`), so a run that changed its mind pays no idle workers.
- `PoolKeeper.close()`: `pool_down` of every pool this run used, then `PoolUsage` per pool: each
  worker billed from its `launched_at` (SkyPilot's cluster record) to the teardown; the trials' own
  attempts (`busy_s`, the records bill them) and the rest, the workers' start-up and idle tail, which
  is the sweep's (`idle_usd`). `per_trial_jobs_usd` prices the same trials as per-trial managed jobs:
  their busy time plus, per trial, the workers' measured mean start-up (launch to first trial).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from gpuledger.launch.base import LaunchRequest


def pool_task_config(request: LaunchRequest, workers: int, **task_options: Any) -> dict[str, Any]:
    """Returns the pool's task (YAML-shaped): the trial's task without `run`, with `pool: {workers}`."""
    from gpuledger.launch.skypilot_task import task_config

    config = task_config(request, **task_options)
    config.pop("run", None)
    config["name"] = request.pool
    config["pool"] = {"workers": int(workers)}
    return config


def pool_job_config(request: LaunchRequest, **task_options: Any) -> dict[str, Any]:
    """Returns one trial's job on the pool (YAML-shaped): no set-up, resources = the accelerators it needs."""
    from gpuledger.launch.skypilot_task import task_config

    config = task_config(request, **task_options)
    config.pop("setup", None)
    config["resources"] = {"accelerators": {request.accelerator: max(1, request.gpus)}} if request.accelerator else {}
    return config


@dataclass
class PoolUsage:
    """What one pool's workers were billed for (seconds, US dollars at the plan's worker price)."""

    name: str
    workers: int
    reused: bool
    worker_s: float  # every worker from its launch to the teardown
    busy_s: float  # the trials' attempts on the pool (billed in their own records)
    idle_s: float  # worker_s - busy_s: start-up and idle tail, the sweep's
    usd_per_hour: float
    idle_usd: float
    startup_s: float | None  # the workers' mean measured start-up (launch to their first trial), if known
    per_trial_jobs_usd: float | None  # the same trials as per-trial jobs: busy + one start-up each
    pool_usd: float
    trials: int

    @property
    def saving_usd(self) -> float | None:
        return None if self.per_trial_jobs_usd is None else self.per_trial_jobs_usd - self.pool_usd

    def to_json(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__}
        return {**out, "saving_usd": self.saving_usd}


@dataclass
class _Pool:
    name: str
    workers: int
    usd_per_hour: float
    reused: bool
    applied_at: float
    jobs: list[Any] = field(default_factory=list)  # the launcher's handles of trials on it


class PoolKeeper:
    """The pools of one sweep run (see the module's docstring). Thread-safe: trials submit from threads."""

    def __init__(self, sdk: Any, build: Any, clock: Any, log: Any = None):
        self.sdk, self.build, self.clock, self.log = sdk, build, clock, log
        self.pools: dict[str, _Pool] = {}
        self.checked: set[str] = set()
        self.usage: list[PoolUsage] = []
        self._lock = threading.Lock()

    def ensure(self, request: LaunchRequest, task_options: dict[str, Any]) -> str | None:
        """Returns the pool the request runs on, created or reused first (None: its own job; a leftover
        pool of its sweep is torn down)."""
        with self._lock:
            if request.pool is None:
                self._down_leftover(request.sweep_id)
                return None
            if request.pool in self.pools:
                return request.pool
            found = self.sdk.pool_status(request.pool)
            workers = max(1, int(request.pool_workers or 1))
            self.sdk.pool_apply(self.build(pool_task_config(request, workers, **task_options)), request.pool, workers)
            self.pools[request.pool] = _Pool(request.pool, workers, float(request.usd_per_hour or 0.0),
                                             reused=bool(found), applied_at=self.clock())
            self.checked.add(request.sweep_id)
            self._say("%s SkyPilot pool %s (%d worker(s))", "reusing" if found else "created", request.pool, workers)
            return request.pool

    def attach(self, pool: str, handle: Any) -> None:
        with self._lock:
            self.pools[pool].jobs.append(handle)

    def _down_leftover(self, sweep_id: str) -> None:
        if sweep_id in self.checked:
            return
        self.checked.add(sweep_id)
        from gpuledger.plan.pools import pool_name

        name = pool_name(sweep_id)
        try:
            if self.sdk.pool_status(name):
                self._say("tearing down SkyPilot pool %s, left by an earlier run of this sweep", name)
                self.sdk.pool_down(name)
        except Exception as err:  # noqa: BLE001 - a trial of its own does not wait on another's leftover
            self._say("could not check for a leftover SkyPilot pool %s (%s); `sky jobs pool status` shows it",
                      name, err)

    def close(self) -> list[PoolUsage]:
        """Tears down every pool this run used; returns what each cost (also kept in `usage`)."""
        with self._lock:
            pools, self.pools = list(self.pools.values()), {}
        for pool in pools:
            try:
                status = self.sdk.pool_status(pool.name)
            except Exception:  # noqa: BLE001 - the teardown matters more than the accounting
                status = []
            self.sdk.pool_down(pool.name)
            self._say("tore down SkyPilot pool %s", pool.name)
            self.usage.append(pool_usage(pool, status, self.clock()))
        return self.usage

    def _say(self, msg: str, *args: Any) -> None:
        if self.log is not None:
            self.log.info(msg, *args)


def pool_usage(pool: _Pool, status: list[dict[str, Any]], ended_at: float) -> PoolUsage:
    """Returns what the pool's workers were billed for: each worker from its `launched_at` (the pool's
    apply when SkyPilot does not say) to `ended_at`, against its trials' attempts."""
    workers = (status[0].get("workers") if status else None) or []
    # a reused pool (left by an earlier run) is counted from this run's apply: its time before is not this run's
    floor = pool.applied_at if pool.reused else 0.0
    launched = [max(floor, float(w["launched_at"])) for w in workers if w.get("launched_at")]
    if len(launched) < pool.workers:  # workers SkyPilot no longer lists: billed from the apply, an upper bound
        launched += [pool.applied_at] * (pool.workers - len(launched))
    worker_s = sum(max(0.0, ended_at - t) for t in launched)
    attempts = [a for job in pool.jobs for a in job.attempts if a.ended_at is not None]
    busy_s = sum(a.ended_at - a.started_at for a in attempts)
    firsts = sorted(a.started_at for a in attempts)
    startup = None
    if firsts and launched:
        gaps = [max(0.0, first - t) for t, first in zip(sorted(launched), firsts, strict=False)]
        startup = sum(gaps) / len(gaps)
    per_s = pool.usd_per_hour / 3600.0
    idle_s = max(0.0, worker_s - busy_s)
    per_trial = None if startup is None else (busy_s + startup * len(pool.jobs)) * per_s
    return PoolUsage(name=pool.name, workers=pool.workers, reused=pool.reused, worker_s=worker_s, busy_s=busy_s,
                     idle_s=idle_s, usd_per_hour=pool.usd_per_hour, idle_usd=idle_s * per_s, startup_s=startup,
                     per_trial_jobs_usd=per_trial, pool_usd=worker_s * per_s, trials=len(pool.jobs))
