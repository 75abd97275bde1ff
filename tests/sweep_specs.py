"""A tiny sweep for the flow tests: a trial script that reports eval_loss = |x - 0.3| + 1 (so x = 0.3 is
the best recipe), optionally sleeping or failing on purpose, and a local-launcher spec that runs it."""

from __future__ import annotations

import textwrap
from pathlib import Path

TRIAL = textwrap.dedent("""
    import argparse, sys, time
    from gpuledger.track import log
    p = argparse.ArgumentParser()
    p.add_argument("--x", type=float, required=True)
    p.add_argument("--sleep", type=float, default=0.0)
    p.add_argument("--fail", type=float, default=-1.0)
    a = p.parse_args()
    time.sleep(a.sleep)
    if a.x == a.fail:
        sys.exit("trial failed on purpose")
    log(step=1, eval_loss=abs(a.x - 0.3) + 1.0)
""")


def write_spec(folder: Path, name: str = "tiny-grid", xs=(0.1, 0.2, 0.3, 0.4), sleep: float = 0.0,
               max_parallel: int = 2, usd_per_hour: float = 0.0, budget: float = 5.0, fail: float = -1.0,
               strategy: str = "grid", n_trials: int | None = None) -> Path:
    """Writes trial.py and a sweep spec running it once per x; returns the spec's path."""
    trial = folder / "trial.py"
    trial.write_text(TRIAL, encoding="utf-8")
    spec = folder / f"{name}.yaml"
    spec.write_text(textwrap.dedent(f"""
        kind: sweep
        name: {name}
        project: tests
        owner: ci
        model: gpuledger/demo-char-gpt
        method: lora
        precision: fp32
        train: {{seq_len: 64, tokens_per_trial: 1000, grad_checkpointing: false, flash_attention: false}}
        search:
          strategy: {strategy}{"" if n_trials is None else f"{chr(10)}          n_trials: {n_trials}"}
          params: {{x: [{", ".join(str(x) for x in xs)}]}}
          objective: {{metric: eval_loss, goal: minimize}}
        resources: {{max_parallel: {max_parallel}}}
        budget: {{max_usd: {budget}}}
        launcher: local
        local: {{usd_per_hour: {usd_per_hour}, trial_timeout: 2m}}
        task:
          run: python {trial} --x {{x}} --sleep {sleep} --fail {fail}
    """), encoding="utf-8")
    return spec
