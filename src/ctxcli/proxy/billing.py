"""Prompt-caching arithmetic: what a request is billed, read from and written to the cache.

Anthropic bills the input of a request in three parts: the prefix found in the cache
(cache read, 0.1x the input price), the prefix up to the request's last ``cache_control``
breakpoint that was not found (cache write, 1.25x), and the rest (1x). A prefix is found
when it is identical to the prefix of an earlier request ending at one of that request's
breakpoints. OpenAI caches automatically: any prefix an earlier request sent is read at the
cached price, nothing costs extra to write.

:class:`CacheModel` keeps the prefixes seen so far (as hashes, bounded) and prices each
request; the proxy runs two of them, one on what it sends and one on what the client sent,
to report the bill with and without the proxy.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ctxcli.proxy.shapes import Block


@dataclass(frozen=True)
class Prices:
    """Multipliers of the input price, and the input price itself (USD per million tokens).

    Attributes:
        input_per_mtok: USD per million uncached input tokens.
        cache_read: multiplier for tokens read from the cache.
        cache_write: multiplier for tokens written to the cache.
        automatic: every prefix is cached without breakpoints (OpenAI), writes cost 1x.
    """

    input_per_mtok: float = 3.0
    cache_read: float = 0.1
    cache_write: float = 1.25
    automatic: bool = False

    @classmethod
    def for_api(cls, api: str, input_per_mtok: float = 3.0) -> Prices:
        if api == "anthropic":
            return cls(input_per_mtok)
        return cls(input_per_mtok, cache_read=0.1, cache_write=1.0, automatic=True)


@dataclass
class Bill:
    """Input tokens of one or more requests, split as the provider bills them."""

    input_tokens: int = 0
    cache_read: int = 0
    cache_write: int = 0
    uncached: int = 0
    requests: int = 0

    def add(self, other: Bill) -> None:
        self.input_tokens += other.input_tokens
        self.cache_read += other.cache_read
        self.cache_write += other.cache_write
        self.uncached += other.uncached
        self.requests += other.requests

    def weighted(self, prices: Prices) -> float:
        """Input-token equivalents billed (uncached tokens count 1)."""
        return (
            self.uncached
            + prices.cache_write * self.cache_write
            + prices.cache_read * self.cache_read
        )

    def cost_usd(self, prices: Prices) -> float:
        return self.weighted(prices) * prices.input_per_mtok / 1_000_000

    def as_dict(self, prices: Prices) -> dict[str, Any]:
        out: dict[str, Any] = asdict(self)
        out["billed_tokens"] = round(self.weighted(prices), 1)
        out["cost_usd"] = round(self.cost_usd(prices), 6)
        return out


@dataclass
class CacheModel:
    """The provider's prompt cache, as prefix hashes (bounded, least recently used dropped).

    Args:
        count: tokens of a block's text.
        prices: how reads and writes are priced (``automatic`` for OpenAI).
        max_entries: cached prefixes kept.
    """

    count: Callable[[str], int]
    prices: Prices = field(default_factory=Prices)
    max_entries: int = 100_000
    _cache: OrderedDict[bytes, None] = field(default_factory=OrderedDict, repr=False)

    def price(self, blocks: Sequence[Block]) -> Bill:
        """Bill one request made of ``blocks`` and remember what it caches."""
        hashes: list[bytes] = []
        cumulative: list[int] = []
        h = hashlib.sha256()
        total = 0
        for block in blocks:
            h.update(hashlib.sha256(block.key).digest())
            hashes.append(h.copy().digest())
            total += self.count(block.text)
            cumulative.append(total)
        if self.prices.automatic:
            stops = list(range(len(blocks)))
        else:
            stops = [i for i, b in enumerate(blocks) if b.breakpoint]
        read = 0
        last = stops[-1] if stops else -1
        for i in range(last, -1, -1):
            if hashes[i] in self._cache:
                self._cache.move_to_end(hashes[i])
                read = cumulative[i]
                break
        cached_end = cumulative[last] if last >= 0 else 0
        write = max(0, cached_end - read)
        if self.prices.automatic:
            write = 0
        for i in stops:
            self._cache[hashes[i]] = None
            self._cache.move_to_end(hashes[i])
        while len(self._cache) > self.max_entries:
            self._cache.popitem(last=False)
        return Bill(
            input_tokens=total,
            cache_read=read,
            cache_write=write,
            uncached=total - read - write,
            requests=1,
        )
