"""The one Anthropic client base: access from the environment, the SDK client, error reasons.

The classifier, the summarizer and the Anthropic token counter all reach the API
through :func:`make_client` (an explicit key, the SDK's own timeouts and retries) and
word a failed request with :func:`describe_api_error` (short and key-free). The
``anthropic`` SDK is imported only when a client is made or an error described.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import anthropic

__all__ = [
    "AnthropicAccess",
    "DEFAULT_MODEL",
    "ReplyError",
    "describe_api_error",
    "make_client",
]

DEFAULT_MODEL = "claude-haiku-4-5"
"""The small, fast model every Anthropic service uses unless told otherwise."""


@dataclass(frozen=True)
class AnthropicAccess:
    """What a client needs from the environment; the key never shows in a repr."""

    api_key: str | None = field(default=None, repr=False)
    base_url: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> AnthropicAccess:
        """Read ``ANTHROPIC_API_KEY`` and ``ANTHROPIC_BASE_URL``."""
        env = os.environ if env is None else env
        return cls(env.get("ANTHROPIC_API_KEY") or None, env.get("ANTHROPIC_BASE_URL") or None)


def make_client(
    access: AnthropicAccess,
    *,
    base_url: str | None = None,
    timeout_seconds: float = 30.0,
    max_retries: int = 2,
) -> anthropic.Anthropic:
    """An SDK client with an explicit key (never a profile found on disk)."""
    import anthropic

    return anthropic.Anthropic(
        api_key=access.api_key,
        base_url=base_url or access.base_url,
        timeout=timeout_seconds,
        max_retries=max_retries,
    )


class ReplyError(ValueError):
    """The model answered, but not in the shape its prompt asked for (a parser raises it)."""


def describe_api_error(exc: BaseException) -> str:
    """A short, key-free reason for a failed request, for notes and counters."""
    import anthropic

    if isinstance(exc, anthropic.APITimeoutError):
        return "timeout"
    if isinstance(exc, anthropic.RateLimitError):
        return "HTTP 429 rate limited"
    if isinstance(exc, anthropic.APIStatusError):
        return f"HTTP {exc.status_code}"
    if isinstance(exc, anthropic.APIConnectionError):
        return "connection failed"
    if isinstance(exc, ReplyError):
        return str(exc)
    return type(exc).__name__
