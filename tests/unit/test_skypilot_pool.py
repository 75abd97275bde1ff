"""The SkyPilot launcher on a pool (gpuledger/launch/skypilot_pool.py), at the SDK boundary: the pool created
once (or a leftover reused), trials launched onto it, a pruned one cancelled, the pool torn down at the end
(and a leftover of a run that no longer wants one), what its workers cost; the pool's task and a trial's job
on it parsed by SkyPilot's own parser against the offline catalog (tests/integration/test_render_task.py: the
offline catalog costs seconds); `pool_apply`/`pool_status`/`pool_down`
called the documented way."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from helpers.sky_offline import no_network, sky_home  # noqa: F401 - fixtures used by name
from test_skypilot_launcher import T0, Clock, FakeSky, request, result_line, run_to_end

from gpuledger.launch.skypilot import SkyPilotLauncher
from gpuledger.launch.skypilot_task import AGENT_RUN_PREFIX, task_config
from gpuledger.plan.pools import pool_name

POOL = pool_name("llama3-8b-lora-abcdef12")


@dataclass
class PoolSky(FakeSky):
    """FakeSky with pools: `pools` maps a name to its status dict; every call is recorded."""

    pools: dict = field(default_factory=dict)
    launched_at: float = T0

    def launch(self, task, name, pool=None):
        job_id = super().launch(task, name)
        self.calls[-1] = ("launch", task, name, pool)
        return job_id

    def pool_apply(self, task, name, workers):
        self.calls.append(("pool_apply", task, name, workers))
        self.pools[name] = {"name": name, "status": "READY", "workers": [
            {"name": f"{name}-{i}", "status": "READY", "launched_at": self.launched_at} for i in range(workers)]}

    def pool_status(self, name):
        self.calls.append(("pool_status", name))
        return [self.pools[name]] if name in self.pools else []

    def pool_down(self, name):
        self.calls.append(("pool_down", name))
        self.pools.pop(name, None)


def _job(start: float, end: float) -> list[dict]:
    res = "[spot](gpus=A10G:1, cpus=4, mem=16, g5.xlarge, disk=256)"
    return [{"t": start - 10, "status": "PENDING"},
            {"t": start, "status": "RUNNING", "start_at": start, "cloud": "AWS", "region": "us-east-1",
             "cluster_resources_full": res, "pool": POOL},
            {"t": end, "status": "SUCCEEDED", "start_at": start, "end_at": end, "cloud": "AWS", "region": "us-east-1",
             "pool": POOL}]


def _launcher(fake, clock):
    return SkyPilotLauncher(sdk=fake, catalog_price=None, task_builder=task_config, config_builder=lambda c: c,
                            clock=clock, poll_interval_s=0)


def pooled(trial_id: str, **kw):
    return request(trial_id=trial_id, pool=POOL, pool_workers=2, **kw)


def test_trials_run_on_one_pool_created_once_and_torn_down_with_what_it_cost():
    clock = Clock()
    # two workers up at T0 (600 s start-up), three trials of 1000 s, the last ends at 2600 s
    fake = PoolSky(clock, [_job(600, 1600), _job(600, 1600), _job(1600, 2600)],
                   logs=[result_line(600, 1600), result_line(600, 1600), result_line(1600, 2600)])
    launcher = _launcher(fake, clock)
    handles = [launcher.submit(pooled(f"trial{i}0000000")) for i in range(3)]
    applies = [c for c in fake.calls if c[0] == "pool_apply"]
    assert len(applies) == 1 and applies[0][2:] == (POOL, 2)
    pool_task = applies[0][1]
    assert pool_task["pool"] == {"workers": 2} and "run" not in pool_task and "pip install" in pool_task["setup"]
    assert pool_task["resources"]["instance_type"] == "g5.xlarge" and pool_task["resources"]["use_spot"] is True
    launches = [c for c in fake.calls if c[0] == "launch"]
    assert [c[3] for c in launches] == [POOL] * 3
    job = launches[0][1]
    assert "setup" not in job and job["resources"] == {"accelerators": {"A10G": 1}}
    assert job["run"].startswith(AGENT_RUN_PREFIX + "python3 -m gpuledger.agent")
    for h in handles:
        assert run_to_end(launcher, h)[-1] == "succeeded"
        (rec,) = launcher.collect(h)
        assert rec.status == "succeeded" and rec.billing[0].hours == pytest.approx(1000 / 3600)
    clock.now = T0 + 2700  # the sweep ends 100 s after the last trial
    launcher.close()
    assert fake.calls[-1] == ("pool_down", POOL) and POOL not in fake.pools
    (usage,) = launcher.pool_usage
    assert usage.workers == 2 and usage.trials == 3 and not usage.reused
    assert usage.worker_s == pytest.approx(2 * 2700)
    assert usage.busy_s == pytest.approx(3000)
    assert usage.idle_s == pytest.approx(2 * 2700 - 3000)  # 2 x 600 s start-up + 1000 s + 2 x 100 s tail
    assert usage.idle_usd == pytest.approx((2 * 2700 - 3000) * 0.4591 / 3600)
    assert usage.startup_s == pytest.approx(600)
    # per-trial jobs: 3000 s of trials + 600 s start-up each, at the same price
    assert usage.per_trial_jobs_usd == pytest.approx((3000 + 3 * 600) * 0.4591 / 3600)
    assert usage.saving_usd == pytest.approx((3000 + 1800 - 5400) * 0.4591 / 3600)
    launcher.close()  # twice (Ctrl-C, then the sweep's end): nothing more torn down
    assert [c for c in fake.calls if c[0] == "pool_down"] == [("pool_down", POOL)]


def test_a_leftover_pool_is_reused_or_torn_down_and_a_pruned_trial_cancelled():
    clock = Clock()
    fake = PoolSky(clock, [_job(600, 1600)], on_cancel=[{"t": 900, "status": "CANCELLED", "start_at": 600,
                                                         "end_at": 900}])
    fake.pools[POOL] = {"name": POOL, "status": "READY", "workers": []}  # left by a crashed run
    launcher = _launcher(fake, clock)
    handle = launcher.submit(pooled("trial00000000"))
    applies = [c for c in fake.calls if c[0] == "pool_apply"]
    assert ("pool_status", POOL) in fake.calls and len(applies) == 1 and applies[0][2:] == (POOL, 2)
    launcher.poll(handle)
    launcher.poll(handle)
    launcher.cancel(handle)  # pruned
    assert ("cancel", handle.job_id) in fake.calls
    assert run_to_end(launcher, handle)[-1] == "cancelled"
    launcher.close()
    assert launcher.pool_usage[0].reused and POOL not in fake.pools
    # a later run of the same sweep planned without a pool: the leftover is torn down before its first job
    fake2 = PoolSky(Clock(), [_job(600, 1600), _job(600, 1600)])
    fake2.pools[POOL] = {"name": POOL, "status": "READY", "workers": []}
    other = _launcher(fake2, Clock())
    other.submit(request())
    other.submit(request(trial_id="another00000"))
    assert [c for c in fake2.calls if c[0] in ("pool_down", "pool_apply")] == [("pool_down", POOL)]
    assert [c[3] for c in fake2.calls if c[0] == "launch"] == [None, None]


@pytest.mark.slow  # imports SkyPilot and runs its optimizer (~2.8 s per process): make test runs it, make test-fast does not
@pytest.mark.usefixtures("sky_home")
def test_sdk_pool_calls_are_skypilots(monkeypatch):
    import inspect

    import sky

    from gpuledger.launch.skypilot_sdk import SkySDK

    calls = []

    def checked(name, rid):
        real = inspect.signature(getattr(sky.jobs, name))

        def fake(*args, **kw):
            real.bind(*args, **kw)  # arguments SkyPilot's own function accepts
            calls.append((name, args, kw))
            return rid
        return fake

    for name, rid in (("pool_apply", "r-apply"), ("pool_status", "r-status"), ("pool_down", "r-down"),
                      ("launch", "r-launch")):
        monkeypatch.setattr(sky.jobs, name, checked(name, rid))
    monkeypatch.setattr(sky, "stream_and_get", lambda rid, output_stream=None: calls.append(("wait", rid)) or (
        [9], None) if rid == "r-launch" else None)
    monkeypatch.setattr(sky, "get", lambda rid: [{"name": "p", "status": "READY", "replica_info": [
        {"name": "p-1", "status": "READY", "launched_at": 1.0, "is_spot": True, "used_by": [3]}]}])
    sdk = SkySDK()
    sdk.pool_apply("TASK", "p", 2)
    assert sdk.pool_status("p") == [{"name": "p", "status": "READY", "workers": [
        {"name": "p-1", "status": "READY", "launched_at": 1.0, "is_spot": True, "used_by": [3]}]}]
    sdk.pool_down("p")
    assert sdk.launch("TASK", "gl-x", pool="p") == 9
    names = [c[0] for c in calls if c[0] != "wait"]
    assert names == ["pool_apply", "pool_status", "pool_down", "launch"]
    assert calls[0][1][:2] == ("TASK", "p") and calls[0][2]["workers"] == 2
    assert calls[-2][2] == {"name": "gl-x", "pool": "p"}


def test_a_failing_leftover_check_does_not_block_a_trial_of_its_own():
    class Unreachable(PoolSky):
        def pool_status(self, name):
            raise RuntimeError("controller unreachable")

    fake = Unreachable(Clock(), [_job(600, 1600)])
    launcher = _launcher(fake, Clock())
    launcher.submit(request())
    assert [c[0] for c in fake.calls] == ["launch"]


@pytest.mark.usefixtures("sky_home")
def test_no_pool_controller_means_no_pool(monkeypatch):
    import sky

    from gpuledger.launch.skypilot_sdk import SkySDK

    def not_up(rid):
        raise sky.exceptions.ClusterNotUpError("no jobs controller")

    monkeypatch.setattr(sky.jobs, "pool_status", lambda names: "r-status")
    monkeypatch.setattr(sky, "get", not_up)
    assert SkySDK().pool_status("gl-x") == []
