"""Loopback fakes of the model APIs that reject what the real APIs reject.

One server (:class:`FakeServer`: records every request, scripted replies, resets, a bounded
lifetime) and one handler per API: :class:`MessagesAPI` (Anthropic Messages, streaming and
count_tokens) and :class:`OpenAIAPI` (Responses, compaction, Chat Completions). The rules
they enforce are the proxy's own (:mod:`ctxcli.proxy.rules`), so the proxy and its tests
cannot disagree on what the APIs refuse.
"""

from support.fake_api.anthropic import (
    COUNT_TOKENS,
    MESSAGES,
    AnthropicServer,
    MessagesAPI,
    ScriptedAgent,
    Step,
    Turn,
    api_error,
    cache_blocks,
    garbage,
    message,
    rate_limited,
    scripted_project,
    server_error,
    text_turn,
    timeout,
    tokens,
)
from support.fake_api.openai import OpenAIAPI, compactions, is_compaction
from support.fake_api.server import FakeServer, Reply, Request, sse

__all__ = [
    "COUNT_TOKENS",
    "MESSAGES",
    "AnthropicServer",
    "FakeServer",
    "MessagesAPI",
    "OpenAIAPI",
    "Reply",
    "Request",
    "ScriptedAgent",
    "Step",
    "Turn",
    "api_error",
    "cache_blocks",
    "compactions",
    "garbage",
    "is_compaction",
    "message",
    "rate_limited",
    "scripted_project",
    "server_error",
    "sse",
    "text_turn",
    "timeout",
    "tokens",
]
