"""The local Prefect machinery: which API to talk to, a temporary server, and `gpuledger serve`.

Prefect itself is never imported here: everything goes through the `prefect` command of this
environment or a `uvicorn` subprocess, so that `gpuledger` stays fast to start.

- `configured_api_url()`: `PREFECT_API_URL`, else `[api].url` of `./prefect.toml` (the project's).
- `serve_api_url()`: where `gpuledger serve` listens: `--port`, else `$GPULEDGER_PREFECT_PORT`, else
  the configured URL (port 4200 of prefect.toml). The port is ONE setting: `serve` on another port
  writes it into the project's prefect.toml (`set_toml_port`), so every `prefect` command run in the
  project (`prefect deployment run ...`), `gpuledger doctor` and the hint `serve` prints follow it.
- `server_home(api_url)` / `server_is_ours(api_url, root)`: which Prefect home the server at a URL
  keeps its state in (its `/admin/settings`): this project's server is the one whose home is the
  project's Prefect home; one that merely answers on the port is someone else's.
- `own_server_url()`: the API of THIS project's running `gpuledger serve`, known from the state file
  it keeps in its Prefect home (`.gpuledger/prefect/gpuledger-serve.json`: pid, API URL, project path).
- `prefect_api()`: a context manager `gpuledger sweep` runs its flow in. It points
  `PREFECT_API_URL` at this project's own server when one runs (or at `PREFECT_API_URL` when the
  user set it: their explicit choice); else at a temporary server it starts (Prefect's ephemeral
  mode, but as our own child process: it dies with us even on SIGKILL), and stops it afterwards.
  A server that merely answers on the configured port (another project's) is never attached to.
- `serve()`: `gpuledger serve`: a local server on 127.0.0.1 with its state under the project
  (`.gpuledger/prefect/`), the process work pool, the deployments of `prefect.yaml`, and a worker. Ctrl-C
  (or SIGTERM) stops the worker, then the server. A second `gpuledger serve` while one runs says so
  and exits 0; a port taken by a server that is not this project's is refused with the way out.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlparse

from gpuledger.errors import UserError
from gpuledger.launch.procs import pid_alive

DEFAULT_API_URL = "http://127.0.0.1:4200/api"
#: the port `gpuledger serve` listens on and `gpuledger sweep` looks for (else prefect.toml's)
PORT_ENV = "GPULEDGER_PREFECT_PORT"
WORK_POOL = "gpuledger-local"
STATE_FILE = "gpuledger-serve.json"
#: what every Prefect process started from here gets: no telemetry, offline (nothing leaves this machine)
QUIET_ENV = {
    "DO_NOT_TRACK": "1",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_SERVER_UI_SHOW_PROMOTIONAL_CONTENT": "false",
}


def project_root() -> Path:
    """Returns the project's root (the folder of its `gpuledger.toml`, found walking up from the
    working directory); ProjectNotFound outside a project."""
    from gpuledger import settings

    root = settings.find_project()
    if root is None:
        raise settings.ProjectNotFound(settings.no_project_message("its Prefect server and deployments"))
    return root


def prefect_home() -> Path:
    """Returns the Prefect home of this project (`gpuledger.settings`: `prefect.home`, else
    `.gpuledger/prefect/`), made if missing."""
    from gpuledger import settings

    home = settings.current().prefect_home
    home.mkdir(parents=True, exist_ok=True)
    return home


def configured_api_url(cwd: Path | None = None) -> str | None:
    """Returns the Prefect API URL configured for `cwd` (env, then ./prefect.toml), or None."""
    if "PREFECT_API_URL" in os.environ:
        return os.environ["PREFECT_API_URL"].strip() or None
    toml = (cwd or Path.cwd()) / "prefect.toml"
    try:
        data = tomllib.loads(toml.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return None
    url = (data.get("api") or {}).get("url")
    return str(url).strip() or None if url else None


def port_from(text: str | int | None, what: str = PORT_ENV) -> int | None:
    """Returns a TCP port (1024-65535) from `text`, None when empty; a clear error otherwise."""
    if text is None or str(text).strip() == "":
        return None
    try:
        port = int(str(text).strip())
    except ValueError:
        port = -1
    if not 1024 <= port <= 65535:
        raise UserError(f"{what}={text!r} is not a port number between 1024 and 65535")
    return port


def port_setting() -> str | None:
    """The setting `prefect.port` ($GPULEDGER_PREFECT_PORT), as given (`port_from` checks it)."""
    from gpuledger import settings

    return settings.current().get("prefect.port")


def serve_api_url(root: Path, port: int | None = None) -> str:
    """Returns the API URL `gpuledger serve` uses: `port` (--port), else $GPULEDGER_PREFECT_PORT,
    else the configured URL (PREFECT_API_URL or prefect.toml), else the default."""
    port = port or port_from(port_setting())
    if port is not None:
        return f"http://127.0.0.1:{port}/api"
    return configured_api_url(root) or DEFAULT_API_URL


def server_home(api_url: str, timeout_s: float = 2.0) -> str | None:
    """Returns the PREFECT_HOME of the Prefect server at `api_url` (its `/admin/settings`), or None
    when it does not answer or does not say."""
    try:
        with urllib.request.urlopen(api_url.rstrip("/") + "/admin/settings", timeout=timeout_s) as resp:  # noqa: S310
            data = json.loads(resp.read(2_000_000))
    except (urllib.error.URLError, OSError, ValueError):
        return None
    home = data.get("home") if isinstance(data, dict) else None
    return str(home) if home else None


def server_is_ours(api_url: str, root: Path) -> bool:
    """Returns True when the server at `api_url` keeps its state in this project's Prefect home (it is
    the server `gpuledger serve` started here), False for anyone else's (or none)."""
    home = server_home(api_url)
    if home is None:
        return False
    try:
        return Path(home).expanduser().resolve() == state_path(root).parent.resolve()
    except OSError:
        return False


def toml_port(root: Path) -> int | None:
    """Returns the port of the project's prefect.toml `[api].url`, or None."""
    url = None
    with contextlib.suppress(OSError, tomllib.TOMLDecodeError):
        url = (tomllib.loads((root / "prefect.toml").read_text(encoding="utf-8")).get("api") or {}).get("url")
    with contextlib.suppress(ValueError):
        return urlparse(str(url)).port if url else None
    return None


def set_toml_port(root: Path, port: int) -> bool:
    """Points the project's prefect.toml at `port` (`[api].url` and `[server.api].port`, the rest of
    the file as it is; written from the scaffold when missing); returns True when it changed."""
    import re

    path = root / "prefect.toml"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        from importlib.resources import files

        text = files("gpuledger.scaffold").joinpath("prefect.toml").read_text(encoding="utf-8")
    new = re.sub(r'(?m)^(\s*url\s*=\s*"http://(?:127\.0\.0\.1|localhost)):\d+(/api"\s*)$', rf"\g<1>:{port}\g<2>", text)
    new = re.sub(r"(?ms)(^\[server\.api\][^\[]*?^\s*port\s*=\s*)\d+", rf"\g<1>{port}", new)
    if path.exists() and new == text:
        return False
    path.write_text(new, encoding="utf-8")
    return True


def state_path(root: Path) -> Path:
    """Returns the file in which this project's `gpuledger serve` names itself (in its Prefect home)."""
    from gpuledger import settings

    return settings.load_settings(cwd=root).prefect_home / STATE_FILE


def own_server_url(root: Path) -> str | None:
    """Returns the API URL of this project's running `gpuledger serve` (its state file names this
    project, its process lives and its API answers), else None."""
    try:
        state = json.loads(state_path(root).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    url = state.get("api_url") if isinstance(state, dict) else None
    if (not url or state.get("root") != str(root.resolve()) or not pid_alive(state.get("pid"))
            or not api_healthy(url)):
        return None
    home = server_home(url)  # a server that says its home is elsewhere took the port after ours died
    if home is not None and not server_is_ours(url, root):
        return None
    return str(url)


def api_healthy(api_url: str, timeout_s: float = 1.0) -> bool:
    """Returns True when the Prefect API at `api_url` answers its health check."""
    try:
        with urllib.request.urlopen(api_url.rstrip("/") + "/health", timeout=timeout_s) as resp:  # noqa: S310
            return resp.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def wait_healthy(api_url: str, timeout_s: float, proc: subprocess.Popen | None = None) -> bool:
    """Waits until the API answers (True), `proc` exits or `timeout_s` passes (False)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if api_healthy(api_url, timeout_s=1.0):
            return True
        if proc is not None and proc.poll() is not None:
            return False
        time.sleep(0.2)
    return False


def free_port() -> int:
    """Returns a TCP port on 127.0.0.1 that was free a moment ago."""
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """preexec_fn: the child gets SIGTERM when the process that started it dies (Linux prctl)."""
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG = 1


def prefect_bin() -> str:
    """Returns the `prefect` command of this environment."""
    candidate = Path(sys.executable).parent / "prefect"
    return str(candidate) if candidate.exists() else "prefect"


def stop_process(proc: subprocess.Popen | None, grace_s: float = 15.0, first: int = signal.SIGINT) -> None:
    """Stops `proc` and its process group: `first` signal, then SIGKILL after `grace_s`; returns once reaped."""
    if proc is None:
        return
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, first)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=grace_s)
    # whatever is left in its group (uvicorn workers, flow-run subprocesses)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)


def start_temporary_server(home: Path | None = None, timeout_s: float = 300.0) -> tuple[subprocess.Popen, str]:
    """Starts a temporary Prefect API server (no UI, no services) on a free port; returns (process, api_url).

    Waits up to `timeout_s` for it to answer; another port is tried only when the server exited.

    The same command Prefect's ephemeral mode runs, but the child dies with this process.
    """
    env = {**os.environ, **QUIET_ENV, "PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1",
           "PREFECT__SERVER_FINAL": "1"}
    env.pop("PREFECT_API_URL", None)
    if home is not None:
        env["PREFECT_HOME"] = str(home)
    for _ in range(3):
        port = free_port()
        proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "--factory", "prefect.server.api.server:create_app",
             "--host", "127.0.0.1", "--port", str(port), "--log-level", "error", "--lifespan", "on"],
            env=env, stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent, start_new_session=True,
        )
        api_url = f"http://127.0.0.1:{port}/api"
        if wait_healthy(api_url, timeout_s, proc):
            return proc, api_url
        slow = proc.poll() is None  # still starting: another try would only start over
        stop_process(proc, grace_s=3.0, first=signal.SIGTERM)
        if slow:
            raise UserError(f"a temporary Prefect server did not answer within {timeout_s:g} s (a loaded "
                            f"machine?); start one with `gpuledger serve` and retry")
    raise UserError("could not start a temporary Prefect server; start one with `gpuledger serve` "
                    "(or `prefect server start`) and retry")


@contextlib.contextmanager
def prefect_api(cwd: Path | None = None, say: Callable[[str], None] | None = None,
                port: int | None = None) -> Iterator[str]:
    """Sets `PREFECT_API_URL` for the body: PREFECT_API_URL when the user set it and it answers, else
    this project's own `gpuledger serve` (on `port` / $GPULEDGER_PREFECT_PORT when given), else a
    temporary server. Yields the API URL; restores the environment and stops a temporary server after.
    """
    saved = {k: os.environ.get(k) for k in ("PREFECT_API_URL", "PREFECT_HOME", *QUIET_ENV)}
    for key, value in QUIET_ENV.items():
        os.environ.setdefault(key, value)
    from gpuledger import settings

    root = (cwd or settings.find_project() or Path.cwd()).resolve()
    # the flow's own Prefect client (imported inside the body) and a temporary server keep their
    # state in the project's Prefect home, whichever subfolder this runs from
    os.environ["PREFECT_HOME"] = str(prefect_home())
    explicit = os.environ.get("PREFECT_API_URL", "").strip() or None
    own = own_server_url(root)
    wanted = serve_api_url(root, port) if (port or port_setting()) else None
    url = explicit if explicit and api_healthy(explicit) else own if own and (wanted in (None, own)) else None
    proc = None
    try:
        if url:
            os.environ["PREFECT_API_URL"] = url
        else:
            other = explicit or wanted or configured_api_url(root)
            if other and say and (explicit or wanted or api_healthy(other)):
                why = ("answers, but it is not this project's `gpuledger serve`" if api_healthy(other)
                       else "does not answer")
                say(f"the Prefect server at {other} {why}; using a temporary one for this run "
                    f"(`gpuledger serve` starts this project's server)")
            elif say:  # the usual case without `gpuledger serve`: nothing is wrong
                say("starting a temporary Prefect server for this run (`gpuledger serve` keeps one, with its UI)")
            proc, url = start_temporary_server(home=Path(os.environ["PREFECT_HOME"]))
            os.environ["PREFECT_API_URL"] = url
        yield url
    finally:
        stop_process(proc, grace_s=5.0, first=signal.SIGTERM)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


# -- gpuledger serve ------------------------------------------------------------------------------


def _run(cmd: list[str], env: dict[str, str], cwd: Path, timeout_s: float = 300.0) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, env=env, cwd=str(cwd), capture_output=True, text=True, timeout=timeout_s,
                          stdin=subprocess.DEVNULL)


def serve_env(root: Path, api_url: str) -> dict[str, str]:
    """Returns the environment of the server, `prefect` commands and the worker."""
    env = dict(os.environ)
    for key, value in QUIET_ENV.items():
        env.setdefault(key, value)
    env["PREFECT_API_URL"] = api_url
    env["PREFECT_HOME"] = str(state_path(root).parent)
    env.setdefault("PREFECT_WORKER_QUERY_SECONDS", "2")  # pick up a run within seconds, not 10 s
    # `prefect deployment run ... --watch` streams the run's logs (each trial's start and end, its spend)
    # only from a server that publishes and streams them out; Prefect 3.8 ships with both off
    env.setdefault("PREFECT_SERVER_LOGS_STREAM_OUT_ENABLED", "true")
    env.setdefault("PREFECT_SERVER_LOGS_STREAM_PUBLISHING_ENABLED", "true")
    env.setdefault("GPULEDGER_HOME", str(root))
    env["PYTHONUNBUFFERED"] = "1"
    # the flow runs must find the same python and `gpuledger`
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    return env


def serve(root: Path | None = None, say: Callable[[str], None] = print, ready_timeout_s: float = 300.0,
          port: int | None = None, metrics_port: int | None = None) -> int:
    """Runs `gpuledger serve` until Ctrl-C/SIGTERM; returns the exit code. See the module docstring.
    `metrics_port`: also serve the ledger's Prometheus metrics there (gpuledger/runtime/metrics.py)."""
    if metrics_port is None:
        return _serve(root, say, ready_timeout_s, port)
    from gpuledger.runtime.metrics import serve_metrics

    metrics, _thread = serve_metrics(metrics_port)
    say(f"Prometheus metrics: http://127.0.0.1:{metrics_port}/metrics")
    try:
        return _serve(root, say, ready_timeout_s, port)
    finally:
        metrics.shutdown()


def _serve(root: Path | None, say: Callable[[str], None], ready_timeout_s: float, port: int | None) -> int:
    root = (root or project_root()).resolve()
    if not (root / "prefect.yaml").is_file():
        raise UserError(f"no prefect.yaml in {root}: `gpuledger serve` deploys the flows it names; "
                        f"`gpuledger init {root}` writes one (it keeps the files you have)")
    api_url = serve_api_url(root, port)
    parsed = urlparse(api_url)
    host, port = parsed.hostname or "127.0.0.1", parsed.port or 4200
    if host not in ("127.0.0.1", "localhost"):
        raise UserError(f"PREFECT_API_URL is {api_url}, not a local server; `gpuledger serve` starts one on "
                        f"127.0.0.1: unset PREFECT_API_URL, or start a worker against that server with "
                        f"`prefect worker start --pool {WORK_POOL}`")
    env = serve_env(root, api_url)
    home = Path(env["PREFECT_HOME"])
    home.mkdir(parents=True, exist_ok=True)  # parents too: a fresh project has no .gpuledger/ yet
    state_file = home / STATE_FILE
    ui = f"http://{host}:{port}"
    explicit = bool(os.environ.get("PREFECT_API_URL", "").strip()) and not (port or port_setting())

    with contextlib.suppress(OSError, ValueError):
        state = json.loads(state_file.read_text(encoding="utf-8"))
        if state.get("pid") != os.getpid() and pid_alive(state.get("pid")) and api_healthy(api_url):
            say(f"gpuledger serve is already running (pid {state['pid']}): UI {ui}, API {api_url}")
            for line in run_hints(api_url):
                say(line)
            return 0

    server = worker = None
    stopping = {"flag": False}

    def on_term(signum, frame):  # SIGTERM behaves like Ctrl-C: orderly shutdown
        stopping["flag"] = True
        raise KeyboardInterrupt

    old_term = signal.signal(signal.SIGTERM, on_term)
    prefect = prefect_bin()
    toml_port_before = toml_port(root)
    try:
        if api_healthy(api_url) and not explicit:
            raise UserError(f"port {port} already has a Prefect server that is not this project's ({root}); "
                            f"start this one on another port: `gpuledger serve --port N` or {PORT_ENV}=N "
                            f"(`gpuledger sweep` then finds it by itself)")
        if not explicit and toml_port(root) != port and set_toml_port(root, port):
            was = "" if toml_port_before is None else f" (was port {toml_port_before})"
            say(f"prefect.toml now points the `prefect` commands of this project at {api_url}{was}; "
                "`gpuledger doctor` and `gpuledger sweep` follow it too")
        if api_healthy(api_url):
            say(f"Prefect server already up at {api_url} (PREFECT_API_URL); using it")
        else:
            say(f"Starting Prefect server on {ui} (state in {home}) ...")
            log = open(home / "server.log", "ab")  # noqa: SIM115 - kept open for the child's lifetime
            server = subprocess.Popen(
                [prefect, "server", "start", "--host", host, "--port", str(port)],
                env=env, cwd=str(root), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True, preexec_fn=_die_with_parent,
            )
            log.close()
            if not wait_healthy(api_url, ready_timeout_s, server):
                tail = _tail(home / "server.log")
                raise UserError(f"the Prefect server did not become healthy at {api_url} within "
                                f"{ready_timeout_s:g} s; its log ({home / 'server.log'}) ends with:\n{tail}")
        state_file.write_text(json.dumps({"pid": os.getpid(), "server_pid": server.pid if server else None,
                                          "api_url": api_url, "root": str(root)}), encoding="utf-8")

        if _run([prefect, "work-pool", "inspect", WORK_POOL], env, root).returncode != 0:
            say(f"Creating work pool {WORK_POOL} (process) ...")
            made = _run([prefect, "work-pool", "create", WORK_POOL, "--type", "process"], env, root)
            if made.returncode != 0:
                raise UserError(f"could not create work pool {WORK_POOL}:\n{made.stdout}{made.stderr}")
        say("Deploying prefect.yaml (sweep/lora-grid, cost-report/weekly, warehouse-maintenance/weekly, ingest/team, "
            "capacity/chat-serving) ...")
        deployed = _run([prefect, "--no-prompt", "deploy", "--all"], env, root)
        if deployed.returncode != 0:
            raise UserError(f"`prefect deploy --all` failed:\n{deployed.stdout[-4000:]}{deployed.stderr[-4000:]}")
        _ingest_schedule(prefect, env, root, say)

        say(f"Starting worker on pool {WORK_POOL} ...")
        worker = subprocess.Popen(
            [prefect, "worker", "start", "--pool", WORK_POOL, "--type", "process"],
            env=env, cwd=str(root), stdin=subprocess.DEVNULL, start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        state_file.write_text(json.dumps({"pid": os.getpid(), "server_pid": server.pid if server else None,
                                          "worker_pid": worker.pid, "api_url": api_url, "root": str(root)}),
                              encoding="utf-8")
        say(f"gpuledger serve ready: UI {ui}  API {api_url}")
        for line in run_hints(api_url):
            say(line)
        say("Ctrl-C stops the worker, then the server.")
        while True:
            if worker.poll() is not None:
                raise UserError(f"the worker exited with code {worker.returncode}; stopping")
            if server is not None and server.poll() is not None:
                raise UserError(f"the Prefect server exited with code {server.returncode}; stopping")
            time.sleep(0.5)
    except KeyboardInterrupt:
        say("Stopping: worker first, then the server ...")
        return 0
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not cut the shutdown short
        stop_process(worker, grace_s=20.0)
        stop_process(server, grace_s=20.0)
        with contextlib.suppress(OSError, ValueError):
            if json.loads(state_file.read_text(encoding="utf-8")).get("pid") == os.getpid():
                state_file.unlink()
        signal.signal(signal.SIGTERM, old_term)
        if worker is not None or server is not None:
            say("Stopped.")


INGEST_DEPLOYMENT = "ingest/team"


def _ingest_schedule(prefect: str, env: dict[str, str], root: Path, say: Callable[[str], None]) -> None:
    """With `[warehouse] ingest = "service"`, turns on ingest/team's 30 s schedule (prefect.yaml deploys it
    paused, so that a single machine's server does not start a flow run every 30 s for nothing)."""
    from gpuledger import settings

    if str(settings.current().values.get("warehouse.ingest") or "").strip().lower() != "service":
        return
    listed = _run([prefect, "deployment", "schedule", "ls", INGEST_DEPLOYMENT, "--output", "json"], env, root)
    try:
        ids = [s["id"] for s in json.loads(listed.stdout or "[]") if not s.get("active")]
    except (ValueError, TypeError, KeyError):
        ids = []
    for schedule_id in ids:
        _run([prefect, "deployment", "schedule", "resume", INGEST_DEPLOYMENT, str(schedule_id)], env, root)
    say(f"[warehouse] ingest = \"service\": {INGEST_DEPLOYMENT} stores landed result records every 30 s")


def run_hints(api_url: str) -> list[str]:
    """Returns the lines `gpuledger serve` prints on how to use the server at `api_url` from this
    project's folder (prefect.toml points there) and elsewhere."""
    lines = ["  run a sweep:    prefect deployment run sweep/lora-grid --watch   (a new sweep each time; "
             "--param resume=true continues the last)",
             "  weekly report:  prefect deployment run cost-report/weekly   (scheduled Mondays 08:00 UTC: "
             "prefect deployment schedule ls cost-report/weekly)",
             "  what runs:      gpuledger status"]
    user = os.environ.get("PREFECT_API_URL", "").strip()
    if user and user.rstrip("/") != api_url.rstrip("/"):
        lines.append(f"  NOTE: PREFECT_API_URL={user} in your environment sends `prefect` there, not here: "
                     f"unset it, or export PREFECT_API_URL={api_url}")
    else:
        lines.append(f"  from another folder: PREFECT_API_URL={api_url} prefect ...")
    return lines


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def serve_worker(root: Path | None = None, say: Callable[[str], None] = print, name: str | None = None,
                 limit: int | None = None) -> int:
    """Runs `gpuledger serve --worker-only` until Ctrl-C/SIGTERM: one more process worker on the work
    pool of the Prefect server PREFECT_API_URL names (a team's server, on PostgreSQL), for this
    project's flow runs; no server, no deployments of its own (one `gpuledger serve`, or `prefect deploy
    --all` against the team server, makes those). Creates the pool when the server lacks it. `limit`: the
    most flow runs this worker runs at once (`prefect worker start --limit`; default no limit)."""
    root = (root or project_root()).resolve()
    api_url = os.environ.get("PREFECT_API_URL", "").strip() or own_server_url(root)
    if not api_url:
        raise UserError("`gpuledger serve --worker-only` needs the Prefect server to work for: set PREFECT_API_URL "
                        "(e.g. http://prefect.internal:4200/api), or start `gpuledger serve` in this project first")
    if not api_healthy(api_url, timeout_s=5.0):
        raise UserError(f"no Prefect server answers at {api_url}; start it (`gpuledger serve` on that machine) "
                        "or fix PREFECT_API_URL")
    env = serve_env(root, api_url)
    with contextlib.suppress(OSError):  # the worker's own Prefect home (its settings, logs)
        Path(env["PREFECT_HOME"]).mkdir(parents=True, exist_ok=True)
    prefect = prefect_bin()
    if _run([prefect, "work-pool", "inspect", WORK_POOL], env, root).returncode != 0:
        say(f"Creating work pool {WORK_POOL} (process) ...")
        made = _run([prefect, "work-pool", "create", WORK_POOL, "--type", "process"], env, root)
        if made.returncode != 0 and "already exists" not in (made.stdout + made.stderr):
            raise UserError(f"could not create work pool {WORK_POOL}:\n{made.stdout}{made.stderr}")
    worker_name = name or f"{socket.gethostname()}-{os.getpid()}"
    stopping = {"flag": False}

    def on_term(signum, frame):
        stopping["flag"] = True
        raise KeyboardInterrupt

    old_term = signal.signal(signal.SIGTERM, on_term)
    worker = None
    try:
        worker = subprocess.Popen(
            [prefect, "worker", "start", "--pool", WORK_POOL, "--type", "process", "--name", worker_name,
             *(["--limit", str(limit)] if limit else [])],
            env=env, cwd=str(root), stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=_die_with_parent)
        say(f"gpuledger worker ready: {worker_name} on pool {WORK_POOL} of {api_url} (Ctrl-C stops it)")
        while worker.poll() is None:
            time.sleep(0.5)
        raise UserError(f"the worker exited with code {worker.returncode}")
    except KeyboardInterrupt:
        say("Stopping the worker ...")
        return 0
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        stop_process(worker, grace_s=20.0)
        signal.signal(signal.SIGTERM, old_term)
