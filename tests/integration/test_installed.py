"""gpuledger as a user gets it: the wheel, installed into a fresh virtual environment outside the
checkout, used in a project of its own far from the checkout.

Builds the wheel (`uv build`), makes a venv with the locked dependencies (`uv sync --frozen
--no-install-project` into a folder of the test: offline once uv's cache holds them, as after
`uv sync`) and installs the wheel alone into it. Then, with the checkout nowhere on the path and no
GPULEDGER_* or PREFECT_* variables: `init`, `doctor`, `validate`, a real 2-trial local sweep (started
from the project's specs/ folder) of the project's own spec whose trial imports `gpuledger.track`, `sql` from a nested subfolder (the same
warehouse, inside the project), `report sweep`, `report weekly`, `render-task`, `schema --write`,
every `prefect.yaml` entrypoint loaded as a flow, and a command outside any project (one line).
No output has a traceback, and nothing is written into site-packages (Python's own `__pycache__`
bytecode aside).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

#: uv as `make test` found it (on PATH, or `python3 -m uv` that `make setup` installed)
UV = shlex.split(os.environ.get("GPULEDGER_TEST_UV") or shutil.which("uv") or "")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800),
              pytest.mark.skipif(not UV, reason="needs uv (the project's installer; `make setup` installs it)")]

TRIAL = '''\
import sys
from gpuledger import track

x = float(sys.argv[1])
for step in range(3):
    track.log(step=step, loss=abs(x - 0.3) + 1.0 / (step + 1))
'''

SPEC = textwrap.dedent("""\
    kind: sweep
    name: own-sweep
    project: install-test
    owner: me
    model: gpuledger/demo-char-gpt
    method: lora
    precision: fp32
    train: {seq_len: 64, tokens_per_trial: 1000}
    search:
      strategy: grid
      params: {x: [0.1, 0.5]}
      objective: {metric: loss, goal: minimize}
    resources: {max_parallel: 2}
    budget: {max_usd: 1}
    launcher: local
    local: {usd_per_hour: 0.1}
    task:
      run: python trainers/own_trial.py {x}
    """)

LOAD_ENTRYPOINTS = textwrap.dedent("""\
    import importlib, json, sys, yaml
    from prefect import Flow
    doc = yaml.safe_load(open("prefect.yaml"))
    loaded = []
    for d in doc["deployments"]:
        module, name = d["entrypoint"].split(":")
        flow = getattr(importlib.import_module(module), name)
        assert isinstance(flow, Flow), (d["entrypoint"], type(flow))
        loaded.append(d["entrypoint"])
    print(json.dumps(loaded))
    """)


def _sh(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kw)
    assert done.returncode == 0, f"{cmd}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    """A fresh venv holding the locked dependencies and the freshly built wheel (not the checkout)."""
    base = tmp_path_factory.mktemp("installed")
    _sh([*UV, "build", "--wheel", "--out-dir", str(base / "dist"), str(REPO)])
    (wheel,) = (base / "dist").glob("gpuledger-*.whl")
    env = {**os.environ, "UV_PROJECT_ENVIRONMENT": str(base / "venv")}
    env.pop("VIRTUAL_ENV", None)
    _sh([*UV, "sync", "--frozen", "--no-dev", "--no-install-project", "--project", str(REPO), "--quiet"], env=env)
    _sh([*UV, "pip", "install", "--no-deps", "--python", str(base / "venv" / "bin" / "python"), str(wheel), "--quiet"])
    return base / "venv"


def _site_packages(venv: Path) -> dict[str, tuple[int, int]]:
    """Returns {relative path: (size, mtime_ns)} of every file in the venv's site-packages but bytecode caches."""
    (site,) = (venv / "lib").glob("python3*/site-packages")
    out = {}
    for path in site.rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts:
            st = path.stat()
            out[str(path.relative_to(site))] = (st.st_size, st.st_mtime_ns)
    return out


class User:
    """Runs `gpuledger` of the venv as a user would: its bin on PATH, a home of its own, no variables
    of the test suite, the checkout nowhere on sys.path."""

    def __init__(self, venv: Path, home: Path):
        self.venv = venv
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith(("GPULEDGER_", "PREFECT_", "PYTHON", "VIRTUAL_ENV", "UV_"))}
        self.env.update({"PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}", "HOME": str(home),
                         "XDG_CACHE_HOME": str(home / ".cache"), "XDG_CONFIG_HOME": str(home / ".config"),
                         "DO_NOT_TRACK": "1", "COLUMNS": "200"})
        self.outputs: list[str] = []

    def run(self, *args: str, cwd: Path, code: int = 0, exe: str = "gpuledger") -> subprocess.CompletedProcess:
        done = subprocess.run([str(self.venv / "bin" / exe), *args], cwd=cwd, env=self.env, capture_output=True,
                              text=True, timeout=900, stdin=subprocess.DEVNULL)
        self.outputs.append(f"$ {exe} {' '.join(args)}\n{done.stdout}\n{done.stderr}")
        assert done.returncode == code, f"{exe} {args} exited {done.returncode}:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
        return done


def test_the_installed_wheel_in_a_project_far_from_the_checkout(venv, tmp_path):
    far = tmp_path / "somewhere" / "else"
    far.mkdir(parents=True)
    assert REPO not in far.parents and not str(far).startswith(str(REPO))
    user = User(venv, tmp_path / "home")
    before = _site_packages(venv)

    where = user.run("-c", "import gpuledger; print(gpuledger.__file__)", cwd=far, exe="python").stdout.strip()
    assert where.startswith(str(venv)), where  # the wheel, not the checkout

    project = far / "proj"
    init = user.run("init", str(project), cwd=far)
    assert "wrote gpuledger.toml" in init.stdout and (project / "specs" / "gpuledger.schema.json").is_file()
    assert "kept  gpuledger.toml" in user.run("init", cwd=project).stdout  # idempotent

    doctor = user.run("doctor", cwd=project)
    assert "ok    project" in doctor.stdout and "ok    package" in doctor.stdout

    (project / "trainers" / "own_trial.py").write_text(TRIAL)
    (project / "specs" / "own.yaml").write_text(SPEC)
    shipped = sorted(str(p.relative_to(project)) for p in (project / "specs").glob("*.yaml"))
    assert "ok (sweep own-sweep, 2 trials)" in user.run("validate", *shipped, cwd=project).stdout

    sweep = user.run("sweep", "own.yaml", cwd=project / "specs")  # its trials still run at the project's root
    assert "2 launched, 2 succeeded, 0 failed" in sweep.stdout, sweep.stdout
    warehouse = project / ".gpuledger" / "ledger.duckdb"
    assert f"Warehouse: {warehouse}" in sweep.stdout and warehouse.is_file()

    nested = project / "analysis" / "deep" / "er"
    nested.mkdir(parents=True)
    rows = json.loads(user.run("sql", "select trial_id, status, metric_value from v_trial_results",
                               "--format", "json", cwd=nested).stdout)
    assert len(rows) == 2 and {r["status"] for r in rows} == {"succeeded"}
    assert min(r["metric_value"] for r in rows) == pytest.approx(abs(0.5 - 0.3) + 1.0 / 3)

    report = json.loads(user.run("report", "sweep", "own-sweep", "--json", cwd=nested).stdout)
    assert Path(report["html"]).is_file() and Path(report["html"]).is_relative_to(project / "reports")
    weekly = user.run("report", "weekly", cwd=nested)
    assert str(project / "reports" / "weekly") in weekly.stdout

    task = user.run("render-task", "specs/llama3-8b-lora-cloud.yaml", "--trial", "1", cwd=project)
    assert "run:" in task.stdout and "gpuledger.agent" in task.stdout

    assert str(project / "specs") in user.run("schema", "--write", cwd=nested).stdout

    loaded = json.loads(user.run("-c", LOAD_ENTRYPOINTS, cwd=project, exe="python").stdout)
    assert len(loaded) >= 3 and all(e.startswith("gpuledger.flows.") for e in loaded)

    outside = tmp_path / "not-a-project"
    outside.mkdir()
    lost = user.run("sql", "select 1", cwd=outside, code=1)
    assert lost.stderr.startswith("gpuledger sql: this command needs a gpuledger project") and lost.stderr.count("\n") == 1

    # one warehouse, inside the project; no run-time data anywhere else
    assert sorted(p for p in far.rglob("*.duckdb")) == [warehouse]
    assert not (nested / ".gpuledger").exists() and not (outside / ".gpuledger").exists()
    assert not any(REPO.glob("reports/sweeps/own-sweep*"))
    everything = "\n".join(user.outputs)
    assert "Traceback" not in everything, everything[-6000:]
    after = _site_packages(venv)
    changed = sorted(set(before.items()) ^ set(after.items()))
    assert not changed, f"written into site-packages: {changed[:20]}"


def test_the_checkout_is_not_what_the_test_suite_imports_from_the_wheel_venv(venv):
    """Guards the test above: the venv's python cannot import the checkout (no editable install there)."""
    done = subprocess.run([str(venv / "bin" / "python"), "-c", "import gpuledger, sys; print(gpuledger.__file__)"],
                          cwd="/", capture_output=True, text=True, timeout=120,
                          env={"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/")})
    assert done.returncode == 0 and str(REPO) not in done.stdout and sys.prefix not in done.stdout
