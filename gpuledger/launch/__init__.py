"""Launchers: where trials run. `local` (default, subprocesses) and `skypilot` (managed jobs), the
names of `gpuledger.vocabulary.LAUNCHERS`. Other launchers are registered at run time
(`register_launcher`): the tests register their deterministic in-process `fake`
(tests/helpers/fake_launcher.py); production code knows only the two."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpuledger.launch.base import Launcher, LaunchRequest, TrialStatus
from gpuledger.vocabulary import LAUNCHERS


@dataclass(frozen=True)
class RegisteredLauncher:
    """A launcher added at run time: how to make it, and the launcher whose plan it runs."""

    factory: Callable[..., Launcher]
    plans_as: str


_REGISTERED: dict[str, RegisteredLauncher] = {}


def register_launcher(name: str, factory: Callable[..., Launcher], *, plans_as: str = "local") -> None:
    """Makes `get_launcher(name, **options)` return `factory(**options)`; a sweep run with it is
    planned as `plans_as` (one of `gpuledger.vocabulary.LAUNCHERS`)."""
    if name in LAUNCHERS:
        raise ValueError(f"launcher {name!r} is built in; register another name")
    if plans_as not in LAUNCHERS:
        raise ValueError(f"plans_as must be one of {', '.join(LAUNCHERS)} (got {plans_as!r})")
    _REGISTERED[name] = RegisteredLauncher(factory, plans_as)


def registered_launchers() -> dict[str, RegisteredLauncher]:
    """Returns the launchers registered at run time (none in production)."""
    return dict(_REGISTERED)


def known_launchers() -> tuple[str, ...]:
    """Returns every launcher name `get_launcher` answers: the built-in ones, then the registered."""
    return (*LAUNCHERS, *_REGISTERED)


def plans_as(name: str) -> str:
    """Returns the launcher a sweep run with `name` is planned for (itself, for a built-in one)."""
    registered = _REGISTERED.get(name)
    return registered.plans_as if registered is not None else name


def get_launcher(name: str, **options) -> Launcher:
    """Returns the launcher called `name`; SkyPilot is imported only when asked for."""
    if name == "local":
        from gpuledger.launch.local import LocalLauncher

        return LocalLauncher(**options)
    if name == "skypilot":
        from gpuledger.launch.skypilot import SkyPilotLauncher

        return SkyPilotLauncher(**options)
    if name in _REGISTERED:
        return _REGISTERED[name].factory(**options)
    raise ValueError(f"unknown launcher {name!r}: use {' or '.join(LAUNCHERS)}")


__all__ = ["Launcher", "LaunchRequest", "RegisteredLauncher", "TrialStatus", "get_launcher", "known_launchers",
           "plans_as", "register_launcher", "registered_launchers"]
