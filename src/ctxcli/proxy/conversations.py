"""Per-conversation memory of the proxy: one live reducer per conversation, and what it sent.

A conversation is recognised by its model, system prompt and first message. For each one the
proxy keeps an in-process :class:`~ctxcli.agent.reducer.Reducer`, which remembers its own
decisions and sends a message it sent once as the same bytes in every later call. Whether it
may change a message already sent (and cached by the provider) is the reducer's prefix policy
(:class:`~ctxcli.agent.prefix_policy.PrefixPolicy`): only when the change pays for the cache
bust it causes. The proxy adds a ``cache_control`` breakpoint on the message the reducer
names (:attr:`~ctxcli.agent.reducer.ReducerResult.cache_breakpoint`), so that the policy's
``marked`` pricing holds. Memory is bounded: the original messages are kept as hashes, at
most ``max_conversations`` are kept and those idle longer than ``idle_seconds`` are dropped.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ctxcli.proxy.rules import rejection
from ctxcli.proxy.shapes import (
    Api,
    digest,
    history_key,
    mark_breakpoint,
    place_breakpoints,
    strip_cache_control,
)

__all__ = [
    "ConversationState",
    "ConversationStore",
    "Decision",
    "MessageReducer",
    "ReducedCall",
    "decide",
]


class ReducedCall(Protocol):
    """What the proxy reads of a :class:`~ctxcli.agent.reducer.ReducerResult`."""

    @property
    def messages(self) -> Sequence[Any]:
        """The messages to send."""

    @property
    def offloaded(self) -> Sequence[str]:
        """The offload paths this call wrote."""

    @property
    def reused(self) -> int:
        """How many leading messages went as they were sent before."""

    @property
    def changed_prefix_at(self) -> int | None:
        """Where the sent prefix first changed (None: it only grew)."""

    @property
    def held_back(self) -> bool:
        """Whether the reduction was held back to keep the cache."""

    @property
    def cache_breakpoint(self) -> int | None:
        """The message to mark with a cache breakpoint (None: none)."""


class MessageReducer(Protocol):
    """What the proxy needs of a reducer: one call's messages reduced."""

    def reduce(
        self, messages: Sequence[Mapping[str, Any]], *, system: Any = None, at: float | None = None
    ) -> ReducedCall:
        """Reduce the messages of one call (``at``: when it is sent, seconds)."""


@dataclass
class Decision:
    """What the proxy sends for one request, and why.

    Attributes:
        messages: the history to send (with breakpoints placed).
        reused: leading messages whose decisions were kept from the previous request.
        accepted_cut: the reducer changed already-sent messages (the change paid).
        held_back: the reducer's chain proposed such a change and its prefix policy kept
            the sent messages instead (the change did not pay yet).
        marked: the proxy added a breakpoint on the reducer's ``cache_breakpoint``.
        offloaded: files the reducer wrote for this request.
    """

    messages: list[Any]
    reused: int = 0
    accepted_cut: bool = False
    held_back: bool = False
    marked: bool = False
    offloaded: int = 0
    refused: str = ""
    """Why the reduction was not sent (the request then goes as the client wrote it)."""


@dataclass
class ConversationState:
    """One conversation the proxy serves: its reducer and what it has sent."""

    key: str
    reducer: MessageReducer
    originals: list[str] = field(default_factory=list)
    requests: int = 0
    last_used: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


def decide(
    conv: ConversationState,
    messages: list[Any],
    system: Any,
    *,
    body: dict[str, Any],
    api: Api = "anthropic",
    at: float | None = None,
) -> Decision:
    """Reduce ``messages`` for ``conv`` (sent at ``at``, seconds) and choose what to send.

    Updates ``conv``. The reducer's prefix policy decides whether messages already sent
    may change; on Anthropic requests that carry breakpoints, one more goes on the
    message the reducer names, when the API's limit of four leaves room.
    """
    plain = strip_cache_control(messages)
    hashes = [digest(m) for m in plain]
    result = conv.reducer.reduce(plain, system=system, at=at)
    candidate = strip_cache_control(list(result.messages))
    appended = bool(conv.originals) and hashes[: len(conv.originals)] == conv.originals
    decision = Decision(
        messages=[],
        reused=result.reused,
        accepted_cut=appended and result.changed_prefix_at is not None,
        held_back=result.held_back,
        offloaded=len(result.offloaded),
    )
    field_name = history_key(api)
    bad = rejection(api, {**body, field_name: candidate})
    mark = result.cache_breakpoint
    if bad is not None and rejection(api, {**body, field_name: plain}) is None:
        # Never send what the API would reject: the client's own history goes instead.
        candidate, mark = plain, None
        decision.refused = bad.message
    conv.originals = hashes
    conv.requests += 1
    decision.messages, placed = place_breakpoints(messages, candidate, body)
    if api == "anthropic" and placed and mark is not None:
        decision.marked = mark_breakpoint(decision.messages, mark, body)
    return decision


@dataclass
class ConversationStore:
    """The conversations the proxy remembers (bounded, idle ones expire).

    Args:
        make_reducer: a fresh reducer for a new conversation of the given API.
        max_conversations: conversations kept; the least recently used one goes first.
        idle_seconds: a conversation not seen for this long is forgotten.
        clock: seconds (tests pass their own).
    """

    make_reducer: Callable[[Api], MessageReducer]
    max_conversations: int = 64
    idle_seconds: float = 3600.0
    clock: Callable[[], float] = time.monotonic
    _items: OrderedDict[str, ConversationState] = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    expired: int = 0

    def get(self, key: str, api: Api) -> ConversationState:
        """Return the conversation ``key``, made for ``api`` on first use."""
        now = self.clock()
        with self._lock:
            self._expire(now)
            conv = self._items.get(key)
            if conv is None:
                conv = ConversationState(key, self.make_reducer(api))
                self._items[key] = conv
                while len(self._items) > self.max_conversations:
                    self._items.popitem(last=False)
                    self.expired += 1
            self._items.move_to_end(key)
            conv.last_used = now
            return conv

    def _expire(self, now: float) -> None:
        for key in [k for k, c in self._items.items() if now - c.last_used > self.idle_seconds]:
            del self._items[key]
            self.expired += 1

    def __len__(self) -> int:
        return len(self._items)

    def keys(self) -> list[str]:
        """Return the keys of the conversations kept now."""
        with self._lock:
            return list(self._items)
