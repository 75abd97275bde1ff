"""Strict scalars where it matters, checked on the raw mapping against the models' fields.

Pydantic's lax mode reads `true` as the number 1 (`max_parallel: true` ran one trial at a time),
`1` or `"yes"` as true, and `.inf` as a number. Here, for every field of every model (fields added
later included): a field that takes numbers but not true/false refuses true/false; a field that takes
only true/false refuses anything else; a number must be finite.
"""

from __future__ import annotations

import math
import numbers
from typing import Annotated, Any, get_args, get_origin

from pydantic import BaseModel

#: The largest count or amount any face takes (a spec's counts, the CLI's whole numbers, the Python API's and the
#: MCP tools' estimator fields): beyond it no estimate or plan means anything. `gpuledger.spec.types.parse_count`
#: and `gpuledger.estimate.Workload` refuse more.
MAX_COUNT = 10**15

_LAX_BOOL_TEXT = {"0", "off", "f", "false", "n", "no", "1", "on", "t", "true", "y", "yes"}


def _admits(annotation: Any) -> set[type]:
    """Returns the scalar types (bool, int, float, str) a field annotation admits; Any admits all."""
    if annotation is Any:
        return {bool, int, float, str}
    if annotation in (bool, int, float, str):
        return {annotation}
    if get_origin(annotation) in (list, dict, tuple, set):
        return set()
    args = get_args(annotation)
    out: set[type] = set()
    for arg in args[:1] if get_origin(annotation) is Annotated else args:
        out |= _admits(arg)
    return out


def _models_in(annotation: Any) -> tuple[type[BaseModel] | None, str]:
    """Returns (model, how) where the annotation holds a model directly ("one"), as list items
    ("list") or as mapping values ("dict"); (None, "") otherwise."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, "one"
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is list and args:
        model, how = _models_in(args[0])
        return (model, "list") if how == "one" else (None, "")
    if origin is dict and len(args) == 2:
        model, how = _models_in(args[1])
        return (model, "dict") if how == "one" else (None, "")
    for arg in args[:1] if origin is Annotated else args:
        model, how = _models_in(arg)
        if model is not None:
            return model, how
    return None, ""


def scalar_problems(data: Any, model: type[BaseModel], path: tuple = ()) -> list[tuple[tuple, str]]:
    """Returns (path, message) for each value of `data` that the lax reading would take wrongly."""
    out: list[tuple[tuple, str]] = []
    if not isinstance(data, dict):
        return out
    for name, value in data.items():
        field = model.model_fields.get(name) if isinstance(name, str) else None
        if field is None:
            continue
        sub = (*path, name)
        admits = _admits(field.annotation)
        if isinstance(value, bool):
            if admits and bool not in admits and (int in admits or float in admits):
                out.append((sub, f"expected a number, not {str(value).lower()}"))
        elif admits == {bool} and (isinstance(value, int | float) or
                                   isinstance(value, str) and value.strip().lower() in _LAX_BOOL_TEXT):
            out.append((sub, f"expected true or false (got {value!r})"))
        elif isinstance(value, float) and not math.isfinite(value) and admits & {int, float}:
            out.append((sub, f"must be a finite number (got {value})"))
        inner, how = _models_in(field.annotation)
        if inner is None:
            continue
        if how == "one":
            out += scalar_problems(value, inner, sub)
        elif how == "list" and isinstance(value, list):
            for i, item in enumerate(value):
                out += scalar_problems(item, inner, (*sub, i))
        elif how == "dict" and isinstance(value, dict):
            for key, item in value.items():
                out += scalar_problems(item, inner, (*sub, key))
    return out


def number_problem(value: Any, annotation: Any) -> str | None:
    """Returns why a field of `annotation` that takes numbers (and not text) refuses `value` beyond
    `scalar_problems`: text where a program passes a number (`seq_len="2048"`), a number above
    `MAX_COUNT`; None when it takes it."""
    admits = _admits(annotation)
    if not admits & {int, float} or isinstance(value, bool):
        return None
    if isinstance(value, str) and str not in admits:
        return f"expected a number, not the text {value!r}"
    if isinstance(value, numbers.Real) and math.isfinite(value) and abs(value) > MAX_COUNT:
        return f"{value!r} is too large (at most {MAX_COUNT:.0e})"
    return None
