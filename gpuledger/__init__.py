"""gpuledger: plan, launch, measure and account for GPU experiments.

    import gpuledger as gl
    ledger = gl.Ledger()                       # gpuledger.api.Ledger, imported on first use
    verdict = ledger.plan("specs/lora-grid.yaml")

`import gpuledger` stays cheap (a trial imports `gpuledger.track`): the application layer is
imported only when one of its names is asked for (PEP 562 module `__getattr__`).
"""
__version__ = "0.1.0"

#: names of `gpuledger.api` served from the package itself
_API_NAMES = ("Ledger", "PlanVerdict", "SpecCheck", "SweepStatus")


def __getattr__(name: str):
    if name in _API_NAMES:
        import gpuledger.api

        return getattr(gpuledger.api, name)
    raise AttributeError(f"module 'gpuledger' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_API_NAMES])
