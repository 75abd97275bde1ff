"""Offline SkyPilot for tests: its catalog in a temporary HOME, chosen clouds "enabled", no network.

SkyPilot (0.14.1) reads prices from `~/.sky/catalogs/v8/<cloud>/<file>.csv` and downloads a file
that is missing (or stale) from GitHub. These machines cannot reach it, so tests fill a temporary
HOME from the snapshot in `../shared/skypilot-catalog/v8` (relative to the repo root; see its
PROVENANCE.md) and write `.meta/<cloud>/<file>.csv.md5` beside each file, so that SkyPilot treats
the copy as a normal, fresh download (fresh mtime: no refresh for 7 hours; matching md5: not
"hand-modified"). Where that folder is absent (a user's machine) the tests that need it skip.

SkyPilot bakes the catalog directory into module globals at import time
(`sky.catalog.common._ABSOLUTE_VERSIONED_CATALOG_DIR`, and one `LazyDataFrame` per file in each
`sky.catalog.<cloud>_catalog` module), so the copy lives in ONE directory per test process, and
`sky_offline` re-points those globals at it if `sky` was imported before HOME was switched.

The optimizer refuses with `NoCloudAccessError` while no cloud has credentials; as SkyPilot's own
test suite does, `sky.check.get_cached_enabled_clouds_or_refresh` and `sky.check.check_capability`
are replaced so that the chosen clouds count as enabled.

`no_network` makes every non-loopback `socket.connect` raise (and records the attempt), so a test
that would reach the catalog host, an API server or a cloud fails loudly instead of hanging.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import socket
import sys
import tempfile
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED_CATALOG = REPO_ROOT.parent / "shared" / "skypilot-catalog" / "v8"
CATALOG_MISSING_REASON = (
    f"SkyPilot catalog snapshot not found at {SHARED_CATALOG} "
    "(it ships only with the development workspace; see shared/skypilot-catalog/PROVENANCE.md)"
)
#: Clouds the tests enable by default (those the shipped specs name).
DEFAULT_CLOUDS = ("aws", "gcp", "lambda", "nebius", "azure")

_HOME: Path | None = None


def catalog_available() -> bool:
    return (SHARED_CATALOG / "common" / "accelerators.csv").is_file()


def fill_catalog(home: Path, source: Path = SHARED_CATALOG) -> Path:
    """Copies the catalog snapshot into `home/.sky/catalogs/v8` with md5 meta files; returns that dir."""
    dest = home / ".sky" / "catalogs" / "v8"
    for src in sorted(source.rglob("*.csv")):
        rel = src.relative_to(source)
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, target)  # copyfile, not copy2: a fresh mtime means "just downloaded"
        meta = dest / ".meta" / rel.parent / (rel.name + ".md5")
        meta.parent.mkdir(parents=True, exist_ok=True)
        # SkyPilot writes md5 of the downloaded text; hashing the bytes gives the same digest.
        meta.write_text(hashlib.md5(target.read_bytes(), usedforsecurity=False).hexdigest())
    return dest


def offline_home() -> Path:
    """Returns the process-wide temporary HOME holding the catalog (created on first call)."""
    global _HOME
    if _HOME is None:
        home = Path(tempfile.mkdtemp(prefix="gpuledger-sky-home-"))
        atexit.register(shutil.rmtree, home, True)
        fill_catalog(home)
        _HOME = home
    return _HOME


def _repoint_catalog(monkeypatch: pytest.MonkeyPatch, catalog_dir: Path) -> None:
    """Points SkyPilot's import-time catalog paths at `catalog_dir` (when sky was imported earlier)."""
    import sky.catalog.common as common

    old = common._ABSOLUTE_VERSIONED_CATALOG_DIR
    if Path(old) == catalog_dir:
        return
    monkeypatch.setattr(common, "_ABSOLUTE_VERSIONED_CATALOG_DIR", str(catalog_dir))
    for name, module in list(sys.modules.items()):
        if not name.startswith("sky.catalog.") or module is None:
            continue
        for attr, value in list(vars(module).items()):
            if isinstance(value, common.LazyDataFrame) and value._filename.startswith(old):
                fresh = common.read_catalog(os.path.relpath(value._filename, old))
                monkeypatch.setattr(module, attr, fresh)


def enable_clouds(monkeypatch: pytest.MonkeyPatch, clouds=DEFAULT_CLOUDS) -> None:
    """Makes `clouds` count as enabled for SkyPilot's checks (no credentials looked at)."""
    import sky
    import sky.check
    from sky.utils import registry

    enabled = [registry.CLOUD_REGISTRY.from_str(c) for c in clouds]

    def get_cached_enabled_clouds_or_refresh(capability=None, raise_if_no_cloud_access=False):
        return list(enabled)

    def check_capability(capability=None, quiet=False, verbose=False, clouds=None, workspace=None):
        names = [repr(c) for c in enabled]
        return {"default": names}

    monkeypatch.setattr(sky.check, "get_cached_enabled_clouds_or_refresh", get_cached_enabled_clouds_or_refresh)
    monkeypatch.setattr(sky.check, "check_capability", check_capability)
    no_cloud_identity(monkeypatch)
    del sky


def no_cloud_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    """Makes AWS report "no credentials" without asking: SkyPilot's AWS catalog otherwise asks boto3
    for the caller identity (STS, the instance metadata service at 169.254.169.254) to map zones."""
    from sky import exceptions
    from sky.clouds import aws

    def get_active_user_identity(*_args, **_kwargs):
        raise exceptions.CloudUserIdentityError("offline test: no AWS identity")

    monkeypatch.setattr(aws.AWS, "get_active_user_identity", classmethod(get_active_user_identity))


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch):
    """Makes non-loopback socket connections raise; yields the list of attempted addresses."""
    attempts: list[object] = []
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex

    def _allowed(sock: socket.socket, address) -> bool:
        if sock.family == getattr(socket, "AF_UNIX", None):
            return True
        host = address[0] if isinstance(address, tuple) else address
        return host in ("127.0.0.1", "::1", "localhost")

    def guarded_connect(sock, address):
        if not _allowed(sock, address):
            attempts.append(address)
            raise OSError(f"network access blocked in tests (tried {address!r})")
        return real_connect(sock, address)

    def guarded_connect_ex(sock, address):
        if not _allowed(sock, address):
            attempts.append(address)
            raise OSError(f"network access blocked in tests (tried {address!r})")
        return real_connect_ex(sock, address)

    def guarded_getaddrinfo(host, *args, **kwargs):
        if host not in (None, "127.0.0.1", "::1", "localhost"):
            attempts.append(host)
            raise socket.gaierror(f"name resolution blocked in tests (tried {host!r})")
        return real_getaddrinfo(host, *args, **kwargs)

    real_getaddrinfo = socket.getaddrinfo
    monkeypatch.setattr(socket.socket, "connect", guarded_connect)
    monkeypatch.setattr(socket.socket, "connect_ex", guarded_connect_ex)
    monkeypatch.setattr(socket, "getaddrinfo", guarded_getaddrinfo)
    yield attempts


def import_sky_with_catalog(monkeypatch: pytest.MonkeyPatch) -> None:
    """Imports `sky` (once per process) while HOME is the offline catalog home, where that exists,
    so SkyPilot's import-time catalog path points at the snapshot even if the first test to import
    `sky` uses an empty HOME."""
    if "sky.catalog.common" in sys.modules or not catalog_available():
        return
    with monkeypatch.context() as m:
        isolate_home(m, offline_home())
        import sky.catalog.common  # noqa: F401 - for its import-time path


def isolate_home(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    """Points HOME (and SkyPilot's runtime dir) at `home`; turns SkyPilot's usage reporting off."""
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("SKY_RUNTIME_DIR", str(home))
    monkeypatch.setenv("SKYPILOT_DISABLE_USAGE_COLLECTION", "1")
    monkeypatch.delenv("SKYPILOT_API_SERVER_ENDPOINT", raising=False)


@pytest.fixture
def sky_offline(monkeypatch: pytest.MonkeyPatch, no_network):
    """SkyPilot with the catalog snapshot in a temporary HOME and DEFAULT_CLOUDS enabled.

    Yields the HOME path. Skips (with the reason) where the snapshot is absent.
    """
    if not catalog_available():
        pytest.skip(CATALOG_MISSING_REASON)
    home = offline_home()
    import_sky_with_catalog(monkeypatch)
    isolate_home(monkeypatch, home)
    _repoint_catalog(monkeypatch, home / ".sky" / "catalogs" / "v8")
    enable_clouds(monkeypatch)
    yield home
    assert not no_network, f"a test tried to reach the network: {no_network}"
    assert not api_server_children(), "a SkyPilot API server was started by a test"


def api_server_children() -> list[str]:
    """Returns the command lines of this process's descendants that look like a SkyPilot API server."""
    import psutil

    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            cmd = " ".join(child.cmdline())
        except psutil.Error:
            continue
        if "sky.server" in cmd or "sky api" in cmd:
            found.append(cmd)
    return found


@pytest.fixture
def sky_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, no_network):
    """An empty temporary HOME (no catalog): SkyPilot must not be asked for anything there."""
    import_sky_with_catalog(monkeypatch)
    isolate_home(monkeypatch, tmp_path)
    yield tmp_path
    assert not no_network, f"a test tried to reach the network: {no_network}"
    assert not api_server_children(), "a SkyPilot API server was started by a test"
