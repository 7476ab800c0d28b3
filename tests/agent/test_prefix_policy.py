"""The reducer's prefix policy: a change to messages already sent is made only when it pays."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ctxcli.agent.prefix_policy import HoldBack, PrefixPolicy
from ctxcli.agent.reducer import Reducer
from ctxcli.pipeline.config import build_config

CLEAR = build_config(
    {"stages": [{"use": "clear_tool_results", "max_tokens": 0, "keep_rounds": 1}]}, "test"
)


def test_rent_or_buy_holds_a_change_until_the_reads_it_saves_pay_for_it() -> None:
    hold = HoldBack(PrefixPolicy())
    # Rewriting 10,000 cached tokens to save 100: 11.5 * 10,000 - 12.5 * 100 read-tokens.
    cost = PrefixPolicy().bust_cost(10_000, 100)
    assert cost == 113_750
    calls = 1
    while not hold.accept(reclaimed_tokens=100, rewritten_tokens=10_000, whole=True):
        calls += 1
    # Held while the rent paid (100 a call, this call's included) is below the cost.
    assert calls == 1_138 and hold.held == 1_137
    assert hold.rent_tokens == 0  # bought: the rent starts again


def test_a_change_that_saves_more_than_it_rewrites_is_made_at_once() -> None:
    hold = HoldBack(PrefixPolicy())
    assert hold.accept(reclaimed_tokens=950, rewritten_tokens=1_000, whole=True)


def test_a_partial_rewrite_pays_over_as_many_calls_as_there_were() -> None:
    """Lindy: a change the cache picks up before, after 50 calls, pays over 50 more."""
    hold = HoldBack(PrefixPolicy(lookback_blocks=None, write_to_read=10.0), calls=50)
    cost = hold.policy.bust_cost(2_000, 300)  # 9 * 2,000 - 10 * 300 = 15,000
    assert not hold.accept(reclaimed_tokens=299, rewritten_tokens=2_000, whole=False)
    assert 300 * 50 >= cost
    assert hold.accept(reclaimed_tokens=300, rewritten_tokens=2_000, whole=False)
    # The same change rewriting everything waits for its rent instead.
    assert not HoldBack(hold.policy, calls=50).accept(
        reclaimed_tokens=300, rewritten_tokens=2_000, whole=True
    )


def test_a_cold_cache_makes_any_change_free_but_the_floor_holds() -> None:
    hold = HoldBack(PrefixPolicy(clear_at_least=500))
    assert hold.accept(reclaimed_tokens=600, rewritten_tokens=10**6, whole=True, cold=True)
    assert not hold.accept(reclaimed_tokens=400, rewritten_tokens=0, whole=True, cold=True)


def test_the_cache_picks_up_at_a_cached_prefix_a_breakpoint_reaches() -> None:
    hold = HoldBack(PrefixPolicy(lookback_blocks=20))
    hold.sent(0.0, None, [3])
    hold.sent(10.0, None, [5, 8])
    blocks = [1] * 8 + [30]  # the new call: 9 messages, the last one 30 blocks long
    # A change at message 6: the prefix of 5 messages is cached, the end breakpoint
    # (message 9) is 30 blocks further, but a breakpoint at 8 reaches it.
    assert hold.cached_until(6, blocks, [9, 8]) == 5
    assert hold.cached_until(6, blocks, [9]) == 0  # too far back for the last one
    assert hold.cached_until(4, blocks, [9, 8]) == 3
    # OpenAI: every prefix is cached.
    assert HoldBack(PrefixPolicy.for_api("openai_chat")).cached_until(6, blocks, [9]) == 6
    # A change at message 4 made the prefixes past it stale; a pause longer than the
    # cache lives empties it.
    hold.sent(20.0, 4, [9])
    assert hold.cached == [3, 9]
    hold.sent(20.0 + 301, None, [10])
    assert hold.cached == [10]


def _round(n: int, result: str) -> list[dict[str, Any]]:
    call = {"type": "tool_use", "id": f"t{n}", "name": "Bash", "input": {"command": f"ls {n}"}}
    answer = {"type": "tool_result", "tool_use_id": f"t{n}", "content": result}
    return [{"role": "assistant", "content": [call]}, {"role": "user", "content": [answer]}]


def _history(big_words: int, small: str) -> list[dict[str, Any]]:
    first = {"role": "user", "content": "context " * big_words}
    return [first, *_round(1, small)]


def test_the_reducer_holds_back_a_small_clear_under_a_large_cached_prefix(tmp_path: Path) -> None:
    reducer = Reducer(CLEAR, api="anthropic", offload_dir=tmp_path / "off")
    history = _history(20_000, "file list " * 40)
    first = reducer.reduce(history, at=0.0)
    assert first.messages == history and first.cache_breakpoint == 0
    history += _round(2, "ok")
    second = reducer.reduce(history, at=60.0)
    # The chain would clear round 1's result (~80 tokens) under 20,000 cached ones.
    assert second.held_back and second.changed_prefix_at is None
    assert second.messages == history
    assert second.cache_breakpoint == 2  # the message before the last round
    # Without a policy the same change is made at once.
    eager = Reducer(CLEAR, api="anthropic", offload_dir=tmp_path / "off2", prefix_policy=None)
    eager.reduce(history[:3], at=0.0)
    made = eager.reduce(history, at=60.0)
    assert made.changed_prefix_at == 2 and not made.held_back
    assert made.messages[2]["content"][0]["content"].startswith("[ctx cleared")


def test_a_pause_longer_than_the_cache_lives_lets_the_change_through(tmp_path: Path) -> None:
    reducer = Reducer(CLEAR, api="anthropic", offload_dir=tmp_path / "off")
    history = _history(20_000, "file list " * 40)
    reducer.reduce(history, at=0.0)
    history += _round(2, "ok")
    result = reducer.reduce(history, at=301.0)
    assert result.changed_prefix_at == 2 and not result.held_back


def test_a_held_change_keeps_reducing_what_arrives(tmp_path: Path) -> None:
    """While the prefix is held, new messages still go through the chain."""
    config = build_config(
        {
            "stages": [
                {"use": "truncate_tool_output", "max_chars": 300},
                {"use": "clear_tool_results", "max_tokens": 0, "keep_rounds": 1},
            ]
        },
        "test",
    )
    reducer = Reducer(config, api="anthropic", offload_dir=tmp_path / "off")
    history = _history(20_000, "file list " * 40)
    sent = reducer.reduce(history, at=0.0).messages
    history += _round(2, "line\n" * 400)
    result = reducer.reduce(history, at=60.0)
    assert result.held_back
    assert result.messages[:3] == sent
    assert "[ctx:" in result.messages[-1]["content"][0]["content"]  # truncated on arrival


@pytest.mark.parametrize("policy", ["auto", None])
def test_a_new_conversation_after_reset_starts_with_an_empty_cache(
    tmp_path: Path, policy: Any
) -> None:
    reducer = Reducer(CLEAR, api="anthropic", offload_dir=tmp_path / "off", prefix_policy=policy)
    history = _history(200, "x " * 40)
    reducer.reduce(history, at=0.0)
    reducer.reset()
    assert reducer.reduce(history, at=1.0).changed_prefix_at is None
