"""The stage registry: built-in stages, loaded lazily, plus entry-point plugins."""

from __future__ import annotations

import importlib

from ctxcli.errors import ConfigError

from .base import (
    StageContext,
    StageOptions,
    StageResult,
    StageSpec,
    TokenLedger,
    register,
    take_pending,
)

__all__ = [
    "StageContext",
    "StageOptions",
    "StageResult",
    "StageSpec",
    "TokenLedger",
    "get_stage",
    "register",
    "registry",
]


def _builtin_modules() -> list[str]:
    # Every module in this package except the plumbing is one stage.
    import pkgutil

    return sorted(
        m.name
        for m in pkgutil.iter_modules(__path__)
        if not m.name.startswith("_") and m.name != "base"
    )


_REGISTRY: dict[str, StageSpec] = {}
_LOADED = False


def _add(spec: StageSpec) -> None:
    other = _REGISTRY.get(spec.name)
    if other is not None and other.fn is not spec.fn:
        raise ConfigError(
            f"stage {spec.name!r} is defined twice: by {other.package} and by {spec.package}; "
            "uninstall one of them or set CTX_NO_PLUGINS=1."
        )
    _REGISTRY[spec.name] = spec


def registry() -> dict[str, StageSpec]:
    """All stages by name, built-ins first (imports them on first use)."""
    global _LOADED
    if not _LOADED:
        for module in _builtin_modules():
            importlib.import_module(f"{__name__}.{module}")
        for spec in take_pending():
            _add(spec)
        _LOADED = True
    return _REGISTRY


def get_stage(name: str) -> StageSpec:
    """The stage called ``name`` (raises :class:`ConfigError` with a suggestion)."""
    stages = registry()
    if name in stages:
        return stages[name]
    import difflib

    close = difflib.get_close_matches(name, list(stages), n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise ConfigError(f"unknown stage {name!r}; {hint}valid stages: {', '.join(stages)}.")
