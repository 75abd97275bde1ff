"""Cross-field checks of a spec, read from the raw mapping so that they are reported together with
type errors (every problem at once)."""

from __future__ import annotations

import difflib
import math
import re
from typing import Any

from gpuledger.spec.expand import grid_too_large
from gpuledger.spec.shellctx import unsafe_placeholders
from gpuledger.spec.templates import KNOWN_FIELDS, template_fields, unsafe_message
from gpuledger.spec.types import MAX_TRIALS
from gpuledger.vocabulary import RL_METHODS

#: Hyper-parameters that are numbers whatever else a spec names: a value of theirs that is not a number is
#: a typo (`learning_rate: ["3e-4x"]`), not a category.
NUMERIC_PARAMS = frozenset({
    "learning_rate", "lr", "weight_decay", "warmup_ratio", "warmup_steps", "lora_r", "lora_alpha",
    "lora_dropout", "dropout", "epochs", "num_epochs", "batch_size", "micro_batch", "grad_accum",
    "gradient_accumulation_steps", "max_steps", "beta1", "beta2", "adam_beta1", "adam_beta2", "max_grad_norm",
    "kl_coef", "beta", "temperature", "top_p", "group_size", "seq_len", "tokens",
})
_NUMBER_LIKE = re.compile(r"\s*[+-]?(\d|\.\d)")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _number_problems(name: str, values: list[Any]) -> list[tuple[int, str]]:
    """Returns (index, message) for the values of a parameter list that should be numbers and are not:
    text that starts like a number but is not one (`"3e-4x"`, `"1.2.3"`) beside numbers or in a
    parameter `NUMERIC_PARAMS` names, and any text in such a parameter. Categories stay text."""
    numeric = name.lower() in NUMERIC_PARAMS or any(_is_number(v) for v in values)
    out = []
    for i, value in enumerate(values):
        if not isinstance(value, str):
            continue
        try:
            float(value.replace("_", ""))
            parses = True
        except ValueError:
            parses = False
        if parses:
            continue
        if name.lower() in NUMERIC_PARAMS or (numeric and _NUMBER_LIKE.match(value)):
            out.append((i, f"{value!r} is not a number ({name} takes numbers, e.g. 3e-4, 0.0003, 16)"))
    return out


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
    ranges: list[str] = []
    sizes: list[int] = []  # distinct values of each list or int range (None once a float range is seen)
    for name, values in params.items():
        if isinstance(values, dict):
            ranges.append(name)
        if strategy == "grid" and isinstance(values, dict):
            out.append((("search", "params", name), "strategy grid needs a list of values here; ranges are for "
                        "strategy random, tpe or asha"))
        elif isinstance(values, list) and not values:
            out.append((("search", "params", name), "empty list of values: the grid would have no trials"))
        elif isinstance(values, dict):
            out += [(("search", "params", name), msg) for msg in _range_problems(values)]
        if isinstance(values, list):
            out += [(("search", "params", name, i), msg) for i, msg in _number_problems(name, values)]
        if isinstance(values, list):
            sizes.append(len(values))
        elif _is_int_range(values):
            sizes.append(int(values["high"]) - int(values["low"]) + 1)
    lists = [v for v in params.values() if isinstance(v, list)]
    if strategy in ("grid", "tpe", "asha") and lists and len(lists) == len(params):
        refused = grid_too_large(lists)
        if refused:
            out.append((("search", "params", "__key__"), refused))
    n_trials = search.get("n_trials")
    distinct = math.prod(sizes) if params and len(sizes) == len(params) and all(n > 0 for n in sizes) else None
    if (strategy in ("random", "tpe", "asha") and distinct is not None and isinstance(n_trials, int)
            and not isinstance(n_trials, bool) and distinct < n_trials <= MAX_TRIALS):
        what = "lists" if not ranges else "lists and int ranges"
        out.append((("search", "n_trials"), f"n_trials ({n_trials}) is more than the {distinct} distinct combinations "
                    f"of the {what}; use strategy: grid, or fewer trials"))
    if strategy in ("tpe", "asha") and ranges and n_trials is None:
        out.append((("search", "n_trials"), f"strategy {strategy} with a range ({', '.join(ranges)}) needs n_trials "
                    "(how many trials to ask); only lists default to every point of their grid"))
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
    for part in ("setup", "run", "rollout_run"):
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
    out += _node_problems(data, resources, mapping(data.get("train")))
    method = data.get("method")
    if "serve" in data and method != "inference":
        out.append((("serve",), "serve: is for method: inference (a serving benchmark sweep)"))
    if method == "inference":
        serve = {**mapping(data.get("serve")), **(params if isinstance(params, dict) else {})}
        if serve.get("concurrency") is None and serve.get("request_rate") is None:
            out.append((("serve",), "method: inference needs a load: serve.concurrency or serve.request_rate "
                                    "(or a search parameter of that name)"))
    train = mapping(data.get("train"))
    if method in RL_METHODS and train.get("completion_len") is None:
        out.append((("train", "completion_len"), f"method {method} needs train.completion_len"))
    budget = train.get("micro_batch_tokens")
    if budget is not None:
        seq_len = train.get("seq_len", 2048)
        if method not in RL_METHODS:
            out.append((("train", "micro_batch_tokens"), f"micro_batch_tokens is a GRPO/PPO trainer's token budget; "
                        f"method {method} batches by train.micro_batch"))
        elif train.get("micro_batch_sequences") is not None:
            out.append((("train", "micro_batch_tokens"), "micro_batch_tokens (a token budget per micro-step) and "
                        "micro_batch_sequences (a count) size the same micro-batch: give one"))
        elif _whole(budget) and _whole(seq_len) and budget < seq_len:
            out.append((("train", "micro_batch_tokens"), f"micro_batch_tokens ({budget}) is below train.seq_len "
                        f"({seq_len}), the longest sequence: a token budget must hold any one sequence (verl asserts "
                        "ppo_max_token_len_per_gpu >= the longest)"))
    if train.get("dynamic_sampling") is not None and method != "grpo":
        out.append((("train", "dynamic_sampling"), f"dynamic_sampling filters GRPO groups (DAPO's group filter): "
                    f"method {method} has none; use method: grpo or drop it"))
    if task.get("rollout_run") and not train.get("rollout_gpu"):
        out.append((("task", "rollout_run"), "task.rollout_run is the rollout task of a split placement on two "
                    "instances: set train.rollout_gpu (and rollout_gpus), or drop task.rollout_run"))
    return out



def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _node_problems(data: dict[str, Any], resources: dict, train: dict) -> list[tuple[tuple, str]]:
    """Returns (path, message) for a trial's GPUs that do not make whole nodes: `gpus_per_trial` over
    `train.nodes` (default ceil(GPUs / 8), `gpuledger.estimate.coefficients.nodes_for`) must split evenly, at
    most 8 GPUs per node (the catalog's largest instances), and a trial of several nodes needs a cloud launcher."""
    from gpuledger.estimate.coefficients import GPUS_PER_NODE, nodes_for

    gpus, stated = resources.get("gpus_per_trial"), train.get("nodes")
    if not _whole(gpus) or (stated is not None and not _whole(stated)):
        return []
    nodes = nodes_for(gpus, stated)
    if nodes == 1:
        return []
    where = ("train", "nodes") if stated is not None else ("resources", "gpus_per_trial")
    if nodes > gpus:
        return [(where, f"train.nodes {nodes} is more than the trial's {gpus} GPUs (resources.gpus_per_trial)")]
    least = -(-gpus // GPUS_PER_NODE)
    if gpus % nodes:
        rule = "train.nodes" if stated else "ceil(GPUs / 8)"
        return [(where, f"{gpus} GPUs do not split evenly over {nodes} nodes ({rule}): give a multiple of {nodes} "
                        f"GPUs or set train.nodes to a divisor of {gpus} of at least {least}")]
    if gpus // nodes > GPUS_PER_NODE:
        return [(where, f"{gpus} GPUs over {nodes} nodes is {gpus // nodes} per node; a node has at most "
                        f"{GPUS_PER_NODE} (the catalog's largest instances): train.nodes of at least {least}")]
    if data.get("launcher") == "local":
        return [(("launcher",), f"a trial of {gpus} GPUs spans {nodes} nodes; the local launcher runs trials on this "
                                "machine: use launcher: skypilot")]
    return []


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_int_range(values: Any) -> bool:
    return (isinstance(values, dict) and values.get("type") == "int" and _number(values.get("low"))
            and _number(values.get("high")) and float(values["low"]).is_integer()
            and float(values["high"]).is_integer() and values["low"] <= values["high"])


def _range_problems(values: dict[str, Any]) -> list[str]:
    """Returns what is wrong with a range `{low, high, log, type}` (its types are pydantic's to check)."""
    low, high = values.get("low"), values.get("high")
    if not (_number(low) and _number(high)):
        return []
    out = []
    if high < low:
        out.append(f"high ({high}) is below low ({low})")
    if values.get("log") is True and low <= 0:
        out.append(f"a log range needs low > 0 (got {low})")
    if values.get("type") == "int" and not (float(low).is_integer() and float(high).is_integer()):
        out.append(f"an int range needs whole numbers for low and high (got {low}, {high})")
    return out
