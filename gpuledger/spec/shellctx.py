"""Where each `{placeholder}` of a task template sits in bash's quoting, so that only safe spots
are allowed.

A value is substituted `shlex.quote`d (`'...'`). That is safe where bash reads a plain word: at top
level, inside `$(...)` or `(...)`. It is not safe anywhere else: inside `"{x}"` the quotes of the
value are literal and `$(touch /tmp/p)` runs; inside `'{x}'` the value's own quotes end the string;
right after a backslash or `$` the value's first quote is eaten; in backticks, `${...}`, `$((...))`
or an unquoted here-document the text is expanded again. `unsafe_placeholders` finds those spots
by scanning the template as bash would (quotes, escapes, substitutions, comments, here-documents).
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass

WHY = {
    "single": "inside single quotes '...' (the value's own quotes would end them)",
    "double": 'inside double quotes "..." (bash expands $(...) and `...` in the value there)',
    "ansi": "inside $'...'",
    "backtick": "inside backticks `...` (bash reads the text twice there)",
    "param": "inside ${...}",
    "arith": "inside arithmetic $((...)) or ((...))",
    "heredoc": "inside a here-document with an unquoted delimiter (bash expands $(...) in it)",
    "escaped": "right after a backslash (it would escape the value's opening quote)",
    "dollar": "right after $ (it would turn the value into $'...')",
}

_PLAIN = ("plain", "cmdsub", "paren")
_WORD_START = " \t\n;&|()<>"


@dataclass(frozen=True)
class Unsafe:
    name: str
    line: int  # 0-based line of the template
    context: str  # a key of WHY
    nth: int = 0  # which occurrence of {name} in the template (0-based)

    @property
    def why(self) -> str:
        return WHY[self.context]


class _Field:
    def __init__(self, name: str):
        self.name = name


def _stream(template: str) -> list[str | _Field]:
    out: list[str | _Field] = []
    for literal, field, _fmt, _conv in string.Formatter().parse(template):
        out.extend(literal)
        if field is not None:
            out.append(_Field(field))
    return out


_HEREDOC = re.compile(r"<<(-?)[ \t]*((?:[^\s;&|<>()'\"\\]|'[^']*'|\"[^\"]*\"|\\.)+)")


def unsafe_placeholders(template: str) -> list[Unsafe]:
    """Returns each placeholder of `template` that sits where a shell-quoted value is not safe.
    Raises ValueError on bad placeholder syntax (as `str.format` would)."""
    items = _stream(template)
    stack: list[list] = [["plain", 0]]  # [context, paren depth]
    heredocs: list[tuple[str, bool, bool]] = []  # pending (delimiter, expands, strip tabs)
    heredoc: tuple[str, bool, bool] | None = None
    line_text: list[str] = []
    line, i, out = 0, 0, []
    seen: dict[str, int] = {}
    prev: str | _Field = "\n"

    def text_from(j: int) -> str:
        chars = []
        while j < len(items) and isinstance(items[j], str) and items[j] != "\n":
            chars.append(items[j])
            j += 1
        return "".join(chars)

    while i < len(items):
        item = items[i]
        top = stack[-1][0]
        if isinstance(item, _Field):
            nth = seen[item.name] = seen.get(item.name, -1) + 1
            context = None
            if heredoc is not None:
                context = "heredoc" if heredoc[1] else None
                line_text.append("\0")
            elif top not in _PLAIN:
                context = top
            elif prev == "\\":
                context = "escaped"
            elif prev == "$":
                context = "dollar"
            if context:
                out.append(Unsafe(item.name, line, context, nth))
            prev, i = item, i + 1
            continue
        c = item
        nxt = items[i + 1] if i + 1 < len(items) else ""
        nxt2 = items[i + 2] if i + 2 < len(items) else ""
        step = 1
        if heredoc is not None:  # the body: lines up to the delimiter
            if c == "\n":
                body = "".join(line_text)
                if (body.lstrip("\t") if heredoc[2] else body) == heredoc[0]:
                    heredoc = heredocs.pop(0) if heredocs else None
                line_text = []
            else:
                line_text.append(c)
        elif top in _PLAIN:
            if c == "\\":
                step = 2 if isinstance(nxt, str) and nxt else 1
            elif c == "'":
                stack.append(["single", 0])
            elif c == '"':
                stack.append(["double", 0])
            elif c == "`":
                stack.append(["backtick", 0])
            elif c == "$" and nxt == "'":
                stack.append(["ansi", 0])
                step = 2
            elif c == "$" and nxt == "(" and nxt2 == "(" or c == "(" and nxt == "(" and top == "plain":
                stack.append(["arith", 0])
                step = 3 if c == "$" else 2
            elif c == "$" and nxt == "(":
                stack.append(["cmdsub", 0])
                step = 2
            elif c == "$" and nxt == "{":
                stack.append(["param", 0])
                step = 2
            elif c == "(":
                stack.append(["paren", 0])
            elif c == ")" and top in ("cmdsub", "paren"):
                stack.pop()
            elif c == "#" and (isinstance(prev, str) and prev in _WORD_START):
                while i + step < len(items) and items[i + step] != "\n":
                    step += 1  # a comment: nothing in it reaches bash
            elif c == "<" and nxt == "<" and nxt2 != "<":
                m = _HEREDOC.match(text_from(i))
                if m:
                    word = m.group(2)
                    quoted = any(q in word for q in "'\"\\")
                    heredocs.append((re.sub(r"['\"\\]", "", word), not quoted, m.group(1) == "-"))
                    step = m.end()
            elif c == "\n" and heredocs:
                heredoc = heredocs.pop(0)
        elif top == "single":
            if c == "'":
                stack.pop()
        elif top in ("ansi", "backtick"):
            if c == "\\":
                step = 2
            elif c == ("'" if top == "ansi" else "`"):
                stack.pop()
        elif top == "double":
            if c == "\\":
                step = 2
            elif c == '"':
                stack.pop()
            elif c == "`":
                stack.append(["backtick", 0])
            elif c == "$" and nxt == "(" and nxt2 == "(":
                stack.append(["arith", 0])
                step = 3
            elif c == "$" and nxt == "(":
                stack.append(["cmdsub", 0])
                step = 2
            elif c == "$" and nxt == "{":
                stack.append(["param", 0])
                step = 2
        elif top == "param":
            if c == "}":
                stack.pop()
        elif top == "arith":
            if c == "(":
                stack[-1][1] += 1
            elif c == ")":
                if stack[-1][1]:
                    stack[-1][1] -= 1
                else:
                    stack.pop()
                    step = 2 if nxt == ")" else 1
        for k in range(step):
            if i + k < len(items) and items[i + k] == "\n":
                line += 1
        prev = items[i + step - 1] if step == 1 else ""
        i += step
    return out
