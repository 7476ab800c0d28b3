"""Per-conversation memory of the proxy: what was sent, so later requests keep those bytes.

A conversation is recognised by its model, system prompt and first message. For each one the
proxy keeps the in-process reducer (which remembers its own decisions) and the messages it
sent last time. A new request of the same conversation normally repeats the earlier history
and appends to it; the proxy then sends the earlier reduced messages again, byte for byte,
followed by the new ones, unless the reducer's new cuts would reclaim at least
``clear_at_least`` tokens: only then does it accept a change to the prefix the provider has
cached. Memory is bounded: the original messages are kept as hashes, at most
``max_conversations`` are kept and those idle longer than ``idle_seconds`` are dropped.
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
    canonical,
    digest,
    history_key,
    place_breakpoints,
    strip_cache_control,
)


class MessageReducer(Protocol):
    def reduce(self, messages: Sequence[Mapping[str, Any]], *, system: Any = None) -> Any: ...


@dataclass
class Decision:
    """What the proxy sends for one request, and why.

    Attributes:
        messages: the history to send (with breakpoints placed).
        reused: messages sent again exactly as last time.
        accepted_cut: the reducer changed already-sent messages and the change was taken.
        held_back: the reducer proposed a change worth fewer than ``clear_at_least`` tokens,
            so the earlier bytes were sent instead.
        offloaded: files the reducer wrote for this request.
    """

    messages: list[Any]
    reused: int = 0
    accepted_cut: bool = False
    held_back: bool = False
    offloaded: int = 0
    refused: str = ""
    """Why the reduction was not sent (the request then goes as the client wrote it)."""


@dataclass
class Conversation:
    key: str
    reducer: MessageReducer
    originals: list[str] = field(default_factory=list)
    sent: list[Any] = field(default_factory=list)
    requests: int = 0
    last_used: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


def _first_difference(a: list[Any], b: list[Any]) -> int:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if canonical(x) != canonical(y):
            return i
    return min(len(a), len(b))


def decide(
    conv: Conversation,
    messages: list[Any],
    system: Any,
    *,
    count: Callable[[list[Any]], int],
    clear_at_least: int,
    body: dict[str, Any],
    api: Api = "anthropic",
) -> Decision:
    """Reduce ``messages`` for ``conv`` and choose what to send (updates ``conv``)."""
    plain = strip_cache_control(messages)
    hashes = [digest(m) for m in plain]
    result = conv.reducer.reduce(plain, system=system)
    candidate = strip_cache_control(list(result.messages))
    decision = Decision(messages=[], offloaded=len(result.offloaded))
    field_name = history_key(api)
    bad = rejection(api, {**body, field_name: candidate})
    if bad is not None and rejection(api, {**body, field_name: plain}) is None:
        # Never send what the API would reject: the client's own history goes instead.
        candidate = plain
        decision.refused = bad.message
    chosen = candidate
    known = len(conv.originals)
    if conv.sent and known <= len(hashes) and hashes[:known] == conv.originals:
        fallback = conv.sent + plain[known:]
        changed_at = _first_difference(conv.sent, candidate)
        if changed_at < len(conv.sent):
            reclaimed = count(fallback) - count(candidate)
            if reclaimed >= clear_at_least:
                decision.accepted_cut = True
            else:
                chosen = fallback
                decision.held_back = True
        decision.reused = _first_difference(conv.sent, chosen)
    conv.originals = hashes
    conv.sent = chosen
    conv.requests += 1
    decision.messages, _ = place_breakpoints(messages, chosen, body)
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
    _items: OrderedDict[str, Conversation] = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    expired: int = 0

    def get(self, key: str, api: Api) -> Conversation:
        now = self.clock()
        with self._lock:
            self._expire(now)
            conv = self._items.get(key)
            if conv is None:
                conv = Conversation(key, self.make_reducer(api))
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
        with self._lock:
            return list(self._items)
