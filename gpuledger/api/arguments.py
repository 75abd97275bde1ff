"""The Ledger's arguments checked against its verbs' own annotations, one place for every verb.

A notebook or pipeline that passes `Ledger.validate(123)`, `Ledger.plan(None)` or `Ledger.sql(b"...")`
gets one `UserError` line naming the verb, the argument and what it takes
(`Ledger.plan(spec=None): expected a path (str or os.PathLike), got None`), not an `OSError` or a
`TypeError` from deep inside. `check_arguments(Ledger)` wraps every public method (a verb added later
included); the checks are read from the annotations as written (`str | os.PathLike[str] | None`,
`int`, `bool`, `float`, `list[str]`, `Workload`), so the signature is the one statement of what a verb
takes. What a value means (a number's range, a spec's content) stays the verb's to say.
"""

from __future__ import annotations

import functools
import inspect
import numbers
import os
from collections.abc import Callable
from typing import Any

from gpuledger.errors import UserError

#: longest shown repr of a refused value
SHOWN_CHARS = 60


def _split(annotation: str) -> list[str]:
    """Returns the members of a union annotation written `A | B[C | D] | None`, at the top level only."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(annotation):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "|" and depth == 0:
            parts.append(annotation[start:i].strip())
            start = i + 1
    parts.append(annotation[start:].strip())
    return parts


def _is_path(value: Any) -> bool:
    return isinstance(value, os.PathLike) and isinstance(os.fspath(value), str)


def _workload(value: Any) -> bool:
    from gpuledger.estimate import Workload

    return isinstance(value, Workload)


#: what each annotation member accepts and how a message names it (None: not checked)
_MEMBERS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "None": (lambda v: v is None, "None"),
    "str": (lambda v: isinstance(v, str), "a str"),
    "bool": (lambda v: isinstance(v, bool), "True or False"),
    "int": (lambda v: isinstance(v, numbers.Integral) and not isinstance(v, bool), "a whole number (int)"),
    "float": (lambda v: isinstance(v, numbers.Real) and not isinstance(v, bool), "a number"),
    "os.PathLike[str]": (_is_path, "an os.PathLike"),
    "Workload": (_workload, "a gpuledger.estimate.Workload"),
}


def _checker(annotation: Any) -> tuple[Callable[[Any], bool], str] | None:
    """Returns (accepts, what it takes in words) for an annotation string; None for one not checked (Any,
    callables, types the verb itself checks)."""
    if not isinstance(annotation, str):
        return None
    members = _split(annotation)
    if any(m == "Any" for m in members):
        return None
    tests: list[Callable[[Any], bool]] = []
    words: list[str] = []
    paths = "str" in members and "os.PathLike[str]" in members
    for member in members:
        if member.startswith("Callable"):
            tests.append(callable)
            words.append("a callable")
        elif member.startswith("list[") and member.endswith("]"):
            inner = _checker(member[5:-1])
            if inner is None:
                return None
            item, item_words = inner
            tests.append(lambda v, item=item: isinstance(v, list | tuple) and all(item(x) for x in v))
            words.append(f"a list, each {item_words}")
        elif member in _MEMBERS:
            if paths and member in ("str", "os.PathLike[str]"):
                continue
            test, word = _MEMBERS[member]
            tests.append(test)
            words.append(word)
        else:
            return None  # a type this table does not know: the verb checks it
    if paths:
        tests.append(lambda v: (isinstance(v, str) and v != "") or _is_path(v))
        words.insert(0, "a path (a non-empty str or os.PathLike)")
    return (lambda v: any(t(v) for t in tests)), " or ".join(words)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS - 3] + "..."


def _checked(owner: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """Returns `fn` checking its arguments against its annotations first (UserError naming the one refused)."""
    verb = owner if fn.__name__ == "__init__" else f"{owner}.{fn.__name__}"

    @functools.cache
    def plan() -> tuple[inspect.Signature, dict[str, tuple[Callable[[Any], bool], str]]]:
        sig = inspect.signature(fn)
        checks = {name: check for name, p in sig.parameters.items()
                  if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and (check := _checker(p.annotation))}
        return sig, checks

    @functools.wraps(fn)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        sig, checks = plan()
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as err:
            raise UserError(f"{verb}: {err}") from None
        for name, value in bound.arguments.items():
            check = checks.get(name)
            if check is not None and not check[0](value):
                got = "" if value is None else f", got {type(value).__name__}"
                raise UserError(f"{verb}({name}={_shown(value)}): expected {check[1]}{got}")
        return fn(*args, **kwargs)

    return wrapped


def check_arguments(cls: type) -> type:
    """Makes every public method of `cls` (and its constructor) check its arguments (see the module)."""
    for name, fn in list(vars(cls).items()):
        if inspect.isfunction(fn) and (not name.startswith("_") or name == "__init__"):
            setattr(cls, name, _checked(cls.__name__, fn))
    return cls
