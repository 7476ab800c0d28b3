"""The format registry: the built-in formats in detection order, then plugins.

Formats register like stages (one design, :mod:`ctxcli.core.plugins`): each built-in
module decorates its class with :func:`register_format`, and so does a plugin module
named by a ``ctxcli.formats.v1`` entry point.
"""

from __future__ import annotations

from typing import TypeVar

from ctxcli.core.errors import ConfigError
from ctxcli.core.plugins import Registry
from ctxcli.formats.format import Format

__all__ = [
    "BUILTIN_MODULES",
    "FORMAT_REGISTRY",
    "PLUGIN_GROUP",
    "register_format",
]

PLUGIN_GROUP = "ctxcli.formats.v1"
"""Entry-point group of third-party formats (versioned, so a v2 interface can coexist)."""

BUILTIN_MODULES = (
    "ctxcli.formats.claude_code",
    "ctxcli.formats.codex",
    "ctxcli.formats.langchain",
    "ctxcli.formats.anthropic",  # before openai_chat, whose sniff takes any {role} line
    "ctxcli.formats.openai_chat",  # the fallback for plain {role, content} lines
    "ctxcli.formats.json_doc",  # whole JSON documents, tried before JSONL parsing
    "ctxcli.formats.openhands",  # OpenHands event lists (the parts of its output.jsonl)
)
"""The built-in formats in auto-detection order: more specific formats first."""


def _admit(fmt: Format, package: str) -> Format:
    if not isinstance(fmt, Format) or not fmt.name:
        raise ConfigError(
            f"format {getattr(fmt, 'name', None) or fmt!r} from {package}: register an instance "
            "of a ctxcli.formats.Format subclass with a non-empty name."
        )
    return fmt


FORMAT_REGISTRY: Registry[Format] = Registry(
    kind="format",
    group=PLUGIN_GROUP,
    builtins=lambda: BUILTIN_MODULES,
    name_of=lambda fmt: fmt.name,
    module_of=lambda fmt: type(fmt).__module__,
    how="decorate a Format subclass in {module} with @ctxcli.formats.register_format",
    admit=_admit,
    same=lambda a, b: type(a) is type(b),
)
"""Every format: the built-in modules above, then ``ctxcli.formats.v1`` plugins."""

F = TypeVar("F", bound="Format | type[Format]")


def register_format(fmt: F) -> F:
    """Declare a format; the registry adds it when it loads the format's module.

    Use it as a class decorator (the class is instantiated once) or call it with an
    instance; either way the argument is returned unchanged.
    """
    FORMAT_REGISTRY.register(fmt() if isinstance(fmt, type) else fmt)
    return fmt
