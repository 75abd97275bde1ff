"""SkyPilot managed jobs: one `sky.jobs.launch` per trial, measured per attempt, billed at catalog prices.

The launcher modules that import `sky` (lazily) are this one and `skypilot_task` (part 1, the task,
which this module re-exports). Three parts:

1. The task. `task_config(request)` returns the SkyPilot task as a plain YAML-shaped dict (pure, no
   `sky` import); `build_task(request)` parses it with SkyPilot's own `sky.Task.from_yaml_config`,
   which validates accelerator names, instance types and regions against SkyPilot's catalog.
   - resources: `accelerators: {ACC: N}`, `use_spot`, and the planned `infra: cloud/region` and
     `instance_type`. With `alternatives` (or `region_failover=True` for spot) the resources become
     an `ordered` list: the planned placement first, then the fallbacks.
   - spot: `job_recovery: {strategy: EAGER_NEXT_REGION | FAILOVER, max_restarts_on_errors: N}`.
     EAGER_NEXT_REGION when the task leaves SkyPilot a region to move to (fallbacks), FAILOVER
     (same region first) when the plan pinned one region.
   - envs: each param as `GPULEDGER_PARAM_<NAME>` (upper case), `GPULEDGER_PARAMS` (JSON), the ids
     (`GPULEDGER_TRIAL_ID`, `GPULEDGER_SWEEP_ID`, `GPULEDGER_SWEEP_NAME`), the planned placement
     (`GPULEDGER_LAUNCHER=skypilot`, `_CLOUD`, `_REGION`, `_INSTANCE_TYPE`, `_ACCELERATOR`, `_GPUS`,
     `_SPOT`) which the agent copies into its record, and the spec's own `task.env`.
   - workdir: `request.workdir` (the repository) is synced to the job, so `python -m gpuledger.agent`
     resolves to the synced package; the set-up therefore only installs the agent's own
     dependencies (`AGENT_SETUP`: psutil, pydantic, nvidia-ml-py) before the spec's set-up. When
     the workdir is not a gpuledger checkout, pass `agent_setup="python3 -m pip install gpuledger"`.
   - run: `python3 -m gpuledger.agent --result /tmp/gpuledger-result.json [--echo-metrics OBJ] --
     bash -c '<run>'`; the agent prints one `GPULEDGER_RESULT {json}` line at exit, which ends up in
     the job's logs, and with `--echo-metrics` (a sweep that prunes) the objective's points as it
     reads them (at most one line per second).

2. The SDK boundary: `SkySDK`, four methods (`launch`, `queue`, `tail_logs`, `cancel`) over
   `sky.jobs.launch` + `sky.stream_and_get`, `sky.jobs.queue_v2` + `sky.get`, `sky.jobs.tail_logs`
   (follow=False, optionally the last `tail` lines, captured) and `sky.jobs.cancel` + `sky.get`.
   Tests substitute a fake here.

3. `SkyPilotLauncher` (the `Launcher` protocol). `poll` maps `ManagedJobStatus` to the protocol's
   statuses and tracks attempts: an attempt opens when the job is seen RUNNING and closes as
   *preempted* when it is next seen RECOVERING (or at the terminal status). `collect` parses the
   `GPULEDGER_RESULT` lines of `tail_logs` signed with the job's key (`SkyJob.key`, made per launch,
   a task secret; unsigned lines are never believed, the attempt they claim says so), pairs them
   with attempts by time, synthesizes a record
   for an attempt without one (preempted; or failed with the job's failure reason), and bills each
   attempt: its duration x the catalog price of the resources actually used (cloud/region/instance
   from the queue's record, else the plan; spot or on-demand), with `on_demand_usd_per_hour` so
   the warehouse can show realised savings.

   `progress(handle, offset)` is the pruning watch's read of a running job: the echoed objective in
   the last `progress_tail_lines` lines of its log, `offset` a step watermark that survives a
   recovery's restarted trainer (`gpuledger.launch.skypilot_logs`), every `progress_interval_s`.

   Per-attempt counters (summed over a trial's attempts by the warehouse): `preemptions` = 1 for an
   attempt that ended in a preemption, `recoveries` = 1 for an attempt that is a recovery (attempt
   >= 2). If SkyPilot's `recovery_count` exceeds the recoveries seen between polls (a preemption
   and recovery happened entirely between two polls), the surplus is added to the last attempt's
   counters; its billed window already covers that time.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuledger import vocabulary
from gpuledger.launch.base import LaunchRequest, TrialStatus
from gpuledger.launch.skypilot_group import group_billing, group_task, trainer_row, trial_logs
from gpuledger.launch.skypilot_logs import (  # noqa: F401 - parse_cluster_resources re-exported
    _clean,
    _iso,
    _ts,
    new_points,
    parse_cluster_resources,
    signed_result_lines,
    unsigned_note,
)
from gpuledger.launch.skypilot_pack import PACK_WAIT_S, Packer, PackGroup, bill_share, packed_task_config
from gpuledger.launch.skypilot_pool import PoolKeeper, pool_job_config
from gpuledger.launch.skypilot_sdk import QUEUE_FIELDS, SkySDK  # noqa: F401 - the SDK boundary, re-exported
from gpuledger.launch.skypilot_task import (  # noqa: F401 - the task part, re-exported
    AGENT_SETUP,
    DEFAULT_MAX_RESTARTS_ON_ERRORS,
    PARAM_ENV_PREFIX,
    RESULT_PATH,
    Placement,
    build_config,
    build_task,
    job_name,
    param_env_name,
    task_config,
    task_envs,
    task_yaml,
    wrapped_run,
)
from gpuledger.protocol import SCHEMA
from gpuledger.record import ResultRecord

#: ManagedJobStatus (sky/jobs/state.py, 0.14.1) -> the Launcher protocol's status.
STATUS_MAP: dict[str, TrialStatus] = {
    "PENDING": "pending",
    "SUBMITTED": "pending",  # DEPRECATED_SUBMITTED, still parsed from old databases
    "STARTING": "pending",
    "RUNNING": "running",
    "WINDING_DOWN": "running",
    "RECOVERING": "recovering",
    "CANCELLING": "running",  # still being torn down; becomes CANCELLED
    "SUCCEEDED": "succeeded",
    "CANCELLED": "cancelled",
    "FAILED": "failed",
    "FAILED_SETUP": "failed",
    "FAILED_PRECHECKS": "failed",
    "FAILED_NO_RESOURCE": "failed",
    "FAILED_CONTROLLER": "failed",
}
TERMINAL_SKY = frozenset({"SUCCEEDED", "CANCELLED", "FAILED", "FAILED_SETUP", "FAILED_PRECHECKS",
                          "FAILED_NO_RESOURCE", "FAILED_CONTROLLER"})
#: Why a job without a result line failed, by status (the queue's failure_reason is added).
FAILURE_REASONS = {
    "FAILED": "the trial command failed (no GPULEDGER_RESULT line in the logs)",
    "FAILED_SETUP": "set-up failed",
    "FAILED_PRECHECKS": "SkyPilot prechecks failed (no feasible resources, credentials or quota)",
    "FAILED_NO_RESOURCE": "no resources available in the requested clouds/regions",
    "FAILED_CONTROLLER": "the SkyPilot jobs controller failed",
}
#: Exit codes of an agent killed with its machine (SIGTERM/SIGKILL/SIGHUP, as 128+N or -N) or none.
KILLED_EXIT_CODES = frozenset({None, 129, 137, 143, -1, -9, -15})
#: How often the pruning watch reads a running job's log (one `tail_logs` API call, which reaches
#: the job's cluster through the controller): a pruned trial runs at most about this long past the
#: value that pruned it, plus the cancel's teardown.
PROGRESS_INTERVAL_S = 60.0
#: How many of the log's last lines the watch reads (bounded memory and transfer per look; the
#: agent echoes at most one objective line per second, so a minute of a chatty trainer still fits).
PROGRESS_TAIL_LINES = 10_000
# --------------------------------------------------------------------------------------------
# Prices


#: catalog_price(cloud, region, instance_type, spot) -> (usd_per_hour, on_demand_usd_per_hour, description) | None
CatalogPrice = Callable[[str, str | None, str, bool], tuple[float, float | None, str] | None]


def offers_catalog_price(cloud: str, region: str | None, instance_type: str, spot: bool):
    """Returns (usd_per_hour, on_demand_usd_per_hour, description) from the bundled offers, or None.

    Without a region, the cheapest region of that instance type (SkyPilot's own choice rule).
    """
    import polars as pl

    from gpuledger.catalog.pricing import load_offers

    df = load_offers(clouds=[cloud]).filter(pl.col("instance_type") == instance_type)
    if region:
        df = df.filter(pl.col("region") == region)
    col = "usd_per_hour_spot" if spot else "usd_per_hour_on_demand"
    df = df.filter(pl.col(col).is_not_null()).sort(col)
    if df.is_empty():
        return None
    row = df.row(0, named=True)
    note = ", spot price flagged suspicious" if spot and row.get("spot_suspicious") else ""
    desc = (f"{cloud} {instance_type} {row['region']} {'spot' if spot else 'on-demand'}, "
            f"catalog {row['as_of']}{note}")
    return float(row[col]), float(row["usd_per_hour_on_demand"]), desc


# --------------------------------------------------------------------------------------------
# The launcher


@dataclass
class Attempt:
    """One run of the job on one cluster: from RUNNING to RECOVERING (preempted) or the end."""

    started_at: float
    ended_at: float | None = None
    ended_by: str | None = None  # "preempted" or the terminal ManagedJobStatus
    cloud: str | None = None
    region: str | None = None
    instance_type: str | None = None
    spot: bool | None = None


@dataclass
class SkyJob:
    """The handle `submit` returns: the request, the managed job id and what `poll` saw."""

    request: LaunchRequest
    job_id: int
    name: str
    submitted_at: float
    sky_status: str = "PENDING"
    status: TrialStatus = "pending"
    attempts: list[Attempt] = field(default_factory=list)
    recovery_count: int = 0
    failure_reason: str | None = None
    last_record: dict[str, Any] = field(default_factory=dict)
    cancel_requested: bool = False
    final_logs: str | None = None  # the log read once the job ended (the last watch and collect share it)
    #: the key the job's agent signs its result line with (a task secret, made per launch): a line
    #: without its signature is never believed (`skypilot_logs.signed_result_lines`)
    key: bytes = field(default_factory=lambda: secrets.token_hex(32).encode(), repr=False)
    #: packed trials: (the job's slot id, this trial's share, trials in the job, its PackGroup); None: its own job
    pack: tuple[str, float, int, Any] | None = field(default=None, repr=False)


class SkyPilotLauncher:
    """Runs each trial as a SkyPilot managed job (see the module docstring)."""

    name = "skypilot"

    def __init__(
        self,
        sdk: Any = None,
        *,
        poll_interval_s: float = 30.0,
        progress_interval_s: float = PROGRESS_INTERVAL_S,
        progress_tail_lines: int = PROGRESS_TAIL_LINES,
        catalog_price: CatalogPrice | None = None,
        task_builder: Callable[..., Any] | None = None,
        alternatives: Callable[[LaunchRequest], Sequence[Placement]] | None = None,
        region_failover: bool = False,
        agent_setup: str | None = AGENT_SETUP,
        max_restarts_on_errors: int = DEFAULT_MAX_RESTARTS_ON_ERRORS,
        clock: Callable[[], float] = time.time,
        config_builder: Callable[[dict[str, Any]], Any] | None = None,
        log: Any = None,
        pack: int = 1,  # packed trials: k agents in one job (gpuledger/launch/skypilot_pack.py)
        pack_wait_s: float = PACK_WAIT_S,
        **_ignored: Any,  # options meant for other launchers (max_parallel, landing_dir, ...)
    ):
        self.sdk = sdk if sdk is not None else SkySDK()
        self.poll_interval_s = poll_interval_s
        self.progress_interval_s = progress_interval_s
        self.progress_tail_lines = progress_tail_lines
        self.catalog_price = catalog_price if catalog_price is not None else offers_catalog_price
        self.task_builder = task_builder or build_task
        self.alternatives = alternatives
        self.region_failover = region_failover
        self.agent_setup = agent_setup
        self.max_restarts_on_errors = max_restarts_on_errors
        self.clock = clock
        #: builds a task from a YAML-shaped dict (pools and their jobs): SkyPilot's parser unless a test says
        self.config_builder = config_builder or build_config
        self.pools = PoolKeeper(self.sdk, self.config_builder, clock, log)
        self.pool_usage: list[Any] = []  # `PoolUsage` per pool, after `close`
        self.packer = Packer(pack, pack_wait_s) if pack > 1 else None

    # -- protocol ----------------------------------------------------------------------------

    def _task_options(self, request: LaunchRequest) -> dict[str, Any]:
        pooled = request.pool is not None  # a pool's workers are one placement: no fallbacks
        return dict(
            alternatives=tuple(self.alternatives(request)) if self.alternatives and not pooled else (),
            region_failover=self.region_failover and not pooled,
            agent_setup=self.agent_setup,
            max_restarts_on_errors=self.max_restarts_on_errors,
        )

    def task_for(self, request: LaunchRequest, result_key: bytes | None = None):
        """Returns what `submit` hands to `sdk.launch` (a `sky.Task` unless `task_builder` says otherwise);
        a trial on a pool: its job there (`skypilot_pool.pool_job_config`). `result_key`: the job's
        signing key, a task secret (`task_config`)."""
        options = self._task_options(request)
        if result_key is not None:
            options["result_key"] = result_key.decode()
        if request.pool is not None:
            return self.config_builder(pool_job_config(request, **options))
        return self.task_builder(request, **options)

    def submit(self, request: LaunchRequest) -> SkyJob:
        if self.packer is not None and request.pool is None and request.rollout is None:  # a job group: its own
            return self.packer.submit(request, secrets.token_hex(32).encode(), self._launch_packed)
        name = job_name(request)
        pool = self.pools.ensure(request, self._task_options(request))
        key = secrets.token_hex(32).encode()  # this launch's: the job's agent signs its result line with it
        task = self.task_for(request, key) if request.rollout is None else group_task(self, request, key)
        job_id = self.sdk.launch(task, name) if pool is None else self.sdk.launch(task, name, pool=pool)
        handle = SkyJob(request=request, job_id=int(job_id), name=name, submitted_at=self.clock(), key=key)
        if pool is not None:
            self.pools.attach(pool, handle)
        return handle

    def _launch_packed(self, group: PackGroup) -> list[SkyJob]:
        """Launches `group` as one job (parsed by SkyPilot's own `from_yaml_config`); a handle per trial."""
        reqs, keys = [r for r, _ in group.members], [k for _, k in group.members]
        config = packed_task_config(reqs, keys, **self._task_options(reqs[0]))
        task = config if self.task_builder is task_config else self.config_builder(config)
        job_id = int(self.sdk.launch(task, config["name"]))
        slot = f"{config['name']}-job{job_id}"
        return [SkyJob(request=r, job_id=job_id, name=config["name"], submitted_at=self.clock(), key=k,
                       pack=(slot, group.share(i), len(reqs), group)) for i, (r, k) in enumerate(group.members)]

    def close(self) -> None:
        """The sweep ended (or was interrupted): tears down its pools; `pool_usage` says what they cost."""
        self.pool_usage.extend(self.pools.close())

    def poll(self, handle: SkyJob) -> TrialStatus:
        if handle.status in vocabulary.LAUNCH_TERMINAL:
            return handle.status
        records = [r for r in self.sdk.queue([handle.job_id]) if int(r.get("job_id", -1)) == handle.job_id]
        if not records:
            return handle.status
        # pipelines have one row per task; a trial is one task (a job group: its trainer's)
        self._observe(handle, trainer_row(records) if handle.request.rollout is not None else records[-1])
        return handle.status

    def cancel(self, handle: SkyJob) -> None:
        if handle.status in vocabulary.LAUNCH_TERMINAL or handle.cancel_requested:
            return
        handle.cancel_requested = True
        if handle.pack is None or all(h.cancel_requested for h in handle.pack[3].handles):
            self.sdk.cancel(handle.job_id)  # a packed job: once every trial in it was cancelled

    def progress(self, handle: SkyJob, offset: int = 0) -> tuple[list[dict[str, Any]], int]:
        """Returns (the echoed objective points the running trial logged at steps >= `offset`, the new
        offset): the pruning watch's read (`skypilot_logs.new_points`; `offset` is a step watermark).

        One `tail_logs` call of the last `progress_tail_lines` lines, only while the job was last
        seen running (nothing to read while it is pending or recovering) or once at its end (the
        whole log, kept for `collect`); none when the request echoes nothing (a sweep that does not
        prune). The runtime calls it every `progress_interval_s`. A log that cannot be read now
        gives nothing new (the next look reads it again).
        """
        names = handle.request.echo_metrics if handle.pack is None else ()  # a packed job echoes nothing
        ended = handle.status in vocabulary.LAUNCH_TERMINAL
        if not names or not (ended or handle.sky_status in ("RUNNING", "WINDING_DOWN")):
            return [], offset
        try:
            logs = self._logs(handle) if ended else trial_logs(self.sdk, handle.job_id, handle.request, self.progress_tail_lines)
        except Exception:  # noqa: BLE001 - best effort: the trial goes on, its record is read at the end
            return [], offset
        return new_points(logs, offset, names)

    def _logs(self, handle: SkyJob) -> str:
        """Returns the job's whole log; read once after the job ended, then kept."""
        if handle.final_logs is not None:
            return handle.final_logs
        logs = trial_logs(self.sdk, handle.job_id, handle.request)
        if handle.status in vocabulary.LAUNCH_TERMINAL:
            handle.final_logs = logs
        return logs

    def wait(self, handle: SkyJob, timeout_s: float | None = None) -> TrialStatus:
        """Polls every `poll_interval_s` until a terminal status (or `timeout_s`); returns the status."""
        start = self.clock()
        while self.poll(handle) not in vocabulary.LAUNCH_TERMINAL:
            if timeout_s is not None and self.clock() - start > timeout_s:
                break
            time.sleep(self.poll_interval_s)
        return handle.status

    # -- status tracking ----------------------------------------------------------------------

    def _observe(self, handle: SkyJob, rec: dict[str, Any]) -> None:
        now = self.clock()
        sky_status = str(rec.get("status") or "PENDING").upper().removeprefix("MANAGEDJOBSTATUS.")
        handle.last_record = dict(rec)
        previous_count = handle.recovery_count
        recovery_count = int(rec.get("recovery_count") or 0)
        handle.recovery_count = max(previous_count, recovery_count)
        if rec.get("failure_reason"):
            handle.failure_reason = str(rec["failure_reason"])
        current = handle.attempts[-1] if handle.attempts and handle.attempts[-1].ended_at is None else None

        recovered_at = _ts(rec.get("last_recovered_at"))
        running = sky_status in ("RUNNING", "WINDING_DOWN")
        if (running and current is not None and recovery_count > previous_count and recovered_at
                and current.started_at < recovered_at <= now):
            # preempted and recovered entirely between two polls: split at SkyPilot's stamp
            current.ended_at, current.ended_by = recovered_at, "preempted"
            current = None
        if current is None and (running or (sky_status in TERMINAL_SKY and not handle.attempts
                                            and _ts(rec.get("start_at")))):
            if handle.attempts:  # a recovery: SkyPilot stamps when it came back
                start = recovered_at or now
            else:
                start = _ts(rec.get("start_at")) or now
            current = Attempt(started_at=min(start, now))
            handle.attempts.append(current)
        if current is not None:
            self._place(handle, current, rec)
        if sky_status == "RECOVERING" and current is not None:
            current.ended_at, current.ended_by = now, "preempted"
        if sky_status in TERMINAL_SKY:
            end = _ts(rec.get("end_at")) or now
            if current is not None:
                current.ended_at, current.ended_by = max(end, current.started_at), sky_status
        handle.sky_status = sky_status
        handle.status = STATUS_MAP.get(sky_status, handle.status)

    def _place(self, handle: SkyJob, attempt: Attempt, rec: dict[str, Any]) -> None:
        cloud = _clean(rec.get("cloud"))
        if cloud:
            attempt.cloud = cloud.lower()
        region = _clean(rec.get("region"))
        if region:
            attempt.region = region
        instance, spot = parse_cluster_resources(rec.get("cluster_resources_full") or rec.get("cluster_resources"))
        if instance:
            attempt.instance_type = instance
        if spot is not None:
            attempt.spot = spot

    # -- results ------------------------------------------------------------------------------

    def collect(self, handle: SkyJob) -> list[ResultRecord]:
        """Returns one validated `ResultRecord` per attempt."""
        try:
            logs = self._logs(handle)
        except Exception as err:  # noqa: BLE001 - logs are best effort; the queue still tells the story
            logs = ""
            handle.failure_reason = handle.failure_reason or f"could not read the job's logs: {err}"
        lines, unsigned = signed_result_lines(logs, handle.key)  # only the agent's signed lines are believed
        attempts = list(handle.attempts)
        if not attempts:
            # never seen running (failed before start, or cancelled while pending): one attempt, as
            # long as the job existed, billed nothing if it never ran
            end = _ts(handle.last_record.get("end_at")) or self.clock()
            start = end if not lines else (_ts(lines[-1].get("started_at")) or end)
            attempts = [Attempt(started_at=min(start, end), ended_at=end, ended_by=handle.sky_status)]
        for a in attempts:
            if a.ended_at is None:
                a.ended_at, a.ended_by = max(self.clock(), a.started_at), handle.sky_status
        matched = self._match(attempts, lines)
        forged = self._claims(attempts, unsigned, matched)
        observed_recoveries = len(attempts) - 1
        missed = max(0, handle.recovery_count - observed_recoveries)
        records = []
        for i, (attempt, line) in enumerate(zip(attempts, matched, strict=True)):
            last = i == len(attempts) - 1
            rec = self._validated(handle, i + 1, attempt, line, forged[i])
            if last and missed:
                rec.preemptions += missed
                rec.recoveries += missed
            records.append(rec)
        return records

    def _validated(self, handle: SkyJob, number: int, attempt: Attempt, line: dict[str, Any] | None,
                   forged: int = 0) -> ResultRecord:
        """Returns the attempt's validated record; a result line that does not validate is
        replaced by a synthesized record that says so. `forged`: how many unsigned result lines
        claimed this attempt (never believed; said in the reason)."""
        from pydantic import ValidationError

        try:
            model = ResultRecord.model_validate(self._record(handle, number, attempt, line, forged))
        except ValidationError as err:
            if line is None:
                raise
            model = ResultRecord.model_validate(self._record(handle, number, attempt, None, forged))
            note = f"result line did not validate ({err.error_count()} problems)"
            model.reason = f"{model.reason}; {note}" if model.reason else note
        return model

    @staticmethod
    def _attempt_of(attempts: list[Attempt], line: dict[str, Any], matched: list[dict[str, Any] | None]) -> int:
        """Returns the attempt a result line belongs to: the one its times overlap most; a line whose
        times overlap none (clock skew) goes to the last attempt without a line in `matched`."""
        start, end = _ts(line.get("started_at")), _ts(line.get("ended_at"))
        best, best_overlap = None, 0.0
        if start is not None and end is not None:
            for i, a in enumerate(attempts):
                overlap = min(end, a.ended_at or end) - max(start, a.started_at)
                if overlap >= best_overlap and overlap > 0:
                    best, best_overlap = i, overlap
        if best is None:
            free = [i for i, m in enumerate(matched) if m is None]
            best = free[-1] if free else len(attempts) - 1
        return best

    @classmethod
    def _match(cls, attempts: list[Attempt], lines: list[dict[str, Any]]) -> list[dict[str, Any] | None]:
        """Pairs (signed) result lines with attempts (`_attempt_of`); the last line per attempt is kept."""
        out: list[dict[str, Any] | None] = [None] * len(attempts)
        for line in lines:
            out[cls._attempt_of(attempts, line, out)] = line  # later lines replace earlier ones
        return out

    @classmethod
    def _claims(cls, attempts: list[Attempt], unsigned: list[dict[str, Any]],
                matched: list[dict[str, Any] | None]) -> list[int]:
        """Returns, per attempt, how many unsigned result lines claim it (placed as `_match` places lines: `_attempt_of`)."""
        counts = [0] * len(attempts)
        for line in unsigned:
            counts[cls._attempt_of(attempts, line, matched)] += 1
        return counts

    def _record(self, handle: SkyJob, number: int, attempt: Attempt, line: dict[str, Any] | None,
                forged: int = 0) -> dict[str, Any]:
        req = handle.request
        ended_by = attempt.ended_by or handle.sky_status
        rec: dict[str, Any] = dict(line) if line else {}
        rec.pop("cost_usd", None)
        start = attempt.started_at
        end = attempt.ended_at if attempt.ended_at is not None else start
        if not line:
            rec.update(started_at=_iso(start), ended_at=_iso(end), wall_s=max(0.0, end - start),
                       exit_code=None, params=dict(req.params), command=req.run)
        restarted_on_error = (ended_by == "preempted" and line is not None
                              and line.get("exit_code") not in KILLED_EXIT_CODES)
        if restarted_on_error:
            # the trial itself failed and SkyPilot restarted it (max_restarts_on_errors)
            status = rec.get("status", "failed")
            status = "failed" if status in ("succeeded", "preempted") else status
            reason = (rec.get("reason") or "failed") + "; SkyPilot restarted the job (max_restarts_on_errors)"
            ended_by = "restarted"
        elif ended_by == "preempted":
            status, reason = "preempted", "spot instance preempted; SkyPilot recovered the job"
        elif line and ended_by == "CANCELLED":
            status, reason = "cancelled", "cancelled"
        elif line:
            status, reason = rec.get("status", "failed"), rec.get("reason")
            if ended_by in FAILURE_REASONS and status == "succeeded":
                status, reason = "failed", self._failure(handle, ended_by)
        elif ended_by == "SUCCEEDED":
            status, reason = "succeeded", "no GPULEDGER_RESULT line in the job's logs (measurements missing)"
        elif ended_by == "CANCELLED":
            status, reason = "cancelled", "cancelled"
        else:
            status, reason = "failed", self._failure(handle, ended_by)
        if forged:  # never what those lines claimed: the attempt is what SkyPilot and the signed line say
            note = unsigned_note(forged)
            if not line and status == "succeeded":
                status, reason = "failed", f"no trustworthy result record: {note}"
            else:
                reason = f"{reason}; {note}" if reason else note
        spot = attempt.spot if attempt.spot is not None else req.spot
        cloud = attempt.cloud or req.cloud
        region = attempt.region or req.region
        instance = attempt.instance_type or req.instance_type
        rec.update(
            schema=SCHEMA,
            run_id=f"{req.trial_id}-sky{handle.job_id}-a{number}",
            sweep_id=req.sweep_id,
            trial_id=req.trial_id,
            attempt=number,
            launcher="skypilot",
            cloud=cloud,
            region=region,
            instance_type=instance,
            accelerator=req.accelerator,
            gpus=req.gpus,
            spot=spot,
            status=status,
            reason=reason,
            preemptions=1 if ended_by == "preempted" else 0,
            recoveries=1 if number > 1 else 0,
        )
        rec.setdefault("params", dict(req.params))
        wall_s = max(0.0, end - start)  # billed: the cluster's whole attempt, set-up included
        rec["billing"] = [self._billing(req, cloud, region, instance, spot, wall_s)]
        if req.rollout is not None:  # a job group: the trainer's and the rollouts' instance, by role
            rec["billing"] = group_billing(req, rec["billing"][0], wall_s)
        if handle.pack is not None:  # one job, k trials: each billed its share of the job's attempt
            bill_share(rec, handle.pack[0], handle.pack[1], handle.pack[2])
        return rec

    def _failure(self, handle: SkyJob, sky_status: str) -> str:
        base = FAILURE_REASONS.get(sky_status, f"job ended {sky_status}")
        return f"{base}: {handle.failure_reason}" if handle.failure_reason else base

    def _billing(self, req: LaunchRequest, cloud: str | None, region: str | None, instance: str | None,
                 spot: bool, wall_s: float) -> dict[str, Any]:
        hours = wall_s / 3600.0
        priced = None
        if cloud and instance:
            try:
                priced = self.catalog_price(cloud, region, instance, spot)
            except Exception:  # noqa: BLE001 - a missing price falls back to the plan's price
                priced = None
        if priced is not None:
            usd, on_demand, desc = priced
            if req.num_nodes > 1:  # the catalog prices one instance; the trial held one per node
                usd, on_demand = usd * req.num_nodes, None if on_demand is None else on_demand * req.num_nodes
                desc = f"{req.num_nodes} nodes x {desc}"
        else:
            usd = req.usd_per_hour or 0.0
            on_demand = req.on_demand_usd_per_hour
            desc = req.price_description or (
                f"{cloud} {instance} {region} {'spot' if spot else 'on-demand'}, plan price")
        if not spot and on_demand is None:
            on_demand = usd
        return {
            "source": "catalog",
            "description": desc,
            "usd_per_hour": float(usd),
            "hours": hours,
            "cost_usd": float(usd) * hours,
            "spot": bool(spot),
            "on_demand_usd_per_hour": None if on_demand is None else float(on_demand),
            "instance_type": instance, "accelerator": req.accelerator, "gpus": req.gpus,
        }
