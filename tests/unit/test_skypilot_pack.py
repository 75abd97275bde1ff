"""Packed trials on SkyPilot (gpuledger/launch/skypilot_pack.py): k trials submitted from k threads become
one managed job whose run starts k agents, each with its own variables and signing key; each trial's
record is the result line signed with its own key, billed its share of the job's attempt (the shares sum
to the job's cost); cancelling one trial of the job leaves it running; the packed task parses with
SkyPilot's own parser and its optimizer picks the planned offer from the offline catalog. SkyPilot is
faked only at its SDK boundary (tests/unit/test_skypilot_launcher.py's FakeSky)."""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass

import pytest
from helpers.sky_offline import no_network, sky_offline  # noqa: F401 - fixtures used by name
from test_skypilot_launcher import (
    AGENT_SIGNS,
    T0,
    Clock,
    FakeSky,
    request,
    result_line,
    run_to_end,
    table_price,
)

from gpuledger.agent.signing import signed_result_line
from gpuledger.launch.skypilot import SkyPilotLauncher
from gpuledger.launch.skypilot_pack import packed_task_config
from gpuledger.launch.skypilot_task import task_config
from gpuledger.protocol import ENV_RESULT_KEY, RESULT_LINE_PREFIX

JOB = [{"t": 0, "status": "PENDING"},
       {"t": 300, "status": "RUNNING", "start_at": 300, "cloud": "AWS", "region": "us-east-1",
        "cluster_resources_full": "[spot](gpus=A10G:1, cpus=4, mem=16, g5.xlarge, disk=256)"},
       {"t": 2100, "status": "SUCCEEDED", "start_at": 300, "end_at": 2100, "cloud": "AWS", "region": "us-east-1"}]


@dataclass
class PackSky(FakeSky):
    """FakeSky whose agents sign each trial's result line with that trial's own key (`_N` secrets)."""

    def launch(self, task, name):
        job_id = super().launch(task, name)
        self.keys[job_id] = task.get("secrets") or {}
        return job_id

    def tail_logs(self, job_id, tail=None):
        text = self.logs[job_id - 1]
        keys = self.keys.get(job_id) or {}

        def sign(m: re.Match) -> str:  # agent i signs its own line (trial index i in the line's run_id)
            i = int(re.search(r'"run_id": "agent-(\d+)"', m.group(1)).group(1))
            return signed_result_line(m.group(1), keys[f"{ENV_RESULT_KEY}_{i}"].encode())

        return re.sub(re.escape(RESULT_LINE_PREFIX) + r"(\{.*\})" + re.escape(AGENT_SIGNS), sign, text)


def _grouped(packer) -> int:
    """Submissions the packer has put in a group so far (its groups fill k at a time, in order)."""
    with packer._lock:
        open_ = packer._open
        return packer._slots * packer.k - (packer.k - len(open_.members) if open_ is not None else 0)


def _submit_together(launcher, reqs):
    handles: dict[int, object] = {}

    def go(i, r):
        handles[i] = launcher.submit(r)

    threads = [threading.Thread(target=go, args=(i, r)) for i, r in enumerate(reqs)]
    packer = launcher.packer
    for i, t in enumerate(threads):
        t.start()
        deadline = time.monotonic() + 10  # in order: the next joins once this one is in its group (agent i + 1)
        while packer is not None and i < len(threads) - 1 and _grouped(packer) <= i and time.monotonic() < deadline:
            time.sleep(0.001)
    for t in threads:
        t.join(10)
    return [handles[i] for i in range(len(reqs))]


def _reqs():
    return [request(trial_id=f"trial{i:07d}", params={"lora_r": 8 * (i + 1)}, run=f"python t.py --r {8 * (i + 1)}",
                    pack_weight=w) for i, w in enumerate((100.0, 300.0))]


def test_two_trials_are_one_job_of_two_agents_each_billed_its_share():
    clock = Clock()
    logs = "\n".join(result_line(310, 1200 + 600 * i, run_id=f"agent-{i + 1}", trial_id=f"trial{i:07d}") for i in range(2))
    fake = PackSky(clock, [JOB], logs=[logs])
    launcher = SkyPilotLauncher(sdk=fake, catalog_price=table_price, task_builder=task_config, clock=clock,
                                poll_interval_s=0, pack=2, pack_wait_s=5.0)
    a, b = _submit_together(launcher, _reqs())
    launches = [c for c in fake.calls if c[0] == "launch"]
    assert len(launches) == 1 and a.job_id == b.job_id == 1  # one job for both
    task = launches[0][1]
    assert task["run"].count("python3 -m gpuledger.agent") == 2 and task["run"].rstrip().endswith("wait\nexit 0")
    assert set(task["secrets"]) == {f"{ENV_RESULT_KEY}_1", f"{ENV_RESULT_KEY}_2"}
    assert "GPULEDGER_TRIAL_ID" not in task["envs"]  # per agent, in its own subshell
    for i, line in enumerate(task["run"].splitlines()[:2], start=1):
        assert f"GPULEDGER_TRIAL_ID=trial{i - 1:07d}" in line and f'{ENV_RESULT_KEY}="${ENV_RESULT_KEY}_{i}"' in line
        assert f"unset {ENV_RESULT_KEY}_1 {ENV_RESULT_KEY}_2" in line  # no agent keeps another's key
    for h in (a, b):
        run_to_end(launcher, h)
    ra, rb = launcher.collect(a)[0], launcher.collect(b)[0]
    assert (ra.trial_id, rb.trial_id) == ("trial0000000", "trial0000001") and ra.status == rb.status == "succeeded"
    assert ra.wall_s == pytest.approx(890) and rb.wall_s == pytest.approx(1490)  # each agent measured its own
    job_usd = 0.4591 * 1800 / 3600  # the job's attempt: 300 s to 2100 s at the spot price
    assert (ra.pack_share, rb.pack_share) == (pytest.approx(0.25), pytest.approx(0.75))  # by planned compute
    assert ra.cost_usd == pytest.approx(job_usd * 0.25) and rb.cost_usd == pytest.approx(job_usd * 0.75)
    assert ra.cost_usd + rb.cost_usd == pytest.approx(job_usd) and ra.pack_slot == rb.pack_slot
    assert ra.pack_k == 2 and ra.pack_wall_s == pytest.approx(1800) and "packed job" in ra.billing[0].description


def test_one_trial_cancelled_leaves_the_job_running_until_all_are():
    clock = Clock()
    fake = PackSky(clock, [JOB], logs=[""], on_cancel=[{"t": 400, "status": "CANCELLED", "start_at": 300,
                                                        "end_at": 400}])
    launcher = SkyPilotLauncher(sdk=fake, catalog_price=table_price, task_builder=task_config, clock=clock,
                                poll_interval_s=0, pack=2, pack_wait_s=5.0)
    a, b = _submit_together(launcher, _reqs())
    assert launcher.progress(a) == ([], 0)  # a packed job echoes no objective: nothing read, no API call
    assert not [c for c in fake.calls if c[0] == "tail_logs"]
    launcher.cancel(a)
    assert not [c for c in fake.calls if c[0] == "cancel"]
    launcher.cancel(b)
    assert [c for c in fake.calls if c[0] == "cancel"] == [("cancel", 1)]


def test_a_lone_trial_launches_after_the_wait():
    clock = Clock()
    fake = PackSky(clock, [JOB], logs=[""])
    launcher = SkyPilotLauncher(sdk=fake, catalog_price=table_price, task_builder=task_config, clock=clock,
                                poll_interval_s=0, pack=4, pack_wait_s=0.2)
    (h,) = _submit_together(launcher, _reqs()[:1])
    assert h.pack[2] == 1 and h.pack[1] == 1.0 and len([c for c in fake.calls if c[0] == "launch"]) == 1


@pytest.mark.slow  # imports SkyPilot and runs its optimizer (~2.8 s per process): make test runs it, make test-fast does not
@pytest.mark.usefixtures("sky_offline")
def test_the_packed_task_parses_and_the_optimizer_picks_the_planned_offer():
    import sky

    reqs = _reqs()
    task = sky.Task.from_yaml_config(packed_task_config(reqs, [b"k1" * 16, b"k2" * 16]))
    with sky.Dag() as dag:
        dag.add(task)
    sky.optimizer.Optimizer.optimize(dag, minimize=sky.OptimizeTarget.COST, quiet=True)
    best = task.best_resources
    assert best.instance_type == "g5.xlarge" and best.use_spot and best.accelerators == {"A10G": 1}
    assert str(best.cloud).lower() == "aws" and best.region == "us-east-1"
    assert best.get_cost(3600) == pytest.approx(reqs[0].usd_per_hour, rel=0.02)  # SkyPilot's price = the plan's
    assert task.run.count("gpuledger.agent") == 2
    assert T0  # the scripted clock's origin (imported with the fakes)
