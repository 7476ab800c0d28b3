"""How many later calls a change to an already-sent prefix needs to pay for itself.

A live chain that changes messages it already sent makes that request rewrite the cache
from the change on (dearer than reading it), and every later call then sends fewer
tokens (cheaper reads). :func:`payback_horizons` puts each such change beside the
session as replayed without it: its extra cost (the request's price with the change
minus its replayed price, when positive), the tokens it removed (how much the gap in
input between the two runs grew at that request), and the calls that saving needs at
the cache-read price to cover the extra cost. Whether a change paid depends on how many
calls followed it: one published measurement went from +54% at 3 requests to -20.9% at
35.

Example:
    >>> h = Horizon(n=10, extra_usd=0.30, removed_tokens=20_000, saving_per_call_usd=0.006, later=80)
    >>> h.calls, h.paid
    (50.0, True)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ctxcli.cost.prices import MILLION, PriceTable
from ctxcli.cost.replay import ReplayedRequest

__all__ = ["Horizon", "horizon_summary", "payback_horizons"]


@dataclass(frozen=True, slots=True)
class Horizon:
    """One change to a sent prefix and the calls it needs to pay for itself.

    Attributes:
        n: the request that made the change.
        extra_usd: what the change cost that request (0: it cost nothing extra).
        removed_tokens: the input tokens it took out of every later call.
        saving_per_call_usd: those tokens at the cache-read price.
        later: the calls that followed it in the session.
    """

    n: int
    extra_usd: float
    removed_tokens: int
    saving_per_call_usd: float
    later: int

    @property
    def calls(self) -> float | None:
        """Later calls needed to pay for the change (None: it never pays)."""
        if self.extra_usd <= 0:
            return 0.0
        if self.saving_per_call_usd <= 0:
            return None
        return self.extra_usd / self.saving_per_call_usd

    @property
    def paid(self) -> bool:
        """Enough calls followed the change for it to pay."""
        calls = self.calls
        return calls is not None and calls <= self.later


def payback_horizons(
    base: Sequence[ReplayedRequest],
    chain: Sequence[ReplayedRequest],
    changed: Sequence[bool],
    prices: PriceTable,
) -> list[Horizon]:
    """Return the horizon of every change ``chain`` made to a sent prefix (``changed``).

    Against the same requests as replayed without it (``base``, aligned).
    """
    out: list[Horizon] = []
    gap_before = 0
    for n, (b, c) in enumerate(zip(base, chain, strict=True)):
        gap = b.input_tokens - c.input_tokens
        if n < len(changed) and changed[n]:
            price = prices.lookup(c.model)
            read = price.cache_read if price is not None else 0.0
            removed = max(0, gap - gap_before)
            extra = max(0.0, (c.usd or 0.0) - (b.usd or 0.0))
            out.append(Horizon(n, extra, removed, removed * read / MILLION, len(base) - n - 1))
        gap_before = gap
    return out


def horizon_summary(horizons: Sequence[Horizon]) -> dict[str, Any]:
    """Summarise the distribution ``ctx cost`` shows.

    How many changes, the median and 90th percentile of the calls they need, how many
    paid within the session, how many never can.
    """
    finite = sorted(h.calls for h in horizons if h.calls is not None)

    def at(q: float) -> float | None:
        if not finite:
            return None
        return round(finite[min(len(finite) - 1, round(q * (len(finite) - 1)))], 2)

    return {
        "changes": len(horizons),
        "median_calls": at(0.5),
        "p90_calls": at(0.9),
        "paid_back": sum(h.paid for h in horizons),
        "never": sum(h.calls is None for h in horizons),
    }
