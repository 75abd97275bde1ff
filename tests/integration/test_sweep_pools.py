"""A sweep run whose launcher tore down a SkyPilot pool: the pool's start-up and idle tail stored as the
sweep's (table sweep_pools, beside the trials' own records), and the sweep report's pool section with the
realised saving against per-trial jobs. Fake launcher, real DuckDB warehouse, real report."""

from __future__ import annotations

import pytest
from helpers.fake_launcher import FakeLauncher
from test_runtime import _run

from gpuledger.launch.skypilot_pool import PoolUsage
from gpuledger.runtime.engine import Hooks, execute

USAGE = PoolUsage(name="gl-test", workers=2, reused=False, worker_s=5400.0, busy_s=3000.0, idle_s=2400.0,
                  usd_per_hour=0.36, idle_usd=0.24, startup_s=600.0, per_trial_jobs_usd=0.48, pool_usd=0.54,
                  trials=3)


class PooledFake(FakeLauncher):
    """The fake launcher, with a pool it 'tears down' at close (what SkyPilotLauncher.close reports)."""

    def close(self) -> None:
        self.pool_usage = [USAGE]


def test_the_pools_idle_tail_is_stored_as_the_sweeps_and_reported(tmp_path, monkeypatch):
    from gpuledger.report import write_sweep_report
    from gpuledger.warehouse import Warehouse

    monkeypatch.chdir(tmp_path)
    run, _ = _run(tmp_path, launcher_kw={"wall_s": 36.0}, usd_per_hour=1.0)
    run.launcher_factory = lambda name, spec, cap, landing_dir: PooledFake(landing_dir=landing_dir, wall_s=36.0)
    summary = execute(run, Hooks())
    assert summary.pools == [USAGE.to_json()] and USAGE.saving_usd == pytest.approx(-0.06)
    with Warehouse.open() as wh:
        (row,) = wh.sweep_pools(run.sweep_id)
        runs_usd = wh.scalar("SELECT sum(cost_usd) FROM runs WHERE sweep_id = ?", [run.sweep_id])
        files = write_sweep_report(wh, sweep_id=run.sweep_id, out_dir=tmp_path / "reports")
    assert row["pool"] == "gl-test" and row["workers"] == 2 and row["idle_usd"] == pytest.approx(0.24)
    assert row["saving_usd"] == pytest.approx(-0.06) and runs_usd == pytest.approx(4 * 0.01)  # the runs keep theirs
    text = files.markdown_text
    assert "SkyPilot pool" in text and "Realised saving of the pool against per-trial jobs: -$0.06" in text
