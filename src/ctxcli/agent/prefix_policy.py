"""When a live reducer may change what it already sent: only when the change pays.

The provider caches the prompt's prefix. A message sent once is read from the cache on
every later call at a tenth of the input price; a change to it (a stage clearing an old
tool result, say) makes the provider write everything after the change again at the
cache-write price (Anthropic: 1.25x input for a 5-minute entry, 12.5 times a read;
OpenAI: no write premium, but the uncached input costs 10 times a read). What the
change removes is then saved on every later call.

Whether that pays depends on how many calls are still to come, which a live reducer
cannot know, and on how the change's price moves while it waits:

- A change that makes the provider write every message again (Anthropic, deeper than
  its cache can look back from a breakpoint) costs about the same now or a few calls
  later. :class:`HoldBack` decides it as the classic rent-or-buy (ski rental) problem
  is decided online: every call that goes on sending the removable tokens pays their
  *rent* (their cache reads); the change is *bought* once the rent paid since the
  chain first proposed it reaches what the change costs now. Whatever the future
  brings, that never pays more than twice what knowing it would have paid, and it
  makes no bust that a short rest of the session cannot pay back.
- A change the cache picks up just before (OpenAI caches every prefix; Anthropic a
  prefix that ends at a breakpoint the caller set, see ``marked``) rewrites only what
  follows it, which grows with every call it waits: it is made as soon as the reads it
  saves over as many calls as the conversation has had so far (the Lindy estimate of
  the calls still to come) pay for it.

A change is free when the cache is cold anyway (the conversation was idle longer than
the cache lives, or the client itself changed its history): then it is made at once.

What a change costs depends on where the cache can pick up again. With OpenAI every
prefix is cached, so only what follows the change is rewritten. Anthropic caches the
prefixes that end at a ``cache_control`` breakpoint, and a request finds one only
within 20 content blocks of one of its own breakpoints; a client that marks only its
last message (Claude Code) has every message rewritten by a change deeper than that.
The reducer names the message before the rounds its chain keeps
(``ReducerResult.cache_breakpoint``): a caller that marks it too (``marked``) makes
the usual change (the oldest kept round leaving the window) cheap.

While a change is held back, the reducer sends what it sent before, followed by the
new messages reduced as usual (a new tool result is truncated when it arrives: it
was never cached, so that costs nothing).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["HoldBack", "PrefixPolicy"]


@dataclass(frozen=True)
class PrefixPolicy:
    """How the provider caches the prompt and prices a change to it, and a floor.

    Attributes:
        lookback_blocks: Anthropic's rule: the cache holds the prefixes that ended at a
            ``cache_control`` breakpoint of an earlier call, and a call reads one only
            when it ends at most this many content blocks before one of its own
            breakpoints. None: OpenAI's rule, every prefix is cached, so a change
            rewrites only what follows it.
        marked: the caller puts a breakpoint on the last message of every call (as
            Claude Code does) *and* on :attr:`ReducerResult.cache_breakpoint
            <ctxcli.agent.reducer.ReducerResult.cache_breakpoint>`, the message before
            the rounds the chain keeps, so that clearing them later rewrites only
            them. False: only on the last message, so a change more than
            ``lookback_blocks`` blocks back rewrites every message. False by default:
            a policy that counts on the breakpoint while the caller does not place it
            pays dearly (``ctx cost``: 26% above the replayed bill on the shared
            cc_mclaude session); ``ctx proxy`` places it and sets True.
        write_to_read: price of a rewritten token over the price of a cached one
            (Anthropic 5-minute entries: 1.25 / 0.1 = 12.5; 1-hour entries: 20;
            OpenAI: uncached / cached input = 10).
        ttl_seconds: how long the cache lives without a call; after a longer pause
            the prefix is written again anyway, so a change costs nothing.
        clear_at_least: a change that reclaims fewer tokens is never made.
    """

    lookback_blocks: int | None = 20
    marked: bool = False
    write_to_read: float = 12.5
    ttl_seconds: float = 300.0
    clear_at_least: int = 0

    @classmethod
    def for_api(cls, api: str) -> PrefixPolicy:
        """The policy for an API shape: Anthropic's breakpoints, else OpenAI's cache."""
        if api == "anthropic":
            return cls()
        return cls(lookback_blocks=None, write_to_read=10.0)

    def bust_cost(self, rewritten_tokens: int, reclaimed_tokens: int) -> float:
        """What making the change now costs over keeping the prefix, in cached tokens.

        ``rewritten_tokens`` would have been read (1 each) and are written instead
        (``write_to_read`` each), less the ``reclaimed_tokens`` the change removes.
        """
        w = self.write_to_read
        return (w - 1) * rewritten_tokens - w * reclaimed_tokens


@dataclass
class HoldBack:
    """The rent-or-buy decision for one conversation, and what its cache holds.

    Attributes:
        policy: the cache's rules and prices, and the floor.
        rent_tokens: cached-token reads paid since the chain first proposed a change
            that was held back (reset when a change is made).
        held: calls whose proposed change was held back so far.
        calls: calls of this conversation so far.
        cached: lengths (in messages) of the sent prefixes the cache holds: those
            that ended at a breakpoint of an earlier call, unchanged since.
        last_at: when the previous call was made (seconds).
    """

    policy: PrefixPolicy
    rent_tokens: float = 0.0
    held: int = 0
    calls: int = 0
    cached: list[int] = field(default_factory=list)
    last_at: float | None = None

    def is_cold(self, now: float) -> bool:
        """Whether the cache has expired since the previous call."""
        return self.last_at is not None and now - self.last_at > self.policy.ttl_seconds

    def cached_until(self, change: int, blocks: Sequence[int], marks: Sequence[int]) -> int:
        """Count the messages the provider still reads from its cache after a change.

        Messages the provider still reads from its cache when the sent prefix changes
        at message ``change``: the longest cached prefix before it that one of the new
        call's breakpoints (``marks``, in messages) reaches back to. ``blocks``: content
        blocks of each message of the new call.
        """
        lookback = self.policy.lookback_blocks
        if lookback is None:
            return change
        best = 0
        for end in self.cached:
            if best < end <= change and any(
                m >= end and sum(blocks[end:m]) <= lookback for m in marks
            ):
                best = end
        return best

    def accept(
        self, *, reclaimed_tokens: int, rewritten_tokens: int, whole: bool, cold: bool = False
    ) -> bool:
        """Whether to send a change of the sent prefix proposed for this call.

        Args:
            reclaimed_tokens: tokens the change removes from what would be sent.
            rewritten_tokens: tokens the provider would read from its cache without
                the change and writes again with it.
            whole: the change rewrites every message (no cached prefix before it).
            cold: the cache holds nothing of this conversation any more.
        """
        if reclaimed_tokens < max(1, self.policy.clear_at_least):
            return False
        cost = self.policy.bust_cost(rewritten_tokens, reclaimed_tokens)
        # This call's reads count as rent already: sending the old prefix reads them.
        bought = self.rent_tokens + reclaimed_tokens >= cost
        pays = not whole and reclaimed_tokens * max(1, self.calls) >= cost
        if cold or bought or pays:
            self.rent_tokens = 0.0
            return True
        self.rent_tokens += reclaimed_tokens
        self.held += 1
        return False

    def sent(self, now: float, changed_at: int | None, marks: Sequence[int]) -> None:
        """Record a call: where its sent prefix changed and what it leaves cached.

        Record a call: the sent prefix changed at ``changed_at`` (None: it grew),
        and its breakpoints ``marks`` (in messages) are cached prefixes from now on.
        """
        if self.is_cold(now):
            self.cached = []
        elif changed_at is not None:
            self.cached = [end for end in self.cached if end <= changed_at]
        self.cached = sorted({*self.cached, *marks})
        self.last_at = now
        self.calls += 1

    def reset(self) -> None:
        """Forget everything (a new conversation)."""
        self.rent_tokens = 0.0
        self.cached = []
        self.last_at = None
        self.calls = 0
