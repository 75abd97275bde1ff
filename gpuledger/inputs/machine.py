"""This machine's measured speed, measured once and stored (not re-probed by every plan).

The local launcher's plan needs the machine's cores, RAM and one core's float32 matmul rate. They
are measured by `measure_machine()` (a child Python with BLAS pinned to one thread, as the demo
trainer pins itself) and stored as JSON with the date and the method in the cache file
(`machine_file()`): `$GPULEDGER_MACHINE_FILE`, else `$XDG_CACHE_HOME/gpuledger/machine.json`, else
`~/.cache/gpuledger/machine.json`. `local_machine()` reads that file (measuring and writing it only
when it is missing, unreadable or from another host), so two plans in a row use the same numbers.
The planner never calls this module: the plan command and the sweep flow pass its result in.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ENV_FILE = "GPULEDGER_MACHINE_FILE"

#: How the matmul rate is measured (stored with the number).
METHOD = ("best of >= 5 float32 {n}x{n} numpy matmuls (up to {budget_s} s) in a child Python with "
          "OPENBLAS/OMP/MKL_NUM_THREADS=1; 2 n^3 FLOP / best time")

_MATMUL_PROBE = """
import math, sys, time
import numpy as np
n, budget = int(sys.argv[1]), float(sys.argv[2])
a = np.random.default_rng(0).standard_normal((n, n), dtype=np.float32)
b = np.random.default_rng(1).standard_normal((n, n), dtype=np.float32)
a @ b
best, reps = math.inf, 0
end = time.perf_counter() + budget
while reps < 5 or (time.perf_counter() < end and reps < 5000):
    t0 = time.perf_counter()
    a @ b
    best = min(best, time.perf_counter() - t0)
    reps += 1
print(2 * n**3 / max(best, 1e-9) / 1e9)
"""


@dataclass(frozen=True)
class MachineLoad:
    """How busy this machine is at plan time: the kernel's load averages (runnable tasks) against its
    logical CPUs. Measured again by a plan more than `LOAD_REUSE_S` after the last measurement (kept that
    long beside the machine file: successive plans plan the same), never stored with the machine
    (`measure_load`; `$GPULEDGER_MACHINE_LOAD` sets one instead)."""

    load_1m: float
    load_5m: float
    logical_cores: int
    measured_at: str  # ISO 8601 UTC
    #: the share of a core each of `probe_k` spinning child processes got over `PROBE_S` seconds, side by
    #: side, just now (`measure_cpu_share`): what k new one-core trials get, whatever the scheduler's
    #: grouping (a session's cgroup gets its share, not each task); None when not measured
    probed_share: float | None = None
    probe_k: int = 0

    def cpu_share(self, parallel: int) -> float:
        """The share of one core each of `parallel` one-core trials can expect: the probe's when it ran
        with that many processes, else the load average's, min(1, logical CPUs / (load + parallel));
        at least 0.02."""
        if self.probed_share is not None and self.probe_k == max(1, parallel):
            return max(0.02, min(1.0, self.probed_share))
        want = max(0.0, self.load_1m) + max(1, parallel)
        return max(0.02, min(1.0, self.logical_cores / want))

    def _basis(self, parallel: int) -> str:
        if self.probed_share is not None and self.probe_k == max(1, parallel):
            return (f"measured: {self.probe_k} process(es) spinning {PROBE_S:g} s side by side got "
                    f"{self.probed_share:.2f} of a core each")
        return "min(1, CPUs / (load + trials))"

    def describe(self, parallel: int) -> str:
        share = self.cpu_share(parallel)
        how = (f"load average {self.load_1m:.1f} (1 min; {self.load_5m:.1f} over 5 min) on {self.logical_cores} "
               f"logical CPUs at {self.measured_at}")
        if share >= 0.95:
            return (f"machine load: {how}: room for {parallel} trial(s) at about a full core each "
                    f"({self._basis(parallel)}), the model's CPU time as it is")
        return (f"machine busy: {how}: with {parallel} trial(s) of this plan each gets about {share:.2f} of a core "
                f"({self._basis(parallel)}), so the model's CPU time is divided by {share:.2f} (x{1 / share:.1f}); "
                f"measured again at every plan ({ENV_LOAD} sets the load to plan for)")

    def to_json(self, parallel: int) -> dict[str, Any]:
        probed = self.probed_share is not None and self.probe_k == max(1, parallel)
        return {"load_1m": round(self.load_1m, 2), "load_5m": round(self.load_5m, 2),
                "logical_cores": self.logical_cores, "measured_at": self.measured_at, "parallel": parallel,
                "cpu_share": round(self.cpu_share(parallel), 3),
                "probed_share": round(self.probed_share, 3) if self.probed_share is not None else None,
                "probe_k": self.probe_k,
                "method": (f"{parallel} child process(es) spinning {PROBE_S:g} s side by side, CPU time / wall time"
                           if probed else "min(1, logical CPUs / (1-min load average + trials at once)); os.getloadavg()")}


#: how long each process of the CPU-share probe spins (seconds)
PROBE_S = 0.4

_SPIN = """
import time
end = time.perf_counter() + {s}
t0, c0 = time.perf_counter(), time.process_time()
while time.perf_counter() < end:
    pass
print((time.process_time() - c0) / max(time.perf_counter() - t0, 1e-9))
"""


def measure_cpu_share(k: int, seconds: float = PROBE_S) -> float | None:
    """Returns the median share of a core that `k` child Pythons, each spinning `seconds` side by side,
    got just now (CPU time / wall time of the spin, Python's start-up excluded); None when a child fails."""
    import statistics

    code = _SPIN.format(s=float(seconds))
    try:
        # each in a session of its own, as the local launcher starts every trial (`start_new_session`): where
        # the kernel groups CPU time by session (autogroup), a trial's share is its session's, not a slice
        # of the planning process's
        procs = [subprocess.Popen([sys.executable, "-S", "-c", code], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  text=True, start_new_session=True) for _ in range(max(1, k))]
        shares = [float(p.communicate(timeout=60)[0].strip()) for p in procs]
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    return statistics.median(shares) if shares else None


#: a load average to plan for instead of the measured one (a number >= 0; 0: plan as on a quiet machine)
ENV_LOAD = "GPULEDGER_MACHINE_LOAD"


def measure_load(probe_k: int = 0) -> MachineLoad | None:
    """Returns this machine's load now (None where the OS has no load average), with the share of a core
    `probe_k` new processes get (`measure_cpu_share`; 0: not probed), or the load that
    `$GPULEDGER_MACHINE_LOAD` sets (nothing probed; its `measured_at` then says so); UserError for a bad setting."""
    cpus = int(os.cpu_count() or 1)
    from gpuledger import settings

    set_to = (settings.current().get("local.machine_load") or "").strip()  # $GPULEDGER_MACHINE_LOAD
    if set_to:
        from gpuledger.errors import UserError

        try:
            value = float(set_to)
        except ValueError:
            value = -1.0
        if not 0 <= value < 1e6:
            raise UserError(f"{ENV_LOAD}={set_to!r}: give the load average to plan for, a number >= 0 (0: a quiet machine)")
        return MachineLoad(load_1m=value, load_5m=value, logical_cores=cpus, measured_at=f"set by {ENV_LOAD}")
    recent = _recent_load(probe_k)
    if recent is not None:
        return recent
    try:
        one, five, _ = os.getloadavg()
    except (AttributeError, OSError):
        return None
    share = measure_cpu_share(probe_k) if probe_k > 0 else None
    measured = MachineLoad(load_1m=float(one), load_5m=float(five), logical_cores=cpus,
                           measured_at=datetime.now(UTC).replace(microsecond=0).isoformat(),
                           probed_share=share, probe_k=probe_k if share is not None else 0)
    with contextlib.suppress(OSError):  # kept a moment, so that the next plan plans the same
        from gpuledger.files import write_text_atomic

        load_file().parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(load_file(), json.dumps({**asdict(measured), "asked_k": probe_k,
                                                   "at": datetime.now(UTC).timestamp()}) + "\n")
    return measured


#: a plan within this many seconds of the last load measurement takes that one (`plan` then `sweep`, or the
#: Python API then `gpuledger plan --json`, plan the same trials at the same share of a core); then measured again
LOAD_REUSE_S = 120.0


def load_file() -> Path:
    """Where the last load measurement is kept for `LOAD_REUSE_S` (beside the machine file)."""
    return machine_file().with_name("machine-load.json")


def _recent_load(probe_k: int) -> MachineLoad | None:
    """The load measured less than `LOAD_REUSE_S` ago with the same probe (None: none, older, or unreadable)."""
    try:
        raw = json.loads(load_file().read_text(encoding="utf-8")[:4096])
        age = datetime.now(UTC).timestamp() - float(raw.pop("at"))
        if raw.pop("asked_k") != probe_k or not 0 <= age < LOAD_REUSE_S:
            return None
        return MachineLoad(**raw)
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None


@dataclass(frozen=True)
class MachineSpeed:
    """One machine's measured facts: what the local plan prices and times trials against."""

    hostname: str
    cores: int  # physical cores (psutil), what `max_parallel` is capped at
    logical_cores: int
    total_ram_gib: float
    matmul_gflops_one_core: float
    method: str
    measured_at: str  # ISO 8601 UTC
    #: how busy the machine is now (`measure_load`, by `local_machine(load=True)`); never stored
    load: MachineLoad | None = None

    @property
    def measured_on(self) -> str:
        """Returns the measurement's date (YYYY-MM-DD)."""
        return self.measured_at[:10]

    def describe(self) -> str:
        return (f"{self.hostname}: {self.cores} cores, {self.total_ram_gib:.1f} GiB RAM, one core "
                f"{self.matmul_gflops_one_core:.1f} GFLOP/s float32 matmul (measured {self.measured_at}: {self.method})")


def machine_file() -> Path:
    """Returns where this machine's measured speed is stored."""
    from gpuledger import settings

    named = settings.current().path("paths.machine_file")  # $GPULEDGER_MACHINE_FILE
    if named is not None:
        return named
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gpuledger" / "machine.json"


def matmul_gflops_one_core(n: int = 256, budget_s: float = 0.3) -> float:
    """Returns one core's float32 matmul rate in GFLOP/s (see METHOD). The best sample is taken
    because other load only ever slows it down."""
    from gpuledger.errors import UserError

    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    try:
        out = subprocess.run([sys.executable, "-c", _MATMUL_PROBE, str(n), str(budget_s)], env=env,
                             capture_output=True, text=True, timeout=120, check=True)
        rate = float(out.stdout.strip())
    except (OSError, subprocess.SubprocessError, ValueError) as err:
        detail = (getattr(err, "stderr", None) or str(err) or type(err).__name__).strip().splitlines()[-1:]
        raise UserError(f"could not measure this machine's matmul speed (a child {sys.executable} running numpy): "
                        f"{' '.join(detail)}; the local plan needs it once (stored in {machine_file()})") from None
    if not rate > 0:
        raise UserError(f"measuring this machine's matmul speed gave {rate} GFLOP/s; try again on a less loaded machine")
    return rate


def measure_machine(n: int = 256, budget_s: float = 0.3) -> MachineSpeed:
    """Returns this machine's facts, measured now (a child process for the matmul rate)."""
    import psutil

    vm = psutil.virtual_memory()
    return MachineSpeed(
        hostname=socket.gethostname() or "this-machine",
        cores=int(psutil.cpu_count(logical=False) or psutil.cpu_count() or 1),
        logical_cores=int(psutil.cpu_count() or 1),
        total_ram_gib=round(vm.total / 2**30, 3),
        matmul_gflops_one_core=round(matmul_gflops_one_core(n, budget_s), 2),
        method=METHOD.format(n=n, budget_s=budget_s),
        measured_at=datetime.now(UTC).replace(microsecond=0).isoformat(),
    )


def read_machine(path: Path | None = None) -> MachineSpeed | None:
    """Returns the stored facts, or None when the file is missing, unreadable, of another host, or
    of this host with other cores or RAM."""
    path = path or machine_file()
    try:
        text = _read_own(path)
    except FileNotFoundError:
        return None
    try:
        data = json.loads(text)
        m = MachineSpeed(**{k: data[k] for k in MachineSpeed.__dataclass_fields__ if k != "load"})
    except (ValueError, TypeError, KeyError):
        return None
    if m.hostname != (socket.gethostname() or "this-machine") or m.matmul_gflops_one_core <= 0:
        return None
    import psutil

    # a resized machine (cores or RAM changed) is another machine: measure it again
    cores = int(psutil.cpu_count(logical=False) or psutil.cpu_count() or 1)
    if m.cores != cores or abs(m.total_ram_gib - psutil.virtual_memory().total / 2**30) > 0.02 * m.total_ram_gib:
        return None
    return m


#: the largest machine file read (bytes): the file is a dozen fields of JSON
MAX_MACHINE_FILE_BYTES = 64 * 1024


def _read_own(path: Path) -> str:
    """Returns the text of the machine file at `path`: a regular file of at most
    `MAX_MACHINE_FILE_BYTES` (`$GPULEDGER_MACHINE_FILE` may name anything: /dev/zero, a FIFO, a
    folder). Raises FileNotFoundError when there is none, UserError naming the variable otherwise."""
    from gpuledger.errors import UserError
    from gpuledger.safeyaml import FileRefused, read_text_file

    try:
        return read_text_file(path, MAX_MACHINE_FILE_BYTES)
    except FileRefused as err:
        if err.reason == "no such file":
            raise FileNotFoundError(str(path)) from None
        raise UserError(f"the machine file {path} ({ENV_FILE} or the default): {err.reason.replace('; give the path of a YAML file', '')}; "
                        f"point {ENV_FILE} at a file of gpuledger's own (or unset it)") from None


def store_machine(m: MachineSpeed, path: Path | None = None) -> Path:
    """Writes `m` to the machine file durably (`gpuledger.files`); returns the path. A file already
    there is replaced only when it is a machine file (gpuledger's own): anything else that
    `$GPULEDGER_MACHINE_FILE` names is refused with a UserError, never overwritten."""
    from gpuledger.errors import UserError
    from gpuledger.files import write_text_atomic

    path = path or machine_file()
    try:
        text = _read_own(path)
    except FileNotFoundError:
        text = None
    if text is not None:
        try:
            data = json.loads(text)
            ours = isinstance(data, dict) and set(MachineSpeed.__dataclass_fields__) - {"load"} <= set(data)
        except ValueError:
            ours = False
        if not ours:
            raise UserError(f"the machine file {path} ({ENV_FILE} or the default) holds something else than "
                            f"gpuledger's measurement; not overwritten: point {ENV_FILE} at a new file")
    stored = {k: v for k, v in asdict(m).items() if k != "load"}  # the load is of the moment, not the machine
    write_text_atomic(path, json.dumps(stored, indent=2) + "\n")
    return path


def local_machine(path: Path | None = None, *, remeasure: bool = False, load: bool = False,
                  probe_k: int = 0) -> MachineSpeed:
    """Returns this machine's stored facts, measuring and storing them first when needed (or asked);
    with `load`, also how busy it is now (`MachineSpeed.load`, measured every call, never stored; with
    `probe_k`, the share of a core that many new processes get, `measure_cpu_share`)."""
    m = None if remeasure else read_machine(path)
    if m is None:
        m = measure_machine()
        with contextlib.suppress(OSError):  # a read-only home: plan with the fresh measurement, it is only not kept
            store_machine(m, path)
    return replace(m, load=measure_load(probe_k)) if load else m
