"""Scalar types of the spec language: durations, money, accelerator names, clouds. The words of
methods, precisions, optimizers, sharding, frameworks and launchers are `gpuledger.vocabulary`'s."""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, WithJsonSchema

from gpuledger.spec.strict import MAX_COUNT

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


_COUNT_RE = re.compile(r"([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:e[+-]?\d+)?)\s*([kmbgt]?)", re.IGNORECASE)
_COUNT_SUFFIX = {"": 1, "k": 10**3, "m": 10**6, "b": 10**9, "g": 10**9, "t": 10**12}


def parse_count(value: Any) -> int:
    """Returns the whole number of `20000000`, `20_000_000`, `20,000,000`, `2e7`, `20M`, `1.5B`, `500k`
    (k 10^3, M 10^6, B or G 10^9, T 10^12); ValueError naming the value otherwise (not whole, not a
    number, negative, above `MAX_COUNT`)."""
    expected = "expected a whole number like 20000000, 20_000_000, 2e7 or 20M"
    if isinstance(value, bool):
        raise ValueError(f"{expected} (got {value!r})")
    if isinstance(value, int):
        number: float | int = value
    elif isinstance(value, float):
        number = value
    elif isinstance(value, str):
        text = value.strip().replace("_", "").replace(",", "")
        m = _COUNT_RE.fullmatch(text)
        if m is None:
            raise ValueError(f"{expected} (got {value!r})")
        digits, suffix = m.group(1), m.group(2).lower()
        try:
            number = int(digits) * _COUNT_SUFFIX[suffix]
        except ValueError:
            number = float(digits) * _COUNT_SUFFIX[suffix]
    else:
        raise ValueError(f"{expected} (got {value!r})")
    if isinstance(number, float):
        if not math.isfinite(number) or number != int(number):
            raise ValueError(f"{expected} (got {value!r}: not a whole number)")
        number = int(number)
    if number < 0:
        raise ValueError(f"must not be negative (got {value!r})")
    if number > MAX_COUNT:
        raise ValueError(f"{value!r} is too large (at most {MAX_COUNT:.0e})")
    return number


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
#: A count of at least 1 as people write it (`parse_count`); its JSON Schema takes the number or the text.
PositiveCount = Annotated[int, Field(ge=1), BeforeValidator(parse_count), WithJsonSchema({"anyOf": [
    {"type": "integer", "minimum": 1},
    {"type": "string", "pattern": r"^\s*[0-9][0-9_,]*(\.[0-9]+)?([eE][+-]?[0-9]+)?\s*[kKmMbBgGtT]?\s*$"}]})]
Accelerator = Annotated[str, BeforeValidator(_normalize_accelerator)]
Scalar = str | int | float | bool
Cloud = Literal["aws", "gcp", "azure", "lambda", "nebius", "vast", "runpod", "oci", "kubernetes"]

#: The most trials one sweep may have: a grid's points (the product of its lists' lengths, before
#: exclusions) or a random search's n_trials. Checked before anything is expanded.
MAX_TRIALS = 10_000

NAME_PATTERN = r"^[a-z0-9][a-z0-9-]{0,62}$"
LABEL_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,62}$"


#: Bounds of a capacity spec's traffic (issue 43: `qps: 1e12` must answer at once, `1e308` must not
#: overflow): a million requests/s is ~10x the busiest public web service's peak; 10M tokens per
#: request is past every context window; a latency over a day (8.64e7 ms) is no SLO.
MAX_QPS = 1_000_000.0
MAX_REQUEST_TOKENS = 10_000_000
MAX_LATENCY_MS = 86_400_000.0
#: a GPU's output tokens/s: ~100x the fastest published per-GPU serving rate (H100/B200, small models)
MAX_TOKENS_PER_S_PER_GPU = 10_000_000.0
MAX_CONCURRENCY = 1_000_000
