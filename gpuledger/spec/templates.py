"""Task templates: `{name}` placeholders, the values they may use, and their rendering."""

from __future__ import annotations

import re
import shlex
import string
from typing import Any

from gpuledger.errors import UserError
from gpuledger.spec.ids import sweep_id_for
from gpuledger.spec.models import Serve, SweepSpec, Train
from gpuledger.spec.shellctx import Unsafe, unsafe_placeholders

#: Placeholders a task template may use besides the search parameters.
KNOWN_FIELDS = frozenset(
    {"trial_id", "trial_index", "sweep_id", "name", "project", "owner", "model", "method", "precision"}
    | set(Train.model_fields)
    | (set(Serve.model_fields) - {"slo"})
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



def _format_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def unsafe_message(u: Unsafe) -> str:
    """Returns the one-line refusal of a placeholder in an unsafe shell spot."""
    return (f"placeholder {{{u.name}}} sits {u.why}; "
            f"write it bare, as in --flag {{{u.name}}}: each value is substituted already shell-quoted")


def render_command(template: str, values: dict[str, Any]) -> str:
    """Returns `template` with each `{name}` replaced by the shell-quoted value (`shlex.quote`).

    Raises UserError if a placeholder sits where a quoted value is not safe (inside quotes,
    backticks, `${...}`, an unquoted here-document, after a backslash or `$`): `validate` refuses
    such templates, and a spec built in code cannot bypass that here."""
    unsafe = unsafe_placeholders(template)
    if unsafe:
        raise UserError("task: " + "; ".join(unsafe_message(u) for u in unsafe))
    quoted = {k: shlex.quote(_format_value(v)) for k, v in values.items()}
    return template.format_map(quoted)


def template_values(spec: SweepSpec, params: dict[str, Any], trial_id: str, index: int) -> dict[str, Any]:
    """Returns the values a task template may use: known fields, overridden by the search params."""
    values: dict[str, Any] = dict(spec.train.model_dump())
    values.update((k, v) for k, v in spec.serve.model_dump(exclude={"slo"}).items() if v is not None)
    values.update(
        trial_id=trial_id, trial_index=index, sweep_id=sweep_id_for(spec), name=spec.name,
        project=spec.project, owner=spec.owner, model=spec.model, method=spec.method,
        precision=spec.precision,
    )
    values.update(params)
    return values

