"""The agent's own output: what a trial prints can never read as the agent's `GPULEDGER_RESULT` line.

A launcher that only sees the job's logs (SkyPilot: stdout and stderr merged) takes an attempt's
record from the `GPULEDGER_RESULT {...}` line (`protocol.RESULT_LINE_PREFIX`), wherever it stands on
a line (`gpuledger.launch.skypilot_logs`; SkyPilot prefixes lines and splits them at `\\r` too). So
the agent rewrites every occurrence of that prefix in the trial's stdout and stderr to
`NEUTRAL_PREFIX` before passing the text on, and counts them (the record says so). The trial's own
`GPULEDGER_METRIC` lines are its metrics and pass unchanged.

`Neutraliser` works on a stream read in pieces (`measure.MAX_LINE_BYTES` per read; stderr in 64 KiB
chunks): a piece that ends with the start of the prefix holds those few bytes back until the next
piece shows whether the prefix is completed, so a prefix split across two reads is caught too.
Stdlib only: it runs inside cloud jobs.
"""

from __future__ import annotations

from gpuledger.protocol import RESULT_LINE_PREFIX

OWNED = RESULT_LINE_PREFIX.encode()
#: What a trial's `GPULEDGER_RESULT ` becomes in the job's output (no parser reads it as a record).
NEUTRAL_PREFIX = "GPULEDGER_RESULT_FROM_TRIAL "
_NEUTRAL = NEUTRAL_PREFIX.encode()
assert OWNED not in _NEUTRAL


class Neutraliser:
    """Rewrites the agent's own line prefix in one output stream of the trial; `count` says how often."""

    def __init__(self) -> None:
        self.count = 0
        self.held = b""  # the end of the last piece that may be the start of the prefix

    def feed(self, data: bytes) -> bytes:
        """Returns what of `held + data` can be written now, the prefix rewritten."""
        data = self.held + data
        found = data.count(OWNED)
        if found:
            self.count += found
            data = data.replace(OWNED, _NEUTRAL)
        keep = 0
        for k in range(min(len(OWNED) - 1, len(data)), 0, -1):
            if data.endswith(OWNED[:k]):
                keep = k
                break
        self.held = data[len(data) - keep:] if keep else b""
        return data[:len(data) - keep]

    def finish(self) -> bytes:
        """Returns what is still held (the stream ended)."""
        held, self.held = self.held, b""
        return held


def note(count: int) -> str | None:
    """Returns the record's note about the trial's own result lines, or None when it printed none."""
    if not count:
        return None
    return (f"the trial printed {count} {RESULT_LINE_PREFIX.strip()} line(s); ignored "
            f"(passed on as {NEUTRAL_PREFIX.strip()})")
