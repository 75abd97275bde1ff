"""Bounded YAML: reading a text file of bounded size that is a regular file, and composing YAML with
limits on nesting depth, aliases, expanded nodes and time.

PyYAML's safe loader has no limits: an 800-byte document of nested aliases expands past gigabytes
(the "billion laughs"), 5,000 nested `[` overflow its recursive composer, and `/dev/zero` or a FIFO
read as a file never ends. Here every such input is answered at once with a `YamlLimitError` or
`FileRefused` that says what and where. The limits (`LIMITS`) are far above any real spec:

- a file is read only when it is a regular file of at most `max_bytes` (256 KiB);
- nesting at most `max_depth` (64) collections deep;
- at most `max_aliases` (100) `*alias` references;
- at most `max_nodes` (20,000) nodes once aliases are expanded, and no alias cycles
  (`check_expansion`, counting each distinct node once; `NodeBudget` guards a walk as well);
- at most `max_seconds` (5 s) of composing and walking.

YAML 1.2 floats: `3e-4` is read as a float (PyYAML's YAML 1.1 rules make it a string).
"""

from __future__ import annotations

import os
import re
import stat
import time
from dataclasses import dataclass
from pathlib import Path

import yaml


@dataclass(frozen=True)
class Limits:
    max_bytes: int = 256 * 1024
    max_depth: int = 64
    max_aliases: int = 100
    max_nodes: int = 20_000
    max_seconds: float = 5.0


LIMITS = Limits()


class YamlLimitError(yaml.MarkedYAMLError):
    """A document beyond one of the limits; `problem_mark` says where (0-based line/column)."""


class FileRefused(Exception):
    """A file that is not read: missing, not a regular file, too large, unreadable or not UTF-8."""

    def __init__(self, path: str | Path, reason: str):
        self.path, self.reason = str(path), reason
        super().__init__(f"{path}: {reason}")


def _size_text(n: int) -> str:
    return f"{n / 1024:.0f} KiB" if n >= 1024 else f"{n} bytes"


def read_text_file(path: str | Path, max_bytes: int = LIMITS.max_bytes) -> str:
    """Returns the UTF-8 text of `path` if it is a regular file of at most `max_bytes`.

    The file is opened non-blocking (a FIFO does not wait for a writer) and checked with fstat on
    the open descriptor, so what is checked is what is read; at most `max_bytes + 1` bytes are read
    (a file that grows, or a /proc file that reports size 0, is still bounded)."""
    if not str(path):
        raise FileRefused("''", "empty path: give the path of a file")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except FileNotFoundError:
        raise FileRefused(path, "no such file") from None
    except IsADirectoryError:
        raise FileRefused(path, "is a directory, not a file") from None
    except PermissionError:
        raise FileRefused(path, "permission denied") from None
    except OSError as err:
        raise FileRefused(path, f"cannot open: {err.strerror or err}") from None
    except ValueError:  # os.open refuses a path with a NUL character in it (no file has one)
        raise FileRefused(str(path).replace("\x00", "\\x00"), "no such file (the path holds a NUL character)") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise FileRefused(path, "is a directory, not a file")
        if not stat.S_ISREG(st.st_mode):
            what = ("a FIFO (named pipe)" if stat.S_ISFIFO(st.st_mode) else
                    "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else
                    "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file")
            raise FileRefused(path, f"is {what}, not a regular file; give the path of a YAML file")
        if st.st_size > max_bytes:
            raise FileRefused(path, f"is {_size_text(st.st_size)}; a file here may be at most {_size_text(max_bytes)}")
        chunks, total = [], 0
        while total <= max_bytes:
            chunk = os.read(fd, min(65536, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > max_bytes:
            raise FileRefused(path, f"is larger than {_size_text(max_bytes)}, the most a file here may be")
    except OSError as err:
        raise FileRefused(path, f"cannot read: {err.strerror or err}") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise FileRefused(path, f"is not UTF-8 text (byte {err.start}, line {line}: {err.reason})") from None


class BoundedLoader(yaml.SafeLoader):
    """SafeLoader whose composer counts depth and aliases and watches a deadline."""

    limits: Limits = LIMITS

    def __init__(self, stream, limits: Limits | None = None):
        super().__init__(stream)
        if limits is not None:
            self.limits = limits
        self._depth = 0
        self._aliases = 0
        self.deadline = time.monotonic() + self.limits.max_seconds

    def _refuse(self, message: str) -> None:
        raise YamlLimitError(problem=message, problem_mark=self.peek_event().start_mark)

    def check_time(self) -> None:
        if time.monotonic() > self.deadline:
            self._refuse(f"reading took over {self.limits.max_seconds:g} s; the document is too complex")

    def fetch_flow_collection_start(self, TokenClass):
        # the scanner tracks every open `[`/`{` as a possible key: bound the depth here, before
        # 5,000 of them make its bookkeeping quadratic
        if self.flow_level >= self.limits.max_depth:
            raise YamlLimitError(problem=f"nested more than {self.limits.max_depth} levels deep",
                                 problem_mark=self.get_mark())
        super().fetch_flow_collection_start(TokenClass)

    def compose_node(self, parent, index):
        self.check_time()
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > self.limits.max_aliases:
                self._refuse(f"more than {self.limits.max_aliases} aliases (*name); write the values out")
            return super().compose_node(parent, index)
        if self.check_event(yaml.SequenceStartEvent, yaml.MappingStartEvent):
            if self._depth >= self.limits.max_depth:
                self._refuse(f"nested more than {self.limits.max_depth} levels deep")
            self._depth += 1
            try:
                return super().compose_node(parent, index)
            finally:
                self._depth -= 1
        return super().compose_node(parent, index)


BoundedLoader.add_implicit_resolver(
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


class NodeBudget:
    """Counts nodes visited while walking a composed graph (aliases expanded) and the time spent;
    `visit(node)` raises YamlLimitError past `max_nodes` or the loader's deadline."""

    def __init__(self, loader: BoundedLoader):
        self.loader, self.count = loader, 0

    def visit(self, node: yaml.Node) -> None:
        self.count += 1
        limits = self.loader.limits
        if self.count > limits.max_nodes:
            raise YamlLimitError(
                problem=f"more than {limits.max_nodes:,} values (aliases expanded); a spec needs far fewer",
                problem_mark=node.start_mark)
        if self.count % 1024 == 0 and time.monotonic() > self.loader.deadline:
            raise YamlLimitError(problem=f"reading took over {limits.max_seconds:g} s; the document is too complex",
                                 problem_mark=node.start_mark)


def check_expansion(root: yaml.Node, limits: Limits = LIMITS) -> None:
    """Raises YamlLimitError when the document, once its aliases are expanded, would hold more than
    `max_nodes` values or nest deeper than `max_depth`, or when an alias refers to a collection that
    contains it (a cycle, which no walk would finish). Counts each distinct node once (an alias is
    a shared node), iteratively: the cost is the size of the file, not of the expansion."""
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    state: dict[int, int] = {}  # 1: on the current path, 2: counted

    def children(node: yaml.Node) -> list[yaml.Node]:
        if isinstance(node, yaml.SequenceNode):
            return list(node.value)
        if isinstance(node, yaml.MappingNode):
            return [n for pair in node.value for n in pair]
        return []

    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        if finished:
            kids = children(node)
            size[key] = 1 + sum(size[id(c)] for c in kids)
            depth[key] = (1 if kids or isinstance(node, yaml.CollectionNode) else 0) + max(
                (depth[id(c)] for c in kids), default=0)
            state[key] = 2
            if size[key] > limits.max_nodes:
                raise YamlLimitError(problem=f"more than {limits.max_nodes:,} values (aliases expanded); a spec "
                                             "needs far fewer", problem_mark=node.start_mark)
            if depth[key] > limits.max_depth:
                raise YamlLimitError(problem=f"nested more than {limits.max_depth} levels deep (aliases expanded)",
                                     problem_mark=node.start_mark)
            continue
        if state.get(key) == 2:
            continue
        state[key] = 1
        stack.append((node, True))
        for child in children(node):
            if state.get(id(child)) == 1:
                raise YamlLimitError(problem="an alias refers to a collection that contains it (a cycle)",
                                     problem_mark=child.start_mark)
            if state.get(id(child)) != 2:
                stack.append((child, False))


def compose(text: str, limits: Limits | None = None) -> tuple[yaml.Node | None, BoundedLoader]:
    """Returns (root node or None for an empty document, the loader) of one YAML document.

    Raises yaml.YAMLError (YamlLimitError beyond a limit). The loader constructs scalars
    (`loader.construct_object(node)`) and gives the `NodeBudget` of the walk."""
    limits = limits or LIMITS
    if len(text) > limits.max_bytes:
        raise YamlLimitError(problem=f"the document is {_size_text(len(text))}; at most "
                                     f"{_size_text(limits.max_bytes)} may be read")
    loader = BoundedLoader(text, limits)
    try:
        root = loader.get_single_node()
    finally:
        loader.dispose()
    if root is not None:
        check_expansion(root, limits)
    return root, loader
