"""A session's requests as data: what each API call sent, block by block (replay, part a).

A :class:`RequestSequence` is what a cache model prices (:func:`ctxcli.cost.replay.
price_requests`). The recorded one is rebuilt from a session file
(:func:`ctxcli.cost.replay.build_requests`); a counterfactual one (the requests a
reducer would have sent) is the same data with other blocks.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Literal

from ctxcli.cost._jsonl import SessionFormat
from ctxcli.cost.cache import TTL
from ctxcli.cost.prices import TokenUsage

__all__ = ["Block", "BuildOptions", "Request", "RequestSequence", "block_key"]

Caching = Literal["breakpoints", "automatic"]


def block_key(*parts: bytes | str) -> bytes:
    """A stable 16-byte identity for a block made of ``parts`` (role, content, ...)."""
    h = hashlib.blake2b(digest_size=16)
    for part in parts:
        data = part.encode("utf-8", "surrogatepass") if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.digest()


@dataclass(frozen=True, slots=True)
class Block:
    """One content block of a request.

    Attributes:
        key: identity of the content: two blocks with the same key are the same bytes
            to the provider (see :func:`block_key`).
        text: what our token counter counts for it.
        tokens: its exact size in provider tokens when known (Codex reasoning items,
            whose text is encrypted: the reasoning tokens recorded for the call that
            made them); then ``text`` is not counted.
        hidden: the client's own prompt (system prompt, tool definitions) that the file
            does not hold; its size is the calibrated overhead.
        images: the images it holds, each :data:`~ctxcli.core.model.IMAGE_TOKENS`
            besides its text (the provider sizes an image by its pixels, not its bytes).
    """

    key: bytes
    text: str = ""
    tokens: int | None = None
    hidden: bool = False
    images: int = 0


@dataclass(frozen=True, slots=True)
class Request:
    """One API call as sent.

    Attributes:
        key: the call's id in the file (``message.id``, ``call-<n>``).
        at: when it was sent, seconds since the epoch.
        model: the model asked.
        blocks: the prompt, in order: the client's hidden prompt, then the messages.
        breakpoints: ``(block index, TTL)`` of each ``cache_control`` breakpoint
            (Anthropic; empty under automatic caching).
        output_tokens: tokens the model answered, as recorded.
        recorded: the usage the file records for this call, when it is a real one.
        messages: the conversation the blocks were made from, as the client sent it:
            Anthropic messages (Claude Code) or Responses input items (Codex), what a
            reducer in the loop (:mod:`ctxcli.cost.counterfactual`) is given.
        post_turn_at: when the client sent this request's conversation without its last
            message in a request the file does not log (Claude Code's request after a
            completed turn): that prefix was then written to the cache, unbilled here.
            None: no such request.
    """

    key: str
    at: float | None
    model: str | None
    blocks: tuple[Block, ...]
    breakpoints: tuple[tuple[int, TTL], ...] = ()
    output_tokens: int = 0
    recorded: TokenUsage | None = None
    messages: tuple[Any, ...] = ()
    post_turn_at: float | None = None


@dataclass(frozen=True)
class RequestSequence:
    """The requests of one session, in the order they were sent.

    Attributes:
        name: the file they come from.
        format: ``claude_code`` or ``codex``.
        caching: ``breakpoints`` (Anthropic) or ``automatic`` (OpenAI).
        requests: the calls.
    """

    name: str
    format: SessionFormat
    caching: Caching
    requests: tuple[Request, ...] = field(default=())


@dataclass(frozen=True)
class BuildOptions:
    """How the recorded requests are rebuilt from a file.

    Attributes:
        ttl: TTL of Claude Code's breakpoints; None reads it from the recorded usage
            (1 hour when any call wrote 1-hour entries, else 5 minutes).
        message_breakpoints: Claude Code marks the last block of this many trailing
            messages (besides its system prompt).
    """

    ttl: TTL | None = None
    message_breakpoints: int = 1
