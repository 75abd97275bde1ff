"""The one reader of gpuledger's settings, and where a project's run-time data lives.

A project is a folder with a `gpuledger.toml`, found by walking up from the working directory (as git
and dbt find theirs). Settings are layered, each layer overriding the one before:

    defaults < user file (~/.config/gpuledger/config.toml, or $GPULEDGER_CONFIG)
             < the project's gpuledger.toml < GPULEDGER_* variables < command-line flags

All run-time data of a project (the warehouse file, the landing folder of result records, the
adaptive-search studies, the local Prefect home, logs) lives in one git-ignored folder of the
project, `.gpuledger/` by default; reports go to `reports/` beside it. From any subfolder of the
project the same files are used. Outside a project, a command that needs one says so in one line
(`ProjectNotFound`), unless `GPULEDGER_WAREHOUSE` names a warehouse explicitly.

Nothing here imports DuckDB (commands that only may read the warehouse ask here first).
"""

from __future__ import annotations

import functools
import math
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuledger.errors import UserError

PROJECT_FILE = "gpuledger.toml"
#: the git-ignored folder of a project that holds all its run-time data
DATA_DIR_NAME = ".gpuledger"
#: warehouse file name inside the data folder
WAREHOUSE_FILE = "ledger.duckdb"
ENV_PATH = "GPULEDGER_WAREHOUSE"
ENV_CONFIG = "GPULEDGER_CONFIG"
ENV_PROJECT = "GPULEDGER_PROJECT"
#: folders (or files) whose settings files are trusted although another user owns them or others may
#: write them, separated by os.pathsep; `*` trusts every one (as git's `safe.directory`)
ENV_TRUSTED = "GPULEDGER_TRUSTED_PROJECTS"
#: the largest settings file read (bytes): a settings file is a few lines
MAX_SETTINGS_BYTES = 256 * 1024


class ProjectNotFound(UserError):
    """No gpuledger.toml in the working directory or above, and no explicit warehouse."""


class UntrustedSettings(UserError):
    """A settings file someone else could have planted: owned by another user, or writable by others."""


def _who(uid: int) -> str:
    try:
        import pwd

        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def untrusted_reason(path: Path) -> str | None:
    """Returns why the settings file `path` could be someone else's (owned by another user than this
    process's, or writable by its group or by others), else None. Links are followed: what counts is
    the file that is read."""
    import stat as _stat

    try:
        st = os.stat(path)
    except OSError:
        return None  # missing or unreadable: said by the reader
    me = os.geteuid() if hasattr(os, "geteuid") else st.st_uid
    if st.st_uid != me:
        return f"is owned by {_who(st.st_uid)}, not by you ({_who(me)})"
    if st.st_mode & _stat.S_IWOTH:
        return f"is writable by every user (mode {_stat.S_IMODE(st.st_mode):04o})"
    if st.st_mode & _stat.S_IWGRP:
        return f"is writable by its group (mode {_stat.S_IMODE(st.st_mode):04o})"
    return None


def _trusted_by_env(path: Path, environ: Mapping[str, str]) -> bool:
    raw = environ.get(ENV_TRUSTED, "")
    real = path.resolve()
    for entry in (e.strip() for e in raw.split(os.pathsep)):
        if not entry:
            continue
        if entry == "*":
            return True
        prefix = entry.endswith("/*")
        place = Path(entry.removesuffix("/*") if prefix else entry).expanduser().resolve()
        if real == place or real.parent == place or (prefix and place in real.parents):
            return True
    return False


def check_trusted(path: Path, what: str, environ: Mapping[str, str] | None = None) -> None:
    """Raises `UntrustedSettings` (one line naming the file and how to trust it) when `path` is a
    settings file another user could have planted or changed, unless $GPULEDGER_TRUSTED_PROJECTS
    names it (as git refuses a repository another user owns, CVE-2022-24765)."""
    reason = untrusted_reason(path)
    if reason is None or _trusted_by_env(path, os.environ if environ is None else environ):
        return
    raise UntrustedSettings(
        f"{what} {path} {reason}: refusing to use it (whoever can write it sets your prices, budgets and where "
        f"run-time data and reports go); if you trust it, export {ENV_TRUSTED}={path.resolve().parent} "
        f"(folders separated by '{os.pathsep}', '*' trusts all, as git's safe.directory), or make it yours: "
        f"chown $USER {path}; chmod go-w {path}")


@dataclass(frozen=True)
class Setting:
    """One setting: its place in the TOML files (`section.name`), its variable and its kind."""

    key: str
    env: str | None
    kind: type
    default: Any = None
    help: str = ""


#: Every setting gpuledger reads, in one table (a feature adds its row here, never reads files itself).
SETTINGS: tuple[Setting, ...] = (
    Setting("paths.data_dir", "GPULEDGER_DATA_DIR", str, DATA_DIR_NAME,
            "run-time data folder (warehouse, landing, studies, Prefect home), relative to the project"),
    Setting("paths.warehouse", ENV_PATH, str, None,
            "the warehouse: a DuckDB file (default DATA_DIR/ledger.duckdb) or ducklake:postgres:..."),
    Setting("paths.reports_dir", "GPULEDGER_REPORTS_DIR", str, "reports",
            "where reports are written, relative to the project"),
    Setting("prefect.api_url", "PREFECT_API_URL", str, None,
            "a Prefect server to use (default: the local one `gpuledger serve` starts, else a temporary one)"),
    Setting("prefect.home", "PREFECT_HOME", str, None,
            "the local Prefect home (its database, results, logs); default DATA_DIR/prefect"),
    Setting("agent.budget_usd", "GPULEDGER_AGENT_BUDGET_USD", float, None,
            "the most sweeps launched through `gpuledger mcp` may spend in total (USD)"),
    Setting("agent.require_plan", None, bool, True,
            "`gpuledger mcp`'s sweep launches only a spec planned first (by its plan_id)"),
    Setting("prices.dir", "GPULEDGER_PRICES_DIR", str, "prices",
            "the project's shared price folder (committed): `gpuledger prices update` writes catalog.csv there"),
    Setting("prices.billed_min_gpu_hours", "GPULEDGER_BILLED_MIN_GPU_HOURS", float, 10.0,
            "billed GPU-hours an offer needs before the planner prices it at the rate learned from the FOCUS bill"),
    Setting("gpus.name", None, str, None,
            "`[[gpus]]` tables, one per GPU kind the catalog lacks: name, memory_gib, bf16_tflops, bandwidth_gbps "
            "(+ fp8_tflops, interconnect, interconnect_gbps, arch, sustained_factor, usd_per_gpu_hour, "
            "usd_per_gpu_hour_spot, gpus_per_instance, cloud, region); read by gpuledger.catalog.project_gpus"),
    Setting("budget.confidence", "GPULEDGER_BUDGET_CONFIDENCE", str, "p90",
            "the quantile of the estimates' bands plans decide the budget, deadline and spot at: p50 or p90 "
            "(a spec's budget.confidence wins)"),
    Setting("warehouse.data_path", "GPULEDGER_WAREHOUSE_DATA", str, None,
            "a team warehouse's data files: a shared folder, s3://BUCKET/PREFIX or gs://BUCKET/PREFIX"),
    Setting("warehouse.s3_endpoint", "GPULEDGER_S3_ENDPOINT", str, None,
            "an S3-compatible endpoint for the data path (default $AWS_ENDPOINT_URL_S3, $AWS_ENDPOINT_URL, else AWS)"),
    Setting("warehouse.s3_region", None, str, None,
            "the bucket's region (default $AWS_REGION, $AWS_DEFAULT_REGION)"),
    Setting("warehouse.s3_url_style", None, str, None,
            "'path' or 'vhost' URLs for the bucket (default: path with a custom endpoint, else vhost)"),
    Setting("warehouse.ingest", "GPULEDGER_INGEST", str, "direct",
            "how sweeps store result records: 'direct' (each sweep writes the warehouse) or 'service' (records "
            "land on `warehouse.landing` and the deployment ingest/team stores them in batches)"),
    Setting("warehouse.landing", "GPULEDGER_INGEST_LANDING", str, None,
            "the ingest service's landing: s3://BUCKET/PREFIX, gs://... or a folder (default DATA_PATH-landing/, "
            "else DATA_DIR/ingest-landing)"),
    Setting("warehouse.ingest_wait_s", "GPULEDGER_INGEST_WAIT_S", float, 600.0,
            "with ingest = 'service': how long a sweep waits at its end for ingest/team to store its records (seconds)"),
    Setting("sql.timeout_s", "GPULEDGER_SQL_TIMEOUT_S", float, 300.0,
            "the longest a `gpuledger sql` query may run (seconds); Ctrl-C stops one at once"),
    Setting("budgets", None, list, (),
            "`[[budgets]]`: spending envelopes over a window (name, scope, window, limit_usd, soft_usd); "
            "the user file's and the project's tables both count (docs/budgets.md)"),
    Setting("alerts", None, list, (),
            "`[[alerts]]`: where alerts go (webhook or command) and on what (docs/budgets.md)"),
    Setting("money.accrue_interval_s", "GPULEDGER_ACCRUE_INTERVAL_S", float, 60.0,
            "how often a running sweep writes its running trials' accrued spend (seconds)"),
    Setting("money.approval_timeout_s", "GPULEDGER_APPROVAL_TIMEOUT_S", float, 86400.0,
            "how long a sweep over an envelope's soft threshold waits for `gpuledger approve` (seconds)"),
    Setting("local.usd_per_hour", "GPULEDGER_LOCAL_USD_PER_HOUR", float, None,
            "the hourly rate of this machine when nothing else names one: a local trial whose launch request "
            "has no rate (else 0), and an ad-hoc run (else its GPUs' catalog price, or the local reference rate)"),
    Setting("prices.file", "GPULEDGER_PRICES", str, None,
            "a CSV of your own prices (the bundled catalog's columns) overriding the rows with the same key "
            "(gpuledger/catalog/pricing.py); relative to the project when set in gpuledger.toml"),
    Setting("warehouse.lock_timeout_s", "GPULEDGER_LOCK_TIMEOUT_S", float, 10.0,
            "how long opening the warehouse waits for another process's lock before saying who holds it (seconds)"),
    Setting("paths.machine_file", "GPULEDGER_MACHINE_FILE", str, None,
            "where this machine's measured speed is stored (default $XDG_CACHE_HOME/gpuledger/machine.json)"),
    Setting("local.machine_load", "GPULEDGER_MACHINE_LOAD", str, None,
            "a load average a local plan plans for instead of the measured one (a number >= 0; 0: a quiet machine)"),
    Setting("prefect.port", "GPULEDGER_PREFECT_PORT", str, None,
            "the port of this project's `gpuledger serve` (1024-65535; default prefect.toml's, else 4200)"),
    Setting("adhoc.project", "GPULEDGER_ADHOC_PROJECT", str, "adhoc",
            "the project an ad-hoc run joins when its code names none (`gpuledger.track.init`, the Trainer "
            "callback, the Lightning logger): its sweep is `adhoc-PROJECT`"),
)
#: settings that are arrays of tables (`[[budgets]]`): the user file's and the project file's rows add up
TABLE_LISTS = tuple(s.key for s in SETTINGS if s.kind is list)
_BY_KEY = {s.key: s for s in SETTINGS}


@dataclass(frozen=True)
class Settings:
    """The settings in force, each with the layer it came from (`sources`)."""

    project_root: Path | None
    values: Mapping[str, Any]
    sources: Mapping[str, str]
    #: every section of the project file (and the user file), e.g. `[prices]`, as read
    sections: Mapping[str, Any] = field(default_factory=dict)

    def get(self, key: str) -> Any:
        """Returns the value of setting `key` (`section.name`, a row of `SETTINGS`)."""
        if key not in _BY_KEY:
            raise KeyError(f"unknown setting {key!r}")
        return self.values.get(key)

    def section(self, name: str) -> dict[str, Any]:
        """Returns a whole section of the settings files (`[prices]`), {} when absent."""
        value = self.sections.get(name)
        return dict(value) if isinstance(value, dict) else {}

    def _in_project(self, value: str, what: str) -> Path:
        p = Path(value).expanduser()
        if p.is_absolute():
            return p
        if self.project_root is None:
            raise ProjectNotFound(no_project_message(what))
        return self.project_root / p

    @property
    def data_dir(self) -> Path:
        """The project's run-time data folder (`.gpuledger/`)."""
        return self._in_project(self.values["paths.data_dir"], "its run-time data folder")

    @property
    def warehouse(self) -> str:
        """The warehouse target: a file path, or a `ducklake:` URI (a team warehouse)."""
        explicit = self.values.get("paths.warehouse")
        if explicit:
            if explicit.startswith("ducklake:"):
                return explicit
            if self.sources.get("paths.warehouse") in ("environment", "flag") or self.project_root is None:
                return str(Path(explicit).expanduser())
            return str(self._in_project(explicit, "its warehouse"))
        return str(self.data_dir / WAREHOUSE_FILE)

    @property
    def warehouse_path(self) -> Path:
        """The warehouse file (for a team warehouse: where local run-time data would sit beside it)."""
        target = self.warehouse
        if target.startswith("ducklake:"):
            return self.data_dir / WAREHOUSE_FILE
        return Path(target)

    @property
    def run_dir(self) -> Path:
        """The folder beside the warehouse file that holds landing, studies and logs."""
        return self.warehouse_path.resolve().parent

    @property
    def landing_dir(self) -> Path:
        """The folder where result records wait until they are stored (one sub-folder per sweep)."""
        return self.run_dir / "landing"

    @property
    def studies_dir(self) -> Path:
        """The adaptive-search studies (Optuna journals)."""
        return self.run_dir / "studies"

    @property
    def prefect_home(self) -> Path:
        """The local Prefect home (its database, results, logs): `prefect.home`, else `prefect/` of the
        run-time folder (outside a project, with an explicit warehouse: beside that file)."""
        explicit = self.values.get("prefect.home")
        if explicit:
            return self._in_project(explicit, "its Prefect home").resolve()
        if self.project_root is None:
            return self.run_dir / "prefect"
        return self.data_dir.resolve() / "prefect"

    def path(self, key: str) -> Path | None:
        """Returns the file or folder setting `key` as a path: as given when it came from a variable or a
        flag (relative to the working directory), relative to the project when a settings file set it;
        None when unset."""
        value = self.get(key)
        if not value:
            return None
        if self.sources.get(key) in ("environment", "flag", "default") or self.project_root is None:
            return Path(value).expanduser()
        return self._in_project(value, key)

    @property
    def reports_dir(self) -> Path:
        """Where reports are written by default (`reports/` of the project)."""
        value = self.values["paths.reports_dir"]
        p = Path(value).expanduser()
        if p.is_absolute():
            return p
        return (self.project_root or Path.cwd()) / p


def no_project_message(what: str = "a project") -> str:
    """The one line said outside a project, naming how to make one."""
    return (f"this command needs a gpuledger project for {what}, and there is no {PROJECT_FILE} in "
            f"{Path.cwd()} or any folder above it: run `gpuledger init` in your repository "
            f"(or set {ENV_PATH} to a warehouse file)")


def find_project(start: Path | None = None, *, environ: Mapping[str, str] | None = None) -> Path | None:
    """Returns the nearest folder at or above `start` (default: the working directory, or
    $GPULEDGER_PROJECT) that holds a `gpuledger.toml`, else None."""
    env = (os.environ if environ is None else environ).get(ENV_PROJECT)
    if start is None and env:
        root = Path(env).expanduser().resolve()
        if not (root / PROJECT_FILE).is_file():
            raise UserError(f"{ENV_PROJECT}={env}: there is no {PROJECT_FILE} in that folder")
        return root
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / PROJECT_FILE).is_file():
            return folder
    return None


def user_config_path() -> Path:
    """Returns the user's settings file: $GPULEDGER_CONFIG, else ~/.config/gpuledger/config.toml."""
    env = os.environ.get(ENV_CONFIG)
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "gpuledger" / "config.toml"


def read_toml(path: Path) -> dict[str, Any]:
    """Returns the tables of a settings file; one-line UserError naming the file for bad TOML."""
    try:
        if not path.is_file():
            raise UserError(f"{path}: not a regular file")
        size = path.stat().st_size
        if size > MAX_SETTINGS_BYTES:
            raise UserError(f"{path}: {size} bytes; a settings file may have at most {MAX_SETTINGS_BYTES}")
        with open(path, "rb") as fh:
            data = fh.read(MAX_SETTINGS_BYTES + 1)
        return tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise UserError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    except tomllib.TOMLDecodeError as err:
        raise UserError(f"{path}: not valid TOML: {err}") from None
    except OSError as err:
        raise UserError(f"{path}: cannot be read ({err.strerror or err})") from None


def _convert(setting: Setting, value: Any, where: str) -> Any:
    if value is None:
        return None
    if setting.kind is float:
        if isinstance(value, bool):
            raise UserError(f"{where}: {setting.key} must be a number, not {value!r}")
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise UserError(f"{where}: {setting.key} must be a number, not {str(value)[:80]!r}") from None
        if not math.isfinite(number) or number < 0:
            raise UserError(f"{where}: {setting.key} must be a finite number >= 0, not {str(value)[:80]!r}")
        return number
    if setting.kind is bool:
        if not isinstance(value, bool):
            raise UserError(f"{where}: {setting.key} must be true or false, not {str(value)[:80]!r}")
        return value
    if setting.kind is str:
        if not isinstance(value, str):
            raise UserError(f"{where}: {setting.key} must be text, not {value!r}")
        if "\x00" in value or len(value) > 4096:
            raise UserError(f"{where}: {setting.key} must be text without NUL of at most 4096 characters")
        return value
    return value


def _table_list(key: str, value: Any, where: str) -> tuple[dict[str, Any], ...]:
    """An array of tables (`[[budgets]]`), each row tagged with the file it came from (`_where`)."""
    rows = value if isinstance(value, list) else None
    if rows is None or not all(isinstance(row, dict) for row in rows):
        raise UserError(f"{where}: {key} must be an array of tables ([[{key}]] rows), not {str(value)[:80]!r}")
    if len(rows) > 200:
        raise UserError(f"{where}: at most 200 [[{key}]] rows, not {len(rows)}")
    return tuple({**row, "_where": where} for row in rows)


def _layer_values(tables: dict[str, Any], where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for setting in SETTINGS:
        if setting.kind is list:
            if setting.key in tables:
                out[setting.key] = _table_list(setting.key, tables[setting.key], where)
            continue
        section, name = setting.key.split(".", 1)
        table = tables.get(section)
        if isinstance(table, dict) and name in table:
            out[setting.key] = _convert(setting, table[name], where)
    return out


def load_settings(flags: Mapping[str, Any] | None = None, *, cwd: Path | None = None,
                  environ: Mapping[str, str] | None = None) -> Settings:
    """Returns the settings in force: defaults < user file < project file < variables < `flags`
    ({`section.name`: value}, None values ignored)."""
    env = os.environ if environ is None else environ
    values = {s.key: s.default for s in SETTINGS}
    sources = {s.key: "default" for s in SETTINGS}
    sections: dict[str, Any] = {}

    user_file = user_config_path()
    if user_file.exists():
        check_trusted(user_file, f"the settings file named by ${ENV_CONFIG}" if env.get(ENV_CONFIG)
                      else "your settings file", env)
        tables = read_toml(user_file)
        sections.update(tables)
        for k, v in _layer_values(tables, str(user_file)).items():
            values[k], sources[k] = v, "user file"
    root = find_project(None if env.get(ENV_PROJECT) else cwd, environ=env)  # $GPULEDGER_PROJECT first
    if root is not None:
        check_trusted(root / PROJECT_FILE, "the project file", env)
        tables = read_toml(root / PROJECT_FILE)
        for name, table in tables.items():
            if isinstance(table, dict) and isinstance(sections.get(name), dict):
                sections[name] = {**sections[name], **table}
            else:
                sections[name] = table
        for k, v in _layer_values(tables, str(root / PROJECT_FILE)).items():
            if k in TABLE_LISTS and sources[k] == "user file":  # both files' rows count
                v = (*values[k], *v)
            values[k], sources[k] = v, "project file"
    for setting in SETTINGS:
        if setting.env and setting.kind is not list and env.get(setting.env):
            values[setting.key] = _convert(setting, env[setting.env], f"${setting.env}")
            sources[setting.key] = "environment"
    for k, v in (flags or {}).items():
        if v is None:
            continue
        if k not in _BY_KEY:
            raise KeyError(f"unknown setting {k!r}")
        values[k], sources[k] = _convert(_BY_KEY[k], v, "command line"), "flag"
    return Settings(project_root=root, values=values, sources=sources, sections=sections)


@functools.lru_cache(maxsize=8)
def _cached(cwd: str, env_key: tuple[tuple[str, str], ...], mtimes: tuple[float, ...]) -> Settings:
    return load_settings(cwd=Path(cwd), environ=dict(env_key))


def current() -> Settings:
    """Returns the settings in force for this process (cached while the working directory, the
    GPULEDGER_* variables and the settings files are unchanged)."""
    env_key = tuple(sorted((k, v) for k, v in os.environ.items()
                           if k.startswith("GPULEDGER_") or k in ("PREFECT_API_URL", "PREFECT_HOME", "XDG_CONFIG_HOME", "HOME")))
    root = find_project()
    files = [user_config_path()] + ([root / PROJECT_FILE] if root else [])
    mtimes = tuple(x for f in files for x in _identity(f))
    return _cached(str(Path.cwd()), env_key, mtimes)


def _identity(path: Path) -> tuple[float, float, float]:
    """What a cached reading of a settings file depends on: its time, owner and mode (a chown or a
    chmod changes whether it is trusted)."""
    try:
        st = path.stat()
    except OSError:
        return (0.0, -1.0, -1.0)
    return (st.st_mtime, float(st.st_uid), float(st.st_mode))


def resolve_path(path: str | os.PathLike[str] | None = None) -> Path:
    """Returns the warehouse file: `path`, else the settings' warehouse (`$GPULEDGER_WAREHOUSE`, the
    project's `paths.warehouse`, else `.gpuledger/ledger.duckdb` of the project). Outside a project
    with no explicit warehouse: `ProjectNotFound`."""
    if path is not None:
        return Path(path)
    return current().warehouse_path


def warehouse_if_any(path: str | os.PathLike[str] | None = None) -> Path | None:
    """Returns the warehouse file a reader that only may read it should read (`path`, else as
    `resolve_path`) when that file exists; None when it does not, or outside a project with no
    explicit warehouse (`plan`, `estimate` then go on without what the warehouse would teach them)."""
    try:
        target = resolve_path(path)
    except ProjectNotFound:
        return None
    return target if target.exists() else None
