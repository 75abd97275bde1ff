"""A demo-shaped warehouse, built through the Warehouse API only: what `make demo` and a month of cloud
use leave behind, for tests that need every view populated (the column tests of views.yml).

`build_demo_warehouse(path)`:
- the ROI sweep `lora-grid` and a second project's `eval-sweep` (report_fixtures.build_weekly_fixture),
  a sweep whose trials all failed, one still running, one registered without trials, the local demo sweep;
- sweep `asha-demo`: trials of every other status (preempted then recovered, cancelled, skipped-budget,
  pruned, not-asked), a measured estimate per run; one of its records stored through the ingest service
  (landed in a folder beside the warehouse, one batch: a row of `v_ingest_batches`);
- sweep `lora-grid-12345678` with two cloud runs in February 2026 and the FOCUS bill
  tests/data/focus/gpu_cloud_2026-02.csv (lines attributed by label and by resource, an unattributed
  forgotten instance, a commitment, a correction, tax).
"""

from __future__ import annotations

from pathlib import Path

from gpuledger.billing import read_focus
from gpuledger.warehouse import Warehouse, ingest_service, landing_store
from helpers.record_fixtures import example_record
from helpers.report_fixtures import (
    build_all_failed,
    build_empty_sweep,
    build_local_demo,
    build_running,
    build_weekly_fixture,
)

FOCUS_BILL = Path(__file__).resolve().parent.parent / "data" / "focus" / "gpu_cloud_2026-02.csv"
ASHA = "asha-demo-0000aaaa"
BILLED = "lora-grid-12345678"


def _asha(wh: Warehouse, landing_dir: Path) -> None:
    wh.register_sweep(sweep_id=ASHA, name="asha-demo", project="support-bot", owner="ml-platform", method="lora",
                      launcher="skypilot", objective_metric="eval_loss", objective_goal="minimize", budget_usd=5.0,
                      max_parallel=2, started_at="2026-01-07T09:00:00")
    wh.upsert_trials(ASHA, [{"trial_id": f"a{i:011d}", "index": i, "params": {"lora_r": 8 * (i + 1)}, "accelerator": "L4",
                             "gpus": 1, "cloud": "gcp", "spot": True, "est_memory_gib": 9.0, "est_wall_s": 900.0,
                             "est_cost_usd": 0.1, "feasible": True} for i in range(6)])
    common = dict(sweep_id=ASHA, launcher="skypilot", cloud="gcp", accelerator="L4", gpus=1, spot=True,
                  usd_per_hour=0.3, on_demand_usd_per_hour=0.8, region="us-central1", instance_type="g2-standard-4",
                  peak_gpu_mem_gib=8.5)
    wh.ingest_records([
        example_record("p0-1", "a00000000000", started_at="2026-01-07T09:00:00", wall_s=400, status="preempted",
                       preemptions=1, **common),
        example_record("p0-2", "a00000000000", started_at="2026-01-07T09:08:00", wall_s=900, attempt=2,
                       final_metrics={"eval_loss": 1.02}, **common),
        example_record("p1-1", "a00000000001", started_at="2026-01-07T09:00:00", wall_s=300, status="cancelled",
                       reason="stopped by the user", **common),
    ])
    # the last record as a team's sweep writes it in service mode: landed, then stored by the ingest service
    store = landing_store.FolderLanding(landing_dir)
    ingest_service.land([example_record("p2-1", "a00000000002", started_at="2026-01-07T09:20:00", wall_s=200,
                                        final_metrics={"eval_loss": 1.4}, **common)], store)
    batch = ingest_service.ingest_batch(wh, store)
    assert batch is not None and batch.stored == 1, batch
    wh.mark_trials(ASHA, ["a00000000000", "a00000000002"], "succeeded")
    wh.mark_trials(ASHA, ["a00000000001"], "cancelled")
    wh.mark_trials(ASHA, ["a00000000003"], "pruned", reason="asha: below the rung's top 1/3")
    wh.mark_trials(ASHA, ["a00000000004"], "skipped-budget")
    wh.mark_trials(ASHA, ["a00000000005"], "not-asked")
    wh.finish_sweep(ASHA, status="budget-stopped", ended_at="2026-01-07T09:30:00")


def _billed(wh: Warehouse) -> None:
    wh.register_sweep(sweep_id=BILLED, name="lora-grid", project="p", owner="o", started_at="2026-02-02T09:00:00",
                      launcher="skypilot")
    wh.upsert_trials(BILLED, [{"trial_id": "aaaaaaaaaaaa", "index": 0, "params": {}},
                              {"trial_id": "bbbbbbbbbbbb", "index": 1, "params": {}}])
    wh.ingest_records([
        example_record("run-a", "aaaaaaaaaaaa", sweep_id=BILLED, started_at="2026-02-02T10:05:00", wall_s=3000,
                       launcher="skypilot", cloud="aws", accelerator="A100", gpus=8, usd_per_hour=32.77,
                       region="us-east-1", instance_type="p4d.24xlarge", final_metrics={"eval_loss": 1.1}),
        example_record("run-b", "bbbbbbbbbbbb", sweep_id=BILLED, started_at="2026-02-02T12:00:00", wall_s=3600,
                       launcher="skypilot", cloud="aws", accelerator="A10G", gpus=1, usd_per_hour=0.45, spot=True,
                       region="us-east-1", instance_type="g5.xlarge", final_metrics={"eval_loss": 1.3})])
    wh.mark_trials(BILLED, ["aaaaaaaaaaaa", "bbbbbbbbbbbb"], "succeeded")
    wh.finish_sweep(BILLED, status="succeeded", ended_at="2026-02-02T13:00:00")
    wh.ingest_billing_file(read_focus(FOCUS_BILL), export_name="aws-cur")


def build_demo_warehouse(path: str | Path) -> None:
    """Writes the warehouse of the module doc at `path` (a new file)."""
    build_weekly_fixture(path)  # the first builder starts from the migrated template
    build_all_failed(path)
    build_running(path)
    build_empty_sweep(path)
    build_local_demo(path)
    with Warehouse.open(path) as wh:
        _asha(wh, Path(path).parent / f"{Path(path).stem}-landing")
        _billed(wh)
        _envelope(wh)


def _envelope(wh: Warehouse) -> None:
    """The billed sweep counted against a weekly envelope: reserved, its runs committed (by the ingest
    above, had it reserved first: committed again here, idempotently), the rest released."""
    from datetime import datetime

    week = (datetime(2026, 2, 2), datetime(2026, 2, 9))
    wh.upsert_budget_envelope({"name": "team-weekly", "scope": "project:p", "window": "week", "limit_usd": 500.0,
                               "soft_usd": 200.0, "approvers": []})
    wh.add_budget_entry(budget="team-weekly", window_start=week[0], window_end=week[1], kind="reserve",
                        sweep_id=BILLED, reserved_usd=40.0, owner="alice", owner_claimed="o", project="p",
                        launched_by="cli")
    costs = wh.query("select run_id, cost_usd from runs where sweep_id = $s order by run_id", {"s": BILLED}).rows()
    wh.commit_budget_runs(BILLED, [(r, float(c)) for r, c in costs])
    wh.release_budget(BILLED, "sweep ended succeeded")
