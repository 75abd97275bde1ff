"""A user's error in a flow is an answer, not a crash: one line in the run's log and a Failed state.

Prefect logs an exception raised in a task or a flow with its traceback. Each flow therefore catches
`UserError` (a spec the planner refuses, a missing or busy warehouse, a bad week) where it arises:
a task body wrapped in `user_errors_as_refusals` returns `Refused(error)` and the flow ends with
`failed(refused)`; a flow body wrapped in `flow_refuses` returns that Failed state itself. The
state's data is the error, so `gpuledger sweep` (which calls the flow with `return_state=True`)
prints it in one line with its exit code.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from prefect import get_run_logger
from prefect.states import Failed, State

from gpuledger.errors import UserError


@dataclass(frozen=True)
class Refused:
    """What a task returns instead of raising a user's error."""

    error: UserError


def failed(refused: Refused) -> State:
    """The flow's end on a user's error: Failed, with the error as data."""
    return Failed(message=str(refused.error), data=refused.error)


def user_errors_as_refusals(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Wraps a task body: a `UserError` becomes one error line in the run's log and a `Refused`."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except UserError as err:
            get_run_logger().error("%s", err)
            return Refused(err)

    return wrapper


def flow_refuses(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Wraps a flow body: a `UserError` becomes one error line and the flow's Failed state."""
    refusing = user_errors_as_refusals(fn)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        result = refusing(*args, **kwargs)
        return failed(result) if isinstance(result, Refused) else result

    return wrapper
