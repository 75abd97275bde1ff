"""The launcher of a sweep, and one trial run through it (submit, poll, collect, with retries).

A trial that ran and failed is a result (its record says so), never retried here. Only the
launcher itself raising (cannot submit, cannot poll, cannot collect) is retried, after
`LAUNCH_RETRY_DELAYS_S` (with +-20% jitter); the attempt is cancelled first, so a retry never
leaves a twin running. After the last retry the error is returned as the trial's outcome.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuledger.launch.base import TERMINAL, LaunchRequest
from gpuledger.record import ResultRecord

#: Backoff between attempts when the launcher itself raises (not the trial): 3 retries.
LAUNCH_RETRY_DELAYS_S = (2.0, 10.0, 30.0)
RETRY_JITTER = 0.2


def refuse_rollout_instance(spec: Any, launcher: str, cloud: str | None = None, pack: int = 1) -> None:
    """Raises one UserError where a spec whose RL rollouts run on an instance of their own (`train.rollout_gpu`,
    docs/rl.md) cannot launch: the trainer's and the rollouts' instances start together as one SkyPilot job
    group (gpuledger/launch/skypilot_group.py), which needs `task.rollout_run` and Kubernetes (`cloud`: the
    trial's planned cloud; None: the spec's `resources.clouds` must name it); another cloud launcher cannot, nor
    packed trials (`pack` > 1: k trials in one job)."""
    own = getattr(getattr(spec, "train", None), "rollout_gpu", None)
    if not own or launcher == "local":
        return
    from gpuledger.errors import UserError

    if launcher != "skypilot":
        raise UserError(f"train.rollout_gpu {own}: rollouts on an instance of their own launch only as a SkyPilot "
                        f"job group (launcher: skypilot), not with launcher {launcher}")
    if pack > 1:
        raise UserError(f"train.rollout_gpu {own}: {pack} trials packed per GPU (resources.trials_per_gpu) cannot "
                        "each be a job group of their own instances; set resources.trials_per_gpu: 1")
    from gpuledger.plan.workloads import rollout_run_problem

    problem = rollout_run_problem(spec)
    if problem is not None:
        raise UserError(str(problem))
    from gpuledger.launch.skypilot_group import GROUP_CLOUD, refuse_vm_cloud

    clouds = [c.lower() for c in (spec.resources.clouds or [])]
    if cloud is not None:
        refuse_vm_cloud(cloud)
    elif GROUP_CLOUD not in clouds:
        refuse_vm_cloud(", ".join(clouds) or None, "resources.clouds")


def make_launcher(name: str, spec: Any, max_parallel: int, landing: Path, pack: int = 1) -> Any:
    """Returns the launcher `name` for a sweep of `spec` (records land in `landing`); `pack` trials side
    by side per slot (packed trials, `resources.trials_per_gpu`)."""
    from gpuledger.launch import get_launcher

    refuse_rollout_instance(spec, name, pack=pack)
    if name == "local":
        from gpuledger.runtime.landing import landing_key

        try:
            key = landing_key(landing)
        except OSError:  # a full disk: agents sign with their attempt's key only; keeping records says the rest
            key = None
        return get_launcher("local", max_parallel=max_parallel, landing_dir=landing,
                            default_timeout_s=spec.local.trial_timeout, landing_key=key, pack=pack)
    return get_launcher(name, landing_dir=landing, **({"pack": pack} if pack > 1 else {}))


def poll_interval_s(launcher: Any) -> float:
    """Returns how often to poll a launcher: its own `poll_interval_s`, else 20 ms locally, 10 s for clouds."""
    explicit = getattr(launcher, "poll_interval_s", None)
    if explicit is not None:
        return float(explicit)
    return 0.02 if getattr(launcher, "name", "") == "local" else 10.0


#: How often a running trial's intermediate metrics are read for the pruner (seconds), at least;
#: a launcher whose read is costly says its own `progress_interval_s` (SkyPilot: an API call).
WATCH_INTERVAL_S = 0.5


def watch_interval_s(launcher: Any) -> float:
    """Returns how often the pruning watch reads a launcher's `progress`: its own `progress_interval_s`,
    else every poll but at most every `WATCH_INTERVAL_S`."""
    explicit = getattr(launcher, "progress_interval_s", None)
    if explicit is not None:
        return float(explicit)
    return max(WATCH_INTERVAL_S, poll_interval_s(launcher))


def launch_and_collect(launcher: Any, request: LaunchRequest,
                       watch: Callable[[Any, Any], str | None] | None = None) -> list[ResultRecord]:
    """Submits one trial, polls it to a terminal status, returns its records (one per attempt).

    `watch(launcher, handle)`, called about every `watch_interval_s(launcher)` while the trial runs, may
    answer why to stop it (pruning): the trial is cancelled and its records (`cancelled`) returned.
    Raises only when the launcher raises; the attempt is cancelled first.
    """
    handle = launcher.submit(request)
    try:
        interval = poll_interval_s(launcher)
        every = watch_interval_s(launcher)
        next_watch = time.monotonic()
        while launcher.poll(handle) not in TERMINAL:
            if watch is not None and time.monotonic() >= next_watch:
                next_watch = time.monotonic() + every
                if watch(launcher, handle):
                    launcher.cancel(handle)
                    watch = None
            time.sleep(interval)
        if watch is not None:  # the values logged since the last look still count (a final tell follows)
            watch(launcher, handle)
        return launcher.collect(handle)
    except BaseException:
        with contextlib.suppress(Exception):
            launcher.cancel(handle)
        raise


@dataclass
class TrialOutcome:
    """What running one trial gave: its records, or the launcher's error after every retry."""

    trial_id: str
    records: list[ResultRecord]
    error: str | None = None
    retries: int = 0
    pruned: str | None = None  # why the pruner stopped it (its records say `cancelled`)


def run_trial(launcher: Any, request: LaunchRequest, *, delays_s: tuple[float, ...] = LAUNCH_RETRY_DELAYS_S,
              on_retry: Callable[[str, int, BaseException], None] | None = None,
              sleep: Callable[[float], None] = time.sleep,
              watch: Callable[[Any, Any], str | None] | None = None) -> TrialOutcome:
    """Runs one trial through `launcher`, retrying launcher errors after `delays_s`; never raises
    an `Exception` (a KeyboardInterrupt still does). `watch`: see `launch_and_collect`; the reason
    it gave is the outcome's `pruned`."""
    stopped: list[str] = []

    def watching(launcher_: Any, handle: Any) -> str | None:
        why = watch(launcher_, handle) if watch is not None else None
        if why:
            stopped.append(why)
        return why

    for attempt in range(len(delays_s) + 1):
        try:
            records = launch_and_collect(launcher, request, watching if watch is not None else None)
            return TrialOutcome(request.trial_id, records, retries=attempt, pruned=stopped[0] if stopped else None)
        except Exception as err:  # noqa: BLE001 - the launcher's failure becomes the trial's outcome
            if attempt == len(delays_s):
                return TrialOutcome(request.trial_id, [], error=(
                    f"launcher error after {len(delays_s)} retries: {type(err).__name__}: {err}"), retries=attempt)
            if on_retry is not None:
                with contextlib.suppress(Exception):
                    on_retry(request.trial_id, attempt + 1, err)
            delay = delays_s[attempt]
            sleep(max(0.0, delay * (1 + random.uniform(-RETRY_JITTER, RETRY_JITTER))))
    raise AssertionError("unreachable")
