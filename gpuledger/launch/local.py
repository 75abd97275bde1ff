"""The local launcher: each trial is a subprocess on this machine, under `gpuledger.agent`.

    with LocalLauncher(max_parallel=2, landing_dir=tmp_path) as launcher:
        handles = [launcher.submit(req) for req in requests]
        launcher.wait(handles)
        records = [r for h in handles for r in launcher.collect(h)]

What it does (docs/result-record.md describes the record):
- `submit` starts `python -m gpuledger.agent --result <landing_dir>/<run_id>.json -- bash -c SCRIPT`
  in `request.workdir`, or queues the trial while `max_parallel` are running; queued trials start
  as running ones finish (every `submit`, `poll`, `wait`, `collect` call advances the queue).
  SCRIPT is `request.run`, preceded by `request.setup` when given: `( SETUP ) && RUN` in the same
  shell, so a failing set-up is a failed trial whose stderr tail shows why.
- The trial sees `request.env`, the `GPULEDGER_*` ids (RUN_ID, TRIAL_ID, SWEEP_ID, SWEEP_NAME,
  ATTEMPT, PARAMS as JSON, LAUNCHER=local) and a PATH that starts with the directory of `python`, so
  that `python trainers/...` in a spec runs the same interpreter as gpuledger.
- Each agent runs in its own session; the agent puts the trial in another. The per-trial timeout
  (`request.timeout_s`, else `default_timeout_s`) is enforced by the agent (status `failed`,
  reason "timeout after N s"), with a backstop here that kills the whole tree if the agent overruns.
- `cancel`, `close()` (also on leaving the `with` block, and at interpreter exit through atexit, which
  covers Ctrl-C) stop every trial: SIGTERM to each agent, which forwards it to its trial's group
  and records the attempt as `cancelled`; whatever is still alive after the grace period is
  SIGKILLed, by process group and by pid. Agents are started with `--exit-with-parent`, so even a
  SIGKILLed launcher leaves no orphan trial behind.
- `collect` returns the record (`ResultRecord`) completed with placement (launcher "local",
  hostname) and one billing line (source "local", hours = wall_s / 3600, at the request's
  `usd_per_hour` and `price_description` when it has one, else this launcher's `usd_per_hour`)
  and rewrites the landing file with it. An agent that died without a record yields a synthesised `failed` record.
- Agent stdout+stderr go to `<landing_dir>/logs/<run_id>.log`.
- Packed trials (`pack` k > 1, gpuledger/launch/packed.py): each slot is one job of up to k agents, each
  billed its share of the job; a packed trial reads `running` until its whole slot ended (paid till then).

run_id = f"{trial_id}-a{attempt}-{8 hex}"; the attempt counts earlier records of the same trial in
the landing folder and earlier submissions to this launcher.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil

from gpuledger import protocol, vocabulary
from gpuledger.agent.signing import signature_path, signed_by, write_signed
from gpuledger.launch.base import LaunchRequest, TrialStatus
from gpuledger.launch.packed import PackSlot, open_slot, trial_span
from gpuledger.record import ResultRecord

USD_PER_HOUR_ENV = "GPULEDGER_LOCAL_USD_PER_HOUR"
TREE_SCAN_INTERVAL_S = 1.0


def _default_usd_per_hour() -> float:
    """The setting `local.usd_per_hour` ($GPULEDGER_LOCAL_USD_PER_HOUR), else 0."""
    from gpuledger import settings

    value = settings.current().get("local.usd_per_hour")
    return float(value) if value is not None else 0.0


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).isoformat()


@dataclass
class LocalHandle:
    """One attempt of one trial on this machine. `state`: pending | running | done | cancelled."""

    run_id: str
    attempt: int
    request: LaunchRequest
    result_path: Path
    log_path: Path
    timeout_s: float | None
    state: str = "pending"
    proc: subprocess.Popen[bytes] | None = None
    submitted_at: float = field(default_factory=time.time)
    started_at: float | None = None  # wall clock, when the agent was started
    started_mono: float | None = None
    ended_at: float | None = None
    exit_code: int | None = None
    cancel_requested: bool = False
    hard_killed: str | None = None  # why the launcher had to SIGKILL the agent
    forged: str | None = None  # why the result file found was not the agent's
    landing_error: str | None = None  # why the landing copy could not be written
    tree: dict[int, float] = field(default_factory=dict)  # pid -> create_time seen under the agent
    groups: set[int] = field(default_factory=set)  # process groups of those (the trial's session)
    tree_scanned_at: float = 0.0  # monotonic time of the last descendant scan
    record: ResultRecord | None = None
    slot: PackSlot | None = None  # the packed slot (one job, k agents) it runs in; None: a slot of its own
    #: the key the agent signs this attempt's result file with (passed on a pipe the trial never
    #: inherits; `gpuledger.agent.signatures`): a file a trial wrote is not believed
    key: bytes = field(default_factory=lambda: secrets.token_hex(32).encode())

    @property
    def trial_id(self) -> str:
        return self.request.trial_id


class LocalLauncher:
    """Runs trials as local subprocesses, at most `max_parallel` at once. See the module docstring."""

    name = "local"

    def __init__(
        self,
        max_parallel: int = 1,
        landing_dir: Path | str | None = None,
        usd_per_hour: float | None = None,
        python: str = sys.executable,
        default_timeout_s: float | None = None,
        kill_grace_s: float = 3.0,
        log_dir: Path | str | None = None,
        landing_key: bytes | None = None,
        pack: int = 1,
    ) -> None:
        if max_parallel < 1:
            raise ValueError(f"max_parallel must be at least 1, got {max_parallel}")
        if pack < 1:
            raise ValueError(f"pack (trials per slot) must be at least 1, got {pack}")
        self.max_parallel = int(max_parallel)
        self.pack = int(pack)
        self._slots: list[PackSlot] = []  # the packed slots not yet ended
        if landing_dir is None:  # the project's landing folder (gpuledger.settings)
            from gpuledger import settings

            landing_dir = settings.current().landing_dir
        self.landing_dir = Path(landing_dir)
        self.log_dir = Path(log_dir) if log_dir is not None else self.landing_dir / "logs"
        self.usd_per_hour = _default_usd_per_hour() if usd_per_hour is None else float(usd_per_hour)
        if self.usd_per_hour < 0:
            raise ValueError(f"usd_per_hour must not be negative, got {self.usd_per_hour}")
        self.python = python
        self.landing_key = landing_key  # the landing folder's key: the agent signs with it too (recovery)
        self.default_timeout_s = default_timeout_s
        self.kill_grace_s = float(kill_grace_s)
        self.hostname = socket.gethostname()
        self._lock = threading.RLock()
        self._queue: deque[LocalHandle] = deque()
        self._running: list[LocalHandle] = []
        self._handles: list[LocalHandle] = []
        self._attempts: dict[str, int] = {}
        self._closed = False
        atexit.register(self.close)

    # -- context manager ---------------------------------------------------------------------

    def __enter__(self) -> LocalLauncher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the Launcher protocol ---------------------------------------------------------------

    def submit(self, request: LaunchRequest) -> LocalHandle:
        """Starts the trial now, or queues it while `max_parallel` trials run; returns its handle."""
        with self._lock:
            if self._closed:
                raise RuntimeError("this LocalLauncher is closed; make a new one")
            attempt = self._next_attempt(request.trial_id)
            run_id = f"{request.trial_id}-a{attempt}-{secrets.token_hex(4)}"
            timeout = request.timeout_s if request.timeout_s is not None else self.default_timeout_s
            handle = LocalHandle(
                run_id=run_id,
                attempt=attempt,
                request=request,
                result_path=self.landing_dir / f"{run_id}.json",
                log_path=self.log_dir / f"{run_id}.log",
                timeout_s=timeout,
            )
            self._handles.append(handle)
            self._queue.append(handle)
            self._pump()
            return handle

    def poll(self, handle: LocalHandle) -> TrialStatus:
        """Returns pending | running | succeeded | failed | cancelled (oom and preempted: failed)."""
        with self._lock:
            self._pump()
            if handle.state == "pending":
                return "pending"
            if handle.state == "running" or (handle.slot is not None and not handle.slot.ended):
                return "running"
            return vocabulary.launch_status_of(self._final_record(handle).status)  # type: ignore[return-value]

    def cancel(self, handle: LocalHandle) -> None:
        """Stops the trial (idempotent): a queued one never starts, a running one gets SIGTERM."""
        with self._lock:
            handle.cancel_requested = True
            if handle.state == "pending":
                with contextlib.suppress(ValueError):
                    self._queue.remove(handle)
                handle.state = "cancelled"
                handle.ended_at = time.time()
                return
            if handle.state == "running" and handle.proc is not None:
                self._remember_tree(handle)
                self._signal_agent(handle, signal.SIGTERM)
        self._reap_within(handle, self.kill_grace_s + 5.0)

    def metrics_path(self, handle: LocalHandle) -> Path:
        """The trial's metrics JSONL (`gpuledger.track.log` lines), next to its log."""
        return self.log_dir / f"{handle.run_id}.metrics.jsonl"

    def progress(self, handle: LocalHandle, offset: int = 0) -> tuple[list[dict[str, Any]], int]:
        """Returns (the metric points the running trial logged after byte `offset`, the new offset);
        only whole lines are read, so a point being written is read next time."""
        try:
            with open(self.metrics_path(handle), "rb") as fh:
                fh.seek(offset)
                data = fh.read(1 << 20)
        except OSError:
            return [], offset
        end = data.rfind(b"\n") + 1
        points = []
        for line in data[:end].splitlines():
            with contextlib.suppress(ValueError):
                point = json.loads(line)
                if isinstance(point, dict):
                    points.append(point)
        return points, offset + end

    def collect(self, handle: LocalHandle) -> list[ResultRecord]:
        """Returns [the completed result record] of this attempt (waits for it to end first)."""
        self.wait([handle])
        if handle.slot is not None:  # its share of the job is known when the whole slot ended
            self.wait(list(handle.slot.members))
        with self._lock:
            return [self._final_record(handle)]

    # -- conveniences ------------------------------------------------------------------------

    def wait(self, handles: list[LocalHandle] | None = None, timeout_s: float | None = None,
             interval_s: float = 0.1) -> bool:
        """Advances the queue until every handle (default: all) is terminal; returns True if so."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            with self._lock:
                self._pump()
                todo = [h for h in (handles if handles is not None else self._handles)
                        if h.state in ("pending", "running")]
            if not todo:
                return True
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(interval_s)

    def run_all(self, requests: list[LaunchRequest]) -> list[ResultRecord]:
        """Submits every request, waits for all, returns their records in order."""
        handles = [self.submit(r) for r in requests]
        self.wait(handles)
        return [rec for h in handles for rec in self.collect(h)]

    @property
    def running(self) -> int:
        with self._lock:
            return len(self._running)

    def close(self) -> None:
        """Stops everything this launcher started (no orphans); idempotent; returns nothing."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for handle in list(self._queue):
                handle.cancel_requested = True
                handle.state = "cancelled"
                handle.ended_at = time.time()
            self._queue.clear()
            running = list(self._running)
            for handle in running:
                handle.cancel_requested = True
                self._remember_tree(handle)
                self._signal_agent(handle, signal.SIGTERM)
        # the agents forward SIGTERM, wait up to their grace, SIGKILL, and write their record
        deadline = time.monotonic() + self.kill_grace_s + 3.0
        for handle in running:
            self._reap_within(handle, max(0.0, deadline - time.monotonic()))
        for handle in running:
            self._kill_tree(handle)
        with contextlib.suppress(Exception):
            atexit.unregister(self.close)

    # -- internals ---------------------------------------------------------------------------

    def _next_attempt(self, trial_id: str) -> int:
        previous = self._attempts.get(trial_id, 0)
        if self.landing_dir.is_dir():  # also the warehouse's landing/ingested/ and landing/rejected/
            for path in self.landing_dir.rglob(f"{trial_id}-a*-*.json"):
                middle = path.name[len(trial_id) + 2:].split("-", 1)[0]
                if middle.isdigit():
                    previous = max(previous, int(middle))
        self._attempts[trial_id] = previous + 1
        return previous + 1

    def _pump(self) -> None:
        """Reaps finished agents, enforces the backstop timeout, starts queued trials."""
        now = time.monotonic()
        for handle in list(self._running):
            assert handle.proc is not None
            code = handle.proc.poll()
            if code is None:
                if now - handle.tree_scanned_at >= TREE_SCAN_INTERVAL_S:  # callers may poll at 50 Hz
                    self._remember_tree(handle)
                if (handle.timeout_s is not None and handle.started_mono is not None
                        and now - handle.started_mono > handle.timeout_s + self.kill_grace_s + 10.0):
                    handle.hard_killed = f"timeout after {handle.timeout_s:g} s"
                    self._kill_tree(handle)
                    code = handle.proc.poll()
                    if code is None:
                        continue
                else:
                    continue
            self._finish(handle, code)
        self._slots = [s for s in self._slots if not s.ended]  # packed slots (pack > 1): gpuledger/launch/packed.py
        while self._queue and len(self._running) < self.max_parallel * self.pack and not self._closed:
            if self.pack > 1 and not open_slot(self._slots, self.max_parallel, self.pack,
                                               self._queue[0].request.sweep_id, self._queue[0]):
                break
            self._start(self._queue.popleft())

    def _finish(self, handle: LocalHandle, code: int) -> None:
        handle.exit_code = code
        handle.ended_at = time.time()
        handle.state = "done"
        self._running.remove(handle)
        self._kill_tree(handle)  # anything the trial left behind in the background

    def _start(self, handle: LocalHandle) -> None:
        req = handle.request
        self.landing_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        script = req.run if not req.setup else f"( {req.setup}\n) && {req.run}"
        # the agent signs its result with keys the trial never sees (a pipe, closed before the trial starts)
        key_read, key_write = os.pipe()
        os.write(key_write, b"\n".join([handle.key, *([self.landing_key] if self.landing_key else [])]) + b"\n")
        os.close(key_write)
        cmd = [
            self.python, "-m", "gpuledger.agent",
            "--result", str(handle.result_path.resolve()),
            "--key-fd", str(key_read),
            "--run-id", handle.run_id,
            "--trial-id", req.trial_id,
            "--sweep-id", req.sweep_id,
            "--attempt", str(handle.attempt),
            "--launcher", "local",
            "--params", json.dumps(req.params, sort_keys=True, default=str),
            "--kill-grace-s", f"{self.kill_grace_s:g}",
            "--exit-with-parent",
            "--metrics-file", str(self.metrics_path(handle).resolve()),
        ]
        if handle.timeout_s is not None:
            cmd += ["--timeout-s", f"{handle.timeout_s:g}"]
        cmd += ["--", "bash", "-c", script]
        # gpuledger's own variables come from here only: none inherited, none from the spec's task.env
        env = protocol.trial_environment(dict(os.environ))
        env.update({str(k): str(v) for k, v in req.env.items() if not protocol.ledger_env_names([str(k)])})
        env.update({
            protocol.ENV_RUN_ID: handle.run_id,
            protocol.ENV_TRIAL_ID: req.trial_id,
            protocol.ENV_SWEEP_ID: req.sweep_id,
            protocol.ENV_SWEEP_NAME: req.sweep_name,
            protocol.ENV_ATTEMPT: str(handle.attempt),
            protocol.ENV_PARAMS: json.dumps(req.params, sort_keys=True, default=str),
            protocol.ENV_LAUNCHER: "local",
            "PYTHONUNBUFFERED": "1",
            **{str(k): str(v) for k, v in req.probe_env.items()},
        })
        py_dir = str(Path(self.python).parent)
        env["PATH"] = py_dir + os.pathsep + env.get("PATH", "")
        handle.started_at = time.time()
        handle.started_mono = time.monotonic()
        try:
            with open(handle.log_path, "ab") as log:
                handle.proc = subprocess.Popen(
                    cmd, cwd=str(req.workdir), env=env, stdin=subprocess.DEVNULL,
                    stdout=log, stderr=subprocess.STDOUT, start_new_session=True, pass_fds=(key_read,),
                )
        except OSError as err:
            handle.state = "done"
            handle.ended_at = time.time()
            handle.exit_code = None
            handle.hard_killed = f"could not start the agent in {req.workdir}: {err}"
            return
        finally:
            os.close(key_read)
        handle.state = "running"
        self._running.append(handle)

    def _signal_agent(self, handle: LocalHandle, sig: int) -> None:
        if handle.proc is None or handle.proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(handle.proc.pid, sig)

    def _remember_tree(self, handle: LocalHandle) -> None:
        """Records the agent's descendants (pid, create time, group) for the final kill sweep."""
        if handle.proc is None or handle.proc.poll() is not None:
            return
        handle.tree_scanned_at = time.monotonic()
        try:
            children = psutil.Process(handle.proc.pid).children(recursive=True)
        except psutil.Error:
            return
        own_group = os.getpgrp()
        for child in children:
            try:
                handle.tree.setdefault(child.pid, child.create_time())
                pgid = os.getpgid(child.pid)
            except (psutil.Error, OSError):
                continue
            if pgid not in (own_group, handle.proc.pid):
                handle.groups.add(pgid)

    def _kill_tree(self, handle: LocalHandle) -> None:
        """SIGKILLs the agent's group, every remembered descendant and their groups."""
        if handle.proc is None:
            return
        self._remember_tree(handle)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(handle.proc.pid, signal.SIGKILL)
        for pgid in list(handle.groups):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
        for pid, created in list(handle.tree.items()):
            try:
                proc = psutil.Process(pid)
                if proc.create_time() == created:  # the same process, not a reused pid
                    proc.kill()
            except psutil.Error:
                continue
        with contextlib.suppress(subprocess.TimeoutExpired):
            handle.proc.wait(timeout=5)

    def _reap_within(self, handle: LocalHandle, seconds: float) -> None:
        if handle.proc is None:
            return
        try:
            handle.proc.wait(timeout=max(0.0, seconds))
        except subprocess.TimeoutExpired:
            handle.hard_killed = handle.hard_killed or "did not stop after SIGTERM; killed"
            self._kill_tree(handle)
        with self._lock:
            if handle in self._running and handle.proc.poll() is not None:
                self._finish(handle, handle.proc.returncode)

    def _final_record(self, handle: LocalHandle) -> ResultRecord:
        """Returns the attempt's completed record (placement + billing), built once and cached."""
        if handle.record is not None:
            return handle.record
        record = self._read_agent_record(handle)
        if record is None:
            record = self._synthesised_record(handle)
        record = self._complete(handle, record)
        handle.record = record
        try:
            write_signed(handle.result_path, record.to_json(), {"landing": self.landing_key} if self.landing_key else {})
        except OSError as err:  # the runtime keeps the record itself and says so when it cannot
            handle.landing_error = f"could not write {handle.result_path}: {err}"
        return record

    def _read_agent_record(self, handle: LocalHandle) -> dict[str, Any] | None:
        """Returns the agent's record when its file is signed with this attempt's key, else None
        (`handle.forged` says why: a file a trial wrote is never believed)."""
        if handle.proc is None or handle.hard_killed and handle.hard_killed.startswith("timeout"):
            return None
        try:
            raw = handle.result_path.read_bytes()
        except OSError:
            return None
        try:
            signature = signature_path(handle.result_path).read_text(encoding="ascii")
        except (OSError, ValueError):
            signature = ""
        if not signed_by(signature, "attempt", handle.key, raw):
            handle.forged = "its result file is not signed by this attempt's agent (written by something else)"
            return None
        try:
            data = json.loads(raw)
        except ValueError:
            return None
        if not isinstance(data, dict) or data.get("run_id") != handle.run_id:
            handle.forged = "its result file names another run"
            return None
        return data

    def _log_tail(self, handle: LocalHandle, max_bytes: int = 8192) -> str | None:
        try:
            with open(handle.log_path, "rb") as fh:
                fh.seek(0, os.SEEK_END)
                size = fh.tell()
                fh.seek(max(0, size - max_bytes))
                data = fh.read()
        except OSError:
            return None
        lines = data.decode("utf-8", "replace").splitlines(keepends=True)[-50:]
        return "".join(lines) or None

    def _synthesised_record(self, handle: LocalHandle) -> dict[str, Any]:
        req = handle.request
        started = handle.started_at or handle.ended_at or time.time()
        ended = handle.ended_at or time.time()
        if handle.proc is None and handle.hard_killed is None:
            status, reason = "cancelled", "cancelled before start"
            started = ended
        elif handle.hard_killed and handle.hard_killed.startswith("timeout"):
            status, reason = "failed", handle.hard_killed
        elif handle.cancel_requested:
            status, reason = "cancelled", "cancelled; the agent was killed before writing a record"
        elif handle.hard_killed:
            status, reason = "failed", handle.hard_killed
        elif handle.forged:
            status, reason = "failed", f"no trustworthy result record: {handle.forged}"
        else:
            status = "failed"
            reason = f"the agent exited with code {handle.exit_code} without writing a result record"
        return {
            "schema": protocol.SCHEMA,
            "run_id": handle.run_id,
            "trial_id": req.trial_id,
            "attempt": handle.attempt,
            "launcher": "local",
            "started_at": _iso(started),
            "ended_at": _iso(ended),
            "wall_s": round(max(0.0, ended - started), 3),
            "exit_code": handle.exit_code if handle.proc is not None else None,
            "status": status,
            "reason": reason,
            "command": req.run,
            "stderr_tail": self._log_tail(handle) if handle.proc is not None else None,
        }

    def _complete(self, handle: LocalHandle, record: dict[str, Any], retry: bool = True) -> ResultRecord:
        """Fills placement and billing; returns the validated record."""
        req = handle.request
        record = dict(record)
        record.update({
            "run_id": handle.run_id,
            "sweep_id": req.sweep_id,
            "trial_id": req.trial_id,
            "attempt": handle.attempt,
            "launcher": "local",
            "cloud": None,
            "region": None,
            "instance_type": None,
            "spot": False,
            "hostname": record.get("hostname") or self.hostname,
            "params": dict(req.params),
            "preemptions": 0,
            "recoveries": 0,
            "log_path": str(handle.log_path),
        })
        if record.get("accelerator") is None:
            record["gpus"] = 0
        wall_s = float(record.get("wall_s") or 0.0)
        hours = wall_s / 3600.0
        if req.usd_per_hour is None:  # no rate in the request: this launcher's own
            rate, description = self.usd_per_hour, f"local machine at ${self.usd_per_hour:.2f}/h ({USD_PER_HOUR_ENV})"
        else:
            rate = float(req.usd_per_hour)
            description = req.price_description or f"local machine at ${rate:.2f}/h (plan)"
        if handle.slot is not None:  # price x the job's wall-clock x share
            hours, fields, description = handle.slot.bill(handle, lambda m: trial_span(
                m.record.to_json() if m.record is not None else self._read_agent_record(m), m), description)
            record.update(fields)
        record["billing"] = [{  # the machine's one line: its GPU kind and count, no instance, no role of its own
            "source": "local", "description": description, "usd_per_hour": rate, "hours": hours,
            "cost_usd": rate * hours, "spot": False, "on_demand_usd_per_hour": rate,
            "accelerator": record.get("accelerator"), "gpus": int(record.get("gpus") or 0)}]
        try:
            model = ResultRecord.model_validate(record)
        except Exception as err:  # pydantic.ValidationError: keep the attempt, say why
            if not retry:
                raise
            bad = self._synthesised_record(handle)
            bad["status"] = "failed"
            bad["reason"] = f"the agent wrote an invalid result record: {' '.join(str(err).split())[:300]}"
            return self._complete(handle, bad, retry=False)
        return model
