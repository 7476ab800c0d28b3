"""The stage registry: built-in stages, loaded lazily, plus entry-point plugins.

The plugin-facing module: a plugin imports the model types and ``register`` from here.
Stages and formats share one registry design (:mod:`ctxcli.core.plugins`).
"""

from __future__ import annotations

import difflib

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
from ctxcli.core.plugins import plugins_enabled
from ctxcli.services.tokens.ledger import TokenLedger
from ctxcli.stages.base import (
    PLUGIN_GROUP,
    STAGE_REGISTRY,
    Frontier,
    StageContext,
    StageOptions,
    StageResult,
    StageSpec,
    everything_final,
    register,
)

__all__ = [
    "Block",
    "Conversation",
    "Frontier",
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
    "STAGE_REGISTRY",
    "everything_final",
    "get_stage",
    "plugins_enabled",
    "register",
    "registry",
]


def registry() -> dict[str, StageSpec]:
    """All stages by name: built-ins first, then entry-point plugins (loaded on first use).

    Stages registered later with :func:`register` (a script defining its own stage)
    are picked up on the next call.
    """
    return STAGE_REGISTRY.items()


def get_stage(name: str) -> StageSpec:
    """The stage called ``name`` (raises :class:`ConfigError` with a suggestion)."""
    stages = registry()
    if name in stages:
        return stages[name]
    close = difflib.get_close_matches(name, list(stages), n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise ConfigError(f"unknown stage {name!r}; {hint}valid stages: {', '.join(stages)}.")
