"""Modules imported on their first use, so that a command that never touches them never pays for them.

    from gpuledger.warehouse.lazy import polars as pl      # nothing imported yet
    pl.DataFrame(...)                            # polars is imported here, once

`gpuledger sql` reads through the warehouse package, whose writing mixins work in polars frames; with
polars behind this proxy a query that never builds a frame (the CLI's rows) starts without it (about
2 s of a loaded 2-core machine's time; tests/unit/test_startup.py keeps it so). Annotations stay
strings (`from __future__ import annotations`), so `-> pl.DataFrame` costs nothing.
"""

from __future__ import annotations

import importlib
import types
from typing import Any


class LazyModule(types.ModuleType):
    """A stand-in for the module `name` that imports it on the first attribute asked of it."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.__dict__["_lazy_target"] = name

    def __getattr__(self, attr: str) -> Any:
        return getattr(importlib.import_module(self.__dict__["_lazy_target"]), attr)

    def __dir__(self) -> list[str]:
        return dir(importlib.import_module(self.__dict__["_lazy_target"]))


polars = LazyModule("polars")
