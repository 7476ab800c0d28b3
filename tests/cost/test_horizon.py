"""The payback horizon of each change a live chain makes to a sent prefix."""

from __future__ import annotations

import pytest

from ctxcli.cost.horizon import Horizon, horizon_summary, payback_horizons
from ctxcli.cost.prices import TokenUsage, load_price_table
from ctxcli.cost.replay import ReplayedRequest

MODEL = "claude-sonnet-4-5-20250929"  # cache reads at USD 0.30 per million


def req(n: int, tokens: int, usd: float) -> ReplayedRequest:
    return ReplayedRequest(f"m{n}", None, MODEL, tokens, TokenUsage(), usd, 0.0, False)


def test_a_change_pays_after_its_extra_cost_over_the_read_saving() -> None:
    base = [req(0, 100_000, 0.05), req(1, 101_000, 0.05), req(2, 102_000, 0.05)]
    # Request 1 drops 50,000 tokens from its prefix and rewrites the cache: +0.15 USD.
    chain = [req(0, 100_000, 0.05), req(1, 51_000, 0.20), req(2, 52_000, 0.02)]
    (h,) = payback_horizons(base, chain, [False, True, False], load_price_table())
    assert (h.n, h.removed_tokens, h.later) == (1, 50_000, 1)
    assert h.saving_per_call_usd == pytest.approx(0.015)
    assert h.calls == pytest.approx(10.0)
    assert not h.paid  # one call followed it, it needed ten


def test_the_summary_counts_changes_that_paid_and_that_never_can() -> None:
    free = Horizon(1, 0.0, 10, 0.001, 5)
    slow = Horizon(2, 0.1, 10, 0.001, 5)
    never = Horizon(3, 0.1, 0, 0.0, 5)
    summary = horizon_summary([free, slow, never])
    assert summary == {
        "changes": 3,
        "median_calls": 0.0,  # nearest rank of [0, 100]
        "p90_calls": 100.0,
        "paid_back": 1,
        "never": 1,
    }
    assert horizon_summary([])["median_calls"] is None
