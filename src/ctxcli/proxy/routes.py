"""Where a request goes: chosen by configuration, never guessed from its headers.

A credential must only reach the API the client addressed, and a client addresses an
API by the base URL it was given, not by the headers it sends (Claude Code sends
``Authorization: Bearer`` to Anthropic when it logs in with OAuth, exactly as Codex does
to OpenAI). So:

- with ``single_upstream`` (``ctx wrap``: the proxy serves one client) every path goes to
  that one API;
- else a path under ``/anthropic`` or ``/openai`` goes to that API, the prefix removed
  (point Claude Code at ``http://HOST:PORT/anthropic`` and Codex at
  ``http://HOST:PORT/openai/v1``);
- else the model endpoints go to the API they belong to (``/v1/messages...`` exists only
  at Anthropic, ``/v1/chat/completions...`` and ``/v1/responses...`` only at OpenAI);
- else the path goes to ``other_paths`` when it is set, and nowhere otherwise (the proxy
  answers 404 and says how to address an API).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from ctxcli.core.errors import ConfigError
from ctxcli.proxy.shapes import Api

if TYPE_CHECKING:
    from ctxcli.proxy.engine import ProxySettings

__all__ = [
    "MODEL_PATHS",
    "PROVIDERS",
    "Provider",
    "Route",
    "check_settings",
    "route",
    "unrouted_message",
]

Provider = Literal["anthropic", "openai"]
PROVIDERS: tuple[Provider, ...] = ("anthropic", "openai")

MODEL_PATHS: dict[str, Api] = {
    "/v1/messages": "anthropic",
    "/v1/chat/completions": "openai_chat",
    "/chat/completions": "openai_chat",
    "/v1/responses": "openai_responses",
    "/responses": "openai_responses",
}
"""The endpoints whose request bodies the proxy reduces, and their shapes."""


@dataclass(frozen=True)
class Route:
    """Where one request goes.

    Attributes:
        provider: the API it goes to.
        base: that API's base URL.
        path: the path to forward (without an ``/anthropic`` or ``/openai`` prefix).
        api: the shape to reduce the body as (a model endpoint), else None.
    """

    provider: Provider
    base: str
    path: str
    api: Api | None


def check_settings(settings: ProxySettings) -> None:
    """Raise :class:`ConfigError` for a routing setting that names no API."""
    for name in ("single_upstream", "other_paths"):
        value = getattr(settings, name)
        if value is not None and value not in PROVIDERS:
            raise ConfigError(
                f"{name} {value!r} is not an API: choose one of {', '.join(PROVIDERS)}"
            )


def route(settings: ProxySettings, path: str) -> Route | None:
    """The route of a request to ``path``, or None when the configuration gives it none."""
    if settings.single_upstream is not None:
        return _to(settings, settings.single_upstream, path)
    for provider in PROVIDERS:
        prefix = f"/{provider}"
        if path.startswith(prefix + "/"):
            return _to(settings, provider, path[len(prefix) :])
    for own, api in MODEL_PATHS.items():
        if path == own or path.startswith(own + "/"):
            return _to(settings, "anthropic" if api == "anthropic" else "openai", path)
    if settings.other_paths is not None:
        return _to(settings, settings.other_paths, path)
    return None


def _to(settings: ProxySettings, provider: Provider, path: str) -> Route:
    base = settings.upstream if provider == "anthropic" else settings.openai_upstream
    return Route(provider, base, path, MODEL_PATHS.get(path))


def unrouted_message(path: str, url: str) -> str:
    """What the proxy answers for a path it routes nowhere."""
    return (
        f"ctx proxy: {path} is not a model endpoint, and this proxy sends other paths to no "
        f"API; point the client at {url}/anthropic or {url}/openai/v1 to address one"
    )
