"""The provider's prompt cache, as a model: what each request reads, writes and pays for.

Anthropic (breakpoints): a request marks ``cache_control`` breakpoints on some of its
blocks. A prefix ending at a breakpoint is an *entry* of the cache once a request has
sent it, alive for its TTL (5 minutes or 1 hour) after the request that last wrote or
read it. A request reads the longest alive entry it can find: the provider looks at
each of the request's breakpoints and up to ``lookback_blocks`` block boundaries before
each. Everything after the read, up to the last breakpoint, is written (1.25x the input
price for a 5-minute entry, 2x for a 1-hour one); the rest is plain input. After the
request every breakpoint prefix of it is an entry, alive for its TTL from now: those it
wrote, and those it read through (a read refreshes what it uses: the entry read and every
shorter entry inside it, so a turn's first entry outlives the five minutes its turn takes
while later requests read longer ones: cc_mclaude_c76e5be5 line 405 reads an entry last
written 375 seconds before).

OpenAI (automatic): every prefix a request sends becomes an entry, for free; a request
reads the longest alive one, in whole 128-token steps from 1,024 tokens on; entries
live ``automatic_ttl_seconds`` (5 to 10 minutes of inactivity, says OpenAI) after the
last request that used them.

A *bust* is a request that found much less than the previous one left in the cache:
its cached prefix collapsed (an expiry, or a change early in the prompt).

:class:`PromptCache` is shared by the replay (:mod:`ctxcli.cost.replay`) and, later, by
the proxy, which runs one on what it sends and one on what the client sent.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["TTL_SECONDS", "CacheBlock", "CacheOutcome", "CachePolicy", "PromptCache"]

TTL = Literal["5m", "1h"]
TTL_SECONDS: dict[str, float] = {"5m": 300.0, "1h": 3600.0}


@dataclass(frozen=True, slots=True)
class CacheBlock:
    """One block of a request as the cache sees it.

    Attributes:
        key: stable identity of the block's content (equal keys, equal content).
        tokens: its size in the provider's tokens.
        breakpoint: the TTL of a ``cache_control`` breakpoint after this block, if any.
    """

    key: bytes
    tokens: int
    breakpoint: TTL | None = None


@dataclass(frozen=True)
class CachePolicy:
    """How a provider caches prompts (see the module docstring).

    Attributes:
        automatic: OpenAI's rule: every prefix is cached, nothing costs extra to write.
        lookback_blocks: block boundaries before a breakpoint where a hit is looked for.
        min_tokens: the shortest prefix the provider caches.
        step_tokens: reads come in whole steps of this many tokens (OpenAI: 128).
        automatic_ttl_seconds: how long an automatic entry lives unused.
        bust_fraction: a request that reads less than this share of what the previous
            request left cached is a bust...
        bust_min_tokens: ...when the loss is at least this many tokens.
        max_entries: entries kept (the oldest expiring first are dropped beyond it).
        ttl_grace_seconds: an entry is still read this long after its TTL (0, as
            documented; a constant ``make bench`` fits on half the shared sessions and
            reports on the other half).
    """

    automatic: bool = False
    lookback_blocks: int = 20
    min_tokens: int = 1024
    step_tokens: int = 1
    automatic_ttl_seconds: float = 300.0
    bust_fraction: float = 0.5
    bust_min_tokens: int = 2048
    max_entries: int = 200_000
    ttl_grace_seconds: float = 0.0

    @classmethod
    def anthropic(cls) -> CachePolicy:
        """Anthropic's prompt caching: breakpoints, 20-block lookback, write premium."""
        return cls()

    @classmethod
    def openai(cls) -> CachePolicy:
        """OpenAI's automatic prefix caching: 128-token steps from 1,024 tokens."""
        return cls(automatic=True, step_tokens=128)


@dataclass(frozen=True, slots=True)
class CacheOutcome:
    """What one request read from, wrote to and left in the cache, in tokens.

    Attributes:
        input_tokens: all input tokens of the request.
        cache_read: read from the cache.
        cache_write_5m: written to 5-minute entries (Anthropic).
        cache_write_1h: written to 1-hour entries (Anthropic).
        uncached: neither read nor written (plain input; OpenAI: all that was not read).
        cached_after: the longest prefix the cache holds after the request.
        bust: the request read much less than the previous one left cached.
    """

    input_tokens: int
    cache_read: int
    cache_write_5m: int
    cache_write_1h: int
    uncached: int
    cached_after: int
    bust: bool


@dataclass
class PromptCache:
    """The cache of one client's requests, as prefix hashes with expiry times.

    Example:
        >>> cache = PromptCache()
        >>> system = CacheBlock(b"system", 2000, "5m")
        >>> cache.send([system, CacheBlock(b"hi", 10, "5m")], at=0).cache_write_5m
        2010
        >>> cache.send([system, CacheBlock(b"hi", 10), CacheBlock(b"ok", 5, "5m")], at=60).cache_read
        2010
    """

    policy: CachePolicy = field(default_factory=CachePolicy)
    _entries: dict[bytes, tuple[float, float]] = field(default_factory=dict, repr=False)
    _previous: int = 0
    _now: float = 0.0

    def send(self, blocks: Sequence[CacheBlock], at: float | None = None) -> CacheOutcome:
        """Bill one request made of ``blocks`` sent at ``at`` (seconds) and update the cache.

        ``at`` None means "right after the previous request" (nothing expires).
        """
        self._now = self._now if at is None else max(at, self._now)
        hashes, ends = _prefixes(blocks)
        total = ends[-1] if ends else 0
        if self.policy.automatic:
            outcome = self._send_automatic(hashes, ends, total)
        else:
            outcome = self._send_breakpoints(blocks, hashes, ends, total)
        self._prune()
        self._previous = outcome.cached_after
        return outcome

    def _alive(self, h: bytes) -> bool:
        entry = self._entries.get(h)
        return entry is not None and entry[0] + self.policy.ttl_grace_seconds > self._now

    def _keep(self, h: bytes, ttl: float) -> None:
        """Write or refresh the entry ``h``: alive for ``ttl`` seconds from now."""
        self._entries[h] = (self._now + ttl, ttl)

    def _send_breakpoints(
        self, blocks: Sequence[CacheBlock], hashes: list[bytes], ends: list[int], total: int
    ) -> CacheOutcome:
        marks = [i for i, b in enumerate(blocks) if b.breakpoint is not None]
        hit = -1
        for m in marks:
            for i in range(m, max(-1, m - self.policy.lookback_blocks - 1), -1):
                if i > hit and self._alive(hashes[i]):
                    hit = i
                    break
        read = ends[hit] if hit >= 0 else 0
        writes = {"5m": 0, "1h": 0}
        done = read
        for m in marks:
            ttl = blocks[m].breakpoint or "5m"
            if ends[m] > done and ends[m] >= self.policy.min_tokens:
                writes[ttl] += ends[m] - done
                done = ends[m]
            if ends[m] >= self.policy.min_tokens:
                self._keep(hashes[m], TTL_SECONDS[ttl])
        for i in range(hit + 1):
            # What is read is used: the entry read, and every entry that is a prefix of
            # it, is refreshed with its own TTL (it may sit where this request has no
            # breakpoint, found by the lookback).
            h = hashes[i]
            if self._alive(h):
                self._keep(h, self._entries[h][1])
        uncached = total - read - writes["5m"] - writes["1h"]
        return self._outcome(total, read, writes["5m"], writes["1h"], uncached, done)

    def _send_automatic(self, hashes: list[bytes], ends: list[int], total: int) -> CacheOutcome:
        policy = self.policy
        hit = next((i for i in range(len(hashes) - 1, -1, -1) if self._alive(hashes[i])), -1)
        read = ends[hit] if hit >= 0 else 0
        read -= read % policy.step_tokens
        read = read if read >= policy.min_tokens else 0
        for h in hashes:
            self._keep(h, policy.automatic_ttl_seconds)
        return self._outcome(total, read, 0, 0, total - read, total)

    def _outcome(
        self, total: int, read: int, w5: int, w1h: int, uncached: int, cached_after: int
    ) -> CacheOutcome:
        lost = self._previous - read
        bust = lost >= self.policy.bust_min_tokens and read < self._previous * (
            1 - self.policy.bust_fraction
        )
        return CacheOutcome(total, read, w5, w1h, uncached, cached_after, bust)

    def _prune(self) -> None:
        if len(self._entries) <= self.policy.max_entries:
            return
        alive = {h: e for h, e in self._entries.items() if e[0] > self._now}
        if len(alive) > self.policy.max_entries:
            keep = sorted(alive.items(), key=lambda item: item[1][0])[-self.policy.max_entries :]
            alive = dict(keep)
        self._entries = alive


def _prefixes(blocks: Sequence[CacheBlock]) -> tuple[list[bytes], list[int]]:
    """The hash of each prefix (through block i) and its length in tokens."""
    hashes: list[bytes] = []
    ends: list[int] = []
    running = b""
    total = 0
    for block in blocks:
        running = hashlib.blake2b(running + block.key, digest_size=16).digest()
        total += block.tokens
        hashes.append(running)
        ends.append(total)
    return hashes, ends
