"""The real SDK wrapper (`SkySDK`) calls SkyPilot 0.14.1's client API the documented way: request
ids resolved with `sky.stream_and_get` / `sky.get`, logs captured with follow=False. SkyPilot's
functions are replaced, so nothing reaches an API server."""

from __future__ import annotations

import inspect

import pytest
from helpers.sky_offline import no_network, sky_home  # noqa: F401 - fixtures used by name

from gpuledger.launch.skypilot import STATUS_MAP, SkySDK


@pytest.mark.usefixtures("sky_home")
def test_sdk_wraps_jobs_launch_queue_v2_tail_logs_and_cancel(monkeypatch):
    import sky
    from sky.jobs.state import ManagedJobStatus
    from sky.schemas.api.responses import ManagedJobRecord

    calls = []
    monkeypatch.setattr(sky.jobs, "launch", lambda task, name=None: calls.append(("launch", task, name)) or "req-1")
    monkeypatch.setattr(sky, "stream_and_get",
                        lambda rid, output_stream=None: calls.append(("stream_and_get", rid)) or ([7], None))

    def queue_v2(refresh, job_ids=None, fields=None, **kw):
        calls.append(("queue_v2", refresh, job_ids, tuple(fields)))
        return "req-2"

    def get(rid):
        calls.append(("get", rid))
        if rid == "req-2":
            rec = ManagedJobRecord(job_id=7, status=ManagedJobStatus.RECOVERING, recovery_count=1, region="us-east-1")
            return [rec], 1, {}, 1
        return None

    real_tail_logs = inspect.signature(sky.jobs.tail_logs)

    def tail_logs(*args, **kw):
        real_tail_logs.bind(*args, **kw)  # arguments SkyPilot's own tail_logs accepts
        calls.append(("tail_logs", kw.get("job_id"), kw.get("follow"), kw.get("tail"))
                     + ((kw["task"],) if "task" in kw else ()))
        kw["output_stream"].write("GPULEDGER_RESULT {}\n")

    monkeypatch.setattr(sky.jobs, "queue_v2", queue_v2)
    monkeypatch.setattr(sky, "get", get)
    monkeypatch.setattr(sky.jobs, "tail_logs", tail_logs)
    monkeypatch.setattr(sky.jobs, "cancel", lambda job_ids=None, **kw: calls.append(("cancel", job_ids)) or "req-3")

    sdk = SkySDK()
    assert sdk.launch("TASK", "gl-x") == 7
    (job,) = sdk.queue([7])
    assert job["job_id"] == 7 and job["status"] == "RECOVERING" and job["recovery_count"] == 1
    assert sdk.tail_logs(7) == "GPULEDGER_RESULT {}\n"
    assert sdk.tail_logs(7, tail=100) == "GPULEDGER_RESULT {}\n"  # the pruning watch: the last lines only
    assert sdk.tail_logs(7, task="trainer") == "GPULEDGER_RESULT {}\n"  # a job group's trainer task
    sdk.cancel(7)
    assert calls[0] == ("launch", "TASK", "gl-x") and calls[1] == ("stream_and_get", "req-1")
    assert calls[2][:3] == ("queue_v2", False, [7]) and "cluster_resources_full" in calls[2][3]
    assert ("tail_logs", 7, False, None) in calls and ("tail_logs", 7, False, 100) in calls
    assert ("tail_logs", 7, False, None, "trainer") in calls
    assert ("cancel", [7]) in calls and calls[-1] == ("get", "req-3")


@pytest.mark.usefixtures("sky_home")
def test_every_managed_job_status_is_mapped():
    from sky.jobs.state import ManagedJobStatus

    assert {s.value for s in ManagedJobStatus} <= set(STATUS_MAP)
