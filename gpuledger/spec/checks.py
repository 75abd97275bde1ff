"""Cross-field checks of a spec, read from the raw mapping so that they are reported together with
type errors (every problem at once)."""

from __future__ import annotations

import difflib
from typing import Any

from gpuledger.spec.expand import grid_points_total, grid_too_large
from gpuledger.spec.shellctx import unsafe_placeholders
from gpuledger.spec.templates import KNOWN_FIELDS, template_fields, unsafe_message
from gpuledger.spec.types import MAX_TRIALS


def _semantic_problems(data: dict[str, Any]) -> list[tuple[tuple, str]]:
    """Returns (path, message) for cross-field mistakes, read from the raw mapping so that they are
    reported together with type errors (every problem at once). Tolerates malformed parts."""
    out: list[tuple[tuple, str]] = []

    def mapping(value: Any) -> dict:
        return value if isinstance(value, dict) else {}

    if data.get("kind") == "capacity":
        accs = mapping(data.get("resources")).get("accelerators")
        accs = {str(a).lower() for a in accs} if isinstance(accs, list) else set()
        measured = mapping(data.get("measured"))
        for acc in measured if "from_sweep" not in measured else ():
            if accs and str(acc).lower() not in accs:
                out.append((("measured", acc), f"{acc} is not among resources.accelerators"))
        return out
    search = mapping(data.get("search"))
    params = mapping(search.get("params"))
    strategy = search.get("strategy", "grid")
    for name, values in params.items():
        if strategy in ("grid", "tpe", "asha") and isinstance(values, dict):
            out.append((("search", "params", name), f"strategy {strategy} needs a list of values here; ranges are "
                        "for strategy: random"))
        elif isinstance(values, list) and not values:
            out.append((("search", "params", name), "empty list of values: the grid would have no trials"))
        elif isinstance(values, dict) and isinstance(values.get("low"), int | float) and isinstance(values.get("high"), int | float):
            if values["high"] < values["low"]:
                out.append((("search", "params", name), f"high ({values['high']}) is below low ({values['low']})"))
            if values.get("log") and values["low"] <= 0:
                out.append((("search", "params", name), "a log range needs low > 0"))
    lists = [v for v in params.values() if isinstance(v, list)]
    if strategy in ("grid", "tpe", "asha") and lists and len(lists) == len(params):
        refused = grid_too_large(lists)
        if refused:
            out.append((("search", "params", "__key__"), refused))
    n_trials = search.get("n_trials")
    if (strategy in ("random", "tpe", "asha") and lists and len(lists) == len(params) and isinstance(n_trials, int)
            and not isinstance(n_trials, bool) and grid_points_total(lists) < n_trials <= MAX_TRIALS):
        out.append((("search", "n_trials"), f"n_trials ({n_trials}) is more than the {grid_points_total(lists)} "
                    "distinct combinations of the lists; use strategy: grid, or fewer trials"))
    if search.get("pruning") is not None and strategy in ("grid", "random"):
        out.append((("search", "pruning"), f"pruning needs strategy asha or tpe, not {strategy}"))
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
        for u in unsafe_placeholders(template):
            out.append((("task", part, "__text__", u.line, u.name, u.nth), unsafe_message(u)))
        for name in names:
            if name not in allowed:
                close = difflib.get_close_matches(name, sorted(allowed), n=1, cutoff=0.5)
                hint = f"; did you mean {{{close[0]}}}?" if close else ""
                out.append((("task", part), f"unknown placeholder {{{name}}}: not a search parameter or known field{hint}"))
    resources = mapping(data.get("resources"))
    if data.get("launcher") == "skypilot" and not resources.get("accelerators"):
        out.append((("resources", "accelerators"), "launcher: skypilot needs at least one accelerator"))
    method = data.get("method")
    if "serve" in data and method != "inference":
        out.append((("serve",), "serve: is for method: inference (a serving benchmark sweep)"))
    if method == "inference":
        serve = {**mapping(data.get("serve")), **(params if isinstance(params, dict) else {})}
        if serve.get("concurrency") is None and serve.get("request_rate") is None:
            out.append((("serve",), "method: inference needs a load: serve.concurrency or serve.request_rate "
                                    "(or a search parameter of that name)"))
    if method in ("grpo", "ppo") and mapping(data.get("train")).get("completion_len") is None:
        out.append((("train", "completion_len"), f"method {method} needs train.completion_len"))
    return out

