"""Adversarial trials (issue 31): a trial is untrusted code running as the same user as gpuledger.

Each attack runs a real trial under the real agent and local launcher and is reproduced first (the
forged file really is in the landing folder, the trial really tried), then shown refused, beside a
positive control that the honest path still works.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from helpers.sweep_specs import sweep_spec, trial_script, x_points

from gpuledger import protocol, vocabulary
from gpuledger.launch.base import LaunchRequest
from gpuledger.launch.local import LocalLauncher
from gpuledger.runtime import landing
from gpuledger.runtime.engine import Hooks, SweepRun, execute


def _forged(run_id: str, trial_id: str, sweep_id: str) -> dict:
    """A record claiming an impossible result: eval_loss -1e9 in 0 s for $0."""
    return {"schema": protocol.SCHEMA, "run_id": run_id, "sweep_id": sweep_id, "trial_id": trial_id, "attempt": 1,
            "launcher": "local", "started_at": "2026-11-26T10:00:00+00:00", "ended_at": "2026-11-26T10:00:00+00:00",
            "wall_s": 0.0, "status": "succeeded", "final_metrics": {"eval_loss": -1e9},
            "billing": [{"source": "local", "description": "forged", "usd_per_hour": 0.0, "hours": 0.0,
                         "cost_usd": 0.0}]}


def _sweep(folder: Path, trial: str, run: str, xs=(0.1, 0.2)) -> SweepRun:
    from gpuledger.runtime.accepted import prepare

    spec_path = sweep_spec(folder, name="hostile", search="strategy: grid", params=x_points(xs), trial=trial,
                           run=run, usd_per_hour=0.0)
    accepted = replace(prepare(spec_path, launcher="local"), cap=1)
    return SweepRun(accepted, summary=accepted.new_summary(), retry_delays_s=(0.01,))


#: The trial: reports eval_loss = |x - 0.3| + 1, saves what it sees of gpuledger's variables, and
#: writes a record for ANOTHER trial into every sweep folder under the landing root it was told.
HOSTILE = trial_script("""
    seen = {k: v for k, v in os.environ.items() if k.startswith("GPULEDGER_")}
    (Path(a.out) / f"env-{a.x}.json").write_text(json.dumps(seen))
    record = json.loads(Path(a.record).read_text())
    for folder in Path(a.landing).iterdir():
        if folder.is_dir():
            (folder / "forged-run.json").write_text(json.dumps({**record, "sweep_id": folder.name}))
    log(step=1, eval_loss=abs(a.x - 0.3) + 1.0)
""", options="""
    import os
    from pathlib import Path
    p.add_argument("--out", required=True)
    p.add_argument("--landing", required=True)
    p.add_argument("--record", required=True)
""")


def test_a_trial_cannot_forge_a_record_into_its_sweep(tmp_path, monkeypatch):
    from gpuledger import settings
    from gpuledger.spec import trial_id_for
    from gpuledger.warehouse import Warehouse

    monkeypatch.chdir(tmp_path)
    victim = trial_id_for("hostile", {"x": 0.2})
    (tmp_path / "record.json").write_text(json.dumps(_forged("forged-run", victim, "?")))
    run = _sweep(tmp_path, HOSTILE, f"python {tmp_path / 'trial.py'} --x {{x}} --out {tmp_path} "
                 f"--landing {settings.current().landing_dir} --record {tmp_path / 'record.json'}")
    summary = execute(run, Hooks())

    # reproduced: the trial really dropped the forged record into the sweep's landing folder
    landing_dir = landing.landing_dir_for(run.sweep_id)
    assert (landing_dir / landing.REJECTED / "forged-run.json").is_file()
    assert "not written by gpuledger" in (landing_dir / landing.REJECTED / "forged-run.json.reason.txt").read_text()
    with Warehouse.open(read_only=True) as wh:
        runs = wh.query("SELECT run_id, trial_id, wall_s FROM runs WHERE sweep_id = ?", [run.sweep_id])
        best = wh.query_named("sweep_best_recipe", {"sweep_id": run.sweep_id}).to_dicts()
    assert "forged-run" not in runs["run_id"].to_list()
    # positive control: both honest trials stored, measured, the best recipe is the honest one
    assert runs.height == 2 and summary.succeeded == 2 and summary.status == vocabulary.SWEEP_SUCCEEDED
    assert best and best[0]["best_metric"] == pytest.approx(1.1)
    # the trial saw who it is, not where the ledger lives nor its sweep
    seen = json.loads((tmp_path / "env-0.1.json").read_text())
    assert protocol.ENV_RUN_ID in seen and protocol.ENV_TRIAL_ID in seen and protocol.ENV_METRICS in seen
    assert not {"GPULEDGER_WAREHOUSE", protocol.ENV_SWEEP_ID, protocol.ENV_RESULT_FILE, protocol.ENV_KEY_FD} & set(seen)
    # a next run of the sweep finds nothing to recover and stores nothing new
    again = _sweep(tmp_path, HOSTILE, run.spec.task.run)
    assert execute(again, Hooks()).skipped_done == 2


def _request(tmp_path: Path, run: str, env: dict | None = None) -> LaunchRequest:
    return LaunchRequest(trial_id="t1", sweep_id="s-1", sweep_name="s", run=run, workdir=tmp_path,
                         params={"x": 1}, env=env or {})


def test_a_result_file_replaced_after_the_agent_wrote_it_is_not_believed(tmp_path):
    script = "python -c \"from gpuledger.track import log; log(step=1, eval_loss=0.5)\""
    with LocalLauncher(landing_dir=tmp_path / "landing") as launcher:
        honest, tampered = launcher.submit(_request(tmp_path, script)), launcher.submit(_request(tmp_path, script))
        assert launcher.wait([honest, tampered], timeout_s=60)
        # the attack: rewrite the agent's file (as a daemon of the trial could) with a better result
        data = json.loads(tampered.result_path.read_text())
        data["final_metrics"] = {"eval_loss": -1e9}
        tampered.result_path.write_text(json.dumps(data))
        good, bad = launcher.collect(honest)[0], launcher.collect(tampered)[0]
    assert good.status == "succeeded" and good.final_metrics == {"eval_loss": 0.5}  # positive control
    assert bad.status == "failed" and bad.final_metrics == {}
    assert "not signed by this attempt's agent" in bad.reason


def test_the_spec_env_cannot_set_placement_and_the_trial_does_not_inherit_the_ledger(tmp_path, monkeypatch):
    monkeypatch.setenv("GPULEDGER_WAREHOUSE_DATA", str(tmp_path / "lake"))
    monkeypatch.setenv("MY_OWN_SETTING", "kept")
    dump = f"python -c \"import json, os; print(json.dumps(dict(os.environ)))\" > {tmp_path / 'env.json'}"
    env = {protocol.ENV_ACCELERATOR: "H100", protocol.ENV_GPUS: "64", "TRAINER_FLAG": "on"}
    with LocalLauncher(landing_dir=tmp_path / "landing") as launcher:
        record = launcher.run_all([_request(tmp_path, dump, env=env)])[0]
    seen = json.loads((tmp_path / "env.json").read_text())
    assert record.accelerator is None and record.gpus == 0  # booked as what it ran on: no GPU here
    assert seen["TRAINER_FLAG"] == "on" and seen["MY_OWN_SETTING"] == "kept"  # positive control
    assert not {protocol.ENV_ACCELERATOR, protocol.ENV_GPUS, "GPULEDGER_WAREHOUSE", "GPULEDGER_WAREHOUSE_DATA"} & set(seen)
