"""Small literal warehouses for the report tests, built through the Warehouse API only.

`build_roi_fixture(path)` — sweep `lora-grid` (id `lora-grid-0123abcd`), started 2026-01-05 10:00 UTC,
objective eval_loss (minimize, target 1.20), budget $10, max_parallel 2, five trials:

| # | trial        | run | start | wall   | price              | status    | eval_loss | cost  |
|---|--------------|-----|-------|--------|--------------------|-----------|-----------|-------|
| 0 | aaaa00000000 | r0  | 10:00 | 3600 s | $1.00/h on-demand  | succeeded | 1.30      | $1.00 |
| 1 | bbbb11111111 | r1  | 10:00 | 1800 s | $0.40/h spot (od $1.00/h), 1 preemption | succeeded | 1.10 | $0.20 |
| 2 | cccc22222222 | r2  | 10:30 |  900 s | $1.00/h on-demand  | oom       | —         | $0.25 |
| 3 | dddd33333333 | r3  | 10:45 | 5400 s | $1.00/h on-demand  | succeeded | 1.05      | $1.50 |
| 4 | eeee44444444 | r4  | 11:00 | 5400 s | $1.00/h on-demand  | succeeded | 1.08      | $1.50 |

The hand-computed headline numbers are in tests/unit/test_report_sweep.py.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

from gpuledger.warehouse import Warehouse
from helpers.record_fixtures import example_record
from helpers.warehouse_template import fresh_warehouse

SWEEP_ID = "lora-grid-0123abcd"
START = "2026-01-05T10:00:00"

TRIALS = [
    # index, trial_id, lora_r, est_memory_gib, est_wall_s, est_cost_usd
    (0, "aaaa00000000", 8, 10.0, 3600.0, 1.00),
    (1, "bbbb11111111", 16, 12.0, 2000.0, 0.25),
    (2, "cccc22222222", 32, 14.0, 900.0, 0.25),
    (3, "dddd33333333", 64, 16.0, 3000.0, 0.83),
    (4, "eeee44444444", 128, 20.0, 5400.0, 1.50),
]


def _register(wh: Warehouse, sweep_id: str = SWEEP_ID, name: str = "lora-grid", **kw) -> None:
    args = dict(sweep_id=sweep_id, name=name, project="support-bot", owner="ml-platform", method="lora",
                model="meta-llama/Llama-3.1-8B", launcher="skypilot", objective_metric="eval_loss",
                objective_goal="minimize", objective_target=1.20, budget_usd=10.0, max_parallel=2,
                started_at=START,
                prices=[{"cloud": "aws", "accelerator": "A10G", "accelerator_count": 1, "spot": False,
                         "usd_per_hour": 1.0, "on_demand_usd_per_hour": 1.0, "source": "skypilot-catalog",
                         "as_of": "2026-01-02"},
                        {"cloud": "aws", "accelerator": "A10G", "accelerator_count": 1, "spot": True,
                         "usd_per_hour": 0.4, "on_demand_usd_per_hour": 1.0, "source": "skypilot-catalog",
                         "as_of": "2026-01-02"}])
    args.update(kw)
    wh.register_sweep(**args)


def _trials(wh: Warehouse, sweep_id: str = SWEEP_ID, status: str = "pending") -> None:
    wh.upsert_trials(sweep_id, [
        {"trial_id": tid, "index": i, "params": {"lora_r": r, "learning_rate": 1e-4}, "accelerator": "A10G",
         "gpus": 1, "cloud": "aws", "spot": i == 1, "est_memory_gib": mem, "est_wall_s": wall,
         "est_cost_usd": cost, "feasible": True, "status": status}
        for i, tid, r, mem, wall, cost in TRIALS])


def _rec(run_id, trial_id, start, wall_s, *, status="succeeded", loss=None, mem=None, spot=False,
         usd_per_hour=1.0, preemptions=0, sweep_id=SWEEP_ID, **extra):
    return example_record(
        run_id, trial_id, sweep_id=sweep_id, started_at=start, wall_s=wall_s, status=status,
        launcher="skypilot", cloud="aws", accelerator="A10G", gpus=1, spot=spot, usd_per_hour=usd_per_hour,
        on_demand_usd_per_hour=1.0, final_metrics={"eval_loss": loss} if loss is not None else {},
        peak_gpu_mem_gib=mem, peak_rss_gib=2.0, preemptions=preemptions, region="us-east-1",
        instance_type="g5.xlarge", **extra)


def roi_records() -> list[dict]:
    return [
        _rec("r0", "aaaa00000000", "2026-01-05T10:00:00", 3600, loss=1.30, mem=10.5),
        _rec("r1", "bbbb11111111", "2026-01-05T10:00:00", 1800, loss=1.10, mem=12.0, spot=True,
             usd_per_hour=0.4, preemptions=1),
        _rec("r2", "cccc22222222", "2026-01-05T10:30:00", 900, status="oom", mem=20.0,
             reason="CUDA out of memory"),
        _rec("r3", "dddd33333333", "2026-01-05T10:45:00", 5400, loss=1.05, mem=15.0),
        _rec("r4", "eeee44444444", "2026-01-05T11:00:00", 5400, loss=1.08, mem=19.0),
    ]


def build_roi_fixture(path) -> None:
    """Writes the five-trial sweep of the module doc (finished) into a new warehouse at `path`."""
    with Warehouse.open(fresh_warehouse(path)) as wh:
        _register(wh)
        _trials(wh)
        wh.ingest_records(roi_records())
        for rec in roi_records():
            wh.mark_trials(SWEEP_ID, [rec["trial_id"]], rec["status"])
        wh.finish_sweep(SWEEP_ID, status="succeeded", ended_at="2026-01-05T12:30:00")


def build_all_failed(path, sweep_id: str = "broken-0000beef") -> None:
    """A finished sweep `broken` whose two trials both failed."""
    with Warehouse.open(fresh_warehouse(path)) as wh:
        _register(wh, sweep_id=sweep_id, name="broken")
        wh.upsert_trials(sweep_id, [{"trial_id": "ffff00000000", "index": 0, "params": {"lora_r": 8},
                                     "est_memory_gib": 10.0, "est_wall_s": 600.0},
                                    {"trial_id": "ffff11111111", "index": 1, "params": {"lora_r": 16},
                                     "est_memory_gib": 11.0, "est_wall_s": 600.0}])
        wh.ingest_records([
            _rec("b0", "ffff00000000", "2026-01-05T10:00:00", 120, status="failed", sweep_id=sweep_id,
                 reason="exit code 1", stderr_tail="Traceback ...\nValueError: bad"),
            _rec("b1", "ffff11111111", "2026-01-05T10:00:00", 60, status="failed", sweep_id=sweep_id,
                 reason="exit code 2"),
        ])
        wh.mark_trials(sweep_id, ["ffff00000000", "ffff11111111"], "failed")
        wh.finish_sweep(sweep_id, status="failed", ended_at="2026-01-05T10:05:00")


def build_running(path, sweep_id: str = "live-0000cafe") -> None:
    """A sweep `live` still running: one trial finished, two running (no result yet), no end time."""
    with Warehouse.open(fresh_warehouse(path)) as wh:
        _register(wh, sweep_id=sweep_id, name="live", objective_target=None, budget_usd=None)
        wh.upsert_trials(sweep_id, [
            {"trial_id": f"9999{i:08d}", "index": i, "params": {"lora_r": 8 * (i + 1)}, "est_memory_gib": 10.0,
             "est_wall_s": 600.0, "status": "running"} for i in range(3)])
        wh.ingest_records([_rec("l0", "999900000000", "2026-01-05T10:00:00", 500, loss=1.4, mem=9.0,
                                sweep_id=sweep_id)])
        wh.mark_trials(sweep_id, ["999900000000"], "succeeded")


def build_empty_sweep(path, sweep_id: str = "fresh-0000f00d") -> None:
    """A sweep `fresh` registered with no trials and no runs."""
    with Warehouse.open(fresh_warehouse(path)) as wh:
        _register(wh, sweep_id=sweep_id, name="fresh")


def build_weekly_fixture(path) -> None:
    """The ROI sweep (week 2026-W02, $4.45) plus a second project's spend that week and the week before.

    Week 2026-W01 (Mon 2025-12-29): sweep `eval-sweep` of project `search`, owner `alice`, one
    on-demand H100 run 2025-12-30 09:00 for 2 h at $4.00/h = $8.00, succeeded.
    Week 2026-W02: the ROI sweep ($4.45: $0.20 spot, $4.25 on-demand, $0.25 waste) plus `eval-sweep`
    again: one run 2026-01-06 09:00, 1 h at $4.00/h = $4.00, succeeded.
    """
    build_roi_fixture(path)
    with Warehouse.open(fresh_warehouse(path)) as wh:
        wh.register_sweep(sweep_id="eval-sweep-11112222", name="eval-sweep", project="search", owner="alice",
                          objective_metric="accuracy", objective_goal="maximize", budget_usd=20.0,
                          started_at="2025-12-30T09:00:00", launcher="skypilot")
        wh.upsert_trials("eval-sweep-11112222", [{"trial_id": "e0", "index": 0}, {"trial_id": "e1", "index": 1}])
        wh.ingest_records([
            example_record("e0-1", "e0", sweep_id="eval-sweep-11112222", started_at="2025-12-30T09:00:00",
                           wall_s=7200, launcher="skypilot", cloud="aws", accelerator="H100", gpus=1,
                           usd_per_hour=4.0, final_metrics={"accuracy": 0.7}),
            example_record("e1-1", "e1", sweep_id="eval-sweep-11112222", started_at="2026-01-06T09:00:00",
                           wall_s=3600, launcher="skypilot", cloud="aws", accelerator="H100", gpus=1,
                           usd_per_hour=4.0, final_metrics={"accuracy": 0.8}),
        ])
        wh.mark_trials("eval-sweep-11112222", ["e0", "e1"], "succeeded")
        wh.finish_sweep("eval-sweep-11112222", ended_at="2026-01-06T10:00:00")


#: the demo-like local sweep: (index, trial_id, learning_rate, wall_s, eval_loss, cloud wall_s, cloud $)
LOCAL_TRIALS = [
    (0, "d0d0d0d0d0d0", 1e-3, 60.0, 0.95, 6.0, 0.0017),
    (1, "d1d1d1d1d1d1", 3e-3, 90.0, 0.81, 9.0, 0.0025),
    (2, "d2d2d2d2d2d2", 1e-2, 120.0, 0.77, 12.0, 0.0034),
    (3, "d3d3d3d3d3d3", 3e-2, 90.0, 0.90, 9.0, 0.0025),
]
LOCAL_SWEEP_ID = "demo-lora-00001111"


def local_curve(final: float, wall_s: float, points: int = 9) -> list[dict]:
    """An eval_loss learning curve from 4.5 at step 0 down to `final` at step 384 (one point per 48 steps),
    as the demo trainer logs one."""
    return [{"name": "eval_loss", "value": final + (4.5 - final) * (1 - k / (points - 1)) ** 2, "step": 48 * k,
             "t_s": wall_s * k / (points - 1)} for k in range(points)]


def build_local_demo(path) -> None:
    """A finished local sweep `demo-lora` like the demo's: 4 trials on this machine, 2 at a time,
    billed at the bundled reference rate (gpuledger/catalog/local_reference.csv), each with the plan's
    cloud equivalent on 1 × A10G (aws g5.xlarge, on-demand $1.006/h): trial 0 and 1 start at 10:00,
    2 at 10:01 (after 0), 3 at 10:01:30 (after 1); the best is trial 2 (0.77), ended 10:03.
    """
    from gpuledger.catalog.local import local_reference

    rate = local_reference().usd_per_hour
    starts = ["2026-01-05T10:00:00", "2026-01-05T10:00:00", "2026-01-05T10:01:00", "2026-01-05T10:01:30"]
    with Warehouse.open(fresh_warehouse(path)) as wh:
        wh.register_sweep(sweep_id=LOCAL_SWEEP_ID, name="demo-lora", project="demo", owner="me", method="lora",
                          model="tiny", launcher="local", objective_metric="eval_loss", objective_goal="minimize",
                          max_parallel=2, started_at=starts[0])
        wh.upsert_trials(LOCAL_SWEEP_ID, [
            {"trial_id": tid, "index": i, "params": {"learning_rate": lr}, "accelerator": None, "gpus": 0,
             "est_memory_gib": 0.1, "est_wall_s": wall, "est_cost_usd": wall / 3600 * rate, "feasible": True,
             "cloud_equiv_accelerator": "A10G", "cloud_equiv_gpus": 1, "cloud_equiv_cloud": "aws",
             "cloud_equiv_instance_type": "g5.xlarge", "cloud_equiv_spot": False, "cloud_equiv_wall_s": cw,
             "cloud_equiv_usd": cu}
            for i, tid, lr, wall, _loss, cw, cu in LOCAL_TRIALS])
        wh.ingest_records([
            example_record(f"{tid}-1", tid, sweep_id=LOCAL_SWEEP_ID, started_at=starts[i], wall_s=wall,
                           usd_per_hour=rate, final_metrics={"eval_loss": loss}, peak_rss_gib=0.12,
                           metrics=local_curve(loss, wall))
            for i, tid, _lr, wall, loss, _cw, _cu in LOCAL_TRIALS])
        wh.mark_trials(LOCAL_SWEEP_ID, [t[1] for t in LOCAL_TRIALS], "succeeded")
        wh.finish_sweep(LOCAL_SWEEP_ID, status="succeeded", ended_at="2026-01-05T10:03:00")


# ------------------------------------------------------------------------------- golden files

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


def assert_golden(name: str, text: str) -> None:
    """Compares `text` with tests/golden/`name`; with GPULEDGER_UPDATE_GOLDEN=1 rewrites the file instead.

    Regenerate after an intended change:
    `GPULEDGER_UPDATE_GOLDEN=1 .venv/bin/pytest tests/unit/test_report_sweep.py tests/unit/test_report_weekly.py
    tests/unit/test_report_capacity.py` and review the diff (`git diff tests/golden`).
    """
    path = GOLDEN / name
    if os.environ.get("GPULEDGER_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    if not path.exists():
        raise AssertionError(f"{path} is missing; create it with GPULEDGER_UPDATE_GOLDEN=1 and review it")
    expected = path.read_text(encoding="utf-8")
    if text != expected:
        diff = "".join(difflib.unified_diff(expected.splitlines(True), text.splitlines(True),
                                            f"golden/{name}", "rendered", n=1))
        raise AssertionError(f"{name} differs from its golden file (regenerate with "
                             f"GPULEDGER_UPDATE_GOLDEN=1 if intended):\n{diff[:4000]}")


#: a capacity result as `gpuledger.capacity.plan_capacity` returns it (literal, so the golden file
#: does not move when the capacity model's constants do): two feasible options, one infeasible
CAPACITY_RESULT = {
    "spec": {"name": "chat-serving", "project": "support-bot", "owner": "ml-platform",
             "model": "meta-llama/Llama-3.1-8B", "precision": "bf16", "qps": 20, "prompt_tokens": 1500,
             "output_tokens": 300, "p95_ttft_ms": 800, "p95_tpot_ms": 50, "headroom": 0.3},
    "options": [
        {"accelerator": "L4", "precision": "bf16", "gpus": 48, "gpus_per_replica": 8, "replicas": 6, "max_batch": 65,
         "tokens_per_s_per_gpu": 163.2, "throughput_source": "estimated", "ttft_ms": 323.0, "tpot_ms": 50.0,
         "price_per_gpu_hour_on_demand": 0.997, "usd_per_hour_on_demand": 47.86, "usd_per_day_on_demand": 1148.64,
         "usd_per_month_on_demand": 34937.8, "usd_per_hour_spot": 13.36, "usd_per_month_spot": 9752.8,
         "cloud": "gcp", "instance_type": "g2-standard-96", "price_source": "catalog 2026-05-20",
         "feasible": True, "reason": None},
        {"accelerator": "H100", "precision": "bf16", "gpus": 3, "gpus_per_replica": 1, "replicas": 3,
         "max_batch": 161, "tokens_per_s_per_gpu": 3221.0, "throughput_source": "measured", "ttft_ms": 252.0,
         "tpot_ms": 50.0, "price_per_gpu_hour_on_demand": 5.383, "usd_per_hour_on_demand": 16.15,
         "usd_per_day_on_demand": 387.6, "usd_per_month_on_demand": 11789.5, "usd_per_hour_spot": 3.52,
         "usd_per_month_spot": 2569.6, "cloud": "gcp", "instance_type": "a3-highgpu-1g",
         "price_source": "catalog 2026-05-20", "feasible": True, "reason": None},
        {"accelerator": "T4", "precision": "bf16", "gpus": None, "gpus_per_replica": None, "replicas": None,
         "max_batch": 0, "tokens_per_s_per_gpu": None, "throughput_source": "estimated", "ttft_ms": None,
         "tpot_ms": None, "price_per_gpu_hour_on_demand": None, "usd_per_hour_on_demand": None,
         "usd_per_day_on_demand": None, "usd_per_month_on_demand": None, "usd_per_hour_spot": None,
         "usd_per_month_spot": None, "cloud": None, "instance_type": None, "price_source": None,
         "feasible": False, "reason": "weights need 15.0 GiB per GPU; T4 has 13.5 GiB usable"},
    ],
    "best": None,  # set below: the H100 option
    "best_reason": None,
    "assumptions": ["730 h per month (cloud billing month)"],
}
CAPACITY_RESULT["best"] = CAPACITY_RESULT["options"][1]
CAPACITY_RESULT["spec"].update(engine="vllm", engine_version="vLLM 0.10 (V1 engine)")


def _curve(points):
    return [{"concurrency": c, "request_rate": None, "requests_per_s": round(tps / 300, 4), "tokens_per_s_per_gpu": tps,
             "ttft_ms_p50": ttft * 0.6, "ttft_ms_p95": ttft, "ttft_ms_p99": ttft * 1.3, "tpot_ms_p50": tpot * 0.95,
             "tpot_ms_p95": tpot, "tpot_ms_p99": tpot * 1.05, "mean_running": c * 0.97, "preemptions": 0,
             "meets_slo": ttft <= 800 and tpot <= 50} for c, tps, ttft, tpot in points]


for _opt, _pts, _c in ((CAPACITY_RESULT["options"][0], [(1, 20.0, 90.0, 41.0), (16, 120.0, 200.0, 46.0),
                                                       (65, 163.2, 323.0, 50.0), (128, 190.0, 900.0, 68.0)], 65),
                       (CAPACITY_RESULT["options"][1], [(1, 150.0, 40.0, 6.5), (64, 2400.0, 120.0, 26.0),
                                                       (161, 3221.0, 252.0, 50.0), (256, 3600.0, 400.0, 71.0)], 161)):
    _opt.update(curve=_curve(_pts), operating_point={
        "mode": "closed loop (simulated)", "concurrency": _c, "engine": "vllm",
        "why": f"concurrency {_c} per replica gives the most tokens/s per GPU within the SLO"})


def _with_economy(result: dict) -> None:
    """Adds the elastic fleet and the API comparison (issue 28) the way plan_capacity does, for a day
    whose traffic peaks at the fixture's 20 req/s."""
    from gpuledger.capacity import economy
    from gpuledger.spec import CapacitySpec

    day = [2, 1.5, 1, 1, 1, 1.5, 3, 6, 10, 14, 16, 18, 20, 19, 18, 17, 16, 15, 14, 12, 10, 8, 5, 3]
    spec = CapacitySpec.model_validate({
        "kind": "capacity", "name": "chat-serving", "project": "support-bot", "owner": "ml-platform",
        "model": "meta-llama/Llama-3.1-8B", "traffic": {"hourly_qps": day, "prompt_tokens": 1500, "output_tokens": 300},
        "slo": {"p95_ttft_ms": 800, "p95_tpot_ms": 50}, "headroom": 0.3,
        "resources": {"accelerators": ["H100", "L4", "T4"], "clouds": ["gcp"]},
        "autoscale": {"min_replicas": 1, "cold_start_s": 300, "scale_down_delay_s": 600},
        "environments": {"staging": {"replicas": 1}, "canary": {"traffic_share": 0.05}},
        "committed": {"1y": 28, "3y": 46},
        "compare": {"api": {"usd_per_1m_input_tokens": 0.15, "usd_per_1m_output_tokens": 0.6}},
        "fine_tune": {"usd": 1200}})
    for o in result["options"]:
        economy.add_to_option(o, spec)
    result["spec"].update(hourly_qps=day, mean_qps=round(sum(day) / 24, 4))
    result["compare"] = economy.compare(result["best"], spec, 1200.0, "spec fine_tune.usd")


_with_economy(CAPACITY_RESULT)
