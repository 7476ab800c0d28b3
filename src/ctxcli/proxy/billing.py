"""What the proxy's requests are billed: the cost instrument's cache model and price table.

Each request is priced twice, as it was sent and as the client wrote it, each through its
own :class:`~ctxcli.cost.cache.PromptCache` (per API family and model: Anthropic's
breakpoints, OpenAI's automatic caching) at the request's model's prices from the one
price table (:mod:`ctxcli.cost.prices`). So ``/stats`` reports what ``ctx cost`` would
charge for the same requests: the input side of the bill (the output is the same either
way). A model the table does not know is priced as :data:`FALLBACK_MODEL` of its family.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ctxcli.cost.cache import CacheBlock, CacheOutcome, CachePolicy, PromptCache
from ctxcli.cost.prices import ModelPrice, PriceTable, TokenUsage
from ctxcli.proxy.shapes import Block

__all__ = ["FALLBACK_MODEL", "Bill", "Meter", "cache_blocks"]

FALLBACK_MODEL = {"anthropic": "claude-sonnet-4-5", "openai": "gpt-5"}
"""The model whose prices stand in for one the price table does not know, by family."""


@dataclass
class Bill:
    """Input tokens of one or more requests, split as the provider bills them, and dollars.

    Attributes:
        billed_tokens: what was billed, in uncached-input tokens of the same price.
        usd: what was billed, in US dollars (input side only).
        busts: requests whose cached prefix collapsed (see :class:`~ctxcli.cost.cache.
            PromptCache`).
    """

    input_tokens: int = 0
    cache_read: int = 0
    cache_write: int = 0
    uncached: int = 0
    requests: int = 0
    billed_tokens: float = 0.0
    usd: float = 0.0
    busts: int = 0

    @classmethod
    def of(cls, outcome: CacheOutcome, price: ModelPrice) -> Bill:
        """The bill of one request the cache model priced."""
        usage = TokenUsage(
            outcome.uncached, outcome.cache_read, outcome.cache_write_5m, outcome.cache_write_1h
        )
        usd = price.usd(usage)
        return cls(
            input_tokens=outcome.input_tokens,
            cache_read=outcome.cache_read,
            cache_write=usage.cache_write,
            uncached=outcome.uncached,
            requests=1,
            billed_tokens=usd * 1_000_000 / price.input if price.input else 0.0,
            usd=usd,
            busts=int(outcome.bust),
        )

    def add(self, other: Bill) -> None:
        """Add ``other``'s tokens, requests and dollars to this bill."""
        self.input_tokens += other.input_tokens
        self.cache_read += other.cache_read
        self.cache_write += other.cache_write
        self.uncached += other.uncached
        self.requests += other.requests
        self.billed_tokens += other.billed_tokens
        self.usd += other.usd
        self.busts += other.busts

    def as_dict(self) -> dict[str, Any]:
        """Return the bill as JSON-able data, rounded."""
        out: dict[str, Any] = asdict(self)
        out["billed_tokens"] = round(self.billed_tokens, 1)
        out["usd"] = round(self.usd, 6)
        return out


def cache_blocks(blocks: Sequence[Block], count: Callable[[str], int]) -> list[CacheBlock]:
    """The blocks of a request as the cache model sees them (tokens by ``count``)."""
    return [CacheBlock(b.key, count(b.text), b.breakpoint) for b in blocks]


class Meter:
    """The caches of the requests a proxy sees, and their prices.

    Args:
        table: the price table.
        count: tokens of a block's text.
    """

    def __init__(self, table: PriceTable, count: Callable[[str], int]) -> None:
        self.table = table
        self.count = count
        self._caches: dict[tuple[str, str, bool], PromptCache] = {}

    def price_of(self, family: str, model: str | None) -> tuple[str, ModelPrice]:
        """The model a request is priced as, and its prices."""
        price = self.table.lookup(model)
        if price is not None and model:
            return model, price
        fallback = FALLBACK_MODEL[family]
        known = self.table.lookup(fallback)
        assert known is not None, f"the price table lost {fallback}"
        return fallback, known

    def price(
        self, family: str, model: str | None, blocks: Sequence[Block], *, sent: bool, at: float
    ) -> Bill:
        """Bill one request (``sent``: as the proxy sent it, else as the client wrote it)."""
        key = (family, model or "", sent)
        cache = self._caches.get(key)
        if cache is None:
            policy = CachePolicy.anthropic() if family == "anthropic" else CachePolicy.openai()
            cache = self._caches[key] = PromptCache(policy)
        outcome = cache.send(cache_blocks(blocks, self.count), at=at)
        return Bill.of(outcome, self.price_of(family, model)[1])
