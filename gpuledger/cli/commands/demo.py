"""`gpuledger demo`: the demo, from the installed package alone.

In the current project (else in a new project folder `./gpuledger-demo` that it makes with
`gpuledger init`, and names): validates and plans the demo grid, prepares the demo model (the
pretrained base of `python -m gpuledger.trainers.demo_lora`, cached once per user), runs the 12-trial
LoRA grid (`specs/lora-grid.yaml`), then ASHA over the same points (`specs/lora-asha.yaml`), both on
this machine's CPU, and prints where the two ROI reports are and a few queries to try. A project
that lacks the demo specs gets them from the package (`gpuledger init` would add them). Both sweeps
share one Prefect API (the project's `gpuledger serve` when it runs, else one temporary server).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from gpuledger.errors import UserError

#: the demo's specs, in the order they run
DEMO_SPECS = ("lora-grid.yaml", "lora-asha.yaml")
#: the folder made for the demo outside a project
DEMO_FOLDER = "gpuledger-demo"


def demo_project() -> tuple[Path, bool]:
    """Returns (project root, made now): the current project, else `./gpuledger-demo` (made)."""
    from gpuledger import settings
    from gpuledger.scaffold import init_project

    root = settings.find_project()
    if root is not None:
        return root, False
    folder = Path.cwd() / DEMO_FOLDER
    if folder.exists() and not (folder / settings.PROJECT_FILE).is_file() and any(folder.iterdir()):
        raise UserError(f"not in a gpuledger project, and {folder} exists without a {settings.PROJECT_FILE}; "
                        f"run `gpuledger init` where the demo should run, then `gpuledger demo` there")
    init_project(folder)
    return folder.resolve(), True


def spec_paths(root: Path) -> list[Path]:
    """Returns the demo specs: the project's `specs/NAME`, else the package's copy written there."""
    from gpuledger.scaffold import scaffold_files

    bundled = dict(scaffold_files())
    out = []
    for name in DEMO_SPECS:
        path = root / "specs" / name
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(bundled[f"specs/{name}"].read_bytes())
            print(f"gpuledger demo: wrote {path} (the bundled demo spec)", flush=True)
        out.append(path)
    return out


def _step(title: str) -> None:
    print(f"\n== {title}", flush=True)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def _sweeps(main, grid: str, asha: str) -> int:
    """Runs the grid, then ASHA; returns the first nonzero exit code, else 0."""
    for spec in (grid, asha):
        _step(f"sweep {spec}")
        code = main(["sweep", spec])
        if code != 0:
            print(f"gpuledger demo: `gpuledger sweep {spec}` ended with exit code {code}", file=sys.stderr)
            return code
    return 0


def run(args: argparse.Namespace) -> int:
    from gpuledger.cli import main

    root, made = demo_project()
    if made:
        print(f"gpuledger demo: not in a gpuledger project; made one in {root} (the demo runs there)", flush=True)
    else:
        print(f"gpuledger demo: in the project {root}", flush=True)
    os.chdir(root)  # the specs' relative paths, and the run-time folder, are the project's
    grid, asha = (str(p.relative_to(root)) for p in spec_paths(root))

    _step(f"validate {grid} {asha}")
    if main(["validate", grid, asha]) != 0:
        return 1
    _step(f"plan {grid}")
    if main(["plan", grid]) != 0:
        return 1
    _step("prepare the demo model (pretrained once, then cached) while the Prefect API starts")
    # side by side: pretraining (single-threaded, about 30 CPU-s on a fresh machine) and a temporary
    # Prefect server's start (tens of seconds on a loaded one) need a core each; the pretraining's
    # output is kept and shown once it ends, so the two do not interleave
    from gpuledger.flows.server import prefect_api

    with tempfile.TemporaryFile(mode="w+", encoding="utf-8") as log, contextlib.ExitStack() as stack:
        prep = subprocess.Popen([sys.executable, "-m", "gpuledger.trainers.demo_lora", "--prepare-base"],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, text=True)
        stack.callback(_stop, prep)  # an interrupted demo leaves no pretraining behind
        stack.enter_context(prefect_api(say=lambda msg: print(f"gpuledger demo: {msg}", file=sys.stderr, flush=True)))
        code = prep.wait()
        log.seek(0)
        print(log.read(), end="", flush=True)
        if code != 0:
            raise UserError(f"preparing the demo model failed (exit {code}; its output is above)")
        code = _sweeps(main, grid, asha)
    if code != 0:
        return code
    print(f"""
Done. Open the two reports above in a browser (the ASHA one compares itself with the grid).
The project is {root}; from there (or any folder below it) query the warehouse with SQL, e.g.:
  gpuledger sql "select sweep_name, best_trial_id, best_metric, time_to_recipe_s, cost_to_recipe_usd, total_cost_usd from v_sweep_roi"
  gpuledger sql "select trial_id, params, status, metric_value, peak_rss_gib, wall_s from v_trial_results order by metric_value"
  gpuledger sql "select * from v_weekly_spend" --format csv""")
    return 0
