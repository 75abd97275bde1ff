"""The SDK boundary of the SkyPilot launcher: `SkySDK`, the only object that calls SkyPilot's client
API (0.14.1), returning plain values. Tests replace it with a fake (tests/unit/test_skypilot_launcher.py).

- managed jobs: `launch` (`sky.jobs.launch` [+ `pool=`] + `sky.stream_and_get`; a `sky.Dag` job group too),
  `queue` (`sky.jobs.queue_v2` + `sky.get`), `tail_logs` (follow=False, optionally the last `tail` lines,
  one `task` of a job group, captured), `cancel` (`sky.jobs.cancel` + `sky.get`);
- pools (sky/jobs/client/sdk.py): `pool_apply` (`sky.jobs.pool_apply(task, name, mode, workers)`),
  `pool_status` (`sky.jobs.pool_status([name])`: the service record with its `replica_info`, one per
  worker), `pool_down` (`sky.jobs.pool_down([name])`).
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from typing import Any

#: Fields asked of `queue_v2` (its defaults plus where the job actually runs).
QUEUE_FIELDS = (
    "job_id", "task_id", "job_name", "task_name", "resources", "submitted_at", "start_at", "end_at",
    "job_duration", "recovery_count", "status", "cloud", "region", "zone", "infra",
    "cluster_resources", "cluster_resources_full", "last_recovered_at", "failure_reason", "details",
    "pool", "current_cluster_name",
)


# --------------------------------------------------------------------------------------------
# The SDK boundary


class SkySDK:
    """The real SDK: the only object that talks to SkyPilot's API server (which it may start).

    Every method returns plain values: job ids (int), job dicts (the fields of `QUEUE_FIELDS`,
    `status` as the ManagedJobStatus name), log text, pool dicts (`pool_status`).
    """

    def __init__(self, log_stream: io.TextIOBase | None = None):
        self.log_stream = log_stream  # where launch progress goes (None: SkyPilot prints it)

    def launch(self, task, name: str, pool: str | None = None) -> int:
        """Launches the managed job `name`; with `pool`, onto that pool's workers (`sky jobs launch --pool`)."""
        import sky

        request_id = sky.jobs.launch(task, name=name) if pool is None else sky.jobs.launch(task, name=name, pool=pool)
        job_ids, _handle = sky.stream_and_get(request_id, output_stream=self.log_stream)
        if not job_ids:
            raise RuntimeError(f"sky.jobs.launch returned no job id for {name!r}")
        return int(job_ids[0])

    def queue(self, job_ids: Iterable[int] | None = None) -> list[dict[str, Any]]:
        import sky

        request_id = sky.jobs.queue_v2(refresh=False, job_ids=list(job_ids) if job_ids else None,
                                       fields=list(QUEUE_FIELDS))
        result = sky.get(request_id)
        records = result[0] if isinstance(result, tuple) else result
        return [_plain_job(r) for r in records]

    def tail_logs(self, job_id: int, tail: int | None = None, task: str | None = None) -> str:
        """Returns the job's log text (`tail`: only its last lines; `task`: of that task of a job group)."""
        import sky

        buf = io.StringIO()
        sky.jobs.tail_logs(job_id=job_id, follow=False, tail=tail, output_stream=buf,
                           **({"task": task} if task is not None else {}))
        return buf.getvalue()

    def cancel(self, job_id: int) -> None:
        import sky

        sky.get(sky.jobs.cancel(job_ids=[job_id]))

    def pool_apply(self, task, name: str, workers: int) -> None:
        """Creates the pool `name` of `workers` workers from `task` (its `pool:` section, resources and
        set-up), or applies them to the existing pool of that name (`sky jobs pool apply`)."""
        import sky
        from sky.serve.serve_utils import DEFAULT_UPDATE_MODE

        sky.stream_and_get(sky.jobs.pool_apply(task, name, mode=DEFAULT_UPDATE_MODE, workers=int(workers)),
                           output_stream=self.log_stream)

    def pool_status(self, name: str) -> list[dict[str, Any]]:
        """Returns the pool `name` as plain dicts (empty: no such pool, or no pool controller up, which
        SkyPilot answers with `ClusterNotUpError`): name, status, and `workers` (each: name, status,
        launched_at) from SkyPilot's `replica_info`."""
        import sky

        try:
            records = sky.get(sky.jobs.pool_status([name])) or []
        except sky.exceptions.ClusterNotUpError:
            return []
        return [_plain_pool(r) for r in records]

    def pool_down(self, name: str) -> None:
        """Tears the pool `name` down (its workers terminated; `sky jobs pool down`)."""
        import sky

        sky.stream_and_get(sky.jobs.pool_down([name]), output_stream=self.log_stream)


def _plain_job(record: Any) -> dict[str, Any]:
    data = record.model_dump() if hasattr(record, "model_dump") else dict(record)
    status = data.get("status")
    if status is not None and not isinstance(status, str):
        data["status"] = getattr(status, "value", str(status))
    return data




def _value(x: Any) -> Any:
    return getattr(x, "value", x) if x is not None and not isinstance(x, str | int | float) else x


def _plain_pool(record: Any) -> dict[str, Any]:
    data = dict(record)
    workers = [{"name": w.get("name"), "status": _value(w.get("status")), "launched_at": w.get("launched_at"),
                "is_spot": w.get("is_spot"), "used_by": list(w.get("used_by") or [])}
               for w in data.get("replica_info") or []]
    return {"name": data.get("name"), "status": _value(data.get("status")), "workers": workers}
