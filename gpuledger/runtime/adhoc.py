"""An ad-hoc run: training started outside a sweep (a notebook, a team's own job), measured in its own
process and stored in the ledger when it finishes, so `report weekly` and the views cover it.

`gpuledger.track.init(...)` (W&B-shaped), the Transformers callback and the Lightning logger start
one when the process is not a trial of a sweep (under `gpuledger.agent` the agent measures and the
sweep stores; then these are no-ops). What it measures, like the agent: wall-clock, the GPU inventory
(NVML: kind and count; none on a CPU machine), the peak GPU memory (NVML device level, and torch's
`max_memory_reserved` when torch is in use) and the peak resident memory of this process (psutil),
sampled every `SAMPLE_INTERVAL_S`; the metrics it is given (tokens, steps, loss, evaluation metrics).

Its cost is wall-clock x a rate with its source: `usd_per_hour` given, else
`$GPULEDGER_LOCAL_USD_PER_HOUR`, else on a GPU machine the cheapest on-demand catalog price of that
many GPUs of its kind (`gpuledger.catalog.pricing.load_offers`, basis and date said), else the
bundled local reference rate (`gpuledger.catalog.local.local_reference`). Nothing is billed: the
billing line says which rate it is.

Stored through `gpuledger.runtime.external.store_external_runs` (sweep `adhoc-PROJECT`, kind
'adhoc'). When the warehouse cannot be written (no project, busy past its wait, a read-only disk),
the record is written to `gpuledger-run-RUN_ID.json` in the working directory and the message says
how to store it later (`gpuledger import FILE`).
"""

from __future__ import annotations

import contextlib
import getpass
import json
import math
import socket
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpuledger import vocabulary

#: how often the memory sampler reads NVML and the process's RSS (seconds)
SAMPLE_INTERVAL_S = 0.5
#: the sweep an ad-hoc run of a project without a name joins
DEFAULT_PROJECT = "adhoc"
#: the configuration kept with a run: values longer than this many characters are cut
MAX_CONFIG_VALUE_CHARS = 500
GIB = 1024**3


def _plain_config(config: Any, prefix: str = "", out: dict[str, Any] | None = None, depth: int = 0) -> dict[str, Any]:
    """Returns `config` (a dict, a dataclass, an argparse Namespace, an object with `to_dict`) flattened
    to JSON scalars with dotted keys (`optim.lr`)."""
    out = {} if out is None else out
    if config is None:
        return out
    if hasattr(config, "to_dict") and callable(config.to_dict):
        with contextlib.suppress(Exception):
            config = config.to_dict()
    if not isinstance(config, dict):
        config = dict(vars(config)) if hasattr(config, "__dict__") else {"value": config}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and depth < 4:
            _plain_config(value, f"{name}.", out, depth + 1)
        elif value is None or isinstance(value, bool | int | str):
            out[name] = value if not isinstance(value, str) else value[:MAX_CONFIG_VALUE_CHARS]
        elif isinstance(value, float):
            out[name] = value if math.isfinite(value) else None
        else:
            out[name] = str(value)[:MAX_CONFIG_VALUE_CHARS]
    return out


@dataclass(frozen=True)
class Rate:
    usd_per_hour: float
    source: str  # gpuledger.vocabulary.PriceSource
    description: str


def run_rate(accelerator: str | None, gpus: int, usd_per_hour: float | None = None) -> Rate:
    """Returns the rate an ad-hoc run is priced at and where it comes from (see the module)."""
    if usd_per_hour is not None:
        return Rate(float(usd_per_hour), "local", f"${float(usd_per_hour):g}/h given to the run (usd_per_hour)")
    from gpuledger import settings

    current = settings.current()
    value = current.get("local.usd_per_hour")
    if value is not None:
        where = current.sources.get("local.usd_per_hour", "settings")
        return Rate(float(value), "local", f"${float(value):g}/h, the setting local.usd_per_hour ({where})")
    if accelerator and gpus:
        with contextlib.suppress(Exception):  # an accelerator the catalog does not rent: the reference rate
            import polars as pl

            from gpuledger.catalog.pricing import load_offers

            offers = load_offers(accelerators=[accelerator])
            per_gpu = offers.filter(pl.col("usd_per_hour_on_demand").is_not_null()).with_columns(
                per_gpu=pl.col("usd_per_hour_on_demand") / pl.col("accelerator_count")).sort("per_gpu")
            if per_gpu.height:
                best = per_gpu.row(0, named=True)
                usd = float(best["per_gpu"]) * gpus
                return Rate(usd, "catalog", (
                    f"{gpus} x {accelerator} at the cheapest on-demand catalog price per GPU "
                    f"({best['cloud']} {best['instance_type']} {best['region']}, ${best['per_gpu']:.4g}/GPU-h, "
                    f"{best['basis']} as of {best['as_of']}): an estimate, not a bill"))
    from gpuledger.catalog.local import local_reference

    ref = local_reference()
    return Rate(ref.usd_per_hour, "local", ref.label)


class _Sampler:
    """Samples peak GPU memory (NVML), utilisation and this process's RSS in a daemon thread."""

    def __init__(self) -> None:
        from gpuledger.agent.measure import Gpus

        self.gpus = Gpus()
        self.peak_gpu_gib: float | None = None
        self.peak_util: float | None = None
        self.peak_rss_gib: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="gpuledger-adhoc-sampler", daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        mem, util = self.gpus.sample()
        if mem:
            self.peak_gpu_gib = max(self.peak_gpu_gib or 0.0, max(mem))
        if util:
            self.peak_util = max(self.peak_util or 0.0, max(util))
        with contextlib.suppress(Exception):
            import psutil

            rss = psutil.Process().memory_info().rss / GIB
            self.peak_rss_gib = max(self.peak_rss_gib or 0.0, rss)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(SAMPLE_INTERVAL_S)

    def stop(self) -> None:
        self._sample()
        self._stop.set()
        self._thread.join(timeout=2.0)
        torch = sys.modules.get("torch")  # torch's own peak, when the run used CUDA through it
        with contextlib.suppress(Exception):
            if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
                reserved = max(torch.cuda.max_memory_reserved(i) for i in range(torch.cuda.device_count())) / GIB
                self.peak_gpu_gib = max(self.peak_gpu_gib or 0.0, reserved)
        self.gpus.close()


@dataclass(frozen=True)
class FinishedRun:
    """What `AdhocRun.finish` did: the run, its cost, and where its record went."""

    run_id: str
    sweep_id: str
    trial_id: str
    status: str
    wall_s: float
    cost_usd: float
    stored: bool
    message: str
    record_file: str | None = None


class AdhocRun:
    """A run started outside a sweep (see the module): `log(metrics, step)`, then `finish()`."""

    def __init__(self, *, project: str | None = None, name: str | None = None, config: Any = None,
                 owner: str | None = None, model: str | None = None, method: str | None = None,
                 usd_per_hour: float | None = None, objective: str | None = None, warehouse: Any = None) -> None:
        from gpuledger.agent.measure import Metrics
        from gpuledger.runtime.external import external_trial_id, slug

        self.started = time.time()
        self.started_at = datetime.now(UTC).replace(tzinfo=None)
        from gpuledger import settings

        self.project = project or settings.current().get("adhoc.project") or DEFAULT_PROJECT
        self.name = name or f"run-{self.started_at:%Y%m%d-%H%M%S}"
        self.run_id = f"adhoc-{slug(self.name, 40)}-{uuid.uuid4().hex[:8]}"
        self.sweep_id = f"adhoc-{slug(self.project)}"
        self.trial_id = external_trial_id(self.sweep_id, self.run_id)
        self.config = _plain_config(config)
        self.owner = owner or _user()
        self.model, self.method, self.objective = model, method, objective
        self.usd_per_hour = usd_per_hour
        self.warehouse = warehouse
        self.metrics = Metrics(self.started)
        self.sampler = _Sampler()
        self.finished: FinishedRun | None = None
        self._lock = threading.Lock()

    def update_config(self, config: Any) -> None:
        """Adds to the run's configuration (W&B's `run.config.update`)."""
        self.config.update(_plain_config(config))

    def log(self, metrics: dict[str, Any], step: int | None = None) -> None:
        """Adds one point per numeric metric (others are left out, as the agent does)."""
        now = round(time.time(), 3)
        for name, value in metrics.items():
            self.metrics.add_json(json.dumps({"name": str(name), "value": value, "step": step, "time": now},
                                             default=lambda v: None))

    def record(self, status: str, exit_code: int | None, reason: str | None = None) -> Any:
        """Returns the run's result record now (wall-clock so far, peaks so far, cost at its rate)."""
        from gpuledger.record import BillingLine, MetricPoint, ResultRecord

        ended_at = datetime.now(UTC).replace(tzinfo=None)
        wall_s = max(0.0, time.time() - self.started)
        accelerator = self.sampler.gpus.name
        gpus = len(self.sampler.gpus.handles)
        rate = run_rate(accelerator, gpus, self.usd_per_hour)
        hours = wall_s / 3600.0
        billing = [BillingLine(source=rate.source, description=rate.description, usd_per_hour=rate.usd_per_hour,
                               hours=hours, cost_usd=rate.usd_per_hour * hours)]
        with self.metrics.lock:
            points = [MetricPoint(**p) for p in self.metrics.points]
            final = dict(self.metrics.final)
        return ResultRecord(
            run_id=self.run_id, sweep_id=self.sweep_id, trial_id=self.trial_id, attempt=1,
            launcher=vocabulary.LAUNCHER_EXTERNAL, accelerator=accelerator, gpus=gpus, spot=False,
            started_at=self.started_at, ended_at=ended_at, wall_s=wall_s, exit_code=exit_code, status=status,
            reason=reason, peak_gpu_mem_gib=self.sampler.peak_gpu_gib, peak_gpu_util_pct=self.sampler.peak_util,
            peak_rss_gib=self.sampler.peak_rss_gib, hostname=socket.gethostname(),
            command=" ".join(sys.argv)[:2000] or None, params=self.config, metrics=points, final_metrics=final,
            billing=billing, purpose="trial")

    def finish(self, status: str = "succeeded", exit_code: int | None = 0, reason: str | None = None) -> FinishedRun:
        """Ends the run: stops measuring, stores its record (or writes it to a file, see the module);
        returns what was done. A second call returns the first one's answer."""
        from gpuledger.errors import UserError
        from gpuledger.runtime.external import ExternalRun, store_external_runs

        with self._lock:
            if self.finished is not None:
                return self.finished
            self.sampler.stop()
            record = self.record(status, exit_code, reason)
            run = ExternalRun(record=record, sweep_name=self.sweep_id, kind="adhoc", project=self.project,
                              owner=self.owner, model=self.model, method=self.method,
                              objective_metric=self.objective, source=f"ad-hoc runs of project {self.project}")
            stored, message, file = False, "", None
            try:
                result = store_external_runs([run], path=self.warehouse, sources=[self.run_id])
                stored = self.run_id in result.stored
                message = (f"run {self.run_id} stored in the ledger (sweep {self.sweep_id})" if stored else
                           f"run {self.run_id} refused by the ledger: {'; '.join(r for _, r in result.rejected)}")
            except (UserError, OSError) as err:
                message = f"run {self.run_id} not stored ({str(err).splitlines()[0]})"
            if not stored:
                file = str(Path.cwd() / f"gpuledger-run-{self.run_id}.json")
                with contextlib.suppress(OSError):
                    from gpuledger.files import write_json_atomic

                    write_json_atomic(Path(file), record.to_json())
                    message += f"; its record is in {file}: store it with `gpuledger import {file}` in the project"
            self.finished = FinishedRun(self.run_id, self.sweep_id, self.trial_id, status, record.wall_s,
                                        record.cost_usd, stored, message, file)
            print(f"gpuledger: {message}", file=sys.stderr, flush=True)
            return self.finished


def _user() -> str | None:
    try:
        return getpass.getuser()
    except Exception:  # no login name (a container without a passwd entry)
        return None
