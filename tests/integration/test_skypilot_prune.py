"""ASHA pruning on the SkyPilot launcher, end to end: a sweep through the runtime (`engine.execute`)
with `SkyPilotLauncher`, whose SDK boundary is a fake cluster that runs each job's real task.

What is real: the spec, the plan, the Optuna study, the SkyPilot task (built by `build_task`, so
parsed by SkyPilot's `sky.Task.from_yaml_config`, then optimized by SkyPilot's own optimizer against
the offline catalog, which picks the cluster the fake "provisions"), the task's `run` command (the
in-job agent with `--echo-metrics`, around the trial script) as a subprocess, its log (stdout and
stderr merged, as SkyPilot keeps it), the cancel (SIGTERM to the job's process group), billing at
the bundled catalog price, and the DuckDB warehouse.

It also recovers one job the way a managed job does: once the watch has read a few of its values,
its "machine" is lost (the process group SIGKILLed, no result line), the job is RECOVERING, then
its `run` starts over on a "new cluster" whose log starts empty; the pruner must count each step of
that trial once.

What the fake cluster does not do: provision, sync the workdir (the job runs in it), run the
task's `setup` (pip installs); the job's `/tmp/gpuledger-result.json` is the test's temporary folder
(a cluster's /tmp is its own).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path

import optuna
import pytest
from helpers.sky_offline import no_network, sky_offline  # noqa: F401 - fixtures used by name
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend

from gpuledger import protocol, vocabulary
from gpuledger.launch.skypilot_task import RESULT_PATH

# eval_loss(x, step) = (|x - 0.3| + 1) * (1 + 1/step): x = 0.3 is best at every step
TRIAL = textwrap.dedent("""
    import argparse, time
    from gpuledger.track import log
    p = argparse.ArgumentParser()
    p.add_argument("--x", type=float, required=True)
    a = p.parse_args()
    for step in range(1, 11):
        log(step=step, eval_loss=(abs(a.x - 0.3) + 1.0) * (1 + 1 / step))
        time.sleep(0.35)
""")

SPEC = """
kind: sweep
name: tiny-sky-asha
project: tests
owner: ci
model: gpuledger/demo-char-gpt
method: lora
precision: fp32
train: {seq_len: 64, tokens_per_trial: 1000, grad_checkpointing: false, flash_attention: false}
search:
  strategy: asha
  seed: 0
  pruning: {min_steps: 2, reduction_factor: 2}
  params: {x: [0.6, 0.5, 0.3, 0.1]}
  objective: {metric: eval_loss, goal: minimize}
resources: {accelerators: [A10G], gpus_per_trial: 1, clouds: [aws], spot: never, max_parallel: 1, pool: never}
budget: {max_usd: 5}
launcher: skypilot
task:
  run: python3 trial.py --x {x}
"""


class FakeCluster:
    """The `SkySDK` boundary: each launched task is optimized by SkyPilot, then its `run` runs here.

    `preempt`: (env name, value) of the one job whose cluster is lost once the watch read 3 values.
    """

    def __init__(self, folder: Path, preempt: tuple[str, str] | None = None):
        self.folder = folder
        self.preempt = preempt
        self.jobs: dict[int, dict] = {}
        self.calls: list[tuple] = []

    def launch(self, task, name: str) -> int:
        import sky

        assert isinstance(task, sky.Task)
        with sky.Dag() as dag:
            dag.add(task)
        sky.optimizer.Optimizer.optimize(dag, minimize=sky.OptimizeTarget.COST, quiet=True)
        best = task.best_resources
        job_id = len(self.jobs) + 1
        self.calls.append(("launch", job_id, name))
        acc, count = next(iter(best.accelerators.items()))
        spot = "[spot]" if best.use_spot else ""
        job = {"task": task, "log": self.folder / f"job-{job_id}.log", "end": None, "cancelled": False,
               "cloud": str(best.cloud), "region": best.region, "windows": [], "values_read": 0,
               "recovery_count": 0, "recovered_at": None, "state": "RUNNING",
               "preempt": self.preempt is not None and task.envs.get(self.preempt[0]) == self.preempt[1],
               "resources": f"1x{spot}(gpus={acc}:{count}, {best.instance_type}, ...)"}
        self.jobs[job_id] = job
        self._start(job_id)
        return job_id

    def pool_status(self, name: str) -> list[dict]:  # no pools here (tests/unit/test_skypilot_pool.py)
        return []

    def _start(self, job_id: int) -> None:
        """Runs the task's `run` on a fresh "cluster": a new process group, a log that starts empty."""
        job, task = self.jobs[job_id], self.jobs[job_id]["task"]
        run = task.run.replace(RESULT_PATH, str(self.folder / f"job-{job_id}-result.json"))
        bin_dir = str(Path(sys.executable).parent)  # `python3` is this interpreter, with gpuledger
        secrets = {k: v.get_secret_value() for k, v in task.secrets.items()}  # SkyPilot sets them like envs
        env = {**os.environ, **task.envs, **secrets, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}
        with open(job["log"], "wb") as out:
            job["proc"] = subprocess.Popen(["bash", "-c", run], cwd=task.workdir, env=env, stdout=out,
                                           stderr=subprocess.STDOUT, start_new_session=True)
        job["windows"].append([time.time(), None])

    def queue(self, job_ids=None) -> list[dict]:
        out = []
        for job_id in job_ids or list(self.jobs):
            job = self.jobs[job_id]
            if job["state"] == "RECOVERING":  # back on a new cluster
                self._start(job_id)
                job["state"], job["recovery_count"] = "RUNNING", 1
                job["recovered_at"] = job["windows"][-1][0]
            elif job["preempt"] and job["values_read"] >= 3 and job["proc"].poll() is None:
                os.killpg(job["proc"].pid, signal.SIGKILL)  # the machine is gone: no result line
                job["proc"].wait()
                job["windows"][-1][1] = time.time()
                job["preempt"], job["state"] = False, "RECOVERING"
            code = job["proc"].poll()
            if job["state"] == "RECOVERING":
                status = "RECOVERING"
            elif code is None:
                status = "CANCELLING" if job["cancelled"] else "RUNNING"
            else:
                if job["end"] is None:
                    job["end"] = job["windows"][-1][1] = time.time()
                status = "CANCELLED" if job["cancelled"] else ("SUCCEEDED" if code == 0 else "FAILED")
            out.append({"job_id": job_id, "status": status, "start_at": job["windows"][0][0],
                        "end_at": job["end"], "recovery_count": job["recovery_count"],
                        "last_recovered_at": job["recovered_at"], "cloud": job["cloud"],
                        "region": job["region"], "cluster_resources_full": job["resources"]})
        return out

    def tail_logs(self, job_id: int, tail: int | None = None) -> str:
        self.calls.append(("tail_logs", job_id, tail))
        job = self.jobs[job_id]
        text = job["log"].read_text(encoding="utf-8", errors="replace")
        text = text if tail is None else "".join(text.splitlines(keepends=True)[-tail:])
        job["values_read"] = max(job["values_read"], text.count(protocol.METRIC_LINE_PREFIX))
        return text

    def cancel(self, job_id: int) -> None:
        self.calls.append(("cancel", job_id))
        job = self.jobs[job_id]
        job["cancelled"] = True
        if job["proc"].poll() is None:
            os.killpg(job["proc"].pid, signal.SIGTERM)

    def stop_all(self) -> None:
        for job in self.jobs.values():
            if job["proc"].poll() is None:
                os.killpg(job["proc"].pid, signal.SIGKILL)
            job["proc"].wait()


@pytest.mark.usefixtures("sky_offline")
def test_asha_sweep_on_the_skypilot_launcher_prunes_cancels_bills_what_ran_and_survives_a_recovery(tmp_path, monkeypatch):
    from gpuledger.launch.skypilot import SkyPilotLauncher
    from gpuledger.runtime.accepted import prepare
    from gpuledger.runtime.engine import SweepRun, execute
    from gpuledger.search import study_path_for
    from gpuledger.warehouse import Warehouse

    # the agent's echo interval is the job's environment (the fake cluster's), never the spec's task.env
    monkeypatch.setenv("GPULEDGER_ECHO_INTERVAL_S", "0.05")

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GPULEDGER_WAREHOUSE", str(tmp_path / "wh" / "ledger.duckdb"))
    (tmp_path / "trial.py").write_text(TRIAL, encoding="utf-8")
    spec_path = tmp_path / "sky-asha.yaml"
    spec_path.write_text(SPEC, encoding="utf-8")
    accepted = replace(prepare(spec_path, launcher="skypilot"), cap=1)
    trials, sweep_id = accepted.trials, accepted.sweep_id
    cluster = FakeCluster(tmp_path, preempt=("GPULEDGER_PARAM_X", "0.3"))
    launchers = []

    def factory(name, spec, cap, landing):
        assert name == "skypilot"
        launchers.append(SkyPilotLauncher(sdk=cluster, poll_interval_s=0.1, progress_interval_s=0.2))
        return launchers[-1]

    summary = accepted.new_summary()
    run = SweepRun(accepted, summary=summary, launcher_factory=factory)
    try:
        execute(run)
    finally:
        cluster.stop_all()

    assert summary.succeeded + summary.pruned == 4 and summary.pruned >= 1 and summary.failed == 0
    assert summary.status == vocabulary.SWEEP_SUCCEEDED
    # every job's task asked the agent to echo the objective, and the watch read the tail of the log
    tails = [c for c in cluster.calls if c[0] == "tail_logs"]
    assert any(c[2] == launchers[0].progress_tail_lines for c in tails)
    cancelled = {c[1] for c in cluster.calls if c[0] == "cancel"}
    with Warehouse.open(read_only=True) as wh:
        rows = {r["trial_id"]: r for r in wh.query(
            "select trial_id, status, metric_value, wall_s, cost_usd from v_trial_results").to_dicts()}
        runs = wh.query("select trial_id, status, launcher, cloud, instance_type, wall_s, cost_usd "
                        "from v_runs").to_dicts()
    trials_by_x = {t.params["x"]: t for t in trials}
    by_x = {x: rows[t.trial_id] for x, t in trials_by_x.items()}
    best = by_x[0.3]
    assert best["status"] == vocabulary.SUCCEEDED and best["metric_value"] == pytest.approx(1.1)
    # billed: each attempt's time on its cluster (start to end) at aws g5.xlarge on-demand
    # one job per attempt the runtime launched (a trial suspended at an undecided rung is launched again)
    jobs: dict[str, list[dict]] = {}
    for _kind, job_id, name in (c for c in cluster.calls if c[0] == "launch"):
        jobs.setdefault(name.rsplit("-", 1)[1], []).append(cluster.jobs[job_id])
    # every cancelled job is a run the warehouse holds as cancelled: a pruned trial's, or a suspended attempt's
    assert len(cancelled) == sum(r["status"] == vocabulary.CANCELLED for r in runs) >= summary.pruned
    assert len(cancelled) - summary.pruned <= summary.suspended
    for trial_id, r in rows.items():
        seconds = sum(end - start for job in jobs[trial_id] for start, end in job["windows"])
        assert r["cost_usd"] == pytest.approx(seconds / 3600 * 1.006, abs=0.2 / 3600 * 1.006)
    # the best trial lost its cluster once: two attempts, and the pruner saw each of its steps once
    best_runs = sorted((r for r in runs if r["trial_id"] == trials_by_x[0.3].trial_id), key=lambda r: r["wall_s"])
    # (its job lost once each time it is launched: a relaunch after a suspension at a rung is a new job)
    kept = sorted(r["status"] for r in best_runs if r["status"] != vocabulary.CANCELLED)
    assert kept.count(vocabulary.SUCCEEDED) == 1 and set(kept) == {vocabulary.PREEMPTED, vocabulary.SUCCEEDED}
    assert kept.count(vocabulary.PREEMPTED) <= len(jobs[trials_by_x[0.3].trial_id])
    assert len(jobs[trials_by_x[0.3].trial_id][-1]["windows"]) == 2
    study = optuna.load_study(study_name=sweep_id, storage=JournalStorage(JournalFileBackend(
        str(study_path_for(sweep_id)))))
    *suspended, best_trial = [t for t in study.get_trials() if t.user_attrs.get("gpuledger_trial_id")
                              == trials_by_x[0.3].trial_id]  # a study trial per attempt the search asked for
    assert best_trial.intermediate_values == {k: pytest.approx(1 + 1 / k) for k in range(1, 11)}
    for t in suspended:  # stopped at a rung: its values up to there, each once
        assert t.intermediate_values == {k: pytest.approx(1 + 1 / k) for k in range(1, len(t.intermediate_values) + 1)}
    pruned = [r for r in rows.values() if r["status"] == vocabulary.PRUNED]
    assert len(pruned) == summary.pruned
    for r in pruned:  # stopped early, billed for what they ran
        assert r["metric_value"] is None and 0 < r["cost_usd"] < best["cost_usd"] and r["wall_s"] < best["wall_s"]
    assert all(r["launcher"] == "skypilot" and r["cloud"] == "aws" and r["instance_type"] == "g5.xlarge"
               for r in runs)
    assert {r["status"] for r in runs if rows[r["trial_id"]]["status"] == vocabulary.PRUNED} == {vocabulary.CANCELLED}
    # the pruned jobs' logs hold the agent's echoed objective and its cancelled result line
    for job_id in cancelled:
        text = cluster.jobs[job_id]["log"].read_text()
        assert protocol.METRIC_LINE_PREFIX + '{"name":"eval_loss"' in text
        assert '"status":"cancelled"' in text
