"""What a session costs in dollars: recorded, replayed through a prompt-cache model, and
(later) with ctx in the loop.

- :mod:`.prices`: the one price table (USD per million tokens, per kind of token).
- :mod:`.recorded`: the bill a session file records, each API response once.
- :mod:`.cache`: the provider's prompt cache as a model (TTLs, breakpoints, reads).
- :mod:`.sequence` and :mod:`.replay`: a session's requests as data, and their price
  through the cache model::

      from ctxcli.cost import replay_session

      session = replay_session("session.jsonl")
      print(session.recorded_usd, session.replayed_usd, session.error)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Imported on first use (PEP 562): the price table alone must stay cheap to import for
# listings, while the replay pulls in the token counters.
_LAZY = {
    "ModelPrice": "prices",
    "PriceTable": "prices",
    "TokenUsage": "prices",
    "load_price_table": "prices",
    "input_price": "prices",
    "resume_cost": "prices",
    "RecordedCost": "recorded",
    "RecordedRequest": "recorded",
    "recorded_cost": "recorded",
    "CacheBlock": "cache",
    "CacheOutcome": "cache",
    "CachePolicy": "cache",
    "PromptCache": "cache",
}

if TYPE_CHECKING:
    from ctxcli.cost.cache import CacheBlock, CacheOutcome, CachePolicy, PromptCache
    from ctxcli.cost.prices import (
        ModelPrice,
        PriceTable,
        TokenUsage,
        input_price,
        load_price_table,
        resume_cost,
    )
    from ctxcli.cost.recorded import RecordedCost, RecordedRequest, recorded_cost


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ctxcli.cost' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "CacheBlock",
    "CacheOutcome",
    "CachePolicy",
    "ModelPrice",
    "PriceTable",
    "PromptCache",
    "RecordedCost",
    "RecordedRequest",
    "TokenUsage",
    "input_price",
    "load_price_table",
    "recorded_cost",
    "resume_cost",
]
