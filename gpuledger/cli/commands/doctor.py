"""`gpuledger doctor [--json]`: is this set-up ready? One line per check, with how to fix it.

Checks, in order: Python and the package data (SQL files, spec schema, the scaffold), the settings
files, the project file and its run-time folder, the warehouse (readable, writable, schema version,
migrations of this gpuledger it still lacks), the Prefect API (answers, or its port is free for a
temporary server), SkyPilot (installed, and which clouds have credential files: no network call),
NVML (the GPUs this machine's driver reports), the age of the bundled price catalog, and PostgreSQL
when the warehouse is a team one (`ducklake:postgres:`; a TCP connect with a short timeout) with its
data bucket (an object-storage data path: a probe object written and removed), and the
ingest service's landing when `[warehouse] ingest = "service"` (a probe object written and removed,
the records waiting and the age of the oldest: the ingest lag at a glance).
Nothing is changed (the probe object is removed at once) and nothing waits long (a network probe
gives up after PROBE_TIMEOUT_S, an object-store request after STORE_TIMEOUT_S).

Each check ends `ok`, `warn` (works, with a limit worth knowing) or `fail` (something will not
work); the exit code is 1 when any check failed, else 0. `--json` prints the list of checks.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import importlib.util
import io
import json
import os
import shlex
import socket
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import date
from importlib import resources
from pathlib import Path

from gpuledger.errors import UserError

#: the oldest Python gpuledger runs on (pyproject's requires-python)
MIN_PYTHON = (3, 11)
#: a bundled price snapshot older than this many days gets a warning (cloud prices move monthly)
PRICE_MAX_AGE_DAYS = 30
#: how long a network probe (PostgreSQL host, Prefect API) may take (s)
PROBE_TIMEOUT_S = 1.0
#: how long one request to the ingest landing's object store may take (s; no retry)
STORE_TIMEOUT_S = 3.0
#: package data every command relies on: (package, relative path)
PACKAGE_DATA = (
    ("gpuledger.warehouse", "sql/migrations"),
    ("gpuledger.warehouse", "sql/views"),
    ("gpuledger.warehouse", "sql/queries"),
    ("gpuledger.warehouse", "sql/views.yml"),
    ("gpuledger.scaffold", "specs/gpuledger.schema.json"),
    ("gpuledger.scaffold", "gpuledger.toml"),
    ("gpuledger.scaffold", "prefect.yaml"),
    ("gpuledger.catalog", "offers.csv"),
)
#: credential files SkyPilot reads, per cloud (`sky check` would confirm them over the network)
CLOUD_CREDENTIALS = {
    "aws": ("~/.aws/credentials", "~/.aws/config"),
    "gcp": ("~/.config/gcloud/application_default_credentials.json", "~/.config/gcloud/credentials.db"),
    "azure": ("~/.azure/msal_token_cache.json", "~/.azure/azureProfile.json"),
    "kubernetes": ("~/.kube/config",),
    "lambda": ("~/.lambda_cloud/lambda_keys",),
    "runpod": ("~/.runpod/config.toml",),
    "oci": ("~/.oci/config",),
    "nebius": ("~/.nebius/credentials.json",),
}
#: environment variables that stand for credential files
CLOUD_ENV = {"aws": ("AWS_ACCESS_KEY_ID", "AWS_PROFILE"), "gcp": ("GOOGLE_APPLICATION_CREDENTIALS",),
             "kubernetes": ("KUBECONFIG",)}


@dataclass
class Check:
    """One line of the doctor's answer."""

    name: str
    status: str  # ok | warn | fail
    detail: str
    fix: str = ""

    def line(self) -> str:
        hint = f"  -> {self.fix}" if self.fix and self.status != "ok" else ""
        return f"{self.status:<4}  {self.name:<10} {self.detail}{hint}"


def check_python() -> Check:
    v = sys.version_info
    version = f"{v.major}.{v.minor}.{v.micro}"
    from gpuledger import __version__

    if (v.major, v.minor) < MIN_PYTHON:
        return Check("python", "fail", f"Python {version} ({sys.executable})",
                     f"gpuledger needs Python {MIN_PYTHON[0]}.{MIN_PYTHON[1]} or newer")
    return Check("python", "ok", f"Python {version}, gpuledger {__version__} ({sys.executable})")


def check_package_data() -> Check:
    missing, counted = [], 0
    for package, rel in PACKAGE_DATA:
        node = resources.files(package).joinpath(*rel.split("/"))
        if node.is_dir():
            n = sum(1 for c in node.iterdir() if c.name.endswith(".sql"))
            counted += n
            if n == 0:
                missing.append(f"{package}/{rel}/*.sql")
        elif not node.is_file():
            missing.append(f"{package}/{rel}")
    where = Path(str(resources.files("gpuledger")))
    if missing:
        return Check("package", "fail", f"missing from {where}: {', '.join(missing)}",
                     "reinstall gpuledger (`uv tool install --reinstall .` or `pip install --force-reinstall .`)")
    return Check("package", "ok", f"{counted} SQL files, the spec schema and the project scaffold in {where}")


def check_project(settings_mod) -> tuple[list[Check], object | None]:
    """The project file and run-time folder; returns the checks and the Settings (None when unreadable)."""
    try:
        s = settings_mod.current()
    except UserError as err:  # a settings file that is not TOML, a bad value
        return [Check("settings", "fail", str(err), "fix that file (docs/guide.md lists every setting)")], None
    checks = []
    user_file = settings_mod.user_config_path()
    if user_file.exists():
        checks.append(Check("settings", "ok", f"user file {user_file}"))
    if s.project_root is None:
        explicit = s.values.get("paths.warehouse")
        checks.append(Check("project", "warn",
                            f"no {settings_mod.PROJECT_FILE} in {Path.cwd()} or above"
                            + (f"; the warehouse is {explicit} ({settings_mod.ENV_PATH})" if explicit else
                               "; sweeps, reports and `sql` need a project"),
                            "`gpuledger init` here (or in your repository) makes one"))
        if not explicit:
            return checks, s
    else:
        checks.append(Check("project", "ok", f"{s.project_root / settings_mod.PROJECT_FILE}"))
    try:
        data = s.run_dir if s.project_root is None else s.data_dir
    except settings_mod.ProjectNotFound:  # a team warehouse (not a file) and no project: no run-time folder
        checks.append(Check("run-dir", "warn", "no run-time folder: the warehouse is not a file and there is no "
                            f"{settings_mod.PROJECT_FILE} (sweeps need one for their landing, studies and logs)",
                            "`gpuledger init` in your repository"))
        return checks, s
    existing = data
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if existing.is_dir() and os.access(existing, os.W_OK | os.X_OK):
        state = "exists" if data.exists() else "made on first use"
        checks.append(Check("run-dir", "ok", f"{data} is writable ({state})"))
    else:
        checks.append(Check("run-dir", "fail", f"{data} cannot be written (nearest folder: {existing})",
                            f"make {existing} writable, or set paths.data_dir in {settings_mod.PROJECT_FILE}"))
    return checks, s


def check_warehouse(s) -> list[Check]:
    target = s.warehouse
    if target.startswith("ducklake:"):
        from gpuledger.warehouse.connect import redact  # every password form, wherever it stands

        return [Check("warehouse", "ok", f"team warehouse {redact(target)[:120]}"),
                check_postgres(target), check_bucket()]
    from gpuledger.warehouse.health import inspect

    h = inspect(target)
    if not h.exists:
        if h.error:
            return [Check("warehouse", "fail", f"{h.path}: {h.error}", "move it away; the first sweep makes the file")]
        if not h.writable:
            return [Check("warehouse", "fail", f"{h.path} does not exist and its folder cannot be written",
                          "make the folder writable, or point paths.warehouse elsewhere")]
        return [Check("warehouse", "ok", f"{h.path}: none yet (the first `gpuledger sweep` makes it; "
                                         f"schema version {h.latest})")]
    if not h.readable:
        return [Check("warehouse", "fail", f"{h.path}: {h.error}", "see the message; `gpuledger doctor` again after")]
    checks = []
    if h.pending:
        checks.append(Check("warehouse", "warn",
                            f"{h.path}: schema version {h.version or 0}, this gpuledger's is {h.latest}: "
                            f"migration(s) {', '.join(map(str, h.pending))} pending",
                            "the next sweep or `gpuledger ingest` applies them (a reader also does, when it can)"))
    elif not h.views_current:
        checks.append(Check("warehouse", "warn", f"{h.path}: schema version {h.version}; views of an older gpuledger",
                            "the next writer (a sweep, `gpuledger ingest`) updates them"))
    else:
        checks.append(Check("warehouse", "ok", f"{h.path}: readable, schema version {h.version} (current)"))
    if not h.writable:
        checks.append(Check("warehouse", "fail", f"{h.path} is not writable by this user",
                            "sweeps and ingest write it: fix its permissions"))
    return checks


def _host_port(conninfo: str) -> tuple[str, int]:
    """Returns (host, port) of a libpq key=value connection string (defaults: localhost, 5432)."""
    fields = {}
    with contextlib.suppress(ValueError):
        for part in shlex.split(conninfo):
            if "=" in part:
                k, v = part.split("=", 1)
                fields[k.strip()] = v.strip()
    host = fields.get("host") or os.environ.get("PGHOST") or "localhost"
    try:
        port = int(fields.get("port") or os.environ.get("PGPORT") or 5432)
    except ValueError:
        port = 5432
    return host, port


def check_postgres(target: str) -> Check:
    """The team warehouse's PostgreSQL catalog: does its host accept a TCP connection (short timeout)?"""
    conninfo = target.split(":", 2)[2] if target.count(":") >= 2 else ""
    host, port = _host_port(conninfo)
    if host.startswith("/"):  # a Unix socket folder
        sock = Path(host) / f".s.PGSQL.{port}"
        ok = sock.exists()
        return Check("postgres", "ok" if ok else "fail", f"socket {sock} {'exists' if ok else 'is missing'}",
                     "start PostgreSQL, or fix host= in the warehouse setting")
    try:
        with socket.create_connection((host, port), timeout=PROBE_TIMEOUT_S):
            pass
    except OSError as err:
        return Check("postgres", "fail", f"{host}:{port} does not answer ({err.strerror or err})",
                     "start PostgreSQL or fix host=/port= in the warehouse setting (paths.warehouse)")
    return Check("postgres", "ok", f"{host}:{port} accepts connections")


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def check_landing(s, now=None) -> Check:
    """The ingest service's landing (`[warehouse] ingest = "service"`): reachable and writable (a probe
    object written and removed), the records waiting there and the age of the oldest (landing time in
    its key, compared with this machine's clock); in direct mode, that it is not used."""
    from datetime import UTC, datetime

    from gpuledger.warehouse import ingest_service, landing_store, objectstore

    try:
        mode = ingest_service.mode()
    except UserError as err:
        return Check("landing", "fail", str(err), "set [warehouse] ingest to 'direct' or 'service'")
    if mode != "service":
        return Check("landing", "ok", "not used: [warehouse] ingest = 'direct' (sweeps write the warehouse "
                                      "themselves)")
    explicit = s.values.get("warehouse.landing")
    setting = "[warehouse] landing (GPULEDGER_INGEST_LANDING)"
    fix = (f"fix {setting}, the endpoint ([warehouse] s3_endpoint, GPULEDGER_S3_ENDPOINT or AWS_ENDPOINT_URL) "
           "or the keys (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, ~/.aws/credentials)")
    where = ""
    try:
        where = landing_store.default_landing()
        h = landing_store.health(where, timeout_s=STORE_TIMEOUT_S)
    except UserError as err:  # ObjectStoreError included: one line, keys redacted
        text = " ".join(str(err).split())
        if not objectstore.is_object_store(where):
            fix = f"make that folder writable, or set {setting}"
        return Check("landing", "fail", text[:400], fix)
    origin = "" if explicit else " (the default: [warehouse] landing is not set)"
    if not h.exists:
        return Check("landing", "ok", f"{h.where}{origin}: none yet, its folder can be made (the first "
                                      "service-mode sweep makes it)")
    count = f"{h.waiting}{'+' if h.more else ''} record(s) waiting"
    lag_s = None
    if h.oldest_key is not None:
        at = ingest_service.landed_at(h.oldest_key)
        if at is not None:
            lag_s = max(0.0, ((now or datetime.now(UTC).replace(tzinfo=None)) - at).total_seconds())
            count += f", the oldest landed {_age(lag_s)} ago (its key's landing time, this machine's clock)"
    rejected = f"; {h.rejected} rejected (see rejected/*.reason.txt)" if h.rejected else ""
    detail = f"{h.where}{origin}: writable ({h.kind}); {count}{rejected}"
    wait_s = float(s.values.get("warehouse.ingest_wait_s") or 600.0)
    if lag_s is not None and lag_s > wait_s:
        return Check("landing", "warn", detail + f", longer than sweeps wait for it ({wait_s:.0f} s, "
                     "[warehouse] ingest_wait_s)",
                     "is ingest/team running? `gpuledger serve` runs it, or `gpuledger warehouse ingest` once")
    if h.rejected:
        return Check("landing", "warn", detail, "read the reasons, fix the records and land them again")
    return Check("landing", "ok", detail)


def check_bucket() -> Check:
    """The team warehouse's data path (`[warehouse] data_path`) when it is object storage: a probe
    object written under its prefix and removed (STORE_TIMEOUT_S per request, no retry)."""
    from gpuledger.warehouse import lake, landing_store, objectstore

    data = lake.data_path_setting()
    if not objectstore.is_object_store(data):
        return Check("bucket", "ok", f"data path {data}: a folder, not object storage" if data else
                     "no data path set here ([warehouse] data_path): readers use the catalog's own")
    try:
        cfg = lake.store_for(data)
        assert cfg is not None
        landing_store.probe_write(landing_store.S3Landing(cfg, timeout_s=STORE_TIMEOUT_S, label="warehouse data"))
    except UserError as err:
        return Check("bucket", "fail", " ".join(str(err).split())[:400],
                     "fix [warehouse] data_path (GPULEDGER_WAREHOUSE_DATA), the endpoint ([warehouse] s3_endpoint, "
                     "GPULEDGER_S3_ENDPOINT or AWS_ENDPOINT_URL) or the keys (AWS_ACCESS_KEY_ID/"
                     "AWS_SECRET_ACCESS_KEY, ~/.aws/credentials)")
    return Check("bucket", "ok", f"{cfg.describe()}: writable (a probe object written and removed)")


def check_prefect(s) -> Check:
    """The Prefect API `gpuledger serve`, the `prefect` commands and sweeps of this project use: the
    same port setting (`gpuledger.flows.server.serve_api_url`: $GPULEDGER_PREFECT_PORT, else
    prefect.toml); a server there is this project's only when its Prefect home is the project's."""
    from gpuledger.flows.server import (
        DEFAULT_API_URL,
        api_healthy,
        configured_api_url,
        serve_api_url,
        server_home,
        server_is_ours,
    )

    explicit = s.values.get("prefect.api_url") if s is not None else None
    root = s.project_root if s is not None else None
    url = explicit or (serve_api_url(root) if root is not None else configured_api_url(root)) or DEFAULT_API_URL
    if api_healthy(url, timeout_s=PROBE_TIMEOUT_S):
        if explicit:
            return Check("prefect", "ok", f"a Prefect API answers at {url} (PREFECT_API_URL)")
        if root is not None and server_is_ours(url, root):
            return Check("prefect", "ok", f"this project's Prefect server answers at {url} (`gpuledger serve`)")
        home = server_home(url)
        return Check("prefect", "warn", f"a Prefect server answers at {url} but it is not this project's "
                     f"(its state is in {home or 'an unknown home'}); `prefect` commands here would use it",
                     "`gpuledger serve --port N` (it points prefect.toml at N), or stop that server")
    from urllib.parse import urlparse

    parsed = urlparse(url)
    host, port = parsed.hostname or "127.0.0.1", parsed.port or 4200
    if host not in ("127.0.0.1", "localhost"):
        return Check("prefect", "fail", f"the Prefect API {url} does not answer",
                     "start that server, or unset PREFECT_API_URL to use a local one")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        taken = sock.connect_ex(("127.0.0.1", port)) == 0
    if taken:
        return Check("prefect", "warn", f"port {port} is taken by something that is not a Prefect API",
                     f"`gpuledger serve --port N` (sweeps then use a temporary server unless told {port})")
    return Check("prefect", "ok", f"no server at {url}; port {port} is free (`gpuledger serve` starts one; "
                                  "a sweep without it starts a temporary one)")


def check_skypilot() -> Check:
    if importlib.util.find_spec("sky") is None:  # find, not import: SkyPilot takes seconds to import
        return Check("skypilot", "warn", "SkyPilot is not installed: only `launcher: local` works",
                     'install the cloud extras: pip install "skypilot[aws,gcp]"')
    from importlib.metadata import PackageNotFoundError, version

    try:
        sky_version = version("skypilot")
    except PackageNotFoundError:
        sky_version = "?"
    found = []
    for cloud, files in CLOUD_CREDENTIALS.items():
        if any(Path(f).expanduser().exists() for f in files) or any(os.environ.get(e) for e in CLOUD_ENV.get(cloud, ())):
            found.append(cloud)
    if not found:
        return Check("skypilot", "warn", f"SkyPilot {sky_version}; no cloud credential files found "
                                         f"(looked for {', '.join(CLOUD_CREDENTIALS)})",
                     "set up a cloud's CLI (e.g. `aws configure`, `gcloud auth application-default login`), "
                     "then `sky check` confirms it")
    return Check("skypilot", "ok", f"SkyPilot {sky_version}; credential files for {', '.join(found)} "
                                   "(not verified over the network: `sky check` does)")


def check_gpu() -> Check:
    try:
        import pynvml
    except ImportError:
        return Check("gpu", "warn", "nvidia-ml-py is not installed: no GPU measurements",
                     "reinstall gpuledger (it depends on nvidia-ml-py)")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as err:
        return Check("gpu", "ok", f"no NVIDIA driver here ({err}); local trials run on the CPU, "
                                  "cloud trials measure their own GPUs")
    try:
        n = pynvml.nvmlDeviceGetCount()
        names = []
        for i in range(n):
            name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i))
            names.append(name.decode() if isinstance(name, bytes) else str(name))
        driver = pynvml.nvmlSystemGetDriverVersion()
        driver = driver.decode() if isinstance(driver, bytes) else str(driver)
    except pynvml.NVMLError as err:
        return Check("gpu", "warn", f"NVML started but could not list the GPUs ({err})",
                     "check `nvidia-smi`; the driver may need a reboot after an update")
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()
    return Check("gpu", "ok", f"{n} GPU(s) via NVML, driver {driver}: {', '.join(names) or '-'}")


def _newest_as_of(text: str) -> date | None:
    """Returns the newest `as_of` date of a price CSV's rows (the catalog's columns), None without one."""
    dates = sorted({row["as_of"][:10] for row in csv.DictReader(io.StringIO(text)) if row.get("as_of")})
    for value in reversed(dates):
        with contextlib.suppress(ValueError):
            return date.fromisoformat(value)
    return None


def check_prices(today: date | None = None, project_copy: Path | None = None) -> Check:
    """The age of the prices plans use: the bundled snapshot, or the project's copy
    (`gpuledger prices update`, `prices.dir`) where newer."""
    bundled = _newest_as_of(resources.files("gpuledger.catalog").joinpath("offers.csv").read_text(encoding="utf-8"))
    if bundled is None:
        return Check("prices", "fail", "the bundled price catalog has no as_of dates", "reinstall gpuledger")
    newest, what = bundled, f"bundled price catalog as of {bundled.isoformat()}"
    if project_copy is not None and project_copy.is_file():
        copied = _newest_as_of(project_copy.read_text(encoding="utf-8", errors="replace"))
        if copied is not None and copied > bundled:
            newest, what = copied, f"the project's price catalog {project_copy} as of {copied.isoformat()}"
    age_days = ((today or date.today()) - newest).days
    detail = f"{what} ({age_days} days old)"
    if age_days > PRICE_MAX_AGE_DAYS:
        return Check("prices", "warn", detail + f", older than {PRICE_MAX_AGE_DAYS} days",
                     "plans price at these rows: `gpuledger prices update` copies SkyPilot's newer catalog into "
                     "the project, or give your own prices (docs/prices.md)")
    return Check("prices", "ok", detail)


def _project_price_copy() -> Path | None:
    from gpuledger.catalog.pricing import project_catalog_path

    try:
        return project_catalog_path()
    except UserError:  # a settings file that does not read: said by the settings line
        return None


def run_checks() -> list[Check]:
    """Runs every check (see the module doc); returns them in order."""
    from gpuledger import settings as settings_mod

    checks = [check_python(), check_package_data()]
    project_checks, s = check_project(settings_mod)
    checks += project_checks
    if s is not None:
        with contextlib.suppress(settings_mod.ProjectNotFound):  # said by the project line
            checks += check_warehouse(s)
        checks.append(check_landing(s))
    steps: list[Callable[[], Check]] = [lambda: check_prefect(s), check_skypilot, check_gpu,
                                        lambda: check_prices(project_copy=_project_price_copy())]
    for step in steps:
        checks.append(step())
    return checks


def run(args: argparse.Namespace) -> int:
    checks = run_checks()
    failed = any(c.status == "fail" for c in checks)
    if getattr(args, "json", False):
        print(json.dumps({"ok": not failed, "checks": [asdict(c) for c in checks]}, indent=2))
    else:
        for c in checks:
            print(c.line())
        warned = sum(c.status == "warn" for c in checks)
        print(f"{'FAILED' if failed else 'ready'}: {len(checks)} checks, "
              f"{sum(c.status == 'fail' for c in checks)} failed, {warned} warning(s)")
    return 1 if failed else 0
