"""Overhead of running trials through the Prefect `sweep` flow vs a bare thread pool, same launcher.

    .venv/bin/python benchmarks/flow_overhead.py [--trials 100 1000] [--parallel 4] [--launcher fake|local]

Both sides run the same no-op trials through the same launcher (default: the fake, in-process
launcher of the tests, tests/helpers/fake_launcher.py (registered here), which writes each record to its landing folder like the local
one; `--launcher local` runs `true` as real subprocesses under the agent) with the same
submit/poll/collect loop (`gpuledger.runtime.launching.launch_and_collect`):
- bare: a `ThreadPoolExecutor(max_workers=parallel)`; records kept in memory, nothing stored;
- flow: `flows.sweep.sweep(spec, launcher=...)` against a temporary Prefect server (the CLI's
  ephemeral mode): plan, artifacts, registering the sweep, every record stored in the DuckDB
  warehouse, the budget meter, the ROI report.
Prints, per trial count, wall times and two overheads per trial, measured side by side in one process:
- overhead = (flow - bare) / trials: everything the flow adds, the ROI report included;
- orchestration = (flow - bare - report) / trials, where `report` is the same sweep's ROI report
  written again on its own right after (`gpuledger.report.write_sweep_report`): what Prefect, the
  plan, the warehouse writes and the budget meter add. The report's own cost grows with its charts'
  labels and is the reports' to keep small.
Goal: orchestration at most 50 ms per trial at 1,000 trials. Nothing is written outside a temporary folder.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

GOAL_MS = 50.0
REPO = Path(__file__).resolve().parents[1]


def write_spec(folder: Path, trials: int, parallel: int) -> Path:
    spec = folder / f"noop-{trials}.yaml"
    spec.write_text(textwrap.dedent(f"""
        kind: sweep
        name: noop-bench-{trials}
        project: bench
        owner: bench
        model: gpuledger/demo-char-gpt
        method: lora
        precision: fp32
        train: {{seq_len: 64, tokens_per_trial: 1000, grad_checkpointing: false, flash_attention: false}}
        search:
          strategy: grid
          params: {{i: [{", ".join(str(i) for i in range(trials))}]}}
          objective: {{metric: eval_loss, goal: minimize}}
        resources: {{max_parallel: {parallel}}}
        budget: {{max_usd: 5}}
        launcher: local
        local: {{usd_per_hour: 0.0, trial_timeout: 1m}}
        task:
          run: "true  # {{i}}"
    """), encoding="utf-8")
    return spec


def bare(spec_path: Path, launcher_name: str, parallel: int, landing: Path) -> tuple[float, int]:
    """Runs the spec's trials on a bare thread pool through the launcher; returns (seconds, records)."""
    from gpuledger.launch import get_launcher
    from gpuledger.runtime.launching import launch_and_collect
    from gpuledger.runtime.requests import launch_requests
    from gpuledger.spec import expand_trials, load_spec

    spec = load_spec(spec_path)
    trials = expand_trials(spec)
    reqs = list(launch_requests(spec, trials, None, sweep_id="bare", launcher="local").values())
    options = {"max_parallel": parallel} if launcher_name == "local" else {}
    t0 = time.perf_counter()
    launcher = get_launcher(launcher_name, landing_dir=landing, **options)
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        records = [r for rs in pool.map(lambda r: launch_and_collect(launcher, r), reqs) for r in rs]
    launcher.close()
    return time.perf_counter() - t0, len(records)


def time_report(name: str, sweep_id: str, out: Path) -> float:
    """Returns the seconds the sweep's ROI report takes to write on its own (same warehouse)."""
    from gpuledger.report import write_sweep_report
    from gpuledger.warehouse import Warehouse

    t0 = time.perf_counter()
    with Warehouse.open(read_only=True) as wh:
        write_sweep_report(wh, name=name, sweep_id=sweep_id, out_dir=out)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, nargs="+", default=[100, 1000])
    ap.add_argument("--parallel", type=int, default=2, help="at most this many at once (the plan may cap it lower)")
    ap.add_argument("--launcher", choices=["fake", "local"], default="fake")
    args = ap.parse_args()
    if args.launcher == "fake":  # the tests' launcher: not part of gpuledger, registered for this run
        sys.path.insert(0, str(REPO / "tests"))
        from helpers import fake_launcher

        fake_launcher.register()
    home = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="gl-bench-") as tmp:
        tmpdir = Path(tmp)
        os.environ["GPULEDGER_WAREHOUSE"] = str(tmpdir / "wh" / "ledger.duckdb")
        os.environ["PREFECT_HOME"] = str(tmpdir / "prefect-home")
        os.environ.pop("PREFECT_API_URL", None)
        os.chdir(tmpdir)
        from gpuledger.flows.server import prefect_api

        results = []
        with prefect_api() as api_url:  # before Prefect is imported: it reads PREFECT_API_URL then
            from gpuledger.flows.sweep import drain_prefect, sweep

            warm = write_spec(tmpdir, 4, args.parallel)
            sweep(spec=str(warm), launcher=args.launcher)  # warm-up: imports, plan, first flow run
            for n in args.trials:
                spec = write_spec(tmpdir, n, args.parallel)
                bare_s, n_bare = bare(spec, args.launcher, args.parallel, tmpdir / f"bare-landing-{n}")
                t0 = time.perf_counter()
                summary = sweep(spec=str(spec), launcher=args.launcher, max_parallel=args.parallel)
                flow_s = time.perf_counter() - t0
                assert summary["succeeded"] == n and summary["unrecorded"] == 0, summary
                report_s = time_report(summary["name"], summary["sweep_id"], tmpdir / f"report-{n}")
                results.append((n, bare_s, n_bare, flow_s, report_s))
            drain_prefect()
        os.chdir(home)  # leave the temporary folder before it is removed
    print(f"launcher: {args.launcher}, no-op trials, at most {args.parallel} at once; Prefect API {api_url}")
    print(f"{'trials':>7} {'bare s':>8} {'flow s':>8} {'report s':>9} {'overhead ms/trial':>18} "
          f"{'orchestration ms/trial':>23}")
    worst = 0.0
    for n, bare_s, _n_bare, flow_s, report_s in results:
        overhead_ms = 1000.0 * (flow_s - bare_s) / n
        orchestration_ms = 1000.0 * (flow_s - bare_s - report_s) / n
        worst = orchestration_ms if n == max(args.trials) else worst
        print(f"{n:>7} {bare_s:>8.2f} {flow_s:>8.2f} {report_s:>9.2f} {overhead_ms:>18.1f} {orchestration_ms:>23.1f}")
    print(f"orchestration per trial at {max(args.trials)} trials: {worst:.1f} ms (goal <= {GOAL_MS:.0f} ms) -> "
          f"{'OK' if worst <= GOAL_MS else 'OVER GOAL'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
