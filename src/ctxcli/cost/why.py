"""Why the cache was written: every cache write of a session, attributed to a cause.

A request writes (Anthropic) or pays full price for (OpenAI) the part of its prompt it
could not read from the cache. Of that, what the previous request of the same client
lineage (the same hidden prompt: the main agent, or one subagent) had already sent is a
*miss*; the rest is new content, written once as any conversation grows. A miss has a
cause:

- ``ttl_expired``: the prompt still began with everything the previous request sent,
  yet the cache had expired (the pause was longer than the breakpoint's TTL);
- ``prefix_changed:client``, ``prefix_changed:compaction``, ``prefix_changed:ctx``:
  something already sent was changed, by the client, by a compaction (the prompt
  restarted much shorter), or by ctx's reducer;
- ``model``, ``system``, ``tools``: the model, the system prompt or the tools changed;
- ``cold_start``: the lineage's first request;
- ``unexplained``: the prefix was intact and fresh, yet the provider did not read it
  (an eviction, or a client that sent what the file does not show). A read that
  stopped inside the lineage's opening (its first request: client prompt and first
  message) is put on the client (``prefix_changed:client``): it re-sent its opening
  differently, in a way the file does not record (cc_mclaude_c76e5be5 line 1013 reads
  21,205 tokens, less than its client prompt). A turn start whose prompt lost the
  previous turn's thinking (the API strips it) diverges from the request before it:
  ``prefix_changed:client`` too, the client having started a turn.

Where the file records the provider's diagnostics (Claude Code ``message.diagnostics.
cache_miss_reason`` from about 2.1.260) they name the cause (``source: diagnostics``);
elsewhere it is inferred from the rebuilt requests (``source: inferred``).

Example:
    >>> why = attribute_writes(sequence, usages)  # doctest: +SKIP
    >>> why.totals()["ttl_expired"]  # doctest: +SKIP
    (412803, 1.548)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ctxcli.cost._calls import Diagnosis
from ctxcli.cost.cache import TTL_SECONDS, CachePolicy
from ctxcli.cost.prices import PriceTable, TokenUsage
from ctxcli.cost.sequence import Request, RequestSequence

__all__ = ["CAUSES", "Why", "WriteCause", "attribute_writes"]

CAUSES = (
    "new_content",
    "cold_start",
    "ttl_expired",
    "prefix_changed:client",
    "prefix_changed:compaction",
    "prefix_changed:ctx",
    "model",
    "system",
    "tools",
    "unexplained",
)
Source = Literal["diagnostics", "inferred"]

_DIAGNOSED = {"model_changed": "model", "system_changed": "system", "tools_changed": "tools"}
NOISE_TOKENS = 1024
"""A miss smaller than this (or than 5% of what was sent before) is counted as new
content: the rebuilt prompt and the provider's differ by that much at times."""
COMPACTED = 0.5
"""A prompt changed early and now under this share of the previous one is a compaction."""


@dataclass(frozen=True, slots=True)
class WriteCause:
    """Part of one request's cache write, and why it was written."""

    cause: str
    tokens: int
    usd: float
    source: Source

    def to_dict(self) -> dict[str, Any]:
        """As JSON."""
        return {
            "cause": self.cause,
            "tokens": self.tokens,
            "usd": round(self.usd, 6),
            "source": self.source,
        }


@dataclass(frozen=True)
class Why:
    """Each request's cache writes by cause (empty for a request that wrote nothing)."""

    requests: tuple[tuple[WriteCause, ...], ...]

    def totals(self) -> dict[str, tuple[int, float]]:
        """Tokens and USD written per cause, over the session (causes that occur)."""
        out: dict[str, tuple[int, float]] = {}
        for causes in self.requests:
            for c in causes:
                tokens, usd = out.get(c.cause, (0, 0.0))
                out[c.cause] = (tokens + c.tokens, usd + c.usd)
        return {k: out[k] for k in CAUSES if k in out}

    @property
    def diagnosed(self) -> int:
        """Requests whose misses the file's diagnostics explain."""
        return sum(any(c.source == "diagnostics" for c in r) for r in self.requests)

    def to_dict(self) -> dict[str, Any]:
        """The stable JSON shape of the totals."""
        return {
            "diagnosed_requests": self.diagnosed,
            "causes": [
                {"cause": k, "tokens": t, "usd": round(u, 6)} for k, (t, u) in self.totals().items()
            ],
        }


def attribute_writes(
    sequence: RequestSequence,
    usages: Sequence[TokenUsage],
    diagnoses: Sequence[Diagnosis | None] = (),
    *,
    changed: Sequence[bool] = (),
    prices: PriceTable | None = None,
    policy: CachePolicy | None = None,
) -> Why:
    """Attribute the cache writes of ``sequence``'s requests to their causes.

    Args:
        sequence: the requests (as run, or a counterfactual).
        usages: each request's usage: recorded where the file has it, else replayed.
        diagnoses: each request's recorded cache diagnostics (None: none recorded).
        changed: per request, ctx's reducer changed what it had sent (a counterfactual).
        prices: prices the writes (default: none, USD 0).
        policy: the cache's rules (default: by the sequence's caching).
    """
    automatic = sequence.caching == "automatic"
    policy = policy or (CachePolicy.openai() if automatic else CachePolicy.anthropic())
    last: dict[bytes, tuple[Request, TokenUsage]] = {}
    opening: dict[bytes, int] = {}  # each lineage's first request's input
    out: list[tuple[WriteCause, ...]] = []
    for n, (request, usage) in enumerate(zip(sequence.requests, usages, strict=True)):
        lineage = request.blocks[0].key if request.blocks else b""
        before = last.get(lineage)
        last[lineage] = (request, usage)
        first = opening.setdefault(lineage, usage.input_total)
        written = usage.input if automatic else usage.cache_write
        if written <= 0:
            out.append(())
            continue
        usd = _write_usd(request, usage, automatic, prices)
        diagnosis = diagnoses[n] if n < len(diagnoses) else None
        ctx = changed[n] if n < len(changed) else False
        cause, missed, source = _cause(request, usage, before, diagnosis, ctx, policy)
        if cause == "unexplained" and usage.cache_read <= first:
            # The read stopped inside the lineage's opening (client prompt and first
            # message) though the file shows it unchanged: the client re-sent its
            # opening differently, in a way it does not log.
            cause = "prefix_changed:client"
        missed = min(written, missed)
        parts = [(cause, missed, source), ("new_content", written - missed, source)]
        out.append(
            tuple(
                WriteCause(c, t, usd * t / written, s)
                for c, t, s in parts
                if t > 0  # a part of zero tokens is no cause
            )
        )
    return Why(tuple(out))


def _write_usd(
    request: Request, usage: TokenUsage, automatic: bool, prices: PriceTable | None
) -> float:
    price = prices.lookup(request.model) if prices is not None else None
    if price is None:
        return 0.0
    if automatic:
        return price.usd(TokenUsage(input=usage.input))
    return price.usd(
        TokenUsage(cache_write_5m=usage.cache_write_5m, cache_write_1h=usage.cache_write_1h)
    )


def _cause(
    request: Request,
    usage: TokenUsage,
    before: tuple[Request, TokenUsage] | None,
    diagnosis: Diagnosis | None,
    ctx: bool,
    policy: CachePolicy,
) -> tuple[str, int, Source]:
    """The cause of the request's miss, the tokens it missed, and who says so."""
    if before is None:
        return "cold_start", usage.input_total, "inferred"
    previous, prev_usage = before
    missed = max(0, prev_usage.input_total - usage.cache_read)
    if missed < max(NOISE_TOKENS, 0.05 * prev_usage.input_total):
        missed = 0
    diverged = _divergence(previous, request)
    if diagnosis is not None and diagnosis[0] not in ("previous_message_not_found", "unavailable"):
        reason, tokens = diagnosis
        if reason is None:
            return ("ttl_expired" if missed else "new_content"), missed, "diagnostics"
        if reason in _DIAGNOSED:
            return _DIAGNOSED[reason], tokens if tokens is not None else missed, "diagnostics"
        who = _who(previous, prev_usage, usage, ctx)
        return f"prefix_changed:{who}", tokens if tokens is not None else missed, "diagnostics"
    if not missed:
        return "new_content", 0, "inferred"
    if request.at is not None and previous.at is not None:
        # After a pause longer than the TTL nothing was left to read, whatever changed
        # (a turn start also drops the previous turn's thinking from the prompt).
        if request.at - previous.at > _ttl(request, policy):
            return "ttl_expired", missed, "inferred"
    if previous.model != request.model:
        return "model", missed, "inferred"
    if diverged == 0:
        return "system", missed, "inferred"
    if diverged is not None:
        return f"prefix_changed:{_who(previous, prev_usage, usage, ctx)}", missed, "inferred"
    return "unexplained", missed, "inferred"


def _who(previous: Request, prev_usage: TokenUsage, usage: TokenUsage, ctx: bool) -> str:
    if ctx:
        return "ctx"
    if usage.input_total < COMPACTED * prev_usage.input_total:
        return "compaction"
    return "client"


def _divergence(previous: Request, request: Request) -> int | None:
    """Return the first block of ``previous`` that ``request`` does not send again.

    None: it sends all of ``previous`` first.
    """
    for i, block in enumerate(previous.blocks):
        if i >= len(request.blocks) or request.blocks[i].key != block.key:
            return i
    return None


def _ttl(request: Request, policy: CachePolicy) -> float:
    if request.breakpoints:
        return max(TTL_SECONDS[ttl] for _, ttl in request.breakpoints)
    return policy.automatic_ttl_seconds
