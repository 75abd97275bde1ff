"""Processes on this host (stdlib only, so the serve command and the warehouse lease share it)."""

from __future__ import annotations

import os


def pid_alive(pid: int | None) -> bool:
    """Returns whether process `pid` exists on this host; a zombie counts as dead."""
    if not pid or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, another user's
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().split(") ", 1)[1][:1] != "Z"
    except (OSError, IndexError):  # no /proc (not Linux) or the process just went: trust kill(0)
        return True
