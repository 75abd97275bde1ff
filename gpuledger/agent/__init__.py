"""The in-job agent: runs one trial command and measures what it really did.

    python -m gpuledger.agent --result FILE [--run-id ID] [--trial-id ID] [--timeout-s S] -- CMD...

It starts CMD in its own session (so the whole tree can be signalled as one process group),
passes its stdout/stderr through (every `GPULEDGER_RESULT ` in them rewritten, so nothing the trial
prints reads as the agent's own result line: `gpuledger.agent.owned`), and meanwhile

- samples every `--sample-interval-s` (default 0.25 s) the resident memory of the process tree
  (psutil RSS summed over CMD and all its descendants) and, where an NVIDIA driver is present,
  every GPU's used memory and utilisation through NVML (no driver: GPU fields stay null);
- collects the trial's metrics from stdout lines `GPULEDGER_METRIC {"name", "value", "step"}` and
  from the JSONL file `$GPULEDGER_METRICS` (a temporary file the agent creates for the child;
  `gpuledger.track.log` writes there);
- with `--echo-metrics NAME[,NAME]`, echoes the named metrics it reads from the file to its own
  stdout as `GPULEDGER_METRIC {"name", "value", "step", "time"}` lines, so that a launcher that
  only sees the job's logs (SkyPilot) can read a running trial's objective (pruning). Bounded: only
  the named metrics, at most one line per metric per `--echo-interval-s` (default 1 s); a metric
  logged faster is coalesced to its latest point, and the last point is always echoed before the
  result line; a point without a step is echoed with its number (1, 2, ... per metric). The
  record keeps every point either way;
- forwards SIGINT/SIGTERM/SIGHUP to the child's process group (SIGKILL after `--kill-grace-s`);
- enforces `--timeout-s` (kills the group; status `failed`, reason "timeout after N s").

At exit it writes the result record (docs/result-record.md; `gpuledger.record.ResultRecord`)
atomically to FILE, prints it as one `GPULEDGER_RESULT {...}` line on stdout (followed by
` hmac-sha256=HEX` when `$GPULEDGER_RESULT_KEY` gave it a key, which it removes from its environment
at start: `gpuledger.agent.signing`), and exits with the child's exit code (128+N when the child died
of signal N).

Placement fields (launcher, cloud, region, instance type, accelerator, GPU count, spot) and the
ids come from options or, when absent, from `GPULEDGER_*` environment variables, so that a
launcher can set them either way. Only stdlib, psutil and (optionally) pynvml: it runs inside
cloud jobs.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil

from gpuledger import protocol, vocabulary
from gpuledger.agent import measure
from gpuledger.agent.measure import GIB, MAX_LINE_BYTES, Echo, FileTail, Gpus, Metrics, oom_kill_count
from gpuledger.agent.owned import Neutraliser
from gpuledger.agent.owned import note as owned_note
from gpuledger.agent.signing import read_keys, signed_result_line, take_env_key, write_signed
from gpuledger.protocol import ENV_METRICS as METRICS_ENV
from gpuledger.protocol import METRIC_LINE_PREFIX, RESULT_LINE_PREFIX, SCHEMA

STDERR_TAIL_LINES = 50
STDERR_TAIL_BYTES = 8 * 1024

#: What marks an out-of-memory death in stderr: PyTorch's `torch.OutOfMemoryError` /
#: "CUDA out of memory", Python's MemoryError, CUDA runtime and cuBLAS allocation failures.
OOM_PATTERN = re.compile(
    rb"CUDA out of memory|OutOfMemoryError|\bMemoryError\b|CUDA error: out of memory|"
    rb"CUBLAS_STATUS_ALLOC_FAILED|RESOURCE_EXHAUSTED: Out of memory"
)
FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _env(name: str, default: str | None = None) -> str | None:
    value = os.environ.get(name)
    return value if value not in (None, "") else default


def _truthy(text: str | None) -> bool:
    return (text or "").strip().lower() in {"1", "true", "yes", "on"}


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).isoformat()


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


class Agent:
    """Runs one command under measurement; `run()` returns the result record as a dict."""

    def __init__(self, cmd: list[str], opts: argparse.Namespace) -> None:
        self.cmd = cmd
        self.opts = opts
        self.proc: subprocess.Popen[bytes] | None = None
        self.signalled: int | None = None  # the signal that cancelled us
        self.timed_out = False
        self.parent_gone = False
        self.done = threading.Event()
        self.peak_rss = 0
        self.peak_gpu_mem: float | None = None
        self.peak_gpu_util: float | None = None
        self.stderr_tail: collections.deque[bytes] = collections.deque(maxlen=STDERR_TAIL_LINES)
        self.stderr_partial = b""
        self.oom_in_stderr = False
        self.stdout_ends_with_newline = True
        self.out_lock = threading.Lock()
        self.kill_at: float | None = None
        self.keys: dict[str, bytes] = {}  # the signing keys (`--key-fd`)
        self.sampler_error: str | None = None
        # the trial's output never carries a line the launcher would take for the agent's own record
        self.stdout_owned = Neutraliser()
        self.stderr_owned = Neutraliser()
        self.line_key: bytes | None = None  # the key the result line is signed with ($GPULEDGER_RESULT_KEY)

    # -- signals -----------------------------------------------------------------------------

    def _killpg(self, sig: int) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)

    def _kill_all(self) -> None:
        """SIGKILLs the trial's group and every other process below the agent: a daemon that left the
        group (double fork, setsid) is still the agent's descendant (`become_subreaper`); reaps them."""
        self._killpg(signal.SIGKILL)
        try:
            rest = psutil.Process().children(recursive=True)
        except psutil.Error:
            return
        for p in rest:
            with contextlib.suppress(psutil.Error):
                p.kill()
        psutil.wait_procs(rest, timeout=2)

    def _stop_child(self, sig: int = signal.SIGTERM) -> None:
        """Sends `sig` to the child's group now and SIGKILL after the grace period."""
        self._killpg(sig)
        if self.kill_at is None:
            self.kill_at = time.monotonic() + self.opts.kill_grace_s

    def _on_signal(self, signum: int, _frame: Any) -> None:
        if self.signalled is None:
            self.signalled = signum
        if self.proc is None:  # not started yet: nothing to forward; do not start it
            return
        # forward what we got (SIGINT stays SIGINT so the trainer can save and exit cleanly)
        self._stop_child(signum if signum != signal.SIGHUP else signal.SIGTERM)

    # -- threads -----------------------------------------------------------------------------

    def _pump_stdout(self, pipe: Any, metrics: Metrics) -> None:
        """Passes the trial's stdout through (result-line prefixes neutralised: `owned.Neutraliser`),
        parsing its `GPULEDGER_METRIC` lines; a line is read in
        pieces of at most `MAX_LINE_BYTES` (memory does not grow with the longest line), and one
        longer than that is passed through unparsed."""
        prefix = METRIC_LINE_PREFIX.encode()
        continued = False  # the piece read is the rest of a line longer than MAX_LINE_BYTES
        for line in iter(lambda: pipe.readline(MAX_LINE_BYTES), b""):
            whole = line.endswith(b"\n") or len(line) < MAX_LINE_BYTES
            if not continued and whole and line.startswith(prefix):
                metrics.add_json(line[len(prefix):].decode("utf-8", "replace"))
            elif not continued and not whole and line.startswith(prefix):
                metrics.refused += 1
            continued = not line.endswith(b"\n")
            self._write_out(self.stdout_owned.feed(line))
        self._write_out(self.stdout_owned.finish())
        pipe.close()

    def _write_out(self, data: bytes) -> None:
        """Writes the trial's stdout (its result-line prefixes already neutralised) through."""
        if not data:
            return
        with self.out_lock:
            with contextlib.suppress(OSError, ValueError):
                sys.stdout.buffer.write(data)
                sys.stdout.buffer.flush()
            self.stdout_ends_with_newline = data.endswith(b"\n")

    def _pump_stderr(self, pipe: Any) -> None:
        err = sys.stderr.buffer
        fd = pipe.fileno()
        carry = b""  # keeps the OOM scan working across chunk boundaries
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            try:
                err.write(self.stderr_owned.feed(chunk))
                err.flush()
            except (OSError, ValueError):
                pass
            window = carry + chunk
            if not self.oom_in_stderr and OOM_PATTERN.search(window):
                self.oom_in_stderr = True
            carry = window[-64:]
            data = self.stderr_partial + chunk
            *lines, self.stderr_partial = data.split(b"\n")
            for line in lines:
                self.stderr_tail.append(line + b"\n")
            if len(self.stderr_partial) > STDERR_TAIL_BYTES:
                self.stderr_partial = self.stderr_partial[-STDERR_TAIL_BYTES:]
        with contextlib.suppress(OSError, ValueError):
            err.write(self.stderr_owned.finish())
            err.flush()
        pipe.close()

    def _sample_once(self, gpus: Gpus) -> None:
        assert self.proc is not None
        rss = 0
        try:  # everything below the agent: the trial's tree and any daemon it left behind
            procs = psutil.Process().children(recursive=True)
        except psutil.Error:
            procs = []
        for p in procs:
            try:
                rss += p.memory_info().rss
            except psutil.Error:
                continue
        self.peak_rss = max(self.peak_rss, rss)
        mem, util = gpus.sample()
        if mem:
            self.peak_gpu_mem = max(self.peak_gpu_mem or 0.0, max(mem))
        if util:
            self.peak_gpu_util = max(self.peak_gpu_util or 0.0, max(util))

    def _sampler(self, gpus: Gpus, tail: FileTail, started_mono: float, echo: Echo | None = None) -> None:
        parent = os.getppid()
        interval = self.opts.sample_interval_s
        while not self.done.is_set():
            try:  # measuring may fail; the timeout and the parent watch below must not stop with it
                self._sample_once(gpus)
                tail.poll()
                if echo is not None:
                    echo.flush()
            except Exception as err:  # noqa: BLE001 - said once on stderr, the trial goes on
                if not self.sampler_error:
                    self.sampler_error = f"{type(err).__name__}: {err}"
                    with contextlib.suppress(OSError, ValueError):
                        sys.stderr.write(f"gpuledger agent: measuring failed ({self.sampler_error[:300]})\n")
            now = time.monotonic()
            if self.opts.timeout_s and not self.timed_out and now - started_mono > self.opts.timeout_s:
                self.timed_out = True
                self._stop_child(signal.SIGTERM)
            if self.opts.exit_with_parent and not self.parent_gone and os.getppid() != parent:
                self.parent_gone = True  # the launcher died: do not leave the trial orphaned
                self._stop_child(signal.SIGTERM)
            if self.kill_at is not None and now >= self.kill_at:
                self._killpg(signal.SIGKILL)
                self.kill_at = None
            self.done.wait(interval)

    # -- main --------------------------------------------------------------------------------

    def run(self) -> tuple[dict[str, Any], int]:
        """Runs the command; returns (the result record dict, the exit code to exit with)."""
        opts = self.opts
        for sig in FORWARDED_SIGNALS:
            signal.signal(sig, self._on_signal)

        measure.become_subreaper()
        tmpdir = tempfile.mkdtemp(prefix="gpuledger-agent-")
        # --metrics-file: kept where the launcher reads intermediate values (pruning); else private
        metrics_path = Path(opts.metrics_file) if opts.metrics_file else Path(tmpdir) / "metrics.jsonl"
        metrics_path.touch()
        # the trial never sees gpuledger's own variables (paths, placement, the result file, the sweep)
        env = protocol.trial_environment(dict(os.environ))
        env[METRICS_ENV] = str(metrics_path)
        env["PYTHONUNBUFFERED"] = env.get("PYTHONUNBUFFERED", "1")
        for key, value in (
            (protocol.ENV_RUN_ID, opts.run_id),
            (protocol.ENV_TRIAL_ID, opts.trial_id),
            (protocol.ENV_ATTEMPT, str(opts.attempt)),
        ):
            if value:
                env[key] = value

        gpus = Gpus()
        oom_kills_before = oom_kill_count()
        started = time.time()
        started_mono = time.monotonic()
        metrics = Metrics(started)
        echo = None
        if opts.echo_metrics:
            echo = Echo(set(opts.echo_metrics), opts.echo_interval_s, started, self._print_line)
        tail = FileTail(metrics_path, metrics, on_points=echo.offer if echo is not None else None)
        exit_code: int | None = None
        launch_error: str | None = None
        threads: list[threading.Thread] = []
        if self.signalled is None:
            try:
                self.proc = subprocess.Popen(
                    self.cmd,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    env=env,
                    cwd=opts.workdir or None,
                    start_new_session=True,
                )
            except OSError as err:
                launch_error = f"could not start {self.cmd[0]!r}: {err}"
        if self.proc is not None:
            threads = [
                threading.Thread(target=self._pump_stdout, args=(self.proc.stdout, metrics), daemon=True),
                threading.Thread(target=self._pump_stderr, args=(self.proc.stderr,), daemon=True),
            ]
            sampler = threading.Thread(target=self._sampler, args=(gpus, tail, started_mono, echo), daemon=True)
            for t in threads:
                t.start()
            sampler.start()
            if self.signalled is not None:  # a signal arrived between handler set-up and Popen
                self._stop_child(signal.SIGTERM)
            while True:
                try:
                    exit_code = self.proc.wait()
                    break
                except KeyboardInterrupt:  # pragma: no cover - handlers replace the default
                    continue
            # Whatever the trial left behind dies with it (and releases the pipes): its group, and
            # daemons that left the group; its time runs until they are gone.
            self._kill_all()
            ended = time.time()
            self.done.set()
            sampler.join(timeout=5)
            for t in threads:
                t.join(timeout=5)
        else:
            ended = time.time()
            self.done.set()
        tail.finish()
        if echo is not None:
            echo.flush(force=True)  # the last point of each echoed metric, before the result line
        gpus.close()
        with contextlib.suppress(OSError):
            if not opts.metrics_file:
                metrics_path.unlink()
            os.rmdir(tmpdir)

        status, reason = self._classify(exit_code, launch_error, oom_kills_before)
        printed = owned_note(self.stdout_owned.count + self.stderr_owned.count)
        if printed:
            reason = f"{reason}; {printed}" if reason else printed
        tail_text = b"".join(self.stderr_tail) + self.stderr_partial
        tail_text = tail_text[-STDERR_TAIL_BYTES:]
        if launch_error:
            tail_text += launch_error.encode() + b"\n"
        record = self._record(started, ended, exit_code, status, reason, metrics, gpus, tail_text)
        if exit_code is None:
            code = 127 if launch_error else 130
        elif exit_code < 0:
            code = 128 + (-exit_code)
        else:
            code = exit_code
        return record, code

    def _classify(self, exit_code: int | None, launch_error: str | None,
                  oom_kills_before: int | None) -> tuple[str, str | None]:
        """Returns (status, reason) by the rules of docs/result-record.md."""
        if launch_error:
            return "failed", launch_error
        if self.timed_out:
            return "failed", f"timeout after {self.opts.timeout_s:g} s"
        if self.signalled is not None:  # even if the trial then exited 0: it did not finish
            return "cancelled", f"cancelled by {_signal_name(self.signalled)}"
        if self.parent_gone:
            return "cancelled", "cancelled: the launching process went away"
        if exit_code is None:
            return "cancelled", "cancelled before start"
        if exit_code == 0:
            return "succeeded", None
        killed_by = -exit_code if exit_code < 0 else (exit_code - 128 if exit_code > 128 else None)
        if self.oom_in_stderr:
            return "oom", f"out of memory (exit code {exit_code})" if exit_code >= 0 else (
                f"out of memory (killed by signal {_signal_name(-exit_code)})")
        if killed_by == signal.SIGKILL:
            after = oom_kill_count()
            if oom_kills_before is not None and after is not None and after > oom_kills_before:
                return "oom", "killed by the kernel OOM killer"
        if exit_code < 0:
            return "failed", f"killed by signal {_signal_name(-exit_code)}"
        return "failed", f"exit code {exit_code}"

    def _record(self, started: float, ended: float, exit_code: int | None, status: str,
                reason: str | None, metrics: Metrics, gpus: Gpus, tail: bytes) -> dict[str, Any]:
        opts = self.opts
        accelerator = opts.accelerator or (gpus.name if gpus.handles else None)
        n_gpus = opts.gpus if opts.gpus is not None else len(gpus.handles)
        params: dict[str, Any] = {}
        if opts.params:
            try:
                loaded = json.loads(opts.params)
                params = loaded if isinstance(loaded, dict) else {}
            except ValueError:
                params = {}
        with metrics.lock:
            points = list(metrics.points)
            final = dict(metrics.final)
        text_tail = None
        if status != "succeeded" and tail:
            text_tail = tail.decode("utf-8", "replace")
        return {
            "schema": SCHEMA,
            "run_id": opts.run_id or f"{opts.trial_id or 'trial'}-{int(started)}-{os.getpid()}",
            "sweep_id": opts.sweep_id,
            "trial_id": opts.trial_id or "trial",
            "attempt": opts.attempt,
            "launcher": opts.launcher,
            "cloud": opts.cloud,
            "region": opts.region,
            "instance_type": opts.instance_type,
            "accelerator": accelerator,
            "gpus": n_gpus,
            "spot": bool(opts.spot),
            "started_at": _iso(started),
            "ended_at": _iso(ended),
            "wall_s": round(max(0.0, ended - started), 3),
            "exit_code": exit_code,
            "status": status,
            "reason": reason,
            "peak_gpu_mem_gib": None if self.peak_gpu_mem is None else round(self.peak_gpu_mem, 4),
            "peak_gpu_util_pct": self.peak_gpu_util,
            "peak_rss_gib": round(self.peak_rss / GIB, 6) if self.proc is not None else None,
            "preemptions": 0,
            "recoveries": 0,
            "hostname": socket.gethostname(),
            "command": shlex.join(self.cmd),
            "params": params,
            "metrics": points,
            "final_metrics": final,
            "billing": [],
            "stderr_tail": text_tail,
            **_purpose(),
        }

    def emit(self, record: dict[str, Any]) -> None:
        """Writes the record atomically to --result (signed, with `--key-fd`: `signature_path`) and
        prints the GPULEDGER_RESULT line (signed with `$GPULEDGER_RESULT_KEY`, when given)."""
        line = json.dumps(record, separators=(",", ":"), allow_nan=False)
        try:
            if self.opts.result:
                write_signed(Path(self.opts.result), record, self.keys)
        finally:  # the line first carries the record when the file cannot be written (a full disk)
            self._print_line(signed_result_line(line, self.line_key) + "\n")

    def _print_line(self, text: str) -> None:
        """Prints one line of the agent's own on stdout, on a line of its own (the child's partial
        last line, if any, is ended first)."""
        with self.out_lock:
            prefix = "" if self.stdout_ends_with_newline else "\n"
            with contextlib.suppress(OSError, ValueError):
                sys.stdout.write(prefix + text)
                sys.stdout.flush()
            self.stdout_ends_with_newline = True


def _purpose() -> dict[str, Any]:
    """Returns the record's purpose fields from `$GPULEDGER_PURPOSE` and `$GPULEDGER_PROBE_SHAPE` (a probe
    says so in its own record, so it is never taken for a trial's attempt wherever it is ingested)."""
    purpose = _env(protocol.ENV_PURPOSE, vocabulary.TRIAL_PURPOSE)
    if purpose not in vocabulary.PURPOSES:
        purpose = vocabulary.TRIAL_PURPOSE
    shape = None
    if purpose == vocabulary.PROBE_PURPOSE:
        with contextlib.suppress(ValueError):
            loaded = json.loads(_env(protocol.ENV_PROBE_SHAPE, "null") or "null")
            shape = loaded if isinstance(loaded, dict) else None
    return {"purpose": purpose, "probe_shape": shape}


def _float_arg(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None


def _int_arg(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None


def _names(text: str) -> list[str]:
    """Parses `--echo-metrics`: comma-separated metric names."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise argparse.ArgumentTypeError("give at least one metric name")
    return names


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m gpuledger.agent", allow_abbrev=False,  # an option only by its full name (as the CLI's)
        description="Run one trial command, measure it, write its result record.",
        epilog="Every option falls back to the GPULEDGER_* environment variable named in brackets.",
    )
    p.add_argument("--result", default=_env(protocol.ENV_RESULT_FILE), metavar="FILE",
                   help=f"where to write the result record JSON [{protocol.ENV_RESULT_FILE}]")
    p.add_argument("--run-id", default=_env(protocol.ENV_RUN_ID), help=f"[{protocol.ENV_RUN_ID}]")
    p.add_argument("--trial-id", default=_env(protocol.ENV_TRIAL_ID), help=f"[{protocol.ENV_TRIAL_ID}]")
    p.add_argument("--sweep-id", default=_env(protocol.ENV_SWEEP_ID), help=f"[{protocol.ENV_SWEEP_ID}]")
    p.add_argument("--attempt", type=_int_arg, default=_env(protocol.ENV_ATTEMPT) or "1",
                   help=f"[{protocol.ENV_ATTEMPT}]")
    p.add_argument("--params", default=_env(protocol.ENV_PARAMS), metavar="JSON",
                   help=f"the trial's parameters as a JSON object [{protocol.ENV_PARAMS}]")
    p.add_argument("--launcher", choices=list(vocabulary.LAUNCHERS), default=_env(protocol.ENV_LAUNCHER, "local"),
                   help=f"[{protocol.ENV_LAUNCHER}]")
    p.add_argument("--cloud", default=_env(protocol.ENV_CLOUD), help=f"[{protocol.ENV_CLOUD}]")
    p.add_argument("--region", default=_env(protocol.ENV_REGION), help=f"[{protocol.ENV_REGION}]")
    p.add_argument("--instance-type", default=_env(protocol.ENV_INSTANCE_TYPE), help=f"[{protocol.ENV_INSTANCE_TYPE}]")
    p.add_argument("--accelerator", default=_env(protocol.ENV_ACCELERATOR),
                   help=f"[{protocol.ENV_ACCELERATOR}]; default: the NVML name of GPU 0, if any")
    # string defaults from the environment go through `type`: a bad variable is a one-line usage error
    p.add_argument("--gpus", type=_int_arg, default=_env(protocol.ENV_GPUS) or None,
                   help=f"[{protocol.ENV_GPUS}]; default: the number of visible GPUs")
    p.add_argument("--spot", action=argparse.BooleanOptionalAction, default=_truthy(_env(protocol.ENV_SPOT)),
                   help=f"[{protocol.ENV_SPOT}]")
    p.add_argument("--timeout-s", type=_float_arg, default=_env(protocol.ENV_TIMEOUT_S) or None,
                   help=f"kill the trial after this many seconds [{protocol.ENV_TIMEOUT_S}]")
    p.add_argument("--kill-grace-s", type=float, default=5.0,
                   help="seconds between SIGTERM/SIGINT and SIGKILL of the trial's group")
    p.add_argument("--sample-interval-s", type=float, default=0.25)
    p.add_argument("--workdir", default=None, help="directory to run the command in")
    p.add_argument("--metrics-file", default=None, metavar="FILE",
                   help="the JSONL file the trial's metrics go to (kept, so a launcher can read intermediate "
                        "values while it runs); default: a private temporary file")
    p.add_argument("--echo-metrics", type=_names, default=[], metavar="NAME[,NAME]",
                   help="echo these metrics from the metrics file to stdout as GPULEDGER_METRIC lines (a launcher "
                        "that reads the job's logs sees intermediate values), at most one line per metric per "
                        "--echo-interval-s")
    # a string default goes through `type` too: a bad variable is the same one-line usage error
    p.add_argument("--echo-interval-s", type=_float_arg, default=_env(protocol.ENV_ECHO_INTERVAL_S, "1.0"),
                   help="the least time between two echoed lines of one metric (faster points: the latest is "
                        f"echoed) [{protocol.ENV_ECHO_INTERVAL_S}]")
    p.add_argument("--key-fd", type=_int_arg, default=None, metavar="FD",
                   help="read the attempt's signing key from this inherited pipe (the local launcher passes it); "
                        "the result file is then signed (FILE.sig, HMAC-SHA256) so the launcher can tell it "
                        "from one a trial wrote")
    p.add_argument("--exit-with-parent", action="store_true",
                   help="cancel the trial when the process that started the agent goes away")
    p.add_argument("cmd", nargs=argparse.REMAINDER, help="-- CMD ARGS...")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    opts = parser.parse_args(argv)
    cmd = list(opts.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        parser.error("no command given: python -m gpuledger.agent --result FILE -- CMD ARGS...")
    if opts.sample_interval_s <= 0 or opts.sample_interval_s > 0.5:
        parser.error("--sample-interval-s must be in (0, 0.5]")
    if opts.timeout_s is not None and not opts.timeout_s > 0:  # also refuses NaN
        parser.error("--timeout-s must be > 0")
    if opts.gpus is not None and opts.gpus < 0:
        parser.error("--gpus must be >= 0")
    if not opts.echo_interval_s >= 0:  # also refuses NaN
        parser.error("--echo-interval-s must be >= 0")
    agent = Agent(cmd, opts)
    try:  # taken out of the environment before anything starts: the trial never inherits it
        agent.line_key = take_env_key(protocol.ENV_RESULT_KEY)
    except ValueError as err:
        parser.error(str(err))
    if opts.key_fd is not None:
        try:
            agent.keys = read_keys(opts.key_fd)
        except (OSError, ValueError) as err:
            parser.error(f"--key-fd {opts.key_fd}: {err}")
    record, code = agent.run()
    try:
        agent.emit(record)
    except OSError as err:  # a full disk, a file-size limit: said in one line, the record is on stdout
        sys.stderr.write(f"gpuledger agent: could not write the result record to {opts.result}: "
                         f"{err.strerror or err}; it is on stdout as the {RESULT_LINE_PREFIX.strip()} line\n")
        return code or 1
    return code


if __name__ == "__main__":
    sys.exit(main())
