"""Tokens the model reads: of a block, a message, a conversation; and a run's ledger of them.

What a counter is (:class:`TokenCounter`: any object with ``count``), which texts of a
message the model sees, and :class:`TokenLedger`, the per-run memo of tokens per message
that stages read through their context. The engines are in :mod:`ctxcli.services.tokens.engines`,
the fast counter (memo, disk cache, worker processes) in :mod:`ctxcli.services.tokens.bulk`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from ctxcli.core.model import (
    IMAGE_TOKENS,
    Block,
    Conversation,
    Kind,
    Message,
    TextSpan,
    visible_sources,
    visible_texts,
)

__all__ = [
    "CountOptions",
    "Progress",
    "Source",
    "TokenCounter",
    "TokenLedger",
    "block_tokens",
    "conversation_exceeds",
    "conversation_sources",
    "conversation_texts",
    "conversation_tokens",
    "message_tokens",
    "read_source",
]

Source = str | TextSpan
"""A text to count, or where to read it (a lazy block's span)."""

Progress = Callable[[int, int], None]
"""Called with (bytes counted so far, bytes to count in all)."""


class TokenCounter(Protocol):
    """Counts tokens in text. Implementations must be deterministic."""

    name: str

    def count(self, text: str) -> int:
        """Return the number of tokens in ``text``."""
        ...


def read_source(source: Source) -> str:
    """The text of a source: the text itself, or its span read again."""
    return source if isinstance(source, str) else source.text()


@dataclass(frozen=True)
class CountOptions:
    """How a run counts (what it counts with is the ``tokenizer`` setting).

    Attributes:
        cache: use the on-disk count cache (``CTX_NO_CACHE=1`` turns it off anyway).
        workers: processes that may count a large input; None for every core.
        progress: receives (bytes counted, bytes to count) while counting.
    """

    cache: bool = True
    workers: int | None = None
    progress: Progress | None = field(default=None, compare=False)


def message_tokens(counter: TokenCounter, message: Message) -> int:
    """Tokens the model reads for one message."""
    count_source: Callable[[Source], int] | None = getattr(counter, "count_source", None)
    if count_source is not None:  # a lazy text is counted from its span
        total = sum(count_source(s) for s in visible_sources(message))
    else:
        total = sum(counter.count(t) for t in visible_texts(message))
    total += IMAGE_TOKENS * sum(1 for b in message.blocks if b.kind is Kind.IMAGE)
    return total


def block_tokens(counter: TokenCounter, block: Block) -> int:
    """Tokens the model reads for one block; a message's blocks add up to :func:`message_tokens`."""
    if block.kind is Kind.TOOL_CALL:
        return (counter.count(block.name) if block.name else 0) + counter.count(block.text)
    if block.kind in (Kind.TEXT, Kind.TOOL_RESULT, Kind.THINKING):
        return counter.count(block.text)
    return IMAGE_TOKENS if block.kind is Kind.IMAGE else 0


def conversation_exceeds(counter: TokenCounter, conv: Conversation, limit: int) -> bool:
    """True if ``conv`` has more than ``limit`` tokens.

    Counts already known are summed first, so while a large input is still being
    counted in the background the answer is usually there at once.
    """
    known = getattr(counter, "known_source", None)
    if known is None:
        return conversation_tokens(counter, conv) > limit
    collect = getattr(counter, "collect", None)
    if collect is not None:
        collect()
    total = 0
    unknown: list[Source] = []  # spans, not texts: a lazy text is read again to be counted
    for message in conv.messages:
        for source in visible_sources(message):
            n = known(source)
            if n is None:
                unknown.append(source)
            else:
                total += n
        total += IMAGE_TOKENS * sum(1 for b in message.blocks if b.kind is Kind.IMAGE)
    if total > limit:
        return True
    count_source = getattr(counter, "count_source", None)
    for source in unknown:
        total += (
            counter.count(read_source(source)) if count_source is None else count_source(source)
        )
        if total > limit:
            return True
    return False


def conversation_texts(conv: Conversation | Iterable[Message]) -> Iterable[str]:
    """Every model-visible text of a conversation, in order (for :meth:`CachedCounter.count_many`)."""
    for message in conv:
        yield from visible_texts(message)


def conversation_sources(conv: Conversation | Iterable[Message]) -> Iterable[Source]:
    """Every model-visible text of a conversation, a lazy one as its span (for counting)."""
    for message in conv:
        yield from visible_sources(message)


def conversation_tokens(counter: TokenCounter, conv: Conversation | Iterable[Message]) -> int:
    """Tokens the model reads for a whole conversation."""
    return sum(message_tokens(counter, m) for m in conv)


class TokenLedger:
    """Tokens per message, counted once per message object across all stages."""

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self._by_id: dict[int, tuple[Message, int]] = {}

    def message(self, msg: Message) -> int:
        """Tokens of one message."""
        hit = self._by_id.get(id(msg))
        if hit is not None and hit[0] is msg:
            return hit[1]
        n = message_tokens(self.counter, msg)
        self._by_id[id(msg)] = (msg, n)
        return n

    def seed(self, messages: Iterable[Message], tokens: int = 0) -> None:
        """Take ``tokens`` as the count of each of ``messages`` without counting them.

        Take ``tokens`` as the count of each of ``messages`` without counting them
        (the text-less stand-ins of an incremental re-run's kept prefix).
        """
        for msg in messages:
            self._by_id[id(msg)] = (msg, tokens)

    def retain(self, messages: Iterable[Message]) -> None:
        """Forget every count but those of ``messages`` (a long-lived ledger stays bounded)."""
        keep = {id(m) for m in messages}
        self._by_id = {k: v for k, v in self._by_id.items() if k in keep}

    def total(self, conv: Conversation) -> int:
        """Tokens of a whole conversation."""
        return sum(self.message(m) for m in conv.messages)

    def exceeds(self, conv: Conversation, limit: int) -> bool:
        """True if ``conv`` has more than ``limit`` tokens.

        Prefer this to ``total(conv) > limit`` in a stage: it can answer from the
        counts known so far while a large input is still being counted.
        """
        by_id = self._by_id
        total = 0
        for m in conv.messages:
            hit = by_id.get(id(m))
            if hit is None or hit[0] is not m:
                # Not all counted yet: let the counter answer from what it knows.
                return conversation_exceeds(self.counter, conv, limit)
            total += hit[1]
        return total > limit

    def per_message(self, conv: Conversation) -> list[int]:
        """Tokens of each message, in order.

        A stage that needs running totals (keep the newest messages within a budget)
        takes this list once and sums it up, instead of calling :meth:`total` on a
        shrinking conversation once per message, which is quadratic.
        """
        return [self.message(m) for m in conv.messages]

    def prime(self, conv: Conversation, progress: Progress | None = None) -> None:
        """Count every text of ``conv`` now, in bulk: disk cache first, then all cores."""
        count_many = getattr(self.counter, "count_many", None)
        if count_many is not None:
            count_many(conversation_sources(conv), progress)
