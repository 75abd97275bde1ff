"""A 32-GPU trial as SkyPilot sees it: the rendered task of 4 nodes of 8 H100 parses, SkyPilot's optimizer accepts it
against the offline catalog (a temporary HOME, skipped where the snapshot is absent), picks the planned instance,
and its price of all the nodes is the plan's hourly price (tests/unit/test_multi_node.py holds the planner)."""

from __future__ import annotations

import pytest
import yaml
from helpers.sky_offline import no_network, sky_home, sky_offline  # noqa: F401 - fixtures used by name

from gpuledger.cli.commands.render_task import launch_requests
from gpuledger.spec import parse_spec

pytestmark = pytest.mark.integration

SPEC = """kind: sweep
name: grpo-32
project: rl
owner: ml
model: Qwen/Qwen2.5-7B
method: grpo
precision: bf16
train: {seq_len: 1536, micro_batch: 2, grad_checkpointing: true, tokens_per_trial: 50_000_000, prompt_len: 512,
        completion_len: 1024, group_size: 8}
search:
  strategy: grid
  params: {learning_rate: [1.0e-6]}
  objective: {metric: reward_mean, goal: maximize}
resources: {accelerators: [H100], gpus_per_trial: 32, clouds: [aws], spot: never, max_parallel: 1}
budget: {max_usd: 50000}
launcher: skypilot
task:
  run: python trainers/grpo.py --lr {learning_rate}
"""


@pytest.mark.usefixtures("sky_offline")
def test_skypilot_parses_and_optimizes_a_four_node_task_as_planned():
    import sky

    from gpuledger.launch.skypilot import build_task, task_yaml

    (req,) = launch_requests(parse_spec(SPEC, "grpo-32.yaml"))
    assert req.accelerator == "H100" and req.gpus == 32 and req.num_nodes == 4 and not req.spot
    task = sky.Task.from_yaml_config(yaml.safe_load(task_yaml(build_task(req))))
    assert task.num_nodes == 4
    (res,) = list(task.resources)
    assert res.accelerators == {"H100": 8} and res.instance_type == req.instance_type
    with sky.Dag() as dag:
        dag.add(task)
    sky.optimizer.Optimizer.optimize(dag, minimize=sky.OptimizeTarget.COST, quiet=True)
    best = task.best_resources
    assert best is not None and best.instance_type == req.instance_type and str(best.cloud).lower() == "aws"
    assert best.region == req.region and best.accelerators == {"H100": 8}
    # SkyPilot prices one node; the plan's hourly price is the 4 nodes' (same catalog)
    assert 4 * best.get_cost(3600) == pytest.approx(req.usd_per_hour, rel=0.02)
    assert 'SKYPILOT_NODE_RANK' in task.run and "gpuledger.agent" in task.run
