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
bytecode aside). Then what issue 39's check does with the wheel alone: the documented Python API's plan
decides the spend `plan --json` decides; an MCP client (the real SDK, over stdio) plans through
`python -m gpuledger.mcp_server`, which never imports `gpuledger.cli` (its `-X importtime` log); a W&B
export imports and appears in the weekly report; and, with the CPU torch wheel of /opt/wheels and the
suite's transformers installed into the venv, a tiny Transformers `Trainer` measured by the one line
`callbacks=[GpuledgerCallback()]` is a run of the ledger read back as a polars frame (tokens, loss,
wall-clock, cost).
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


#: The documented Python API (docs/api.md), as a notebook calls it: the plan's decided spend
API_PLAN = textwrap.dedent("""\
    import json
    import gpuledger as gl

    verdict = gl.Ledger().plan("specs/lora-grid.yaml")
    print(json.dumps({"decided_usd": verdict.decided_usd, "accepted": verdict.accepted}))
    """)

#: A tiny random-weight GPT-2 trained on the CPU by a Transformers `Trainer`, measured by the one line
#: `callbacks=[GpuledgerCallback()]`; nothing downloaded
TRAINER = textwrap.dedent("""\
    import json
    import torch, transformers
    from gpuledger.integrations.transformers import GpuledgerCallback

    class Tokens(torch.utils.data.Dataset):
        def __init__(self, n):
            self.ids = torch.randint(0, 64, (n, 16), generator=torch.Generator().manual_seed(n))
        def __len__(self):
            return len(self.ids)
        def __getitem__(self, i):
            return {"input_ids": self.ids[i], "attention_mask": torch.ones(16, dtype=torch.long), "labels": self.ids[i]}

    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=64, n_positions=16, n_embd=32, n_layer=1, n_head=2))
    args = transformers.TrainingArguments(output_dir="out", max_steps=4, per_device_train_batch_size=2, logging_steps=1,
                                          eval_strategy="steps", eval_steps=2, save_strategy="no", use_cpu=True,
                                          disable_tqdm=True, report_to="none")
    trainer = transformers.Trainer(model=model, args=args, train_dataset=Tokens(16), eval_dataset=Tokens(4),
                                   callbacks=[GpuledgerCallback()])
    trainer.train()
    callback = next(c for c in trainer.callback_handler.callbacks if isinstance(c, GpuledgerCallback))
    print(json.dumps({"run_id": callback.finished.run_id}))
    """)

#: The ledger read back as the documented API gives it: runs as a polars frame, a run's final metrics
API_RUN = textwrap.dedent("""\
    import json, sys
    import polars as pl
    import gpuledger as gl

    ledger = gl.Ledger()
    runs = ledger.runs()
    assert isinstance(runs, pl.DataFrame), type(runs)
    row = runs.filter(pl.col("run_id") == sys.argv[1]).row(0, named=True)
    print(json.dumps({"wall_s": row["wall_s"], "cost_usd": row["cost_usd"], "status": row["status"],
                      "finals": ledger.final_metrics(sys.argv[1])}))
    """)

#: The MCP server as `python -m gpuledger.mcp_server`, every import it makes written to a file (-X importtime)
MCP_SERVER = textwrap.dedent("""\
    import os, runpy, sys
    fd = os.open(sys.argv.pop(1), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(fd, 2)
    runpy.run_module("gpuledger.mcp_server", run_name="__main__", alter_sys=True)
    """)

WANDB_EXPORT = {
    "id": "hist-1", "name": "sft-history", "state": "finished", "created_at": "2026-11-30T10:00:00Z",
    "config": {"model_name_or_path": "Qwen/Qwen2.5-0.5B", "lora_r": 16},
    "summary": {"_runtime": 3600, "train/loss": 1.2, "train/num_input_tokens_seen": 3.6e7},
    "metadata": {"gpu": "NVIDIA A100-SXM4-80GB", "gpu_count": 2}}

#: The CPU torch wheel the Trainer part installs into the venv (as `make torch-cpu` does for the checkout)
WHEELS = Path("/opt/wheels")


def _imported(importtime_log: str) -> set[str]:
    """The modules a `python -X importtime` process imported (its stderr's `import time:` lines)."""
    return {line.rsplit("|", 1)[-1].strip() for line in importtime_log.splitlines() if line.startswith("import time:")}


def test_the_documented_api_a_trainer_the_mcp_server_and_history_from_the_installed_wheel(venv, tmp_path):
    """What issue 39's check does with the wheel alone: the Python API's plan decides the spend `plan --json`
    decides; a Transformers Trainer measured by one line is a run of the ledger (tokens, loss, wall-clock,
    cost) read back as a polars frame; an MCP client over stdio (the real SDK) plans through a server that
    never imports `gpuledger.cli`; a W&B export imports and appears in the weekly report."""
    import asyncio

    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters

    user = User(venv, tmp_path / "home")
    project = tmp_path / "far" / "proj"
    user.run("init", str(project), cwd=tmp_path)

    planned = json.loads(user.run("plan", "specs/lora-grid.yaml", "--json", cwd=project).stdout)
    api = json.loads(user.run("-c", API_PLAN, cwd=project, exe="python").stdout)
    assert api == {"decided_usd": planned["decided_usd"], "accepted": planned["within_budget"]}
    assert api["decided_usd"] > 0

    imports = tmp_path / "mcp-imports.txt"
    env = {**user.env, "PYTHONUNBUFFERED": "1"}
    params = StdioServerParameters(command=str(venv / "bin" / "python"), args=["-X", "importtime", "-c", MCP_SERVER,
                                                                             str(imports)], cwd=str(project), env=env)

    async def talk() -> dict:
        async with Client(params, read_timeout_seconds=300) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert {"plan", "sql", "status", "validate"} <= set(tools)
            assert tools["sql"].annotations is not None and tools["sql"].annotations.read_only_hint
            plan = await client.call_tool("plan", {"spec": "specs/lora-grid.yaml"})
            assert not plan.is_error, plan.content
            return plan.structured_content

    mcp_plan = asyncio.run(talk())
    assert mcp_plan["plan"]["decided_usd"] == planned["decided_usd"]
    seen = _imported(imports.read_text(encoding="utf-8"))
    assert {"gpuledger.mcp_server.server", "gpuledger.api"} <= seen, sorted(seen)[:50]  # the log is live
    assert not {m for m in seen if m == "gpuledger.cli" or m.startswith("gpuledger.cli.")}, "the MCP server imported the CLI"

    export = project / "wandb-runs.jsonl"
    export.write_text(json.dumps(WANDB_EXPORT) + "\n", encoding="utf-8")
    history = json.loads(user.run("import", str(export), "--project", "team-history", "--json", cwd=project).stdout)
    assert history["stored"] == 1 and history["new"] == 1 and history["formats"] == ["wandb"]
    weekly = json.loads(user.run("report", "weekly", "--week", "2026-W49", "--json", cwd=project).stdout)
    text = Path(weekly["markdown"]).read_text(encoding="utf-8")
    assert "team-history" in text and "A100-80GB" in text, text[:2000]

    from importlib.metadata import PackageNotFoundError, version

    torch_wheels = sorted(WHEELS.glob("torch-*+cpu-*.whl")) if WHEELS.is_dir() else []
    try:  # the suite's own versions (from uv's cache); the Trainer needs accelerate beside torch
        pins = [f"{name}=={version(name)}" for name in ("transformers", "accelerate")]
    except PackageNotFoundError:
        pins = []
    if not torch_wheels or not pins:
        pytest.skip(f"the Trainer part needs a CPU torch wheel in {WHEELS} and transformers in the suite's venv "
                    "(`make torch-cpu` installs both)")
    _sh([*UV, "pip", "install", "--quiet", "--python", str(venv / "bin" / "python"), "--find-links", str(WHEELS),
         f"torch=={torch_wheels[-1].name.split('-')[1]}", *pins])
    trained = json.loads(user.run("-c", TRAINER, cwd=project, exe="python").stdout.strip().splitlines()[-1])
    run = json.loads(user.run("-c", API_RUN, trained["run_id"], cwd=project, exe="python").stdout)
    assert run["status"] == "succeeded" and run["wall_s"] > 0 and run["cost_usd"] > 0
    assert run["finals"]["tokens"] == 4 * 2 * 16 and run["finals"]["steps"] == 4
    assert run["finals"]["loss"] > 0 and run["finals"]["eval_loss"] > 0
    assert "Traceback" not in "\n".join(user.outputs)
