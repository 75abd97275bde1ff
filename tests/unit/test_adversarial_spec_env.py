"""Issue 31: a spec's `task.env` cannot set gpuledger's own variables; a trial never inherits them."""

from __future__ import annotations

import pytest

from gpuledger import protocol
from gpuledger.spec import SpecError, parse_spec

SPEC = """\
kind: sweep
name: adv
project: p
owner: o
model: gpt2
train: {seq_len: 128, tokens_per_trial: 1000}
search:
  params:
    lr: [0.001, 0.01]
  objective: {metric: eval_loss}
budget: {max_usd: 10}
task:
  run: python train.py --lr {lr}
  env: ENV
"""


@pytest.mark.parametrize("env", ["{GPULEDGER_ACCELERATOR: H100}", "{GPULEDGER_GPUS: '64'}",
                                 "{gpuledger_warehouse: /tmp/x.duckdb}", "{A: '1', GPULEDGER_SPOT: 'true'}"])
def test_task_env_cannot_set_gpuledgers_variables(env):
    with pytest.raises(SpecError) as info:
        parse_spec(SPEC.replace("ENV", env), "adv.yaml")
    text = str(info.value)
    assert "adv.yaml:14:" in text and "task.env" in text and "gpuledger's own" in text
    assert len(text.splitlines()) == 1


def test_task_env_of_the_trainer_is_kept():  # positive control
    spec = parse_spec(SPEC.replace("ENV", "{TRAINER_FLAG: 'on', HF_HOME: /cache}"), "adv.yaml")
    assert spec.task.env == {"TRAINER_FLAG": "on", "HF_HOME": "/cache"}


def test_every_gpuledger_setting_variable_is_kept_from_trials():
    from gpuledger import settings

    names = {s.env for s in settings.SETTINGS if s.env and s.env.startswith(protocol.LEDGER_ENV_PREFIX)}
    names |= {settings.ENV_PATH, settings.ENV_CONFIG, settings.ENV_PROJECT}
    assert all(protocol.is_ledger_env(n) for n in names)
    env = {n: "x" for n in names} | {protocol.ENV_RUN_ID: "r", "PATH": "/bin", "GPULEDGER_CACHE_DIR": "/c"}
    assert protocol.trial_environment(env) == {protocol.ENV_RUN_ID: "r", "PATH": "/bin", "GPULEDGER_CACHE_DIR": "/c"}
