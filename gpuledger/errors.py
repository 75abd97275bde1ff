"""Errors meant for the person at the keyboard: printed as one clear message, never a traceback."""

from __future__ import annotations


class UserError(Exception):
    """A mistake in input (spec, option, file) or a state the user can fix.

    `str(err)` is the whole message; it should say what is wrong, where, and what to do.
    `exit_code` is what the CLI exits with (1 by default; 3 for a budget refusal).
    """

    exit_code = 1

    def __init__(self, message: str, exit_code: int | None = None):
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class BudgetExceeded(UserError):
    """The budget guard refused a sweep before anything launched."""

    exit_code = 3


def validation_message(error: dict) -> str:
    """Returns one pydantic error's message (an item of `ValidationError.errors()`) without the "Value error, "
    prefix pydantic puts before a validator's own words."""
    return error["msg"].removeprefix("Value error, ")
