"""A Lightning `Logger` that reports to gpuledger (Lightning 2: `lightning.pytorch`, or the older
`pytorch_lightning` package; gpuledger depends on neither).

    from gpuledger.integrations.lightning import GpuledgerLogger
    trainer = lightning.Trainer(logger=GpuledgerLogger(project="vision"), max_epochs=3)

Outside a sweep the fit is an ad-hoc run (`gpuledger.track.init`: wall-clock, GPU inventory, peak
memory and cost, stored in the ledger when the fit ends: `finalize`); inside one the agent measures
it. Hyperparameters go to the run's config, every logged metric to its points at the trainer's
global step (`tokens`, when the module logs it, is what the ledger calls tokens).
"""

from __future__ import annotations

from typing import Any

from gpuledger import track

try:  # Lightning 2
    from lightning.pytorch.loggers.logger import Logger, rank_zero_experiment
    from lightning.pytorch.utilities import rank_zero_only
except ImportError:  # the older package name
    try:
        from pytorch_lightning.loggers.logger import Logger, rank_zero_experiment
        from pytorch_lightning.utilities import rank_zero_only
    except ImportError as err:
        raise ImportError("gpuledger.integrations.lightning needs Lightning (`pip install lightning`); gpuledger "
                          "does not install it") from err


class GpuledgerLogger(Logger):
    """Reports a Lightning fit to gpuledger (see the module)."""

    def __init__(self, project: str | None = None, name: str | None = None, *, usd_per_hour: float | None = None,
                 config: dict[str, Any] | None = None) -> None:
        super().__init__()
        self._project, self._name, self._usd_per_hour = project, name, usd_per_hour
        self._config = dict(config or {})
        self._run: Any = None
        self.finished: Any = None

    @property
    def name(self) -> str:
        return self._name or "gpuledger"

    @property
    def version(self) -> str:
        run = self._run
        return (run.id if run is not None and run.id else "0")

    @property
    @rank_zero_experiment
    def experiment(self) -> Any:
        """The gpuledger run (`gpuledger.track.Run`), started on first use."""
        if self._run is None:
            self._run = track.run or track.init(project=self._project, name=self._name, config=self._config,
                                                usd_per_hour=self._usd_per_hour, method="full")
        return self._run

    @rank_zero_only
    def log_hyperparams(self, params: Any, *args: Any, **kwargs: Any) -> None:
        run = self.experiment
        plain = dict(params) if isinstance(params, dict) else dict(vars(params)) if hasattr(params, "__dict__") else {}
        run.config.update(plain)
        if run.adhoc is not None:
            run.adhoc.update_config(plain)

    @rank_zero_only
    def log_metrics(self, metrics: dict[str, Any], step: int | None = None) -> None:
        self.experiment  # noqa: B018 (starts the run on the first metrics)
        track.log({k: float(v) for k, v in metrics.items() if _is_number(v)}, step=step)

    @rank_zero_only
    def finalize(self, status: str) -> None:
        if self._run is None or self.finished is not None:
            return
        self.finished = track.finish(0 if status in ("success", "finished") else 1)


def _is_number(value: Any) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return not isinstance(value, bool)
