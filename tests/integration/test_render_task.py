"""`gpuledger render-task` and the tasks it renders: parsed by SkyPilot, matching the plan, accepted
by SkyPilot's own optimizer with its catalog in a temporary HOME (skipped where that is absent).

`sky` is imported once (inside the fixtures, after HOME points at the offline catalog).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from helpers.sky_offline import REPO_ROOT, no_network, sky_home, sky_offline  # noqa: F401 - fixtures used by name

from gpuledger.cli import main
from gpuledger.cli.commands.render_task import launch_requests
from gpuledger.launch.skypilot_task import AGENT_RUN_PREFIX
from gpuledger.spec import SweepSpec, expand_trials, load_spec

SPECS = sorted(p for p in (REPO_ROOT / "specs").glob("*.yaml") if isinstance(load_spec(p), SweepSpec))


@pytest.fixture(scope="module")
def requests_by_spec():
    return {p.name: launch_requests(load_spec(p)) for p in SPECS}


def test_shipped_sweep_specs_are_found():
    names = {p.name for p in SPECS}
    assert {"llama3-8b-lora-cloud.yaml", "grpo-qwen-7b.yaml"} <= names


def _resources(task):
    return list(task.resources)


@pytest.mark.usefixtures("sky_offline")
def test_every_rendered_task_parses_and_matches_the_plan(requests_by_spec):
    import sky

    from gpuledger.launch.skypilot import build_task, task_yaml

    checked = 0
    for spec_name, reqs in requests_by_spec.items():
        for req in reqs:
            if req.accelerator is None:
                continue  # infeasible trial: render-task refuses it (tested below)
            text = task_yaml(build_task(req))
            task = sky.Task.from_yaml_config(yaml.safe_load(text))
            (res,) = _resources(task)
            assert res.accelerators == {req.accelerator: req.gpus}, (spec_name, req.trial_id)
            assert res.use_spot is req.spot
            assert str(res.cloud).lower() == req.cloud
            assert res.region == req.region
            assert res.instance_type == req.instance_type
            if req.spot:
                assert res.job_recovery["strategy"] in ("FAILOVER", "EAGER_NEXT_REGION")
            envs = task.envs
            assert envs["GPULEDGER_TRIAL_ID"] == req.trial_id
            for key, value in req.params.items():
                assert envs[f"GPULEDGER_PARAM_{key.upper()}"] == str(value)
            assert task.run.startswith(AGENT_RUN_PREFIX + "python3 -m gpuledger.agent --result ")
            checked += 1
    assert checked >= 12


@pytest.mark.usefixtures("sky_offline")
def test_skypilots_optimizer_accepts_each_rendered_task_and_agrees_with_the_plan(requests_by_spec):
    import sky

    from gpuledger.launch.skypilot import build_task

    seen = set()
    for reqs in requests_by_spec.values():
        for req in reqs:
            key = (req.accelerator, req.gpus, req.cloud, req.region, req.instance_type, req.spot)
            if req.accelerator is None or key in seen:
                continue
            seen.add(key)
            task = build_task(req)
            with sky.Dag() as dag:
                dag.add(task)
            sky.optimizer.Optimizer.optimize(dag, minimize=sky.OptimizeTarget.COST, quiet=True)
            best = task.best_resources
            assert best is not None, key
            assert str(best.cloud).lower() == req.cloud, key
            assert best.region == req.region, key
            assert best.instance_type == req.instance_type, key
            assert best.use_spot is req.spot, key
            assert best.accelerators == {req.accelerator: req.gpus}, key
            # SkyPilot's own price for what it chose equals the plan's hourly price (same catalog)
            assert best.get_cost(3600) == pytest.approx(req.usd_per_hour, rel=0.02), key
    assert seen


@pytest.mark.usefixtures("sky_offline")
def test_region_fallbacks_render_as_an_ordered_list_that_skypilot_accepts(requests_by_spec):
    import sky

    from gpuledger.launch.skypilot import Placement, build_task

    req = next(r for r in requests_by_spec["llama3-8b-lora-cloud.yaml"] if r.accelerator)
    task = build_task(req, alternatives=[Placement(req.cloud, None, req.instance_type)])
    config = task.to_yaml_config()
    assert [r.get("infra") for r in config["resources"]["ordered"]] == [f"{req.cloud}/{req.region}", req.cloud]
    if req.spot:
        assert config["resources"]["ordered"][0]["job_recovery"]["strategy"] == "EAGER_NEXT_REGION"
    with sky.Dag() as dag:
        dag.add(task)
    sky.optimizer.Optimizer.optimize(dag, minimize=sky.OptimizeTarget.COST, quiet=True)
    assert task.best_resources.instance_type == req.instance_type


@pytest.mark.parametrize("spec", ["llama3-8b-lora-cloud.yaml", "grpo-qwen-7b.yaml", "lora-grid.yaml"])
@pytest.mark.usefixtures("sky_offline")
def test_cli_prints_yaml_skypilot_parses(capsys, spec):
    import sky

    assert main(["render-task", str(REPO_ROOT / "specs" / spec), "--trial", "1"]) == 0
    out = capsys.readouterr().out
    config = yaml.safe_load(out)
    assert "_user_specified_yaml" not in config and "&id" not in out
    task = sky.Task.from_yaml_config(config)
    expected = launch_requests(load_spec(REPO_ROOT / "specs" / spec))[1]
    (res,) = _resources(task)
    assert res.accelerators == {expected.accelerator: expected.gpus}
    assert task.envs["GPULEDGER_TRIAL_ID"] == expected.trial_id


@pytest.mark.usefixtures("sky_home")
def test_cli_bad_trial_number_is_a_clear_error(capsys):
    spec = str(REPO_ROOT / "specs" / "lora-grid.yaml")
    assert main(["render-task", spec, "--trial", "99"]) == 1
    err = capsys.readouterr().err
    n = len(expand_trials(load_spec(spec)))
    assert "no trial 99" in err and f"numbered 0 to {n - 1}" in err and "Traceback" not in err
    with pytest.raises(SystemExit) as exit_:  # refused by the parser, before any planning
        main(["render-task", spec, "--trial", "-1"])
    assert exit_.value.code == 2 and "must be 0 or more" in capsys.readouterr().err


@pytest.mark.usefixtures("sky_home")
def test_cli_refuses_a_capacity_spec(capsys):
    assert main(["render-task", str(REPO_ROOT / "specs" / "chat-capacity.yaml")]) == 1
    assert "kind: sweep" in capsys.readouterr().err


def test_without_the_planner_the_spec_s_first_choices_are_used():
    spec = load_spec(REPO_ROOT / "specs" / "grpo-qwen-7b.yaml")
    reqs = launch_requests(spec, use_planner=False)
    assert {(r.accelerator, r.cloud, r.spot) for r in reqs} == {("A100-80GB", "aws", False)}
    assert all(Path(r.workdir) == Path(".") for r in reqs)


def _render_subprocess(home: Path, spec: str, trial: int = 0):
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("SKY_RUNTIME_DIR", "GPULEDGER_PRICES")}
    env["HOME"] = str(home)
    return subprocess.run([sys.executable, "-m", "gpuledger.cli", "render-task", str(REPO_ROOT / "specs" / spec),
                           "--trial", str(trial)], cwd=home, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("spec", ["llama3-8b-lora-cloud.yaml", "lora-grid.yaml"])
def test_offline_without_skypilot_catalog_stdout_is_the_yaml_alone(tmp_path, spec):
    """No SkyPilot catalog cached and no network: exit 0, stdout parses as the task, nothing downloaded."""
    r = _render_subprocess(tmp_path, spec)
    assert r.returncode == 0, r.stderr[-2000:]
    config = yaml.safe_load(r.stdout)
    expected = launch_requests(load_spec(REPO_ROOT / "specs" / spec))[0]
    assert config["resources"]["instance_type"] == expected.instance_type
    assert config["resources"]["accelerators"] == {expected.accelerator: expected.gpus}
    assert config["envs"]["GPULEDGER_TRIAL_ID"] == expected.trial_id
    assert "sky-payload" not in r.stdout and "bundled catalog" in r.stdout.splitlines()[1]
    assert not (tmp_path / ".sky").exists()  # SkyPilot was not asked (it would download its catalog)


@pytest.mark.usefixtures("sky_offline")
def test_offline_render_is_a_task_skypilot_accepts(tmp_path):
    import sky

    r = _render_subprocess(tmp_path, "llama3-8b-lora-cloud.yaml", trial=1)
    assert r.returncode == 0, r.stderr[-2000:]
    task = sky.Task.from_yaml_config(yaml.safe_load(r.stdout))
    expected = launch_requests(load_spec(REPO_ROOT / "specs" / "llama3-8b-lora-cloud.yaml"))[1]
    (res,) = _resources(task)
    assert res.instance_type == expected.instance_type and res.region == expected.region


def test_with_skypilots_catalog_cached_stdout_is_the_yaml_alone(tmp_path):
    from helpers.sky_offline import catalog_available, fill_catalog

    if not catalog_available():
        pytest.skip("SkyPilot catalog snapshot not available")
    fill_catalog(tmp_path)
    r = _render_subprocess(tmp_path, "llama3-8b-lora-cloud.yaml")
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.splitlines()
    assert lines[1] == "# validated by SkyPilot against its cached catalog"
    assert all(not line.startswith("<sky-payload>") for line in lines)
    assert yaml.safe_load(r.stdout)["resources"]["use_spot"] in (True, False)


def test_stdout_to_stderr_moves_file_descriptor_writes(capfd):
    import os
    import sys

    from gpuledger.cli.commands.render_task import stdout_to_stderr

    with stdout_to_stderr():
        print("python-level")
        os.write(1, b"<sky-payload>fd-level</sky-payload>\n")
    print("after")
    sys.stdout.flush()
    out, err = capfd.readouterr()
    assert out == "after\n"
    assert "python-level" in err and "fd-level" in err


@pytest.mark.usefixtures("sky_offline")
def test_the_pool_task_and_a_job_on_it_parse_with_skypilot():
    """A SkyPilot pool's task and a trial's job on it (gpuledger/launch/skypilot_pool.py) as SkyPilot parses them."""
    import sky

    from gpuledger.launch.base import LaunchRequest
    from gpuledger.launch.skypilot_pool import pool_job_config, pool_task_config
    from gpuledger.plan.pools import pool_name

    req = LaunchRequest(
        sweep_id="llama3-8b-lora-abcdef12", sweep_name="llama3-8b-lora", trial_id="trial00000000",
        params={"lora_r": 16}, run="python trainers/peft_lora.py --lora-r 16",
        setup="pip install -r trainers/requirements.txt", workdir=Path("."), accelerator="A10G", gpus=1, cloud="aws",
        region="us-east-1", instance_type="g5.xlarge", spot=True, usd_per_hour=0.4591, on_demand_usd_per_hour=1.006,
        price_source="catalog", pool=pool_name("llama3-8b-lora-abcdef12"), pool_workers=2)
    pool = sky.Task.from_yaml_config(pool_task_config(req, 3))
    assert pool.service is not None and pool.service.pool and pool.run is None
    (res,) = list(pool.resources)
    assert res.instance_type == "g5.xlarge" and res.use_spot and res.accelerators == {"A10G": 1}
    job = sky.Task.from_yaml_config(pool_job_config(req))
    (jres,) = list(job.resources)
    assert jres.accelerators == {"A10G": 1} and job.setup is None
    assert job.run.startswith(AGENT_RUN_PREFIX + "python3 -m gpuledger.agent")
