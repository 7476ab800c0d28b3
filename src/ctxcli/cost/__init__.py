"""Price a session in dollars: recorded, replayed, and with ctx in the loop.

What a session costs in dollars: recorded, replayed through a prompt-cache model, and
with ctx in the loop.

- :mod:`.prices`: the one price table (USD per million tokens, per kind of token).
- :mod:`.recorded`: the bill a session file records, each API response once.
- :mod:`.cache`: the provider's prompt cache as a model (TTLs, breakpoints, reads).
- :mod:`.sequence` and :mod:`.replay`: a session's requests as data, and their price
  through the cache model.
- :mod:`.blocks`: a request cut into the blocks the cache sees (keys, text, images), one
  rule for the replay and the proxy's meter.
- :mod:`.counterfactual`: the requests a live reducer (``ctx proxy``, ``Reducer``) or a
  reduced and resumed file would have sent instead.
- :mod:`.session`: all of it for one session, what ``ctx cost`` shows::

      from ctxcli.cost import session_cost

      cost = session_cost("session.jsonl")
      print(cost.recorded_usd, cost.replayed_usd, cost.with_ctx_usd)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ctxcli.core.facade import lazy_getattr

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
    "Block": "sequence",
    "BuildOptions": "sequence",
    "Request": "sequence",
    "RequestSequence": "sequence",
    "block_key": "sequence",
    "Calibration": "replay",
    "Replay": "replay",
    "ReplayedRequest": "replay",
    "SessionReplay": "replay",
    "build_requests": "replay",
    "fit_calibration": "replay",
    "price_requests": "replay",
    "replay_session": "replay",
    "Chain": "counterfactual",
    "LiveOptions": "counterfactual",
    "LiveRun": "counterfactual",
    "live_requests": "counterfactual",
    "resumed_requests": "counterfactual",
    "ChainCost": "session",
    "CostOptions": "session",
    "RequestCost": "session",
    "SessionCost": "session",
    "session_cost": "session",
}

if TYPE_CHECKING:
    from ctxcli.cost.cache import CacheBlock, CacheOutcome, CachePolicy, PromptCache
    from ctxcli.cost.counterfactual import (
        Chain,
        LiveOptions,
        LiveRun,
        live_requests,
        resumed_requests,
    )
    from ctxcli.cost.prices import (
        ModelPrice,
        PriceTable,
        TokenUsage,
        input_price,
        load_price_table,
        resume_cost,
    )
    from ctxcli.cost.recorded import RecordedCost, RecordedRequest, recorded_cost
    from ctxcli.cost.replay import (
        Calibration,
        Replay,
        ReplayedRequest,
        SessionReplay,
        build_requests,
        fit_calibration,
        price_requests,
        replay_session,
    )
    from ctxcli.cost.sequence import Block, BuildOptions, Request, RequestSequence, block_key
    from ctxcli.cost.session import (
        ChainCost,
        CostOptions,
        RequestCost,
        SessionCost,
        session_cost,
    )


__getattr__ = lazy_getattr(__name__, _LAZY)


__all__ = [
    "Block",
    "BuildOptions",
    "CacheBlock",
    "CacheOutcome",
    "CachePolicy",
    "Calibration",
    "Chain",
    "ChainCost",
    "CostOptions",
    "LiveOptions",
    "LiveRun",
    "RequestCost",
    "SessionCost",
    "ModelPrice",
    "PriceTable",
    "PromptCache",
    "RecordedCost",
    "RecordedRequest",
    "Replay",
    "ReplayedRequest",
    "Request",
    "RequestSequence",
    "SessionReplay",
    "TokenUsage",
    "block_key",
    "build_requests",
    "fit_calibration",
    "input_price",
    "live_requests",
    "load_price_table",
    "price_requests",
    "recorded_cost",
    "replay_session",
    "resume_cost",
    "resumed_requests",
    "session_cost",
]
