"""Trials of several nodes (issue 40: RL on 16-64 GPUs, large full fine-tunes): `resources.gpus_per_trial` above 8
spans `train.nodes` nodes (default ceil(GPUs / 8)) of at most 8 GPUs, each one instance; the time model's
data-parallel traffic crosses the nodes at the inter-node bandwidth; the plan pays every node and says so; the
launch asks SkyPilot for num_nodes (tests/integration/test_skypilot_multi_node.py parses it with SkyPilot's optimizer)."""

from __future__ import annotations

import pytest

from gpuledger.spec import SpecError, parse_spec


def spec_text(gpus: int, *, method: str = "grpo", nodes: int | None = None, accelerators: str = "[H100]",
              clouds: str = "[aws, gcp]", launcher: str = "skypilot", model: str = "Qwen/Qwen2.5-7B") -> str:
    rl = "  prompt_len: 512\n  completion_len: 1024\n  group_size: 8\n" if method == "grpo" else ""
    node_line = f"  nodes: {nodes}\n" if nodes is not None else ""
    return f"""kind: sweep
name: multi-node-{method}
project: rl
owner: ml
model: {model}
method: {method}
precision: bf16
train:
  seq_len: 1536
  micro_batch: 2
  grad_checkpointing: true
  tokens_per_trial: 50_000_000
{rl}{node_line}search:
  strategy: grid
  params:
    learning_rate: [1.0e-6]
  objective: {{metric: reward_mean, goal: maximize}}
resources:
  accelerators: {accelerators}
  gpus_per_trial: {gpus}
  clouds: {clouds}
  max_parallel: 1
budget: {{max_usd: 50000}}
launcher: {launcher}
task:
  run: python trainers/grpo.py --lr {{learning_rate}}
"""


def _plan(text):
    from gpuledger.plan import plan_sweep

    return plan_sweep(parse_spec(text, "multi.yaml"))


def test_the_nodes_rule_is_one_place():
    from gpuledger.estimate.coefficients import nodes_for

    assert [nodes_for(g) for g in (1, 8, 9, 16, 32, 64)] == [1, 1, 2, 2, 4, 8]
    assert nodes_for(32, 8) == 8 and nodes_for(8, 2) == 2


@pytest.mark.parametrize("method", ["grpo", "full"])
def test_a_32_gpu_trial_validates_and_plans_on_4_nodes_of_8(method):
    plan = _plan(spec_text(32, method=method))
    (trial,) = plan.trials
    assert trial["feasible"], trial["reason"]
    assert trial["gpus"] == 32 and trial["accelerator"] == "H100"
    assert trial["instance_type"] in ("p5.48xlarge", "a3-highgpu-8g")  # an 8-GPU instance per node
    # every node is paid: the trial's hourly price is 4 instances'
    from gpuledger.catalog.pricing import load_offers

    offers = load_offers(clouds=[trial["cloud"]], regions=[trial["region"]])
    one = offers.filter(offers["instance_type"] == trial["instance_type"])
    col = "usd_per_hour_spot" if trial["spot"] else "usd_per_hour_on_demand"
    assert trial["usd_per_hour"] == pytest.approx(4 * one[col].min())
    assert trial["on_demand_usd_per_hour"] == pytest.approx(4 * one["usd_per_hour_on_demand"].min())
    assert trial["est_cost_usd"] == pytest.approx(trial["usd_per_hour"] * trial["est_wall_s"] / 3600, rel=1e-3)
    (note,) = [a for a in plan.assumptions if a.startswith("multi-node:")]
    assert "32 GPUs on 4 nodes of 8" in note and "num_nodes" in note
    assert plan.pool is None or not plan.pool.used  # a pool worker is one node


def test_the_nodes_cost_time_through_the_inter_node_link():
    """FSDP on 4 nodes of 8 H100 sends its all-gathers over the network (350 GB/s per GPU between nodes, below the
    360 of NVLink inside one): more communication per step than on one node of 8; a PCIe card's 20 GB/s inside
    the node binds before the network does."""
    from gpuledger.catalog import gpu_kinds
    from gpuledger.estimate import Workload, estimate, training_step
    from gpuledger.estimate.throughput import _bus_gbps

    def comm(gpus):
        w = Workload(model="Qwen/Qwen2.5-7B", method="full", gpus=gpus, sharding="fsdp", micro_batch=2, seq_len=1536,
                     grad_ckpt=True)
        return training_step(estimate(w), "H100").parts_s["communication"]

    assert comm(32) > comm(8)
    assert _bus_gbps(gpu_kinds()["H100"], 4, None) == (350.0, "4 nodes (350 GB/s per GPU between nodes)")
    assert _bus_gbps(gpu_kinds()["L40S"], 4, None)[0] == 20.0


def test_spot_on_several_nodes_counts_each_nodes_preemptions():
    from gpuledger.catalog.pricing import load_offers
    from gpuledger.plan.candidates import candidate_offers
    from gpuledger.plan.settings import PlanSettings

    offers = load_offers(clouds=["aws"], accelerators=["H100"], usable_only=False)
    cand = candidate_offers(offers, [8, 32], PlanSettings())
    one = cand.filter((cand["gpus"] == 8) & cand["spot"]).row(0, named=True)
    four = cand.filter((cand["gpus"] == 32) & cand["spot"] & (cand["instance_type"] == one["instance_type"])
                       & (cand["region"] == one["region"])).row(0, named=True)
    assert four["usd_per_hour"] == pytest.approx(4 * one["usd_per_hour"])
    assert four["preemptions_per_hour"] == pytest.approx(4 * one["preemptions_per_hour"])
    assert four["preemption_source"].endswith(" x 4 nodes") and not one["preemption_source"].endswith("nodes")


@pytest.mark.parametrize("gpus,nodes,where,match", [
    (20, None, "resources.gpus_per_trial", "20 GPUs do not split evenly over 3 nodes"),
    (64, 4, "train.nodes", "64 GPUs over 4 nodes is 16 per node; a node has at most 8"),
    (8, 16, "train.nodes", "train.nodes 16 is more than the trial's 8 GPUs"),
    (2000, None, "resources.gpus_per_trial", "must be <= 1024 \\(got 2000\\)"),
])
def test_gpus_that_make_no_whole_nodes_are_one_located_problem(gpus, nodes, where, match):
    with pytest.raises(SpecError, match=match) as err:
        parse_spec(spec_text(gpus, nodes=nodes), "multi.yaml")
    assert where in str(err.value)


def test_a_local_trial_cannot_span_nodes():
    with pytest.raises(SpecError, match="spans 4 nodes; the local launcher"):
        parse_spec(spec_text(32, launcher="local"), "multi.yaml")


def test_no_node_of_that_many_gpus_is_a_clear_refusal():
    """GH200 instances hold one GPU each (Lambda gpu_1x_gh200): 16 GPUs as 2 nodes of 8 cannot be rented, and the
    refusal names the nodes and the largest instance; 16 nodes of 1 (train.nodes: 16) can."""
    (trial,) = _plan(spec_text(16, method="full", accelerators="[GH200]", clouds="[lambda]",
                               model="Qwen/Qwen2.5-1.5B")).trials
    assert not trial["feasible"] and trial["est_cost_usd"] is None
    assert trial["reason"] == ("16 GPUs need 2 nodes of 8 GPUs each: no instance in the chosen clouds/regions has 8 "
                               "(the largest GH200 instance has 1); more nodes of fewer GPUs: train.nodes")
    (trial,) = _plan(spec_text(16, method="full", accelerators="[GH200]", clouds="[lambda]", nodes=16,
                               model="Qwen/Qwen2.5-1.5B")).trials
    assert trial["feasible"] and trial["instance_type"] == "gpu_1x_gh200"
    assert trial["usd_per_hour"] == pytest.approx(16 * 2.29)


def test_one_node_plans_are_unchanged_by_the_multi_node_rule():
    """A spec of 8 GPUs or fewer plans exactly as before: no note, the one instance's price."""
    plan = _plan(spec_text(8, method="full"))
    (trial,) = plan.trials
    assert trial["feasible"] and not any(a.startswith("multi-node") for a in plan.assumptions)
    from gpuledger.catalog.pricing import load_offers

    offers = load_offers(clouds=[trial["cloud"]], regions=[trial["region"]])
    one = offers.filter(offers["instance_type"] == trial["instance_type"])
    col = "usd_per_hour_spot" if trial["spot"] else "usd_per_hour_on_demand"
    assert trial["usd_per_hour"] == pytest.approx(one[col].min())


def test_the_launch_request_and_task_of_a_multi_node_trial():
    from gpuledger.cli.commands.render_task import launch_requests
    from gpuledger.launch.skypilot_task import AGENT_RUN_PREFIX, task_config

    spec = parse_spec(spec_text(32), "multi.yaml")
    (req,) = launch_requests(spec)
    assert req.gpus == 32 and req.num_nodes == 4
    config = task_config(req)
    assert config["num_nodes"] == 4 and config["resources"]["accelerators"] == {"H100": 8}
    assert config["envs"]["GPULEDGER_GPUS"] == "32"
    head, worker = config["run"].split("\nelse\n")
    assert head.startswith('if [ "${SKYPILOT_NODE_RANK:-0}" = "0" ]; then\n  ' + AGENT_RUN_PREFIX + "python3 -m "
                           "gpuledger.agent")
    assert worker.strip().startswith(AGENT_RUN_PREFIX + "bash -c") and worker.strip().endswith("fi")
    one = parse_spec(spec_text(8), "one.yaml")
    (req1,) = launch_requests(one)
    config1 = task_config(req1)
    assert req1.num_nodes == 1 and "num_nodes" not in config1 and config1["run"].startswith(AGENT_RUN_PREFIX)


def test_the_bill_of_a_multi_node_attempt_pays_every_node():
    from gpuledger.launch.base import LaunchRequest
    from gpuledger.launch.skypilot import SkyPilotLauncher

    launcher = SkyPilotLauncher(catalog_price=lambda *a: (10.0, 40.0, "aws p5.48xlarge us-east-1 spot"))
    req = LaunchRequest(sweep_id="s", sweep_name="s", trial_id="t", params={}, run="true", accelerator="H100",
                        gpus=32, num_nodes=4, cloud="aws", region="us-east-1", instance_type="p5.48xlarge", spot=True)
    bill = launcher._billing(req, "aws", "us-east-1", "p5.48xlarge", True, 3600.0)
    assert bill["usd_per_hour"] == 40.0 and bill["cost_usd"] == 40.0 and bill["on_demand_usd_per_hour"] == 160.0
    assert bill["description"].startswith("4 nodes x aws p5.48xlarge")


def test_the_estimate_table_prices_the_nodes_of_a_multi_node_count():
    """`gpuledger estimate --gpus 32 --tokens N`: the table has the 32-GPU row beside 1-8, priced as 4 instances
    of the cheapest 8-GPU offer."""
    from gpuledger.catalog.pricing import load_offers
    from gpuledger.estimate import Workload
    from gpuledger.plan.gpu_table import _cheapest, gpu_options

    offers = load_offers()
    w = Workload(model="Qwen/Qwen2.5-7B", method="full", gpus=32, sharding="fsdp", micro_batch=2, seq_len=1536,
                 grad_ckpt=True)
    rows = gpu_options(w, 5e7, offers, accelerators=["H100"])
    assert [r["gpus"] for r in rows] == [1, 2, 4, 8, 32]
    (row,) = [r for r in rows if r["gpus"] == 32]
    node = _cheapest(offers, "H100", 8, False)
    assert row["fits"] and f" 4 x {node['instance_type']} " in row["on_demand_offer"]
    assert row["usd_on_demand"] == pytest.approx(4 * node["usd_per_hour"] * row["time_s"]["p50"] / 3600, abs=0.01)


def test_a_count_the_parallel_split_refuses_says_why_in_words():
    """A GPU count that does not split into tensor x pipeline x sequence parallel is a row that does not fit
    with the workload's own reason, not pydantic's trailing link line."""
    from gpuledger.catalog.pricing import load_offers
    from gpuledger.estimate import Workload
    from gpuledger.plan.gpu_table import gpu_options

    w = Workload(model="Qwen/Qwen2.5-7B", method="full", gpus=8, sharding="zero1", seq_len=8192,
                 sequence_parallel=2)
    (one,) = [r for r in gpu_options(w, 5e7, load_offers(), accelerators=["H100"]) if r["gpus"] == 1]
    assert not one["fits"]
    assert one["reason"] == ("gpus (1) must be a multiple of tensor_parallel x pipeline_parallel x "
                             "sequence_parallel (1 x 1 x 2)")
