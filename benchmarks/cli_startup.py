"""Start-up of the prompt's commands as ratios against a bare `python -c "import pydantic, yaml"`.

    .venv/bin/python benchmarks/cli_startup.py [--runs 9] [--write] [--against DIR]

Runs, interleaved round by round so that the machine's load falls on every command alike:
- bare:     `python -c "import pydantic, yaml"` (the floor any pydantic-and-YAML tool pays);
- validate: `gpuledger validate specs/lora-grid.yaml`;
- estimate: `gpuledger estimate gpuledger/demo-char-gpt ...`: a real estimate of one trial of
            specs/lora-grid.yaml (its model, method, precision, seq_len, lora_r, lora_targets and micro-batch,
            no checkpointing or flash attention, on the CPU: the spec's own settings as flags, `ESTIMATE_TRIAL`);
- sql:      `gpuledger sql "select 1"` on a warehouse made (migrated) beforehand in a temporary folder;
- sql-runs: `gpuledger sql "select count(*) from v_runs"` on that warehouse (a query of a view).
Each is a fresh process, Python's compiled-module cache on as in a user's shell (`python -m gpuledger.cli`, the same code as the installed `gpuledger`), wall
time by `time.perf_counter` around `subprocess.run`. Prints the median and range of each, the ratio of
the medians to bare's, the same for the CPU time the child used (user + system: what the machine's
other work does not inflate, on a shared machine the steadier ratio), the machine (cores, load average before and after) and the date; `--write` keeps
them in benchmarks/results/cli_startup.json. `--against DIR` also runs each command from another checkout
(the same interpreter and packages; `python -m` imports the gpuledger of the folder it runs in), in the same
rounds, as `NAME@before`: a change's before and after under the same load.
Goal (issue 38): each command at most 3x bare.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GOAL = 3.0
RESULT = REPO / "benchmarks" / "results" / "cli_startup.json"


#: one trial of specs/lora-grid.yaml as `estimate` flags (lora_r 16, micro_batch 8 of its grid)
ESTIMATE_TRIAL = ["gpuledger/demo-char-gpt", "--method", "lora", "--precision", "fp32", "--seq", "64", "--batch", "8",
                  "--lora-r", "16", "--lora-targets", "q,k,v,o", "--no-grad-ckpt", "--no-flash-attn", "--device", "cpu"]


def commands() -> dict[str, list[str]]:
    py = sys.executable
    cli = [py, "-m", "gpuledger.cli"]
    return {
        "bare": [py, "-c", "import pydantic, yaml"],
        "validate": [*cli, "validate", "specs/lora-grid.yaml"],
        "estimate": [*cli, "estimate", *ESTIMATE_TRIAL],
        "sql": [*cli, "sql", "select 1"],
        "sql-runs": [*cli, "sql", "select count(*) from v_runs"],
    }


def machine() -> str:
    """Returns the machine in words: architecture, cores, memory, whether it has an NVIDIA GPU, Python."""
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1024**3
    gpu = "an NVIDIA GPU" if shutil.which("nvidia-smi") else "no GPU"
    return (f"{platform.machine()}, {os.cpu_count()} cores, {memory:.0f} GiB, {gpu}, "
            f"Python {platform.python_version()}")


def timed(argv: list[str], env: dict[str, str], cwd: Path = REPO) -> tuple[float, float]:
    """Returns (wall s, CPU s: user + system of the child) of one run (`python -m` imports `cwd`'s gpuledger)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    took = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[-2:])} failed ({done.returncode}): {done.stderr.strip()[-400:]}")
    return took, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=9, help="rounds (each runs every command once)")
    ap.add_argument("--write", action="store_true", help=f"keep the result in {RESULT.relative_to(REPO)}")
    ap.add_argument("--against", type=Path, default=None, metavar="DIR",
                    help="also run the commands of another checkout (e.g. `git worktree add --detach DIR main`, "
                         "the code before a change) in the same rounds, as NAME@before")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpuledger-startup-") as tmp:
        env = {**os.environ, "GPULEDGER_WAREHOUSE": str(Path(tmp) / "ledger.duckdb"), "HOME": tmp}
        # as a user's shell runs them: Python keeps its compiled modules (__pycache__), which the warm-up
        # round writes; a PYTHONDONTWRITEBYTECODE left in the environment would recompile gpuledger's
        # own modules at every start (about 1 s of validate's at load 5)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        subprocess.run([sys.executable, "-c", "from gpuledger.warehouse import Warehouse\n"
                        "with Warehouse.open(): pass"], cwd=REPO, env=env, check=True, timeout=300)
        cmds = {name: (argv, REPO) for name, argv in commands().items()}
        if args.against is not None:
            cmds.update({f"{name}@before": (argv, args.against.resolve()) for name, argv in commands().items()
                         if name != "bare"})
        load_before = os.getloadavg()
        times: dict[str, list[float]] = {name: [] for name in cmds}
        cpu: dict[str, list[float]] = {name: [] for name in cmds}
        for argv, cwd in cmds.values():  # one warm-up each (the OS's file cache, the __pycache__), not counted
            timed(argv, env, cwd)
        for _ in range(args.runs):
            for name, (argv, cwd) in cmds.items():
                wall, used = timed(argv, env, cwd)
                times[name].append(wall)
                cpu[name].append(used)
        load_after = os.getloadavg()
    bare = statistics.median(times["bare"])
    bare_cpu = statistics.median(cpu["bare"])
    result = {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine(),
        "load_average_1m": [round(load_before[0], 1), round(load_after[0], 1)],
        "runs": args.runs,
        "goal_ratio": GOAL,
        "commands": {name: {"median_s": round(statistics.median(ts), 3), "min_s": round(min(ts), 3),
                            "max_s": round(max(ts), 3),
                            "ratio": round(statistics.median(ts) / bare, 2),
                            "cpu_median_s": round(statistics.median(cpu[name]), 3),
                            "cpu_ratio": round(statistics.median(cpu[name]) / bare_cpu, 2)}
                     for name, ts in times.items()},
    }
    print(f"{result['date']}, {result['machine']}, load {load_before[0]:.1f} -> {load_after[0]:.1f}, "
          f"{args.runs} rounds (median, range)")
    for name, row in result["commands"].items():
        verdict = "" if name == "bare" else ("  ok" if row["ratio"] <= GOAL else f"  over {GOAL:g}x")
        print(f"  {name:15s} {row['median_s']:6.2f} s  ({row['min_s']:.2f}-{row['max_s']:.2f})  "
              f"{row['ratio']:4.2f}x{verdict}   CPU {row['cpu_median_s']:.2f} s = {row['cpu_ratio']:.2f}x")
    if args.write:
        RESULT.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {RESULT.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
