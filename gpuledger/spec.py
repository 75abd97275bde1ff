"""The spec language: pydantic models of `kind: sweep` and `kind: capacity`, YAML loading that keeps
line/column positions, precise error messages, and grid/random expansion into trials.

Every problem in a spec is reported at once, one line each, as
`FILE:LINE:COL: field.path: message` (see `SpecError`). Values of search parameters reach a shell
command only through `shlex.quote`.
"""

from __future__ import annotations

import difflib
import hashlib
import itertools
import json
import math
import random
import re
import shlex
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    TypeAdapter,
    ValidationError,
    field_validator,
)

from gpuledger.errors import UserError

# --------------------------------------------------------------------------------------------
# Scalar types


_DURATION_RE = re.compile(r"(\d+(?:\.\d+)?)\s*(d|h|m|s)", re.IGNORECASE)
_DURATION_UNIT_S = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}


def parse_duration(value: Any) -> float:
    """Returns seconds for `8h`, `90m`, `2d`, `1h30m`, `45s` or a bare number of seconds."""
    if isinstance(value, bool):
        raise ValueError(f"expected a duration like 8h, 90m or 2d (got {value!r})")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip().replace(" ", "")
        pos, seconds, matched = 0, 0.0, False
        for m in _DURATION_RE.finditer(text):
            if m.start() != pos:
                break
            seconds += float(m.group(1)) * _DURATION_UNIT_S[m.group(2).lower()]
            pos, matched = m.end(), True
        if not matched or pos != len(text):
            raise ValueError(f"expected a duration like 8h, 90m, 2d or 1h30m (got {value!r})")
    else:
        raise ValueError(f"expected a duration like 8h, 90m or 2d (got {value!r})")
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"must be a positive duration (got {value!r})")
    return seconds


def parse_money(value: Any) -> float:
    """Returns US dollars for `300`, `300.50`, `"$1,200"` or `"1200 USD"`; rejects negatives."""
    if isinstance(value, bool):
        raise ValueError(f"expected an amount of US dollars like 300 or '$1,200' (got {value!r})")
    if isinstance(value, str):
        text = value.strip().replace(",", "").replace("_", "")
        text = re.sub(r"(?i)^\$|\s*usd$", "", text).strip()
        try:
            amount = float(text)
        except ValueError:
            raise ValueError(f"expected an amount of US dollars like 300 or '$1,200' (got {value!r})") from None
    elif isinstance(value, int | float):
        amount = float(value)
    else:
        raise ValueError(f"expected an amount of US dollars like 300 (got {value!r})")
    if not math.isfinite(amount) or amount < 0:
        raise ValueError(f"must be a non-negative amount of US dollars (got {value!r})")
    return amount


def _normalize_accelerator(value: Any) -> str:
    from gpuledger.catalog import UnknownAccelerator, normalize_accelerator

    if not isinstance(value, str):
        raise ValueError(f"expected an accelerator name like H100 or A100-80GB (got {value!r})")
    try:
        return normalize_accelerator(value)
    except UnknownAccelerator as err:
        raise ValueError(str(err)) from None


Duration = Annotated[float, BeforeValidator(parse_duration)]
Money = Annotated[float, BeforeValidator(parse_money)]
Accelerator = Annotated[str, BeforeValidator(_normalize_accelerator)]
Scalar = str | int | float | bool
Cloud = Literal["aws", "gcp", "azure", "lambda", "nebius", "vast", "runpod", "oci", "kubernetes"]
Method = Literal["full", "lora", "qlora", "grpo", "ppo"]
Precision = Literal["fp32", "bf16", "fp16", "bf16-mixed", "fp16-mixed", "fp8", "int8", "int4", "nf4"]
Optimizer = Literal["adamw", "adamw-8bit", "paged-adamw-8bit", "sgd", "adafactor"]
Sharding = Literal["auto", "none", "ddp", "zero1", "zero2", "zero3", "fsdp"]

NAME_PATTERN = r"^[a-z0-9][a-z0-9-]{0,62}$"
LABEL_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,62}$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# --------------------------------------------------------------------------------------------
# kind: sweep


class Objective(_Strict):
    metric: str = Field(min_length=1, description="name of the metric the trial reports, e.g. eval_loss")
    goal: Literal["minimize", "maximize"] = "minimize"
    target: float | None = Field(None, description="good-enough value; time/cost to reach it are reported")


class RandomRange(_Strict):
    """A continuous or integer range for `strategy: random`."""

    low: float
    high: float
    log: bool = False
    type: Literal["float", "int"] = "float"


ParamValues = list[Scalar] | RandomRange


class Search(_Strict):
    strategy: Literal["grid", "random"] = "grid"
    params: dict[str, ParamValues] = Field(min_length=1)
    n_trials: int | None = Field(None, ge=1, le=100_000)
    seed: int = 0
    exclude: list[dict[str, Scalar | list[Scalar]]] = Field(
        default_factory=list, description="a trial matching every key of one rule is left out"
    )
    objective: Objective

    @field_validator("params")
    @classmethod
    def _param_names(cls, params: dict[str, Any]) -> dict[str, Any]:
        for name in params:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                raise ValueError(f"parameter name {name!r} must be an identifier (letters, digits, _)")
        return params


class Train(_Strict):
    seq_len: int = Field(2048, ge=1, le=10_000_000)
    tokens_per_trial: int | None = Field(None, ge=1, description="training tokens per trial (for time and cost)")
    micro_batch: int = Field(1, ge=1)
    grad_checkpointing: bool = True
    flash_attention: bool = True
    optimizer: Optimizer = "adamw"
    lora_r: int = Field(16, ge=1)
    lora_targets: str = "q,v"
    sharding: Sharding = "auto"
    prompt_len: int | None = Field(None, ge=1)
    completion_len: int | None = Field(None, ge=1)
    group_size: int | None = Field(None, ge=1)


class Resources(_Strict):
    accelerators: list[Accelerator] = Field(default_factory=list)
    gpus_per_trial: Literal["auto"] | Annotated[int, Field(ge=1, le=8)] = "auto"
    clouds: list[Cloud] = Field(default_factory=lambda: ["aws", "gcp"])
    regions: list[str] | None = None
    spot: Literal["auto", "always", "never"] = "auto"
    max_parallel: int = Field(4, ge=1, le=1024)
    preemption_per_hour: float | None = Field(
        None, ge=0, le=10, description="overrides the default spot preemption rate (per hour)"
    )
    deadline_confidence: float = Field(0.9, gt=0, lt=1)


class Budget(_Strict):
    max_usd: Money = Field(gt=0)
    deadline: Duration | None = None

    @property
    def deadline_s(self) -> float | None:
        return self.deadline


class Local(_Strict):
    usd_per_hour: Money = 0.0
    trial_timeout: Duration | None = None


class Task(_Strict):
    setup: str | None = None
    run: str = Field(min_length=1)
    workdir: str = "."
    env: dict[str, str] = Field(default_factory=dict)

    @field_validator("env")
    @classmethod
    def _env_names(cls, env: dict[str, str]) -> dict[str, str]:
        for key in env:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
                raise ValueError(f"environment variable name {key!r} is not valid")
        return env


class _SpecBase(_Strict):
    name: str = Field(pattern=NAME_PATTERN, description="[a-z0-9-]+; used in file names")
    project: str = Field(pattern=LABEL_PATTERN)
    owner: str = Field(pattern=LABEL_PATTERN)
    model: str = Field(min_length=1, description="a registry name, or a path to an HF config.json")
    precision: Precision = "bf16"

    _positions: dict[tuple, tuple[int, int]] = PrivateAttr(default_factory=dict)
    _source: str = PrivateAttr(default="<spec>")

    def position(self, *path: str | int) -> tuple[str, int, int]:
        """Returns (file, line, column) of a field, or of its nearest located parent."""
        key = tuple(path)
        while key and key not in self._positions:
            key = key[:-1]
        line, col = self._positions.get(key, (1, 1))
        return self._source, line, col


class SweepSpec(_SpecBase):
    kind: Literal["sweep"]
    method: Method = "lora"
    train: Train = Field(default_factory=Train)
    search: Search
    resources: Resources = Field(default_factory=Resources)
    budget: Budget
    launcher: Literal["local", "skypilot"] = "local"
    local: Local = Field(default_factory=Local)
    task: Task


class Traffic(_Strict):
    qps: float = Field(gt=0, description="requests per second at peak")
    prompt_tokens: int = Field(ge=1)
    output_tokens: int = Field(ge=1)


class Slo(_Strict):
    p95_ttft_ms: float = Field(gt=0, description="time to first token, 95th percentile (ms)")
    p95_tpot_ms: float = Field(gt=0, description="time per output token, 95th percentile (ms)")


class CapacityResources(_Strict):
    accelerators: list[Accelerator] = Field(min_length=1)
    clouds: list[Cloud] = Field(default_factory=lambda: ["aws", "gcp"])
    regions: list[str] | None = None
    max_gpus_per_replica: int = Field(8, ge=1, le=8)


class MeasuredRate(_Strict):
    tokens_per_s_per_gpu: float = Field(gt=0, description="output tokens/s one GPU sustained, prefill included")


class CapacitySpec(_SpecBase):
    kind: Literal["capacity"]
    traffic: Traffic
    slo: Slo
    headroom: float = Field(0.2, ge=0, le=10, description="extra capacity above peak, 0.2 = 20%")
    resources: CapacityResources
    measured: dict[Accelerator, MeasuredRate] = Field(default_factory=dict)


Spec = Annotated[SweepSpec | CapacitySpec, Field(discriminator="kind")]
_SPEC_ADAPTER: TypeAdapter = TypeAdapter(Spec)


def json_schema() -> dict[str, Any]:
    """Returns the JSON Schema of both spec kinds (for editor completion)."""
    schema = _SPEC_ADAPTER.json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "gpuledger spec"
    return schema


# --------------------------------------------------------------------------------------------
# Errors


@dataclass(frozen=True)
class Problem:
    file: str
    line: int
    col: int
    path: str
    message: str

    def __str__(self) -> str:
        where = f"{self.path}: " if self.path else ""
        return f"{self.file}:{self.line}:{self.col}: {where}{self.message}"


class SpecError(UserError):
    """Every problem of one spec; `str()` is one line per problem."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


# --------------------------------------------------------------------------------------------
# YAML with positions


class _Loader(yaml.SafeLoader):
    """SafeLoader that reads floats the YAML 1.2 way (`3e-4` is a float, not a string)."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
        |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
        |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
        |[-+]?\.(?:inf|Inf|INF)
        |\.(?:nan|NaN|NAN))$""",
        re.X,
    ),
    list("-+0123456789."),
)


def _load_yaml(text: str, filename: str) -> tuple[Any, dict[tuple, tuple[int, int]], list[Problem]]:
    """Returns (data, positions, problems): positions map a key path to (line, col), 1-based."""
    try:
        root = yaml.compose(text, Loader=_Loader)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        msg = " ".join(str(x) for x in (err.context, err.problem) if x)
        return None, {}, [Problem(filename, line, col, "", f"YAML syntax error: {msg}")]
    except yaml.YAMLError as err:
        return None, {}, [Problem(filename, 1, 1, "", f"YAML error: {err}")]
    positions: dict[tuple, tuple[int, int]] = {}
    problems: list[Problem] = []
    constructor = _Loader("")

    def build(node: yaml.Node, path: tuple) -> Any:
        positions.setdefault(path, (node.start_mark.line + 1, node.start_mark.column + 1))
        if isinstance(node, yaml.MappingNode):
            out: dict[Any, Any] = {}
            for key_node, value_node in node.value:
                key = constructor.construct_object(key_node, deep=True)
                if not isinstance(key, str | int | float | bool):
                    key = str(key)
                sub = (*path, key)
                kpos = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
                if key in out:
                    first = positions.get((*sub, "__key__"), (0, 0))[0]
                    problems.append(
                        Problem(filename, *kpos, ".".join(map(str, sub)), f"duplicate key (first given on line {first})")
                    )
                    continue
                positions[(*sub, "__key__")] = kpos
                positions[sub] = (value_node.start_mark.line + 1, value_node.start_mark.column + 1)
                out[key] = build(value_node, sub)
            return out
        if isinstance(node, yaml.SequenceNode):
            return [build(item, (*path, i)) for i, item in enumerate(node.value)]
        return constructor.construct_object(node, deep=True)

    if root is None:
        return None, positions, [Problem(filename, 1, 1, "", "the spec is empty")]
    return build(root, ()), positions, problems


# --------------------------------------------------------------------------------------------
# Validation errors -> problems


def _model_at(loc: tuple) -> type[BaseModel] | None:
    """Returns the pydantic model class that owns the field at `loc` (loc[0] is the kind tag)."""
    model: Any = {"sweep": SweepSpec, "capacity": CapacitySpec}.get(loc[0]) if loc else None
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
    exc: ValidationError, positions: dict[tuple, tuple[int, int]], filename: str, kind: str, data: Any
) -> list[Problem]:
    errors = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        if loc and loc[0] == kind:  # discriminated union: the tag comes first
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


# --------------------------------------------------------------------------------------------
# Semantic checks (after the models validate)

#: Placeholders a task template may use besides the search parameters.
KNOWN_FIELDS = frozenset(
    {"trial_id", "trial_index", "sweep_id", "name", "project", "owner", "model", "method", "precision"}
    | set(Train.model_fields)
)


def template_fields(template: str) -> list[str]:
    """Returns the placeholder names of a `{name}` template; raises ValueError on bad syntax."""
    names = []
    for _literal, field, fmt, conv in string.Formatter().parse(template):
        if field is None:
            continue
        if not field or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", field):
            raise ValueError(f"placeholder {{{field}}} must be a plain name like {{lora_r}}")
        if fmt or conv:
            raise ValueError(f"placeholder {{{field}}} may not carry a format or conversion")
        names.append(field)
    return names


def _semantic_problems(data: dict[str, Any]) -> list[tuple[tuple, str]]:
    """Returns (path, message) for cross-field mistakes, read from the raw mapping so that they are
    reported together with type errors (every problem at once). Tolerates malformed parts."""
    out: list[tuple[tuple, str]] = []

    def mapping(value: Any) -> dict:
        return value if isinstance(value, dict) else {}

    if data.get("kind") == "capacity":
        accs = mapping(data.get("resources")).get("accelerators")
        accs = {str(a).lower() for a in accs} if isinstance(accs, list) else set()
        for acc in mapping(data.get("measured")):
            if accs and str(acc).lower() not in accs:
                out.append((("measured", acc), f"{acc} is not among resources.accelerators"))
        return out
    search = mapping(data.get("search"))
    params = mapping(search.get("params"))
    strategy = search.get("strategy", "grid")
    for name, values in params.items():
        if strategy == "grid" and isinstance(values, dict):
            out.append((("search", "params", name), "a grid needs a list of values; ranges are for strategy: random"))
        elif isinstance(values, list) and not values:
            out.append((("search", "params", name), "empty list of values: the grid would have no trials"))
        elif isinstance(values, dict) and isinstance(values.get("low"), int | float) and isinstance(values.get("high"), int | float):
            if values["high"] < values["low"]:
                out.append((("search", "params", name), f"high ({values['high']}) is below low ({values['low']})"))
            if values.get("log") and values["low"] <= 0:
                out.append((("search", "params", name), "a log range needs low > 0"))
    if strategy == "random" and search.get("n_trials") is None:
        out.append((("search", "strategy"), "strategy: random needs n_trials (how many trials to draw)"))
    exclude = search.get("exclude")
    for i, rule in enumerate(exclude if isinstance(exclude, list) else []):
        for key in mapping(rule):
            if params and key not in params:
                close = difflib.get_close_matches(str(key), list(params), n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                out.append((("search", "exclude", i, key, "__key__"), f"{key!r} is not a search parameter{hint}"))
    allowed = set(params) | KNOWN_FIELDS
    task = mapping(data.get("task"))
    for part in ("setup", "run"):
        template = task.get(part)
        if not isinstance(template, str):
            continue
        try:
            names = template_fields(template)
        except ValueError as err:
            out.append((("task", part), str(err)))
            continue
        for name in names:
            if name not in allowed:
                close = difflib.get_close_matches(name, sorted(allowed), n=1, cutoff=0.5)
                hint = f"; did you mean {{{close[0]}}}?" if close else ""
                out.append((("task", part), f"unknown placeholder {{{name}}}: not a search parameter or known field{hint}"))
    resources = mapping(data.get("resources"))
    if data.get("launcher") == "skypilot" and not resources.get("accelerators"):
        out.append((("resources", "accelerators"), "launcher: skypilot needs at least one accelerator"))
    method = data.get("method")
    if method in ("grpo", "ppo") and mapping(data.get("train")).get("completion_len") is None:
        out.append((("train", "completion_len"), f"method {method} needs train.completion_len"))
    return out


# --------------------------------------------------------------------------------------------
# Loading


def parse_spec(text: str, filename: str = "<spec>") -> SweepSpec | CapacitySpec:
    """Returns the validated spec of YAML `text`; raises SpecError listing every problem."""
    data, positions, problems = _load_yaml(text, filename)
    if data is None and problems:
        raise SpecError(problems)
    if not isinstance(data, dict):
        raise SpecError(problems + [Problem(filename, 1, 1, "", "a spec must be a mapping (key: value lines)")])
    kind = data.get("kind")
    if kind not in ("sweep", "capacity"):
        line, col = positions.get(("kind",), (1, 1))
        msg = "required field is missing (sweep or capacity)" if kind is None else f"must be one of sweep, capacity (got {kind!r})"
        raise SpecError(problems + [Problem(filename, line, col, "kind", msg)])
    def located(path: tuple) -> tuple[int, int]:
        if path and path[-1] == "__key__":  # a problem about a key itself
            if path in positions:
                return positions[path]
            path = path[:-1]
        key = path
        while key and key not in positions:
            key = key[:-1]
        return positions.get(key, (1, 1))

    semantic = [Problem(filename, *located(path), _dotted(tuple(p for p in path if p != "__key__")), msg) for path, msg in _semantic_problems(data)]
    try:
        spec = _SPEC_ADAPTER.validate_python(data)
    except ValidationError as exc:
        problems += _problems_from_validation(exc, positions, filename, kind, data)
        problems += [p for p in semantic if (p.path, p.message) not in {(q.path, q.message) for q in problems}]
        raise SpecError(sorted(problems, key=lambda p: (p.line, p.col))) from None
    spec._positions = positions
    spec._source = filename
    problems += semantic
    if not problems and isinstance(spec, SweepSpec) and spec.search.strategy == "grid" and grid_size(spec) == 0:
        problems.append(Problem(filename, *located(("search", "exclude")), "search.exclude", "the exclude rules leave no trial"))
    if problems:
        raise SpecError(sorted(problems, key=lambda p: (p.line, p.col)))
    return spec


def load_spec(path: str | Path) -> SweepSpec | CapacitySpec:
    """Returns the validated spec in file `path`; raises SpecError (a UserError)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError([Problem(str(path), 1, 1, "", "no such file")]) from None
    except IsADirectoryError:
        raise SpecError([Problem(str(path), 1, 1, "", "is a directory, not a spec file")]) from None
    except (OSError, UnicodeDecodeError) as err:
        raise SpecError([Problem(str(path), 1, 1, "", f"cannot read: {err}")]) from None
    return parse_spec(text, str(path))


# --------------------------------------------------------------------------------------------
# Trials


@dataclass(frozen=True)
class Trial:
    """One point of the search: its stable id, parameters and rendered commands."""

    index: int
    trial_id: str
    params: dict[str, Any]
    run: str
    setup: str | None


def trial_id_for(name: str, params: dict[str, Any]) -> str:
    """Returns a stable trial id: 12 hex of sha256(spec name + canonical JSON of params)."""
    blob = name + "\0" + json.dumps(params, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def _excluded(params: dict[str, Any], rules: list[dict[str, Any]]) -> bool:
    for rule in rules:
        if all(params.get(k) in (v if isinstance(v, list) else [v]) for k, v in rule.items()):
            return True
    return False


def grid_size(spec: SweepSpec) -> int:
    """Returns the number of trials a grid spec expands to (product of values minus exclusions)."""
    return sum(1 for _ in _grid_points(spec))


def _grid_points(spec: SweepSpec):
    names = list(spec.search.params)
    lists = [spec.search.params[n] for n in names]
    for combo in itertools.product(*lists):
        params = dict(zip(names, combo, strict=True))
        if not _excluded(params, spec.search.exclude):
            yield params


def _random_points(spec: SweepSpec):
    s = spec.search
    rng = random.Random(s.seed)
    seen: set[str] = set()
    n = s.n_trials or 0
    attempts = 0
    while len(seen) < n and attempts < n * 50:
        attempts += 1
        params: dict[str, Any] = {}
        for name, values in s.params.items():
            if isinstance(values, RandomRange):
                lo, hi = values.low, values.high
                x = math.exp(rng.uniform(math.log(lo), math.log(hi))) if values.log else rng.uniform(lo, hi)
                params[name] = int(round(x)) if values.type == "int" else float(f"{x:.6g}")
            else:
                params[name] = rng.choice(values)
        key = json.dumps(params, sort_keys=True, default=str)
        if key in seen or _excluded(params, s.exclude):
            continue
        seen.add(key)
        yield params


def _format_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def render_command(template: str, values: dict[str, Any]) -> str:
    """Returns `template` with each `{name}` replaced by the shell-quoted value (`shlex.quote`)."""
    quoted = {k: shlex.quote(_format_value(v)) for k, v in values.items()}
    return template.format_map(quoted)


def template_values(spec: SweepSpec, params: dict[str, Any], trial_id: str, index: int) -> dict[str, Any]:
    """Returns the values a task template may use: known fields, overridden by the search params."""
    values: dict[str, Any] = dict(spec.train.model_dump())
    values.update(
        trial_id=trial_id, trial_index=index, sweep_id=sweep_id_for(spec), name=spec.name,
        project=spec.project, owner=spec.owner, model=spec.model, method=spec.method,
        precision=spec.precision,
    )
    values.update(params)
    return values


def expand_trials(spec: SweepSpec) -> list[Trial]:
    """Returns the trials of a sweep spec, in a stable order, each with its rendered commands."""
    points = _grid_points(spec) if spec.search.strategy == "grid" else _random_points(spec)
    trials = []
    for index, params in enumerate(points):
        tid = trial_id_for(spec.name, params)
        values = template_values(spec, params, tid, index)
        trials.append(
            Trial(
                index=index,
                trial_id=tid,
                params=params,
                run=render_command(spec.task.run, values),
                setup=render_command(spec.task.setup, values) if spec.task.setup else None,
            )
        )
    return trials


def spec_hash(spec: SweepSpec | CapacitySpec) -> str:
    """Returns sha256 of what makes a sweep the same experiment (not its budget or parallelism)."""
    data = spec.model_dump(mode="json")
    for volatile in ("budget", "resources", "launcher", "local", "owner", "project"):
        data.pop(volatile, None)
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def sweep_id_for(spec: SweepSpec | CapacitySpec) -> str:
    """Returns the stable sweep id `NAME-XXXXXXXX`: a re-run of the same spec continues it."""
    return f"{spec.name}-{spec_hash(spec)[:8]}"
