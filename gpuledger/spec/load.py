"""Loading a spec: YAML text or a file to a validated model, or a SpecError with every problem."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

from gpuledger.safeyaml import FileRefused, read_text_file
from gpuledger.spec.checks import _semantic_problems
from gpuledger.spec.expand import grid_size, has_ranges
from gpuledger.spec.models import SweepSpec
from gpuledger.spec.problems import Problem, SpecError, _dotted, _kind_model, _problems_from_validation
from gpuledger.spec.strict import scalar_problems
from gpuledger.spec.yamlpos import _load_yaml

if TYPE_CHECKING:
    from gpuledger.spec.capacity_models import CapacitySpec


def parse_spec(text: str, filename: str = "<spec>") -> SweepSpec | CapacitySpec:
    """Returns the validated spec of YAML `text`; raises SpecError listing every problem.

    The spec is validated by its own kind's model (`kind`, read from the mapping first): a sweep spec
    does not import the capacity models (issue 38's start-up)."""
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
        if "__text__" in path:  # (..., "__text__", N, name, k): the k-th {name}, on line N of a scalar's text
            at = path.index("__text__")
            scalar, n, name, k = path[:at], path[at + 1], path[at + 2], path[at + 3]
            folded = positions.get((*scalar, "__folded__"))
            if folded:  # a folded scalar's lines are not the file's: the file line of the k-th {name}
                lines = text.splitlines()[folded[0] - 1: folded[1]]
                hits = [i for i, s in enumerate(lines) for _ in range(s.count("{" + name + "}"))]
                return (folded[0] + hits[min(k, len(hits) - 1)] if hits else folded[0], 1)
            line, col = positions.get((*scalar, "__text__")) or located(scalar)
            return (line + n, col if n == 0 else 1)
        if path and path[-1] == "__key__":  # a problem about a key itself
            if path in positions:
                return positions[path]
            path = path[:-1]
        key = path
        while key and key not in positions:
            key = key[:-1]
        return positions.get(key, (1, 1))

    def problem(path: tuple, message: str) -> Problem:
        shown = path[: path.index("__text__")] if "__text__" in path else path
        return Problem(filename, *located(path), _dotted(tuple(p for p in shown if p != "__key__")), message)

    semantic = [problem(path, msg) for path, msg in _semantic_problems(data)]
    model = _kind_model(kind)
    strict = [problem(path, msg) for path, msg in scalar_problems(data, model)]
    try:
        spec = model.model_validate(data)
    except ValidationError as exc:
        strict_paths = {p.path for p in strict}  # the strict reading's message is the precise one
        problems += [p for p in _problems_from_validation(exc, positions, filename, kind, data, tagged=False)
                     if p.path not in strict_paths] + strict
        problems += [p for p in semantic if (p.path, p.message) not in {(q.path, q.message) for q in problems}]
        raise SpecError(sorted(problems, key=lambda p: (p.line, p.col))) from None
    problems += strict
    spec._positions = positions
    spec._source = filename
    problems += semantic
    if (not problems and isinstance(spec, SweepSpec) and spec.search.strategy != "random" and not has_ranges(spec)
            and grid_size(spec) == 0):
        problems.append(Problem(filename, *located(("search", "exclude")), "search.exclude", "the exclude rules leave no trial"))
    if problems:
        raise SpecError(sorted(problems, key=lambda p: (p.line, p.col)))
    return spec


def load_spec(path: str | Path) -> SweepSpec | CapacitySpec:
    """Returns the validated spec in file `path`; raises SpecError (a UserError).

    Only a regular file of at most 256 KiB is read (`gpuledger.safeyaml.read_text_file`): a
    directory, `/dev/zero` or a FIFO is refused at once, in one line."""
    try:
        text = read_text_file(path)
    except FileRefused as err:
        raise SpecError([Problem(err.path, 1, 1, "", err.reason)]) from None
    return parse_spec(text, str(path))
