"""An RL trial whose rollouts run on an instance of their own, launched as one SkyPilot job group
(gpuledger/launch/skypilot_group.py): the group parses with SkyPilot's own job-group loader; its tasks'
resources are SkyPilot-valid (each task optimized by SkyPilot's optimizer against the offline catalog picks
the planned instance); SkyPilot's own optimizer refuses in-group networking off Kubernetes, which is why
gpuledger refuses VM clouds with one message; the launcher, faked only at its SDK boundary, sends the group,
reads the trainer task's row and log, and bills the two instances by role. trainers/grpo.py takes the
rollouts' host and port from the group's variables."""

from __future__ import annotations

import copy
import importlib.util
import sys
from pathlib import Path

import pytest
from helpers.sky_offline import no_network, sky_offline  # noqa: F401 - fixtures used by name
from test_skypilot_launcher import T0, Clock, FakeSky, agent_signs, request, result_line, run_to_end

from gpuledger import protocol
from gpuledger.errors import UserError
from gpuledger.launch.base import RolloutRequest
from gpuledger.launch.skypilot import SkyPilotLauncher
from gpuledger.launch.skypilot_group import build_group, group_configs, refuse_vm_cloud
from gpuledger.launch.skypilot_task import job_name, task_config
from gpuledger.record import parse_record

ROOT = Path(__file__).resolve().parents[2]
ROLLOUT = RolloutRequest(run="trl vllm-serve --model Qwen/Qwen2.5-7B --port $GPULEDGER_ROLLOUT_PORT",
                         accelerator="L40S", gpus=4, usd_per_hour=8.0, instance_type="L40S-x4",
                         cloud="kubernetes", region="default",
                         price_description="kubernetes L40S-x4 rollout instance, project prices (plan)")


def _req(**kw):
    base = dict(sweep_id="grpo-qwen-7b-0000abcd", sweep_name="grpo-qwen-7b", trial_id="0123456789ab",
                run="python trainers/grpo.py --generation vllm_server --lr 1e-06", accelerator="H100", gpus=8,
                cloud="kubernetes", region="default", instance_type="H100-x8", spot=False, usd_per_hour=24.0,
                on_demand_usd_per_hour=24.0, price_source="catalog", rollout=ROLLOUT)
    base.update(kw)
    return request(**base)


def test_the_group_is_a_trainer_and_a_rollout_task_that_find_each_other_by_hostname():
    docs = group_configs(_req(), result_key="k" * 64)
    header, trainer, rollout = docs
    group = job_name(_req())
    assert header == {"name": group, "execution": "parallel", "primary_tasks": ["trainer"], "inter_connection": True}
    assert (trainer["name"], rollout["name"]) == ("trainer", "rollout")
    for task, role in ((trainer, "trainer"), (rollout, "rollout")):
        env = task["envs"]
        assert env[protocol.ENV_ROLE] == role and env[protocol.ENV_ROLLOUT_HOST] == f"rollout-0.{group}"
        assert env[protocol.ENV_ROLLOUT_PORT] == "8000" and env[protocol.ENV_TRAINER_HOST] == f"trainer-0.{group}"
        assert task["resources"]["infra"] == "kubernetes" and "instance_type" not in task["resources"]
        assert task["resources"]["labels"]["gpuledger-role"] == role
    assert trainer["resources"]["accelerators"] == {"H100": 8} and rollout["resources"]["accelerators"] == {"L40S": 4}
    assert "gpuledger.agent" in trainer["run"] and trainer["secrets"] == {protocol.ENV_RESULT_KEY: "k" * 64}
    assert rollout["run"] == ROLLOUT.run and "secrets" not in rollout  # the result key is the trainer's alone
    assert rollout["envs"][protocol.ENV_ACCELERATOR] == "L40S" and rollout["envs"][protocol.ENV_GPUS] == "4"


@pytest.mark.parametrize("cloud", ["aws", "gcp", None])
def test_a_vm_cloud_is_refused_with_the_reason(cloud):
    with pytest.raises(UserError, match="SkyPilot 0.14.1 gives a job group's tasks hostnames only on Kubernetes"):
        group_configs(_req(cloud=cloud, region="us-east-1", instance_type="p5.48xlarge"))
    refuse_vm_cloud("kubernetes")  # no refusal


@pytest.mark.slow  # imports SkyPilot and runs its optimizer (~2.8 s per process): make test runs it, make test-fast does not
@pytest.mark.usefixtures("sky_offline")
def test_skypilots_loader_parses_the_group_and_its_optimizer_says_why_vm_clouds_are_refused():
    import sky
    from sky import exceptions

    dag = build_group(group_configs(_req(), result_key="k" * 64))
    assert dag.is_job_group() and dag.primary_tasks == ["trainer"] and dag.inter_connection is True
    assert [t.name for t in dag.tasks] == ["trainer", "rollout"]
    tr, ro = dag.tasks
    assert tr.envs[protocol.ENV_ROLLOUT_HOST] == f"rollout-0.{dag.name}" and ro.run == ROLLOUT.run
    assert {str(r.cloud).lower() for t in dag.tasks for r in t.resources} == {"kubernetes"}
    assert next(iter(ro.resources)).accelerators == {"L40S": 4}
    # what `sky.jobs.launch(dag, name=...)` sends the API server: the client's conversion and dump, reloaded
    from sky.utils import dag_utils

    sent = dag_utils.convert_entrypoint_to_dag(dag)
    again = dag_utils.load_job_group_from_yaml_str(dag_utils.dump_dag_to_yaml_str(sent))
    assert again.is_job_group() and again.name == dag.name and again.primary_tasks == ["trainer"]
    assert again.inter_connection is True and [t.name for t in again.tasks] == ["trainer", "rollout"]
    assert again.tasks[0].envs[protocol.ENV_ROLE] == "trainer" and again.tasks[1].run == ROLLOUT.run
    # the same two tasks placed on AWS instances of the offline catalog: each is a valid SkyPilot task, the
    # optimizer picks the planned instance ...
    docs = group_configs(_req(), result_key="k" * 64)
    docs[2]["resources"]["accelerators"] = {"L40S": 1}  # the catalog snapshot's one AWS L40S instance
    for doc, inst in ((docs[1], "p5.48xlarge"), (docs[2], "g6e.xlarge")):
        doc["resources"].update(infra="aws/us-east-1", instance_type=inst)
    for doc, inst in ((docs[1], "p5.48xlarge"), (docs[2], "g6e.xlarge")):
        task = sky.Task.from_yaml_config(copy.deepcopy(doc))
        with sky.Dag() as one:
            one.add(task)
        sky.optimizer.Optimizer.optimize(one, minimize=sky.OptimizeTarget.COST, quiet=True)
        assert task.best_resources.instance_type == inst
    # ... but as one group with in-group networking SkyPilot's own optimizer refuses: Kubernetes only
    aws_group = build_group(docs)
    with pytest.raises(exceptions.ResourcesUnavailableError, match="only supported on Kubernetes"):
        sky.optimizer.Optimizer.optimize_job_group(aws_group, quiet=True)


class GroupSky(FakeSky):
    """FakeSky for a job group: each queue record is given for both tasks (the rollout's a step behind), and
    `tail_logs` answers for one task (the trainer's log holds the agent's result line)."""

    def launch(self, task, name):  # the group's documents: the agent's key is the trainer task's secret
        (trainer,) = [d for d in task if d.get("name") == "trainer"]
        job_id = super().launch(trainer, name)
        self.calls[-1] = ("launch", task, name)
        return job_id

    def queue(self, job_ids=None):
        out = []
        for rec in super().queue(job_ids):
            out += [{**rec, "task_id": 0, "task_name": "trainer"},
                    {**rec, "task_id": 1, "task_name": "rollout", "status": "RUNNING"}]
        return out

    def tail_logs(self, job_id, tail=None, task=None):
        self.calls.append(("tail_logs", job_id, task))
        text = self.logs[job_id - 1] if task == "trainer" else "INFO vLLM server up\n"
        return agent_signs(text, self.keys.get(job_id))


def test_the_launcher_sends_the_group_and_bills_both_instances_by_role():
    clock = Clock()
    script = [{"t": 0, "status": "PENDING", "recovery_count": 0},
              {"t": 120, "status": "RUNNING", "start_at": 120, "recovery_count": 0, "cloud": "Kubernetes",
               "region": "default"},
              {"t": 3720, "status": "SUCCEEDED", "start_at": 120, "end_at": 3720, "recovery_count": 0,
               "cloud": "Kubernetes", "region": "default"}]
    fake = GroupSky(clock, [script], logs=[result_line(130, 3700, final_metrics={"reward_mean": 0.5}) + "\n"])
    launcher = SkyPilotLauncher(sdk=fake, catalog_price=lambda *a: None, task_builder=task_config, clock=clock,
                                poll_interval_s=0)
    req = _req()
    handle = launcher.submit(req)
    (_, sent, name), = [c for c in fake.calls if c[0] == "launch"]
    assert name == job_name(req) and [d["name"] for d in sent] == [name, "trainer", "rollout"]
    assert run_to_end(launcher, handle)[-1] == "succeeded"  # the trainer's row, not the rollout's RUNNING
    rec = parse_record(launcher.collect(handle)[0].to_json())
    assert ("tail_logs", 1, "trainer") in fake.calls and rec.final_metrics == {"reward_mean": 0.5}
    hours = 3600 / 3600
    lines = {b.role: b for b in rec.billing}
    assert set(lines) == {"trainer", "rollout"}
    # the trainer at its own price (the plan's sum less the rollouts'), the rollouts at the plan's, same hours
    assert lines["trainer"].usd_per_hour == pytest.approx(24.0) and lines["trainer"].hours == pytest.approx(hours)
    assert (lines["trainer"].accelerator, lines["trainer"].gpus) == ("H100", 8)
    assert lines["rollout"].cost_usd == pytest.approx(8.0 * hours)
    assert (lines["rollout"].accelerator, lines["rollout"].gpus, lines["rollout"].instance_type) == ("L40S", 4, "L40S-x4")
    assert rec.cost_usd == pytest.approx(32.0 * hours)
    assert T0


def test_the_grpo_trainer_defaults_its_vllm_server_to_the_groups_rollout_host(monkeypatch):
    path = ROOT / "gpuledger" / "scaffold" / "trainers" / "grpo.py"
    spec = importlib.util.spec_from_file_location("grpo_scaffold", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.delenv(protocol.ENV_ROLLOUT_HOST, raising=False)
    monkeypatch.delenv(protocol.ENV_ROLLOUT_PORT, raising=False)
    args = module.build_parser().parse_args([])
    assert (args.vllm_server_host, args.vllm_server_port) == ("127.0.0.1", 8000)
    monkeypatch.setenv(protocol.ENV_ROLLOUT_HOST, "rollout-0.gl-grpo-qwen-7b-0123456789ab")
    monkeypatch.setenv(protocol.ENV_ROLLOUT_PORT, "8123")
    args = module.build_parser().parse_args([])
    assert (args.vllm_server_host, args.vllm_server_port) == ("rollout-0.gl-grpo-qwen-7b-0123456789ab", 8123)
    assert module.build_parser().parse_args(["--vllm-server-host", "h"]).vllm_server_host == "h"
    assert "grpo_scaffold" not in sys.modules


def _grpo_spec(tmp_path, clouds, rollout_run="trl vllm-serve --model {model} --port $GPULEDGER_ROLLOUT_PORT"):
    import yaml

    from gpuledger.spec import load_spec

    data = yaml.safe_load((ROOT / "specs" / "grpo-qwen-7b.yaml").read_text())
    data["search"]["params"] = {"learning_rate": [1.0e-6]}
    data["train"].update(generation="vllm_server", rollout_gpu="L40S", rollout_gpus=4)
    data["resources"].update(accelerators=["H100"], gpus_per_trial=8, clouds=clouds)
    if rollout_run:
        data["task"]["rollout_run"] = rollout_run
    path = tmp_path / "grpo.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_spec(path)


def test_the_request_of_a_planned_trial_carries_its_rollout_task_at_the_trainers_own_price(tmp_path):
    from gpuledger.plan.model import PlannedTrial
    from gpuledger.runtime.requests import launch_request
    from gpuledger.spec import expand_trials

    spec = _grpo_spec(tmp_path, ["kubernetes"])
    trial = expand_trials(spec)[0]
    assert trial.rollout_run == "trl vllm-serve --model Qwen/Qwen2.5-7B --port $GPULEDGER_ROLLOUT_PORT"
    row = PlannedTrial(trial_id=trial.trial_id, trial_index=0, params=trial.params, feasible=True,
                       accelerator="H100", gpus=8, cloud="kubernetes", region="default", instance_type="H100-x8",
                       spot=False, usd_per_hour=32.0, on_demand_usd_per_hour=32.0, price_source="project",
                       rollout={"accelerator": "L40S", "gpus": 4, "cloud": "kubernetes", "region": "default",
                                "instance_type": "L40S-x4", "usd_per_hour": 8.0, "price_source": "project"})
    req = launch_request(spec, trial, row, sweep_id="s-1", launcher="skypilot")
    assert req.rollout == RolloutRequest(run=trial.rollout_run, accelerator="L40S", gpus=4, usd_per_hour=8.0,
                                         instance_type="L40S-x4", cloud="kubernetes", region="default",
                                         price_description="kubernetes L40S-x4 rollout instance, project (plan)")
    assert req.usd_per_hour == pytest.approx(24.0) and req.on_demand_usd_per_hour == pytest.approx(24.0)
    assert [d["name"] for d in group_configs(req)][1:] == ["trainer", "rollout"]
    local = launch_request(spec, trial, row, sweep_id="s-1", launcher="local")
    assert local.rollout is None
    aws = row.__class__(**{**row.__dict__, "cloud": "aws", "region": "us-east-1", "instance_type": "p5.48xlarge"})
    with pytest.raises(UserError, match="puts this trial on aws, .* hostnames only on Kubernetes"):
        launch_request(spec, trial, aws, sweep_id="s-1", launcher="skypilot")
    # the rollouts planned off the trainer's cluster: SkyPilot places a networked group on one infrastructure
    apart = row.__class__(**{**row.__dict__, "rollout": {**row.rollout, "cloud": "aws", "region": "us-east-1"}})
    with pytest.raises(UserError, match="rollout instance of trial .* puts this trial on aws"):
        launch_request(spec, trial, apart, sweep_id="s-1", launcher="skypilot")
    other = row.__class__(**{**row.__dict__, "rollout": {**row.rollout, "region": "lab-b"}})
    with pytest.raises(UserError, match="trainer on kubernetes/default and its rollouts on kubernetes/lab-b"):
        launch_request(spec, trial, other, sweep_id="s-1", launcher="skypilot")
    # no rollout instance from the plan (no plan at all, or a trial not timed by role): never a trainer alone
    for no_plan in (None, row.__class__(**{**row.__dict__, "rollout": None})):
        with pytest.raises(UserError, match="has no rollout instance from the plan"):
            launch_request(spec, trial, no_plan, sweep_id="s-1", launcher="skypilot")
    pooled = row.__class__(**{**row.__dict__, "pool": "gl-pool", "pool_workers": 2})
    with pytest.raises(UserError, match="planned on SkyPilot pool gl-pool.* cannot run on a pool"):
        launch_request(spec, trial, pooled, sweep_id="s-1", launcher="skypilot")
    from gpuledger.runtime.launching import make_launcher

    with pytest.raises(UserError, match=r"2 trials packed per GPU \(resources.trials_per_gpu\) cannot .* set resources.trials_per_gpu: 1"):
        make_launcher("skypilot", spec, 1, tmp_path, pack=2)


@pytest.mark.slow  # builds SkyPilot's Dag: imports SkyPilot (~2.8 s per process): make test runs it, make test-fast does not
def test_a_trainer_of_several_nodes_and_on_spot_keeps_its_nodes_and_recovery_in_the_group():
    docs = group_configs(_req(gpus=16, num_nodes=2, spot=True, usd_per_hour=40.0), result_key="k" * 64,
                         max_restarts_on_errors=3)
    trainer, rollout = docs[1], docs[2]
    assert trainer["num_nodes"] == 2 and trainer["resources"]["accelerators"] == {"H100": 8}  # per node
    assert "SKYPILOT_NODE_RANK" in trainer["run"] and "gpuledger.agent" in trainer["run"]
    assert trainer["resources"]["use_spot"] is True and trainer["resources"]["job_recovery"]["max_restarts_on_errors"] == 3
    assert rollout["resources"]["use_spot"] is False and "num_nodes" not in rollout  # priced on demand, one node
    dag = build_group(docs)
    assert dag.tasks[0].num_nodes == 2 and next(iter(dag.tasks[0].resources)).accelerators == {"H100": 8}
    with pytest.raises(UserError, match="cannot run on pool p"):
        group_configs(_req(pool="p", pool_workers=1))


def test_validate_names_a_missing_rollout_command_at_its_line(tmp_path):
    from gpuledger.plan.requirements import check_spec

    _grpo_spec(tmp_path, ["kubernetes"], rollout_run=None)
    out = check_spec(tmp_path / "grpo.yaml")
    assert not out["ok"] and len(out["problems"]) == 1
    assert out["problems"][0].startswith(f"{tmp_path / 'grpo.yaml'}:") and "need task.rollout_run" in out["problems"][0]
    _grpo_spec(tmp_path, ["kubernetes"])
    assert check_spec(tmp_path / "grpo.yaml")["ok"]
