"""A spec's YAML with positions: the bounded loader of `gpuledger.safeyaml`, then a walk that keeps
each value's (line, column), reports duplicate and non-text keys, and never constructs more than
the node budget allows (aliases are expanded by this walk, so this is where a bomb stops)."""

from __future__ import annotations

from typing import Any

import yaml

from gpuledger.safeyaml import NodeBudget, YamlLimitError, compose
from gpuledger.spec.problems import Problem, _dotted

_KEY_KINDS = {bool: "a boolean (YAML reads yes/no/on/off/true/false so)", int: "an integer", float: "a number",
              type(None): "empty (null)"}
_PLAIN_COLLECTION_TAGS = ("tag:yaml.org,2002:map", "tag:yaml.org,2002:seq")


def _mark(node_or_mark) -> tuple[int, int]:
    mark = getattr(node_or_mark, "start_mark", node_or_mark)
    return (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)


def _load_yaml(text: str, filename: str) -> tuple[Any, dict[tuple, tuple[int, int]], list[Problem]]:
    """Returns (data, positions, problems): positions map a key path to (line, col), 1-based.

    `positions[(*path, "__key__")]` is where a key is written; `positions[(*path, "__text__")]`
    where the text of a scalar starts (the line after `|` or `>` for a block scalar)."""
    try:
        root, loader = compose(text)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        msg = " ".join(str(x) for x in (err.context, err.problem) if x)
        what = "refused" if isinstance(err, YamlLimitError) else "YAML syntax error"
        return None, {}, [Problem(filename, *_mark(mark), "", f"{what}: {msg}")]
    except yaml.reader.ReaderError as err:  # a character YAML does not allow (NUL, other controls)
        before = text[: err.position]
        line, col = before.count("\n") + 1, err.position - (before.rfind("\n") + 1) + 1
        return None, {}, [Problem(filename, line, col, "", f"YAML error: character {err.character!r} is not allowed "
                                                           f"in YAML ({err.reason})")]
    except yaml.YAMLError as err:
        return None, {}, [Problem(filename, 1, 1, "", f"YAML error: {err}")]
    if root is None:
        return None, {}, [Problem(filename, 1, 1, "", "the spec is empty")]
    positions: dict[tuple, tuple[int, int]] = {}
    problems: list[Problem] = []
    budget = NodeBudget(loader)

    def scalar(node: yaml.Node, path: tuple) -> Any:
        try:
            return loader.construct_object(node, deep=True)
        except yaml.MarkedYAMLError as err:  # an unknown tag such as !!python/object
            msg = " ".join(str(x) for x in (err.context, err.problem) if x)
            problems.append(Problem(filename, *_mark(node), _dotted(path), f"YAML error: {msg}"))
        except (ValueError, OverflowError, TypeError) as err:  # an integer of 5,000 digits, a bad !!timestamp
            problems.append(Problem(filename, *_mark(node), _dotted(path), f"cannot read this value: {err}"))
        return None

    def build(node: yaml.Node, path: tuple) -> Any:
        budget.visit(node)
        positions.setdefault(path, _mark(node))
        if isinstance(node, yaml.CollectionNode) and node.tag not in _PLAIN_COLLECTION_TAGS:
            problems.append(Problem(filename, *_mark(node), _dotted(path), f"YAML error: the tag {node.tag} is not allowed "
                                    "in a spec (only plain lists and mappings)"))
            return None
        if isinstance(node, yaml.MappingNode):
            out: dict[str, Any] = {}
            for key_node, value_node in node.value:
                kpos = _mark(key_node)
                if not isinstance(key_node, yaml.ScalarNode):
                    problems.append(Problem(filename, *kpos, _dotted(path), "a key must be a name, not a list or mapping"))
                    continue
                budget.visit(key_node)
                key = scalar(key_node, path)
                if not isinstance(key, str):
                    if key is not None or key_node.value in ("", "~", "null", "Null", "NULL"):
                        kind = _KEY_KINDS.get(type(key), type(key).__name__)
                        problems.append(Problem(filename, *kpos, _dotted(path),
                                                f"key {key_node.value!r} is {kind}; keys are names: quote it "
                                                f"(\"{key_node.value}\") or rename it"))
                    continue
                sub = (*path, key)
                if key in out:
                    first = positions.get((*sub, "__key__"), (0, 0))[0]
                    problems.append(Problem(filename, *kpos, _dotted(sub), f"duplicate key (first given on line {first})"))
                    continue
                positions[(*sub, "__key__")] = kpos
                positions[sub] = _mark(value_node)
                out[key] = build(value_node, sub)
            return out
        if isinstance(node, yaml.SequenceNode):
            return [build(item, (*path, i)) for i, item in enumerate(node.value)]
        line, col = _mark(node)
        positions[(*path, "__text__")] = (line + 1, 1) if node.style in ("|", ">") else (line, col)
        if node.style != "|" and node.end_mark.line > node.start_mark.line:  # folded: lines do not map 1:1
            positions[(*path, "__folded__")] = (line, node.end_mark.line + 1)
        return scalar(node, path)

    try:
        data = build(root, ())
    except yaml.MarkedYAMLError as err:
        return None, {}, [Problem(filename, *_mark(err.problem_mark), "", f"refused: {err.problem}")]
    return data, positions, problems

