"""`gpuledger.track`: how trainer code reports its metrics, W&B-shaped: `init(project=, name=, config=)`,
`log({"loss": 0.5}, step=10)` (or `log(step=10, loss=0.5)`), `finish()`; `import gpuledger.track as wandb`
keeps a W&B script's calls working.

Inside a sweep (the process runs under `gpuledger.agent`: `$GPULEDGER_RUN_ID` or `$GPULEDGER_METRICS`
set) the agent measures and the sweep stores the run: `init` and `finish` only keep the config, and
`log` writes to the agent's channel (below). Outside a sweep (a notebook, a team's own job) `init`
starts an ad-hoc run (`gpuledger.runtime.adhoc.AdhocRun`: wall-clock, GPU inventory, peak memory,
cost at a stated rate) which `log` feeds and `finish` stores in the ledger (sweep `adhoc-PROJECT`),
so `report weekly` covers it; a run not finished by hand is finished when the process exits (failed
after an uncaught exception). The ad-hoc part is imported only by `init` (the rest stays stdlib).

Stdlib only (its one gpuledger import, `gpuledger.protocol`, is stdlib-only too), so any trainer (numpy demo, PEFT on a cloud GPU) can import it without the rest of
gpuledger's dependencies. Under `gpuledger.agent` the variable `GPULEDGER_METRICS` names a JSONL
file that the agent tails; without it (a trainer run by hand) each metric is printed as one
`GPULEDGER_METRIC {...}` line on stdout, which the agent also understands.

Probes (`gpuledger probe`, docs/probes.md): when `$GPULEDGER_PROBE_STEPS` (N) or
`$GPULEDGER_PROBE_SECONDS` (S) is set, `log` ends the process cleanly (`SystemExit(0)`, after the
point is written) once N distinct training steps (step >= 1) were logged, or at the first step logged
S seconds or more after the first training step. Any trainer that logs its steps through `log` can
be probed; a trainer reports `tokens` (cumulative training tokens at that step) so the probe measures
tokens per second directly (else steps x micro-batch x sequence length).
Under a probe each training step's point also carries `process_cpu_s` (`time.process_time()`: the
trainer process's CPU seconds, all its threads, not its child processes'), unless the trainer logs it
itself: `v_probes` tells from it how many cores the trainer used in its steady state (`cpu_cores`).

Each metric is one JSON object `{"name": str, "value": float, "step": int | null, "time": unix s}`.
Values that are not finite numbers (NaN, inf) are still written, as JSON null, so that a diverged
run is visible; the agent keeps them out of the record's numeric series.
"""

from __future__ import annotations

import json
import math
import os
import sys
import threading
import time
from collections.abc import Mapping
from typing import Any

from gpuledger.protocol import ENV_METRICS as METRICS_ENV
from gpuledger.protocol import (
    ENV_PROBE_SECONDS,
    ENV_PROBE_STEPS,
    ENV_RUN_ID,
    METRIC_LINE_PREFIX,
    PROBE_CPU_METRIC,
)

#: What this process has logged for a probe's stop rule: distinct training steps, and when the first was.
_probe_seen: dict[str, Any] = {"steps": set(), "first_time": None}


def _number(value: Any) -> float | None:
    """Returns `value` as a finite float, or None (NaN, inf, or not a number)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def metric_lines(step: int | None = None, **metrics: Any) -> list[str]:
    """Returns one JSON line (without newline) per metric, in the format the agent reads."""
    now = round(time.time(), 3)
    lines = []
    for name, value in metrics.items():
        point = {"name": name, "value": _number(value), "step": None if step is None else int(step), "time": now}
        lines.append(json.dumps(point, separators=(",", ":")))
    return lines


def _limit(name: str) -> float | None:
    """Returns the positive number in environment variable `name`, or None (unset or not a positive number)."""
    value = _number(os.environ.get(name))
    return value if value is not None and value > 0 else None


def probing() -> bool:
    """Returns True when this process runs as a probe (a stop rule is set: `$GPULEDGER_PROBE_STEPS` or
    `$GPULEDGER_PROBE_SECONDS`)."""
    return _limit(ENV_PROBE_STEPS) is not None or _limit(ENV_PROBE_SECONDS) is not None


def probe_limit_reached(step: int | None, now: float | None = None) -> bool:
    """Returns True when a probe's limit (`$GPULEDGER_PROBE_STEPS` / `$GPULEDGER_PROBE_SECONDS`) is reached
    with training step `step` logged now (steps < 1 and points without a step do not count)."""
    steps, seconds = _limit(ENV_PROBE_STEPS), _limit(ENV_PROBE_SECONDS)
    if (steps is None and seconds is None) or step is None or int(step) < 1:
        return False
    now = time.time() if now is None else now
    seen = _probe_seen
    seen["steps"].add(int(step))
    if seen["first_time"] is None:
        seen["first_time"] = now
    if steps is not None and len(seen["steps"]) >= steps:
        return True
    return seconds is not None and now - seen["first_time"] >= seconds


def in_sweep() -> bool:
    """Returns True when this process is a trial of a sweep (run by `gpuledger.agent`, which measures it)."""
    return bool(os.environ.get(ENV_RUN_ID) or os.environ.get(METRICS_ENV))


def log(data: Mapping[str, Any] | int | None = None, step: int | None = None, **metrics: Any) -> None:
    """Reports metrics at `step`; returns nothing. W&B's shape `log({"loss": 0.5}, step=10)` and
    gpuledger's `log(step=10, loss=0.5)` both work (a number as the first argument is the step).

    With an ad-hoc run (`init` outside a sweep) the points go to it. Otherwise appends to
    `$GPULEDGER_METRICS` when set (one flushed write per call, so a reader never sees half a batch),
    else prints `GPULEDGER_METRIC {...}` lines on stdout. Under a probe's limit (module docstring)
    raises `SystemExit(0)` once the limit is reached.
    """
    if isinstance(data, Mapping):
        metrics = {**{str(k): v for k, v in data.items()}, **metrics}
    elif data is not None:
        step = int(data)
    if step is not None and int(step) >= 1 and PROBE_CPU_METRIC not in metrics and probing():
        metrics[PROBE_CPU_METRIC] = round(time.process_time(), 4)
    current = run
    if isinstance(current, Run) and current.adhoc is not None:
        current.adhoc.log(metrics, step)
        return
    lines = metric_lines(step, **metrics)
    if lines:
        path = os.environ.get(METRICS_ENV)
        if path:
            with open(path, "a", encoding="utf-8") as fh:
                fh.write("".join(line + "\n" for line in lines))
        else:
            sys.stdout.write("".join(METRIC_LINE_PREFIX + line + "\n" for line in lines))
            sys.stdout.flush()
    if probe_limit_reached(step):
        sys.stdout.flush()
        raise SystemExit(0)  # a probe measured enough: end the trainer cleanly (finally blocks run)


class Run:
    """The run `init` started (W&B's `wandb.run`): `config`, `log`, `finish`; a context manager
    (`with gpuledger.track.init(...) as run:` finishes it, failed when the body raised)."""

    def __init__(self, project: str | None, name: str | None, config: dict[str, Any], adhoc: Any = None) -> None:
        self.project, self.name, self.config, self.adhoc = project, name, config, adhoc

    @property
    def id(self) -> str | None:
        """The ad-hoc run's run id (`runs.run_id`); inside a sweep, the trial's attempt's."""
        return self.adhoc.run_id if self.adhoc is not None else os.environ.get(ENV_RUN_ID)

    def log(self, data: Mapping[str, Any] | None = None, step: int | None = None, **metrics: Any) -> None:
        log(data, step, **metrics)

    def finish(self, exit_code: int = 0) -> Any:
        return finish(exit_code)

    def __enter__(self) -> Run:
        return self

    def __exit__(self, kind: Any, value: Any, tb: Any) -> None:
        finish(0 if kind is None else 1)


#: the current run (`init` sets it, `finish` clears it), like `wandb.run`
run: Run | None = None
_run_lock = threading.Lock()


def init(project: str | None = None, name: str | None = None, config: Any = None, *, owner: str | None = None,
         model: str | None = None, method: str | None = None, usd_per_hour: float | None = None,
         objective: str | None = None, reinit: bool = False, **_ignored: Any) -> Run:
    """Starts a run (W&B's `wandb.init`; arguments W&B has and gpuledger does not use are ignored);
    returns it. Outside a sweep an ad-hoc run measures this process from now on (see the module);
    `usd_per_hour` prices it (else `$GPULEDGER_LOCAL_USD_PER_HOUR`, the catalog price of its GPUs,
    or the local reference rate). A second `init` returns the current run unless `reinit` (which
    finishes it first)."""
    global run
    with _run_lock:
        if run is not None and not reinit:
            return run
    if run is not None:
        finish()
    plain = dict(config) if isinstance(config, Mapping) else ({} if config is None else dict(vars(config)))
    adhoc = None
    if not in_sweep():
        from gpuledger.runtime.adhoc import AdhocRun

        adhoc = AdhocRun(project=project, name=name, config=config, owner=owner, model=model, method=method,
                         usd_per_hour=usd_per_hour, objective=objective)
        _finish_at_exit()
    with _run_lock:
        run = Run(project, name, plain, adhoc)
        return run


def finish(exit_code: int = 0) -> Any:
    """Ends the current run (W&B's `wandb.finish`): an ad-hoc run is stored in the ledger (failed when
    `exit_code` is not 0); returns what was done (`gpuledger.runtime.adhoc.FinishedRun`), None when
    there was no ad-hoc run."""
    global run
    with _run_lock:
        current, run = run, None
    if current is None or current.adhoc is None:
        return None
    status = "succeeded" if exit_code == 0 else "failed"
    return current.adhoc.finish(status, exit_code, None if exit_code == 0 else f"exit code {exit_code}")


_hooks_installed = False


def _finish_at_exit() -> None:
    """Finishes a run left open when the process ends (failed after an uncaught exception)."""
    global _hooks_installed
    if _hooks_installed:
        return
    _hooks_installed = True
    import atexit

    failed = {"yes": False}
    previous = sys.excepthook

    def hook(kind, value, tb):
        failed["yes"] = True
        previous(kind, value, tb)

    sys.excepthook = hook
    atexit.register(lambda: finish(1 if failed["yes"] else 0) if run is not None else None)
