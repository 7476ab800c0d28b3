"""What the proxy's requests are billed: the cost instrument's blocks, cache model and prices.

Each request is priced twice, as it was sent and as the client wrote it, each through its
own :class:`~ctxcli.cost.cache.PromptCache` (per API family and model: Anthropic's
breakpoints, OpenAI's automatic caching) at the request's model's prices from the one
price table (:mod:`ctxcli.cost.prices`). The body is cut into blocks by
:func:`ctxcli.cost.blocks.body_request`, sized by :class:`ctxcli.cost.replay.Sizer` and
priced by :func:`ctxcli.cost.replay.price_request`: the rules ``ctx cost`` prices a
session's requests with. So ``/stats`` reports what ``ctx cost`` would charge for the same
requests: the input side of the bill (the output is the same either way). A model the
table does not know is priced as :data:`FALLBACK_MODEL` of its family.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ctxcli.cost.cache import CachePolicy, PromptCache
from ctxcli.cost.prices import ModelPrice, PriceTable, TokenUsage, sum_fields
from ctxcli.cost.replay import ReplayedRequest, Sizer, price_request
from ctxcli.cost.sequence import Request

__all__ = ["FALLBACK_MODEL", "Bill", "Meter"]

FALLBACK_MODEL = {"anthropic": "claude-sonnet-4-5", "openai": "gpt-5"}
"""The model whose prices stand in for one the price table does not know, by family."""


@dataclass(frozen=True)
class Bill:
    """Input tokens of one or more requests, split as the provider bills them, and dollars.

    Bills add up (``a + b``) field by field, the tokens as :class:`~ctxcli.cost.prices.
    TokenUsage` adds them.

    Attributes:
        usage: the input tokens by kind (uncached, cache read, cache writes).
        requests: the requests billed.
        billed_tokens: what was billed, in uncached-input tokens of the same price.
        usd: what was billed, in US dollars (input side only).
        busts: requests whose cached prefix collapsed (see :class:`~ctxcli.cost.cache.
            PromptCache`).
    """

    usage: TokenUsage = field(default_factory=TokenUsage)
    requests: int = 0
    billed_tokens: float = 0.0
    usd: float = 0.0
    busts: int = 0

    @classmethod
    def of(cls, priced: ReplayedRequest, price: ModelPrice) -> Bill:
        """The bill of one request the cost instrument priced at ``price``."""
        usd = priced.usd or 0.0
        return cls(
            usage=priced.usage,
            requests=1,
            billed_tokens=usd * 1_000_000 / price.input if price.input else 0.0,
            usd=usd,
            busts=int(priced.bust),
        )

    def __add__(self, other: Bill) -> Bill:
        return sum_fields(self, other)

    @property
    def input_tokens(self) -> int:
        """All input tokens: uncached, read and written."""
        return self.usage.input_total

    @property
    def cache_read(self) -> int:
        """Input tokens read from the cache."""
        return self.usage.cache_read

    def as_dict(self) -> dict[str, Any]:
        """The bill as ``/stats`` shows it."""
        return {
            "input_tokens": self.usage.input_total,
            "cache_read": self.usage.cache_read,
            "cache_write": self.usage.cache_write,
            "uncached": self.usage.input,
            "requests": self.requests,
            "billed_tokens": round(self.billed_tokens, 1),
            "usd": round(self.usd, 6),
            "busts": self.busts,
        }


class Meter:
    """The caches of the requests a proxy sees, and their prices.

    Args:
        table: the price table.
        count: tokens of a block's text (a bounded cache of its own: the meter keeps none).
    """

    def __init__(self, table: PriceTable, count: Callable[[str], int]) -> None:
        self.table = table
        self.size = Sizer(count, remember=False)
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

    def price(self, family: str, request: Request, *, sent: bool) -> Bill:
        """Bill one request (``sent``: as the proxy sent it, else as the client wrote it).

        ``request`` is the body cut into blocks (:func:`ctxcli.cost.blocks.body_request`),
        with its time; it meets the cache of its family, model and side.
        """
        key = (family, request.model or "", sent)
        cache = self._caches.get(key)
        if cache is None:
            policy = CachePolicy.anthropic() if family == "anthropic" else CachePolicy.openai()
            cache = self._caches[key] = PromptCache(policy)
        name, price = self.price_of(family, request.model)
        priced = price_request(cache, replace(request, model=name), self.size, self.table)
        return Bill.of(priced, price)
