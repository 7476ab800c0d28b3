"""The prompt-cache model: what is read, written, refreshed and expired, request by request."""

from __future__ import annotations

import pytest

from ctxcli.cost.cache import TTL, CacheBlock, CachePolicy, PromptCache
from ctxcli.cost.prices import PriceTable, TokenUsage

SYSTEM = CacheBlock(b"system", 3_000, "5m")


def msg(name: str, tokens: int = 1_000, ttl: TTL | None = None) -> CacheBlock:
    return CacheBlock(name.encode(), tokens, ttl)


def conversation(*names: str, ttl: TTL = "5m") -> list[CacheBlock]:
    """The system prompt, then messages; Claude Code's breakpoint on the last one."""
    blocks = [CacheBlock(SYSTEM.key, SYSTEM.tokens, ttl), *(msg(n) for n in names)]
    blocks[-1] = CacheBlock(blocks[-1].key, blocks[-1].tokens, ttl)
    return blocks


def test_read_after_write() -> None:
    cache = PromptCache()
    first = cache.send(conversation("u1"), at=0)
    assert (first.cache_read, first.cache_write_5m, first.uncached) == (0, 4_000, 0)
    second = cache.send(conversation("u1", "a1"), at=60)
    assert (second.cache_read, second.cache_write_5m, second.input_tokens) == (4_000, 1_000, 5_000)
    assert not second.bust


def test_expiry_after_five_minutes() -> None:
    cache = PromptCache()
    cache.send(conversation("u1"), at=0)
    assert cache.send(conversation("u1", "a1"), at=299).cache_read == 4_000
    late = cache.send(conversation("u1", "a1", "u2"), at=299 + 300.5)
    assert (late.cache_read, late.cache_write_5m) == (0, 6_000)
    assert late.bust


def test_a_read_refreshes_the_entry() -> None:
    cache = PromptCache()
    cache.send(conversation("u1"), at=0)
    cache.send(conversation("u1"), at=240)  # reads the entry: alive until 540
    assert cache.send(conversation("u1"), at=500).cache_read == 4_000
    assert cache.send(conversation("u1"), at=801).cache_read == 0


def test_a_read_refreshes_the_shorter_entries_inside_what_it_read() -> None:
    """A turn's first entry stays alive while later requests read longer prefixes over it:
    a request after the turn whose tail changed finds it (the lookback) 400 s after it was
    written, and 200 s after its last own read."""
    cache = PromptCache()
    cache.send(conversation("u1"), at=0)  # entry A: system + u1
    cache.send(conversation("u1", "a1"), at=200)  # reads A, writes B
    cache.send(conversation("u1", "a1", "u2"), at=400)  # reads B (A inside it)
    changed = cache.send(conversation("u1", "x1", "x2"), at=650)
    assert changed.cache_read == 4_000  # A, used at 400: alive until 700


def test_one_hour_ttl() -> None:
    for ttl, hit in (("1h", True), ("5m", False)):
        cache = PromptCache()
        first = cache.send(conversation("u1", ttl=ttl), at=0)
        assert (first.cache_write_1h, first.cache_write_5m) == ((4_000, 0) if hit else (0, 4_000))
        later = cache.send(conversation("u1", "u2", ttl=ttl), at=1_800)
        assert later.cache_read == (4_000 if hit else 0), ttl


def test_a_changed_early_message_busts_the_cache() -> None:
    """Editing an early message re-writes everything after it, at 1.25x the input price."""
    cache = PromptCache()
    cache.send(conversation("u1", "a1", "u2", "a2"), at=0)
    edited = cache.send(conversation("u1-edited", "a1", "u2", "a2", "u3"), at=30)
    # Only the system prompt (its own breakpoint) is still found.
    assert (edited.cache_read, edited.cache_write_5m, edited.uncached) == (3_000, 5_000, 0)
    assert edited.bust
    sonnet = PriceTable()["claude-sonnet-4-5"]
    usage = TokenUsage(cache_read=3_000, cache_write_5m=5_000)
    assert sonnet.usd(usage) == pytest.approx((3_000 * 0.3 + 5_000 * 3.75) / 1e6)
    assert sonnet.cache_write_5m == pytest.approx(1.25 * sonnet.input)


def test_content_after_the_last_breakpoint_is_plain_input() -> None:
    cache = PromptCache()
    blocks = [SYSTEM, msg("u1", 1_000, "5m"), msg("tail", 200)]
    outcome = cache.send(blocks, at=0)
    assert (outcome.cache_write_5m, outcome.uncached, outcome.cached_after) == (4_000, 200, 4_000)


def test_lookback_finds_an_entry_at_most_twenty_blocks_back() -> None:
    def run(extra: int) -> int:
        cache = PromptCache()
        base = [SYSTEM, msg("u1", 2_000, "5m")]
        cache.send(base, at=0)
        # Same prefix, then `extra` blocks and a breakpoint on the last only.
        blocks = [SYSTEM, msg("u1", 2_000)] + [msg(f"b{k}", 10) for k in range(extra)]
        blocks[-1] = CacheBlock(blocks[-1].key, 10, "5m")
        return cache.send(blocks, at=10).cache_read

    assert run(20) == 5_000
    # 21 blocks on, the entry at u1 is out of reach: only the system prompt is found.
    assert run(21) == 3_000


def test_short_prefixes_are_not_cached() -> None:
    cache = PromptCache()
    tiny = [CacheBlock(b"s", 500, "5m"), msg("u1", 300, "5m")]
    assert cache.send(tiny, at=0).cache_write_5m == 0
    assert cache.send(tiny, at=1).cache_read == 0


def test_one_hour_entries_come_first_in_the_write_split() -> None:
    cache = PromptCache()
    blocks = [CacheBlock(b"system", 3_000, "1h"), msg("u1", 1_000, "5m")]
    outcome = cache.send(blocks, at=0)
    assert (outcome.cache_write_1h, outcome.cache_write_5m) == (3_000, 1_000)
    # Ten minutes later the 5-minute entry is gone, the system prompt's is not.
    assert cache.send(blocks, at=600).cache_read == 3_000


def test_automatic_caching_reads_in_128_token_steps_and_writes_free() -> None:
    cache = PromptCache(CachePolicy.openai())
    blocks = [msg("instructions", 2_500), msg("u1", 700)]
    first = cache.send(blocks, at=0)
    assert (first.cache_read, first.cache_write_5m, first.uncached) == (0, 0, 3_200)
    second = cache.send([*blocks, msg("out", 300)], at=10)
    assert (second.cache_read, second.uncached) == (3_200 - 3_200 % 128, 300 + 3_200 % 128)
    changed = cache.send([blocks[0], msg("u1-changed", 700)], at=20)
    assert changed.cache_read == 2_432  # 2,500 rounded down to 128s
    assert cache.send(blocks, at=20 + 301).cache_read == 0


def test_automatic_prefixes_under_1024_tokens_are_not_read() -> None:
    cache = PromptCache(CachePolicy.openai())
    cache.send([msg("a", 900)], at=0)
    assert cache.send([msg("a", 900), msg("b", 50)], at=1).cache_read == 0


def test_a_small_loss_is_no_bust() -> None:
    cache = PromptCache()
    cache.send(conversation("u1", "a1"), at=0)
    cache.send(conversation("u1", "a1", "u2"), at=3)
    # The last message changed: 1,000 tokens lost of 6,000, not a collapse.
    outcome = cache.send(conversation("u1", "a1", "u2-changed"), at=5)
    assert (outcome.cache_read, outcome.bust) == (5_000, False)


def test_send_without_a_time_never_expires() -> None:
    cache = PromptCache()
    cache.send(conversation("u1"), at=1_000)
    assert cache.send(conversation("u1", "a1")).cache_read == 4_000


def test_entries_beyond_the_bound_are_dropped() -> None:
    cache = PromptCache(CachePolicy(max_entries=2))
    for k in range(5):
        cache.send([SYSTEM, msg(f"u{k}", 1_000, "5m")], at=k)
    # The two entries expiring last are kept: the system prompt's and u4's.
    assert cache.send([SYSTEM, msg("u4", 1_000, "5m")], at=6).cache_read == 4_000
    assert cache.send([SYSTEM, msg("u0", 1_000, "5m")], at=7).cache_read == 3_000


def test_a_grace_reads_an_entry_just_past_its_ttl() -> None:
    for grace, read in ((0.0, 0), (30.0, 4_000)):
        cache = PromptCache(CachePolicy(ttl_grace_seconds=grace))
        cache.send(conversation("u1"), at=0)
        assert cache.send(conversation("u1", "a1"), at=310).cache_read == read
