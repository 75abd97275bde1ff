"""Overhead of running trials through the Prefect `sweep` flow vs a bare thread pool.

    .venv/bin/python benchmarks/flow_overhead.py [--trials 100] [--parallel 2]

Both sides run the same no-op trials (`true`) as subprocesses through the same local launcher
(`gpuledger.launch.local.LocalLauncher`, same poll loop `flows.sweep.launch_and_collect`):
- bare: a `concurrent.futures.ThreadPoolExecutor(max_workers=parallel)`; results collected in memory;
- flow: `flows.sweep.sweep(spec)` against a temporary Prefect server (the CLI's ephemeral mode),
  i.e. plan + artifacts + one Prefect task run per trial + warehouse ingest per result + report.
Prints wall times and the overhead per trial = (flow - bare) / trials, measured in one run.
Goal: under 100 ms per trial. Nothing is written outside a temporary folder.
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

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def write_spec(folder: Path, trials: int, parallel: int) -> Path:
    spec = folder / "noop.yaml"
    spec.write_text(textwrap.dedent(f"""
        kind: sweep
        name: noop-bench
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


def bare(spec_path: Path, parallel: int, landing: Path) -> tuple[float, int]:
    """Runs the spec's trials on a bare thread pool through the local launcher; returns (seconds, records)."""
    from flows.sweep import launch_and_collect
    from gpuledger.launch.base import LaunchRequest
    from gpuledger.launch.local import LocalLauncher
    from gpuledger.spec import expand_trials, load_spec

    spec = load_spec(spec_path)
    trials = expand_trials(spec)
    reqs = [LaunchRequest(sweep_id="bare", sweep_name=spec.name, trial_id=t.trial_id, params=t.params, run=t.run,
                          workdir=Path.cwd()) for t in trials]
    t0 = time.perf_counter()
    with LocalLauncher(max_parallel=parallel, landing_dir=landing) as launcher, \
            ThreadPoolExecutor(max_workers=parallel) as pool:
        records = [r for rs in pool.map(lambda r: launch_and_collect(launcher, r), reqs) for r in rs]
    return time.perf_counter() - t0, len(records)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--parallel", type=int, default=2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="gl-bench-") as tmp:
        tmpdir = Path(tmp)
        os.environ["GPULEDGER_WAREHOUSE"] = str(tmpdir / "wh" / "ledger.duckdb")
        os.environ["PREFECT_HOME"] = str(tmpdir / "prefect-home")
        os.environ.pop("PREFECT_API_URL", None)
        home = os.getcwd()
        os.chdir(tmpdir)
        spec = write_spec(tmpdir, args.trials, args.parallel)

        from gpuledger.serve import prefect_api

        with prefect_api() as api_url:  # before Prefect is imported: it reads PREFECT_API_URL then
            bare_s, n_bare = bare(spec, args.parallel, tmpdir / "bare-landing")
            from prefect.logging.handlers import APILogWorker

            from flows.sweep import sweep

            sweep(spec=str(spec), dry_run=True)  # warm-up: imports, plan, first flow run
            t0 = time.perf_counter()
            summary = sweep(spec=str(spec))
            flow_s = time.perf_counter() - t0
            APILogWorker.drain_all(timeout=10)
        assert summary["succeeded"] == args.trials, summary
        per_trial_ms = 1000.0 * (flow_s - bare_s) / args.trials
        print(f"trials: {args.trials} no-op (`true`), at most {args.parallel} at once; Prefect API {api_url}")
        print(f"bare thread pool + local launcher: {bare_s:7.2f} s  ({1000 * bare_s / n_bare:6.1f} ms/trial)")
        print(f"sweep flow (tasks, ingest, report): {flow_s:7.2f} s  ({1000 * flow_s / args.trials:6.1f} ms/trial)")
        print(f"overhead per trial: {per_trial_ms:.1f} ms  (goal < 100 ms)  -> "
              f"{'OK' if per_trial_ms < 100 else 'OVER GOAL'}")
        os.chdir(home)  # leave the temporary folder before it is removed
    return 0


if __name__ == "__main__":
    sys.exit(main())
