"""The sweep specs of the tests, written in one place: `sweep_spec` writes a local-launcher sweep of the demo
model (lora, fp32, eval_loss minimized) and, given one, its trial script; `trial_script` the script's
argument parsing around a test's own body. `write_spec` is the tiny sweep of the flow tests: a trial that
reports eval_loss = |x - 0.3| + 1 (so x = 0.3 is the best recipe), optionally sleeping (unless a file `no-sleep`
lies beside its script: a test's later run need not wait) or failing on purpose."""

from __future__ import annotations

import textwrap
from pathlib import Path


def trial_script(body: str, options: str = "") -> str:
    """Returns a trial script: parses --x (a float, required) and the `options` (argparse calls on `p`) into
    `a`, then runs `body`, which reports through gpuledger.track.log (argparse, json, sys, time imported)."""
    lines = ["import argparse, json, sys, time", "from gpuledger.track import log", "p = argparse.ArgumentParser()",
             'p.add_argument("--x", type=float, required=True)', textwrap.dedent(options).strip(), "a = p.parse_args()",
             textwrap.dedent(body).strip()]
    return "\n".join(line for line in lines if line) + "\n"


def x_points(xs) -> str:
    """The `params` of a sweep over the points `xs` of one parameter x."""
    return f"{{x: [{', '.join(str(x) for x in xs)}]}}"


def sweep_spec(folder: Path, *, name: str, search: str, params: str, trial: str | None = None, run: str | None = None,
               tokens_per_trial: int = 1000, max_parallel: int = 1, budget_usd: float = 5.0,
               usd_per_hour: float = 3.6) -> Path:
    """Writes `folder/<name>.yaml` and, given `trial`, that script as `folder/trial.py`; returns the spec's path.

    `search`: the lines of the search block before its params (`strategy: asha`, `seed: 2`, ...);
    `run`: the task's command, by default `python <folder>/trial.py --x {x}`."""
    if trial is not None:
        (folder / "trial.py").write_text(trial, encoding="utf-8")
    run = run if run is not None else f"python {folder / 'trial.py'} --x {{x}}"
    path = folder / f"{name}.yaml"
    path.write_text(textwrap.dedent(f"""
        kind: sweep
        name: {name}
        project: tests
        owner: ci
        model: gpuledger/demo-char-gpt
        method: lora
        precision: fp32
        train: {{seq_len: 64, tokens_per_trial: {tokens_per_trial}, grad_checkpointing: false, flash_attention: false}}
        search:
        SEARCH
          params: {params}
          objective: {{metric: eval_loss, goal: minimize}}
        resources: {{max_parallel: {max_parallel}}}
        budget: {{max_usd: {budget_usd}}}
        launcher: local
        local: {{usd_per_hour: {usd_per_hour}, trial_timeout: 2m}}
        task:
          run: {run}
    """).replace("SEARCH\n", textwrap.indent(textwrap.dedent(search).strip(), "  ") + "\n"), encoding="utf-8")
    return path


TRIAL = trial_script("""
    import pathlib
    if not pathlib.Path(__file__).with_name("no-sleep").exists():  # a test may drop the sleep between runs
        time.sleep(a.sleep)
    if a.x == a.fail:
        sys.exit("trial failed on purpose")
    log(step=1, eval_loss=abs(a.x - 0.3) + 1.0)
""", options="""
    p.add_argument("--sleep", type=float, default=0.0)
    p.add_argument("--fail", type=float, default=-1.0)
""")


def write_spec(folder: Path, name: str = "tiny-grid", xs=(0.1, 0.2, 0.3, 0.4), sleep: float = 0.0,
               max_parallel: int = 2, usd_per_hour: float = 0.0, budget: float = 5.0, fail: float = -1.0,
               strategy: str = "grid", n_trials: int | None = None) -> Path:
    """Writes trial.py and a sweep spec running it once per x; returns the spec's path."""
    search = f"strategy: {strategy}" + ("" if n_trials is None else f"\nn_trials: {n_trials}")
    return sweep_spec(folder, name=name, search=search, params=x_points(xs), trial=TRIAL,
                      run=f"python {folder / 'trial.py'} --x {{x}} --sleep {sleep} --fail {fail}",
                      max_parallel=max_parallel, budget_usd=budget, usd_per_hour=usd_per_hour)
