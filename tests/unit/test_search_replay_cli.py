"""benchmarks/search_replay.py end to end: the demo grid's recorded curves (tests/data/demo_grid_curves.json)
stored as runs in a real DuckDB warehouse, replayed by the harness's command line; its --json has the
issue's shape ({"strategies": {NAME: {"recipe_kept", "cost_vs_grid", ...}}, "default": NAME}), the default
keeps the recipe for at most half the grid's dollars, and it is compared with plain ASHA at the same
recipe rate; --synthetic replays a curve family instead; bad input is one line and exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from helpers.record_fixtures import example_record

from gpuledger.warehouse import Warehouse

REPO = Path(__file__).resolve().parents[2]
DATA = json.loads((REPO / "tests" / "data" / "demo_grid_curves.json").read_text())
SWEEP = DATA["sweep_id"]


def _store(path: Path) -> None:
    t0 = datetime(2026, 12, 1, 10, 0, 0)
    with Warehouse.open(path) as wh:
        wh.register_sweep(sweep_id=SWEEP, name="lora-grid", project="p", owner="o", method="lora", launcher="local",
                          objective_metric="eval_loss", objective_goal="minimize", budget_usd=5.0, max_parallel=2,
                          started_at=t0.isoformat())
        wh.upsert_trials(SWEEP, [{"trial_id": c["trial_id"], "index": i, "params": c["params"], "feasible": True}
                                 for i, c in enumerate(DATA["curves"])])
        recs = []
        for i, c in enumerate(DATA["curves"]):
            pts = [{"name": "eval_loss", "value": v, "step": k, "t_s": t}
                   for k, (v, t) in enumerate(zip(c["values"], c["times_s"], strict=True))]
            recs.append(example_record(f"{c['trial_id']}-a1-0000", c["trial_id"], sweep_id=SWEEP,
                                       started_at=(t0 + timedelta(seconds=60 * i)).isoformat(), wall_s=c["wall_s"],
                                       usd_per_hour=c["usd_per_s"] * 3600, params=c["params"], metrics=pts,
                                       final_metrics={"eval_loss": c["values"][-1]}))
        wh.ingest_records(recs)


def _harness(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "benchmarks" / "search_replay.py"), *args],
                          capture_output=True, text=True, timeout=600, cwd=REPO)


@pytest.mark.slow
def test_the_harness_replays_a_warehouse_in_the_issues_json_shape(tmp_path):
    wh = tmp_path / "demo.duckdb"
    _store(wh)
    done = _harness("--warehouse", str(wh), "--sweep", "lora-grid", "--orders", "4", "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["sweep_id"] == SWEEP and out["default"] in out["strategies"] and out["cost_aware"] == out["default"]
    for s in out["strategies"].values():
        assert {"recipe_kept", "cost_vs_grid", "cost_vs_grid_range", "trial_s_vs_grid"} <= set(s)
        assert 0.0 <= s["recipe_kept"] <= 1.0 and s["cost_vs_grid_range"][0] <= s["cost_vs_grid"]
    default = out["strategies"][out["default"]]
    assert default["recipe_kept"] >= 0.95 and default["cost_vs_grid"] <= 0.5 and default["replays"] == 4
    cmp_ = out["cost_aware_vs_plain"]
    assert cmp_["same_recipe_rate_as_plain"] and 0 < cmp_["vs_plain"] < 1.0
    assert out["plain_same_rate"]["tried"] and ("vs_optuna_asha_same_rate" in cmp_ or "vs_optuna_asha_safest" in cmp_)
    assert {"tpe", "tpe-ei-per-usd"} <= set(out["strategies"])  # the sequential asks, from the stored params


@pytest.mark.slow
def test_synthetic_families_and_bad_input():
    done = _harness("--synthetic", "crossing", "--seeds", "1", "--orders", "2", "--json")
    assert done.returncode == 0, done.stderr
    fam = json.loads(done.stdout)["families"]["crossing"]
    assert fam["grids"] == 1 and fam["strategies"]["asha"]["recipe_kept"] == 1.0  # the checked default is safe
    for args in (["--synthetic", "nope"], ["--warehouse", "/nonexistent.duckdb", "--sweep", "x"], []):
        bad = _harness(*args)
        assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr
