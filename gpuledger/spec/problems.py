"""Spec problems: one located line each (`FILE:LINE:COL: field.path: message`), and the
translation of pydantic validation errors into such lines."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from gpuledger.errors import UserError


@dataclass(frozen=True)
class Problem:
    file: str
    line: int
    col: int
    path: str
    message: str

    def __str__(self) -> str:
        where = f"{self.path}: " if self.path else ""
        return _one_line(f"{self.file}:{self.line}:{self.col}: {where}{self.message}")


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _one_line(text: str) -> str:
    """Returns `text` with control characters (a newline in a key or a value) written as escapes,
    so that each problem stays one line."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)


class SpecError(UserError):
    """Every problem of one spec; `str()` is one line per problem."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))



def _kind_model(kind: Any) -> type[BaseModel] | None:
    """Returns the model of spec kind `kind` (None for another value), importing only that kind's models."""
    if kind == "sweep":
        from gpuledger.spec.models import SweepSpec

        return SweepSpec
    if kind == "capacity":
        from gpuledger.spec.capacity_models import CapacitySpec

        return CapacitySpec
    return None


def _model_at(loc: tuple) -> type[BaseModel] | None:
    """Returns the pydantic model class that owns the field at `loc` (loc[0] is the kind tag)."""
    model: Any = _kind_model(loc[0]) if loc else None
    for part in loc[1:-1]:
        if model is None:
            return None
        field = model.model_fields.get(part) if isinstance(part, str) else None
        if field is None:
            return None
        ann = field.annotation
        model = next(
            (a for a in getattr(ann, "__args__", (ann,)) if isinstance(a, type) and issubclass(a, BaseModel)),
            ann if isinstance(ann, type) and issubclass(ann, BaseModel) else None,
        )
    return model


def _dotted(path: tuple) -> str:
    """Returns `resources.accelerators[1]` for ("resources", "accelerators", 1)."""
    text = ""
    for part in path:
        if isinstance(part, str) and not re.fullmatch(r"[A-Za-z0-9_@.-]+", part):
            part = repr(part)  # a key with spaces or control characters: shown quoted
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _num_text(value: Any) -> str:
    """Returns 0 for 0.0 and 1e-05 for 1e-5: numbers as a person would write them."""
    if isinstance(value, float) and not isinstance(value, bool):
        return f"{value:g}"
    return repr(value)


_BOUNDS = {"greater_than": ">", "greater_than_equal": ">=", "less_than": "<", "less_than_equal": "<="}


def _friendly(err: dict[str, Any]) -> str:
    kind, msg, value = err["type"], err["msg"], err.get("input")
    if kind == "extra_forbidden":
        return "unknown key"
    if kind == "missing":
        return "required field is missing"
    if kind == "literal_error":
        expected = err.get("ctx", {}).get("expected", "")
        options = re.findall(r"'([^']*)'", expected)
        return f"must be one of {', '.join(options)} (got {value!r})"
    if kind == "string_pattern_mismatch":
        if err["loc"][-1] == "name":
            return (
                f"must be lowercase letters, digits and '-' ([a-z0-9-]+, at most 63); it names files, "
                f"so no '/', '.' or spaces (got {value!r})"
            )
        return f"must be letters, digits, '_', '.', '@' or '-' (got {value!r})"
    if kind in _BOUNDS:
        bound = next(iter(err.get("ctx", {}).values()), "?")
        return f"must be {_BOUNDS[kind]} {_num_text(bound)} (got {_num_text(value)})"
    if kind == "too_short" and isinstance(value, list | dict):
        return "must not be empty"
    if kind in ("value_error", "assertion_error"):
        return re.sub(r"^(Value|Assertion) error, ", "", msg)
    text = msg[0].lower() + msg[1:] if msg else kind
    if value is not None and not isinstance(value, dict | list):
        text += f" (got {value!r})"
    return text


def _data_path(loc: tuple, data: Any) -> tuple:
    """Returns the part of a pydantic error location that indexes the data: union member tags
    (`constrained-int`, `literal['auto']`, ...) are dropped; the last element (a missing or unknown
    key) is kept."""
    path, cur = [], data
    for i, part in enumerate(loc):
        if isinstance(cur, dict) and part in cur or isinstance(cur, list) and isinstance(part, int) and 0 <= part < len(cur):
            path.append(part)
            cur = cur[part]
        elif i == len(loc) - 1 and isinstance(cur, dict):
            path.append(part)
    return tuple(path)


def _problems_from_validation(
    exc: ValidationError, positions: dict[tuple, tuple[int, int]], filename: str, kind: str, data: Any,
    tagged: bool = True,
) -> list[Problem]:
    """Returns the located problems of `exc`: from the two-kind union (`tagged`: each location starts with
    the kind tag) or from the spec kind's own model (`tagged=False`: locations start at the spec's keys)."""
    errors = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        if tagged and loc and loc[0] == kind:  # discriminated union: the tag comes first
            loc = loc[1:]
        errors.append((_data_path(loc, data), err))
    # where one value failed every member of a union, a literal's "must be one of auto" is noise
    by_path: dict[tuple, list[str]] = {}
    for path, err in errors:
        by_path.setdefault(path, []).append(err["type"])
    errors = [
        (path, err) for path, err in errors
        if not (err["type"] == "literal_error" and any(t != "literal_error" for t in by_path[path]))
    ]
    problems = []
    for data_loc, err in errors:
        if err["type"] == "extra_forbidden":
            pos = positions.get((*data_loc, "__key__")) or positions.get(data_loc, (1, 1))
        elif err["type"] == "missing":
            pos = positions.get(data_loc[:-1], (1, 1))
        else:
            pos = positions.get(data_loc) or positions.get(data_loc[:-1], (1, 1))
        message = _friendly(err)
        if err["type"] == "extra_forbidden" and data_loc:
            model = _model_at((kind, *data_loc))
            if model is not None:
                close = difflib.get_close_matches(str(data_loc[-1]), list(model.model_fields), n=1, cutoff=0.6)
                if close:
                    message += f"; did you mean {close[0]!r}?"
                else:
                    message += f" (allowed: {', '.join(model.model_fields)})"
        path = _dotted(data_loc)
        problems.append(Problem(filename, pos[0], pos[1], path, message))
    # a union of several alternatives reports each; keep one line per path and message
    seen, unique = set(), []
    for p in problems:
        if (p.path, p.message) not in seen:
            seen.add((p.path, p.message))
            unique.append(p)
    return _collapse_union_noise(unique)


def _collapse_union_noise(problems: list[Problem]) -> list[Problem]:
    """Where one path failed every alternative of a union, keep the clearest message."""
    by_path: dict[str, list[Problem]] = {}
    for p in problems:
        by_path.setdefault(p.path, []).append(p)
    out = []
    for p in problems:
        group = by_path[p.path]
        if len(group) > 1 and p is not group[0]:
            continue
        out.append(p)
    return out

