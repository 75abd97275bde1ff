"""`validate` says a spec is valid only when `plan` and `sweep` accept it: the planner's own
requirements (gpuledger/plan/requirements.py) are validation problems, located in the spec."""

from __future__ import annotations

import json

import pytest

from gpuledger.cli import main
from gpuledger.errors import UserError

GRID = "specs/lora-grid.yaml"


@pytest.fixture
def spec_text(repo_root):
    return (repo_root / GRID).read_text()


def test_a_training_spec_without_tokens_is_invalid_where_the_planner_refuses_it(tmp_path, spec_text, capsys):
    from gpuledger.plan.estimates import trial_estimates
    from gpuledger.spec import expand_trials, load_spec

    path = tmp_path / "no-tokens.yaml"
    path.write_text("\n".join(line for line in spec_text.splitlines() if "tokens_per_trial" not in line))
    assert main(["validate", str(path)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"{path}:") and err.endswith("train.tokens_per_trial is needed to estimate time and cost "
                                                      "(training tokens per trial, e.g. 20_000_000)")
    spec = load_spec(path)
    with pytest.raises(UserError) as refused:  # the planner refuses it with the same line
        trial_estimates(spec, expand_trials(spec))
    assert str(refused.value) == err


def test_an_unknown_model_is_a_problem_at_the_model_line(tmp_path, spec_text, capsys):
    path = tmp_path / "bad-model.yaml"
    path.write_text(spec_text.replace("model: gpuledger/demo-char-gpt", "model: nobody/no-such-model"))
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if text.startswith("model:"))
    assert main(["validate", "--json", str(path), GRID]) == 1
    bad, good = json.loads(capsys.readouterr().out)
    assert not bad["ok"] and len(bad["problems"]) == 1
    assert bad["problems"][0].startswith(f"{path}:{line}:") and "unknown model 'nobody/no-such-model'" in bad["problems"][0]
    assert good == {"path": GRID, "ok": True, "kind": "sweep", "name": "lora-grid", "trials": 12, "problems": []}


def test_every_shipped_spec_is_valid_for_the_planner_too(repo_root, capsys):
    specs = sorted(str(p) for p in (repo_root / "specs").glob("*.yaml"))
    assert main(["validate", *specs]) == 0, capsys.readouterr().err
