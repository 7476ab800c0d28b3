"""The stage registry: built-in stages, loaded lazily, plus entry-point plugins."""

from __future__ import annotations

import importlib
import os
from dataclasses import replace
from typing import TYPE_CHECKING

from ctxcli.core.errors import ConfigError, StageError
from ctxcli.core.model import (
    Block,
    Conversation,
    Kind,
    Message,
    RecordEdits,
    Round,
    SourceRecord,
)
from ctxcli.stages.base import (
    StageContext,
    StageOptions,
    StageResult,
    StageSpec,
    TokenLedger,
    register,
    take_pending,
)

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

__all__ = [
    "Block",
    "Conversation",
    "Kind",
    "Message",
    "RecordEdits",
    "Round",
    "SourceRecord",
    "StageError",
    "StageContext",
    "StageOptions",
    "StageResult",
    "StageSpec",
    "TokenLedger",
    "PLUGIN_GROUP",
    "get_stage",
    "plugins_enabled",
    "register",
    "registry",
]

PLUGIN_GROUP = "ctxcli.stages.v1"
"""Entry-point group of third-party stages (versioned, so a v2 interface can coexist)."""


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
_PLUGINS_LOADED = False


def _add(spec: StageSpec) -> None:
    if not (isinstance(spec.options, type) and issubclass(spec.options, StageOptions)):
        raise ConfigError(
            f"stage {spec.name!r} from {spec.package}: its options must subclass "
            "ctxcli.stages.StageOptions (unknown keys are errors, values frozen)."
        )
    other = _REGISTRY.get(spec.name)
    if other is not None and other.fn is not spec.fn:
        raise ConfigError(
            f"stage {spec.name!r} is defined twice: by {other.package} and by {spec.package}; "
            "uninstall one of them or set CTX_NO_PLUGINS=1."
        )
    _REGISTRY[spec.name] = spec


def plugins_enabled() -> bool:
    """False when ``CTX_NO_PLUGINS`` is set (to anything but ``0``): built-ins only."""
    return os.environ.get("CTX_NO_PLUGINS", "") in ("", "0")


def registry() -> dict[str, StageSpec]:
    """All stages by name: built-ins first, then entry-point plugins (loaded on first use).

    Stages registered later with :func:`register` (a script defining its own stage)
    are picked up on the next call.
    """
    global _LOADED, _PLUGINS_LOADED
    if not _LOADED:
        for module in _builtin_modules():
            importlib.import_module(f"{__name__}.{module}")
        _LOADED = True
    for spec in take_pending():
        _add(spec)
    if not _PLUGINS_LOADED and plugins_enabled():
        _load_plugins()
        # Only after every plugin loaded: a broken one fails every call, not just the first.
        _PLUGINS_LOADED = True
    return _REGISTRY


def _load_plugins() -> None:
    """Import every ``ctxcli.stages.v1`` entry point; its ``@register`` calls add the stages."""
    from importlib.metadata import entry_points

    def order(ep: EntryPoint) -> tuple[str, str]:
        return (ep.dist.name if ep.dist else "", ep.name)

    for ep in sorted(entry_points(group=PLUGIN_GROUP), key=order):
        package = ep.dist.name if ep.dist else ep.module.split(".")[0]
        where = f"entry point {ep.name} = {ep.value!r} of package {package}"
        try:
            ep.load()
        except Exception as exc:
            raise ConfigError(
                f"{where} failed to load ({type(exc).__name__}: {exc}); fix or uninstall "
                "the plugin, or set CTX_NO_PLUGINS=1 to run without plugins."
            ) from exc
        specs = take_pending()
        for spec in specs:
            # Errors about this stage should name the distribution users installed.
            _add(replace(spec, package=package))
        if not specs and not any(
            getattr(s.fn, "__module__", None) == ep.module for s in _REGISTRY.values()
        ):
            raise ConfigError(
                f"{where} registers no stage; decorate a function in {ep.module} with "
                "@ctxcli.stages.register(name, options=...)."
            )


def get_stage(name: str) -> StageSpec:
    """The stage called ``name`` (raises :class:`ConfigError` with a suggestion)."""
    stages = registry()
    if name in stages:
        return stages[name]
    import difflib

    close = difflib.get_close_matches(name, list(stages), n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise ConfigError(f"unknown stage {name!r}; {hint}valid stages: {', '.join(stages)}.")
