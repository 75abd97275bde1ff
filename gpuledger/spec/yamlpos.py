"""YAML with positions."""

from __future__ import annotations

import re
from typing import Any

import yaml

from gpuledger.spec.problems import Problem


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

