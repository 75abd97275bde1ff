"""The spec language: pydantic models of `kind: sweep` and `kind: capacity`, a bounded YAML loader
that keeps line/column positions, precise error messages, and grid/random expansion into trials.

Every problem in a spec is reported at once, one line each, as `FILE:LINE:COL: field.path: message`
(see `SpecError`). Modules: `types` (durations, money, enumerations), `models` (pydantic models of
`kind: sweep`, the union of both kinds, JSON Schema), `capacity_models` (those of `kind: capacity`),
`base` (what both share), `yamlpos` (bounded YAML with positions), `problems` (located messages), `checks`
(cross-field checks), `templates` (task placeholders and their safe rendering), `ids` (trial and
sweep ids), `exclusions` (`search.exclude`), `expand` (grid/random expansion), `load` (`parse_spec`, `load_spec`).

The names below are served from their modules, each imported on first use (PEP 562): importing
`gpuledger.spec.types` or loading a sweep spec does not build the capacity models (issue 38's start-up).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: each public name -> the module of this package that defines it
_WHERE = {
    **dict.fromkeys(("CapacityResources", "CapacitySpec", "EngineArgs", "MeasuredPoint", "MeasuredRate", "Slo",
                     "Traffic"), "capacity_models"),
    **dict.fromkeys(("Trial", "expand_trials", "grid_size", "iter_trials"), "expand"),
    **dict.fromkeys(("spec_hash", "sweep_id_for", "trial_id_for"), "ids"),
    **dict.fromkeys(("load_spec", "parse_spec"), "load"),
    **dict.fromkeys(("Budget", "Local", "Objective", "RandomRange", "Resources", "Search", "SweepSpec", "Task",
                     "Train", "json_schema"), "models"),
    **dict.fromkeys(("Problem", "SpecError"), "problems"),
    **dict.fromkeys(("KNOWN_FIELDS", "render_command", "template_fields", "template_values"), "templates"),
    **dict.fromkeys(("MAX_TRIALS", "parse_duration", "parse_money"), "types"),
}

__all__ = [
    "KNOWN_FIELDS", "MAX_TRIALS", "Budget", "CapacityResources", "CapacitySpec", "EngineArgs", "Local", "MeasuredPoint", "MeasuredRate", "Objective",
    "Problem", "RandomRange", "Resources", "Search", "Slo", "SpecError", "SweepSpec", "Task", "Traffic",
    "Train", "Trial", "expand_trials", "grid_size", "iter_trials", "json_schema", "load_spec", "parse_duration",
    "parse_money", "parse_spec", "render_command", "spec_hash", "sweep_id_for", "template_fields",
    "template_values", "trial_id_for",
]


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{where}"), name)
    globals()[name] = value  # once: later look-ups are plain attributes
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_WHERE})


if TYPE_CHECKING:
    from gpuledger.spec.capacity_models import (
        CapacityResources,
        CapacitySpec,
        EngineArgs,
        MeasuredPoint,
        MeasuredRate,
        Slo,
        Traffic,
    )
    from gpuledger.spec.expand import Trial, expand_trials, grid_size, iter_trials
    from gpuledger.spec.ids import spec_hash, sweep_id_for, trial_id_for
    from gpuledger.spec.load import load_spec, parse_spec
    from gpuledger.spec.models import (
        Budget,
        Local,
        Objective,
        RandomRange,
        Resources,
        Search,
        SweepSpec,
        Task,
        Train,
        json_schema,
    )
    from gpuledger.spec.problems import Problem, SpecError
    from gpuledger.spec.templates import KNOWN_FIELDS, render_command, template_fields, template_values
    from gpuledger.spec.types import MAX_TRIALS, parse_duration, parse_money
