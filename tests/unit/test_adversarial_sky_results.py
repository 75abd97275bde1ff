"""A trial forging its SkyPilot record (issue 31): the launcher, against the fake at the SDK boundary
(`FakeSky`, tests/unit/test_skypilot_launcher.py), believes only result lines signed with the key it
made for that launch. A forged line (another attempt's times, 0 s, no GPUs, a fake metric) is never
stored as what it claims; the attempt says why. Each attack sits beside its positive control: the
agent's signed line in the same log is stored."""

from __future__ import annotations

from test_skypilot_launcher import (
    PREEMPTED_THEN_SUCCEEDED,
    Clock,
    FakeSky,
    launcher_for,
    request,
    result_line,
    run_to_end,
)

from gpuledger.agent.signing import signed_result_line
from gpuledger.launch.skypilot_task import task_config
from gpuledger.protocol import ENV_RESULT_KEY, RESULT_LINE_PREFIX

# what a forging trial claims: a great metric, no time, no GPUs
CLAIM = dict(final_metrics={"eval_loss": -1e9}, gpus=0, wall_s=0.0, peak_gpu_mem_gib=0.0)
SUCCEEDED_ONCE = [
    {"t": 0, "status": "RUNNING", "start_at": 0, "cloud": "AWS", "region": "us-east-1",
     "cluster_resources_full": "[spot](gpus=A10G:1, cpus=4, mem=16, g5.xlarge, disk=256)"},
    {"t": 3600, "status": "SUCCEEDED", "start_at": 0, "end_at": 3600, "cloud": "AWS", "region": "us-east-1"},
]


def _records(script, logs):
    clock = Clock()
    fake = FakeSky(clock, [script], logs=[logs])
    launcher = launcher_for(fake, clock)
    handle = launcher.submit(request())
    run_to_end(launcher, handle)
    return [r.to_json() for r in launcher.collect(handle)], fake


def test_a_forged_line_overlapping_an_earlier_attempt_does_not_replace_its_record():
    # attempt 1 (300-3900 s) was preempted: its agent never printed a line. The trial of attempt 2
    # prints one with attempt 1's times, then the agent's signed line for attempt 2 comes last.
    logs = "\n".join([result_line(400, 3800, signed=False, **CLAIM),
                      result_line(4450, 7990, final_metrics={"eval_loss": 1.07})]) + "\n"
    (first, second), _ = _records(PREEMPTED_THEN_SUCCEEDED, logs)
    assert first["status"] == "preempted" and first["final_metrics"] == {} and first["exit_code"] is None
    assert "not signed by its agent" in first["reason"] and "ignored" in first["reason"]
    assert first["billing"][0]["hours"] == 1.0  # billed from SkyPilot's times, not the line's 0 s
    # positive control: the agent's signed line is attempt 2's record
    assert second["status"] == "succeeded" and second["final_metrics"] == {"eval_loss": 1.07}
    assert second["peak_gpu_mem_gib"] == 17.25 and second["gpus"] == 1


def test_a_job_whose_only_result_line_is_forged_is_failed_with_the_reason():
    (rec,), _ = _records(SUCCEEDED_ONCE, result_line(10, 3590, signed=False, **CLAIM) + "\n")
    assert rec["status"] == "failed" and rec["final_metrics"] == {}
    assert rec["reason"].startswith("no trustworthy result record: 1 GPULEDGER_RESULT line(s)")
    assert rec["peak_gpu_mem_gib"] is None and rec["gpus"] == 1 and rec["wall_s"] == 3600
    # positive control: the same job with the agent's line stored as the agent measured it
    (good,), _ = _records(SUCCEEDED_ONCE, result_line(10, 3590) + "\n")
    assert good["status"] == "succeeded" and good["final_metrics"] == {"eval_loss": 1.07} and good["reason"] is None


def test_a_forged_line_after_the_agents_own_for_the_same_attempt_does_not_win():
    # later lines used to win: the forged one comes after the agent's signed line (a trial writing to
    # SkyPilot's log file itself, after the agent ended)
    logs = "\n".join([result_line(10, 3590), result_line(10, 3590, signed=False, **CLAIM)]) + "\n"
    (rec,), _ = _records(SUCCEEDED_ONCE, logs)
    assert rec["status"] == "succeeded" and rec["final_metrics"] == {"eval_loss": 1.07}
    assert "1 GPULEDGER_RESULT line(s) in the job's logs are not signed" in rec["reason"]


def test_a_line_signed_with_another_key_another_jobs_line_or_a_changed_line_is_not_believed():
    clock = Clock()
    made_up = signed_result_line(result_line(10, 3590, signed=False, **CLAIM).split(RESULT_LINE_PREFIX)[1],
                                 b"f" * 64)  # a key the trial made up
    fake = FakeSky(clock, [SUCCEEDED_ONCE] * 4, logs=[made_up + "\n", result_line(10, 3590), "", ""])
    launcher = launcher_for(fake, clock)
    handles = [launcher.submit(request(trial_id=f"trial{i}0000000")) for i in range(4)]
    for handle in handles:
        run_to_end(launcher, handle)
    genuine = fake.tail_logs(2)  # job 2's agent line, signed with job 2's key
    fake.logs[2] = genuine  # replayed in job 3's log
    fake.logs[3] = genuine.replace('"eval_loss": 1.07', '"eval_loss": -1000000000.0')  # changed after signing
    made_up_rec, genuine_rec, replayed, changed = (launcher.collect(h)[0].to_json() for h in handles)
    for rec in (made_up_rec, replayed, changed):
        assert rec["status"] == "failed" and rec["final_metrics"] == {}
        assert "not signed by its agent" in rec["reason"]
    # positive control: the line in the log of the job whose agent signed it
    assert genuine_rec["status"] == "succeeded" and genuine_rec["final_metrics"] == {"eval_loss": 1.07}


def test_each_launch_gets_its_own_key_as_a_task_secret_never_an_env():
    clock = Clock()
    fake = FakeSky(clock, [SUCCEEDED_ONCE, SUCCEEDED_ONCE])
    launcher = launcher_for(fake, clock)
    launcher.submit(request())
    launcher.submit(request(trial_id="another00000"))
    tasks = [c[1] for c in fake.calls if c[0] == "launch"]
    keys = [t["secrets"][ENV_RESULT_KEY] for t in tasks]
    assert len(set(keys)) == 2 and all(len(k) == 64 for k in keys)
    for task in tasks:
        assert ENV_RESULT_KEY not in task["envs"]
        # the spec's own set-up runs without it (SkyPilot sets secrets for set-up too)
        assert task["setup"].splitlines()[0] == f"unset {ENV_RESULT_KEY}"
    # positive control: a rendered task (no launch) carries no key
    assert "secrets" not in task_config(request()) and ENV_RESULT_KEY not in task_config(request())["setup"]
