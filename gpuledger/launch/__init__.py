"""Launchers: where trials run. `local` (default, subprocesses), `skypilot` (managed jobs), or
`fake` (deterministic and in-process: fast flow tests and benchmarks, `gpuledger.launch.fake`)."""

from __future__ import annotations

from gpuledger.launch.base import Launcher, LaunchRequest, TrialStatus


def get_launcher(name: str, **options) -> Launcher:
    """Returns the launcher called `name`; SkyPilot is imported only when asked for."""
    if name == "local":
        from gpuledger.launch.local import LocalLauncher

        return LocalLauncher(**options)
    if name == "skypilot":
        from gpuledger.launch.skypilot import SkyPilotLauncher

        return SkyPilotLauncher(**options)
    if name == "fake":
        from gpuledger.launch.fake import FakeLauncher

        return FakeLauncher(**options)
    raise ValueError(f"unknown launcher {name!r}: use local or skypilot")


__all__ = ["Launcher", "LaunchRequest", "TrialStatus", "get_launcher"]
