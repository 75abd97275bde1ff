"""From spec to runtime without a dict: `prepare` gives the accepted sweep (spec, trials, plan), the
plan's trials are `PlannedTrial`s with `feasible` and `reason`, and the launch request reads them."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import pytest

from gpuledger.errors import UserError
from gpuledger.plan import PlannedTrial, PlanningInputs
from gpuledger.runtime.accepted import AcceptedSweep, prepare
from gpuledger.runtime.requests import launch_request

SPEC = """
kind: sweep
name: typed
project: tests
owner: ci
model: meta-llama/Meta-Llama-3-8B
method: lora
precision: bf16
train: {{seq_len: 2048, tokens_per_trial: 1000000}}
search:
  strategy: grid
  params: {{micro_batch: [1, 512]}}
  objective: {{metric: eval_loss}}
resources: {{accelerators: [{accelerator}], gpus_per_trial: 1, clouds: [aws]}}
budget: {{max_usd: 5000}}
launcher: skypilot
task:
  run: python train.py --mb {{micro_batch}}
"""


def _spec(folder: Path, accelerator: str = "A100-80GB") -> Path:
    path = folder / "typed.yaml"
    path.write_text(textwrap.dedent(SPEC.format(accelerator=accelerator)), encoding="utf-8")
    return path


def test_prepare_returns_the_spec_its_trials_and_a_plan_of_typed_trials(tmp_path):
    accepted = prepare(_spec(tmp_path), inputs=PlanningInputs())
    assert isinstance(accepted, AcceptedSweep) and accepted.launcher == "skypilot"
    assert [t.trial_id for t in accepted.trials] == [t.trial_id for t in accepted.plan.planned_trials]
    assert accepted.sweep_id.startswith("typed-") and accepted.cap >= 1
    small, huge = accepted.plan.planned_trials
    assert small.feasible and small.reason is None and small.accelerator == "A100-80GB" and small.cost_usd > 0
    assert not huge.feasible and "A100-80GB" in huge.reason and huge.accelerator is None and huge.cost_usd == 0.0
    assert accepted.plan.planned(huge.trial_id) is huge and accepted.plan.planned("nope") is None
    summary = accepted.new_summary(dry_run=True)
    assert (summary.sweep_id, summary.trials, summary.dry_run) == (accepted.sweep_id, 2, True)


def test_the_launch_request_reads_the_planned_trial(tmp_path):
    accepted = prepare(_spec(tmp_path), inputs=PlanningInputs())
    small, huge = accepted.plan.planned_trials
    trials = {t.trial_id: t for t in accepted.trials}
    placed = launch_request(accepted.spec, trials[small.trial_id], small, sweep_id=accepted.sweep_id,
                            launcher="skypilot")
    assert (placed.accelerator, placed.gpus, placed.cloud, placed.usd_per_hour) == (
        "A100-80GB", small.gpus, "aws", small.usd_per_hour)
    unplaced = launch_request(accepted.spec, trials[huge.trial_id], huge, sweep_id=accepted.sweep_id,
                              launcher="skypilot")
    assert unplaced.accelerator is None and unplaced.price_description == f"not placed: {huge.reason}"


def test_a_planned_trial_from_a_row_keeps_what_it_names_and_counts_no_cost_it_cannot_trust():
    row = {"trial_id": "t1", "trial_index": 3, "params": {"x": 1}, "feasible": True, "est_cost_usd": math.nan,
           "accelerator": "H100", "unknown_column": 1}
    planned = PlannedTrial.from_row(row)
    assert (planned.trial_id, planned.trial_index, planned.params, planned.accelerator) == ("t1", 3, {"x": 1}, "H100")
    assert planned.cost_usd == 0.0 and not hasattr(planned, "unknown_column")


def test_prepare_refuses_a_capacity_spec_and_an_unknown_launcher_in_one_line(tmp_path):
    capacity = tmp_path / "cap.yaml"
    capacity.write_text(textwrap.dedent("""
        kind: capacity
        name: cap
        project: tests
        owner: ci
        model: meta-llama/Meta-Llama-3-8B
        traffic: {qps: 1, prompt_tokens: 100, output_tokens: 100}
        slo: {p95_ttft_ms: 1000, p95_tpot_ms: 100}
        resources: {accelerators: [A100-80GB]}
    """), encoding="utf-8")
    with pytest.raises(UserError, match="is a capacity spec .* `gpuledger capacity ") as err:
        prepare(capacity, inputs=PlanningInputs())
    assert "\n" not in str(err.value)
    with pytest.raises(UserError, match="unknown launcher 'mars': use local or skypilot"):
        prepare(_spec(tmp_path), launcher="mars", inputs=PlanningInputs())
