"""Replay a session's requests through the cache model and price them.

Two steps, kept apart so that any request sequence can be priced:

(a) :func:`build_requests` rebuilds the requests a session file records, as data
    (:class:`~ctxcli.cost.sequence.RequestSequence`);
(b) :func:`price_requests` sends a sequence through :class:`~ctxcli.cost.cache.
    PromptCache` and prices each request with the price table.

The file does not hold the client's system prompt and tools, and our tokenizer is not
the provider's: :func:`fit_calibration` fits those two constants per session (hidden
prompt tokens, and provider tokens per token of ours) from the recorded input sizes,
by least squares. Nothing else is fitted: what is read, written or expired is the cache
model's. :func:`replay_session` does it all and compares the replay with the recorded
bill.

Example:
    >>> session = replay_session("session.jsonl")  # doctest: +SKIP
    >>> f"{session.recorded_usd:.2f} {session.replayed_usd:.2f} {session.error:+.1%}"  # doctest: +SKIP
    '9.53 8.99 -5.6%'
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from ctxcli.core.errors import TranscriptError
from ctxcli.core.model import IMAGE_TOKENS
from ctxcli.cost._calls import claude_code_calls, codex_calls
from ctxcli.cost._claude_code import claude_code_requests
from ctxcli.cost._codex import codex_requests
from ctxcli.cost._jsonl import Lines, Source, read_lines, session_format
from ctxcli.cost.blocks import content_items
from ctxcli.cost.cache import CacheBlock, CacheOutcome, CachePolicy, PromptCache
from ctxcli.cost.prices import BillTotals, PriceTable, TokenUsage, load_price_table
from ctxcli.cost.recorded import RecordedCost, recorded_from_lines
from ctxcli.cost.sequence import Block, BuildOptions, Request, RequestSequence
from ctxcli.services.tokens.by_name import get_counter
from ctxcli.services.tokens.ledger import TokenCounter

__all__ = [
    "Calibration",
    "Replay",
    "ReplayedRequest",
    "SessionReplay",
    "Sizer",
    "build_requests",
    "fit_calibration",
    "price_request",
    "price_requests",
    "replay_session",
]


@dataclass(frozen=True, slots=True)
class Calibration:
    """The two constants fitted per session.

    Attributes:
        overhead_tokens: the client's hidden prompt (system prompt, tools), in provider
            tokens.
        token_ratio: provider tokens per token of our counter.
    """

    overhead_tokens: int = 0
    token_ratio: float = 1.0


@dataclass(frozen=True, slots=True)
class ReplayedRequest:
    """One request as the cache model bills it.

    Attributes:
        key: the call's id.
        at: when it was sent (seconds since the epoch).
        model: the model asked.
        input_tokens: all input tokens.
        usage: uncached input, cache read, cache writes 5m/1h, output (as recorded).
        usd: its price, or None when the model has none in the table.
        read_usd: the part of ``usd`` paid for cache reads.
        bust: it read much less than the previous request left cached.
    """

    key: str
    at: float | None
    model: str | None
    input_tokens: int
    usage: TokenUsage
    usd: float | None
    read_usd: float | None
    bust: bool


@dataclass(frozen=True)
class Replay(BillTotals):
    """A priced request sequence: each request and the totals (``usage``, ``usd``, ...)."""

    requests: tuple[ReplayedRequest, ...]
    calibration: Calibration

    @property
    def busts(self) -> int:
        """Requests whose cached prefix collapsed."""
        return sum(r.bust for r in self.requests)


def build_requests(source: Source, options: BuildOptions | None = None) -> RequestSequence:
    """(a) The requests a Claude Code session or Codex rollout records, as data.

    Raises:
        TranscriptError: the file is neither a Claude Code session nor a Codex rollout.
    """
    return _requests_of(read_lines(source), options)


def _requests_of(lines: Lines, options: BuildOptions | None) -> RequestSequence:
    fmt = session_format(lines.records)
    if fmt is None:
        raise TranscriptError(
            lines.name,
            None,
            "not a Claude Code session or a Codex rollout, the files that record each call: nothing to replay",
        )
    if fmt == "codex":
        requests = codex_requests(lines.records, codex_calls(lines.records))
        return RequestSequence(lines.name, fmt, "automatic", tuple(requests))
    calls, _ = claude_code_calls(lines.records)
    built = claude_code_requests(lines.records, calls, options or BuildOptions())
    return RequestSequence(lines.name, fmt, "breakpoints", tuple(built))


class Sizer:
    """Provider tokens of blocks, the one sizing rule of the cache model's blocks.

    A hidden block is the calibrated overhead; a block of exact size is its ``tokens``;
    any other is our count of its text times the calibrated ratio. Each image a block
    holds adds :data:`~ctxcli.core.model.IMAGE_TOKENS`.

    Args:
        count: our token count of a text.
        calibration: hidden prompt tokens and token ratio (default: none, 1.0).
        remember: keep each key's count (a replay meets the same blocks request after
            request); off where ``count`` has its own bounded cache (the proxy, which
            runs for days).
    """

    def __init__(
        self,
        count: Callable[[str], int],
        calibration: Calibration | None = None,
        *,
        remember: bool = True,
    ) -> None:
        self.count = count
        self.calibration = calibration or Calibration()
        self.counts: dict[bytes, int] | None = {} if remember else None

    def ours(self, block: Block) -> int:
        """Our counter's tokens for a block's text (0 for hidden or exact blocks)."""
        if block.hidden or block.tokens is not None:
            return 0
        if self.counts is None:
            return self.count(block.text)
        n = self.counts.get(block.key)
        if n is None:
            n = self.counts[block.key] = self.count(block.text)
        return n

    def exact(self, block: Block) -> int:
        """The tokens of a block that are not counted: its exact size and its images."""
        return (0 if block.hidden else block.tokens or 0) + block.images * IMAGE_TOKENS

    def __call__(self, block: Block) -> int:
        """The block's size in provider tokens."""
        if block.hidden:
            return self.calibration.overhead_tokens + self.exact(block)
        ours = round(self.ours(block) * self.calibration.token_ratio)
        return ours + self.exact(block)


def fit_calibration(sequence: RequestSequence, counter: TokenCounter) -> Calibration:
    """Fit hidden prompt tokens and token ratio to the recorded input sizes (least squares).

    Each recorded request says how many input tokens it sent: ``overhead + ratio *
    ours + exact``, where ``ours`` is our count of its message text and ``exact`` the
    blocks of known size. Requests without a recorded usage are left out.
    """
    sizer = Sizer(counter.count)
    xs: list[float] = []
    ys: list[float] = []
    for request in sequence.requests:
        if request.recorded is None:
            continue
        exact = sum(sizer.exact(b) for b in request.blocks)
        xs.append(float(sum(sizer.ours(b) for b in request.blocks)))
        ys.append(float(request.recorded.input_total - exact))
    overhead, ratio = _line_fit(xs, ys)
    return Calibration(round(overhead), ratio)


def _line_fit(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """``y = a + b x`` by least squares, with ``a >= 0`` and ``b > 0`` (else ``b = 1``)."""
    n = len(xs)
    if n == 0:
        return 0.0, 1.0
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx if sxx else 0.0
    if b <= 0:
        b = 1.0
    a = my - b * mx
    if a < 0:
        # Through the origin: no hidden prompt.
        sx2 = sum(x * x for x in xs)
        b = sum(x * y for x, y in zip(xs, ys, strict=True)) / sx2 if sx2 else 1.0
        a = 0.0
    return a, b


def price_requests(
    sequence: RequestSequence,
    *,
    counter: TokenCounter,
    calibration: Calibration | None = None,
    prices: PriceTable | None = None,
    policy: CachePolicy | None = None,
    warm_client_prompt: bool = False,
) -> Replay:
    """(b) Send ``sequence`` through a fresh cache model and price every request.

    Args:
        sequence: the requests (recorded, or as a reducer would have sent them).
        counter: counts the text of blocks without an exact size.
        calibration: hidden prompt tokens and token ratio (default: none, 1.0).
        prices: the price table (default: :func:`load_price_table`).
        policy: the cache's rules (default: Anthropic's for ``breakpoints``
            sequences, OpenAI's for ``automatic`` ones).
        warm_client_prompt: the client's hidden prompt is in the cache when the
            session starts (written by the user's other sessions).
    """
    table = prices if prices is not None else load_price_table()
    automatic = sequence.caching == "automatic"
    cache = PromptCache(policy or (CachePolicy.openai() if automatic else CachePolicy.anthropic()))
    sizer = Sizer(counter.count, calibration)
    out: list[ReplayedRequest] = []
    for n, request in enumerate(sequence.requests):
        if n == 0 and warm_client_prompt:
            hidden = _cache_blocks(request, sizer)[:1]  # the hidden prompt comes first
            cache.send(hidden, request.at)
        out.append(price_request(cache, request, sizer, table))
    return Replay(tuple(out), sizer.calibration)


def price_request(
    cache: PromptCache, request: Request, size: Callable[[Block], int], table: PriceTable
) -> ReplayedRequest:
    """Send one request through ``cache`` (it learns what it wrote) and price it.

    The step of :func:`price_requests`, and of the proxy's meter on each request it forwards.

    Args:
        cache: the prompt cache the request meets.
        request: its blocks and breakpoints; ``at`` its time, ``model`` its prices.
        size: provider tokens of a block (see :class:`Sizer`).
        table: the price table.
    """
    blocks = _cache_blocks(request, size)
    if request.post_turn_at is not None and request.messages and request.breakpoints:
        # The client's unlogged request after the turn: the conversation without its
        # last message, marked as the client marks it (system prompt, last block).
        last = request.messages[-1]
        n = len(content_items(last.get("content") if isinstance(last, dict) else None))
        if 1 < len(blocks) - n:
            ttl = request.breakpoints[-1][1]
            ghost = [
                *blocks[: len(blocks) - n - 1],
                replace(blocks[len(blocks) - n - 1], breakpoint=ttl),
            ]
            cache.send(ghost, request.post_turn_at)
    outcome = cache.send(blocks, request.at)
    return _priced(request, outcome, table)


def _cache_blocks(request: Request, size: Callable[[Block], int]) -> list[CacheBlock]:
    marks = dict(request.breakpoints)
    return [CacheBlock(b.key, size(b), marks.get(i)) for i, b in enumerate(request.blocks)]


def _priced(request: Request, outcome: CacheOutcome, table: PriceTable) -> ReplayedRequest:
    usage = TokenUsage(
        input=outcome.uncached,
        cache_read=outcome.cache_read,
        cache_write_5m=outcome.cache_write_5m,
        cache_write_1h=outcome.cache_write_1h,
        output=request.output_tokens,
    )
    price = table.lookup(request.model)
    return ReplayedRequest(
        key=request.key,
        at=request.at,
        model=request.model,
        input_tokens=outcome.input_tokens,
        usage=usage,
        usd=price.usd(usage) if price is not None else None,
        read_usd=price.read_usd(usage) if price is not None else None,
        bust=outcome.bust,
    )


@dataclass(frozen=True)
class SessionReplay:
    """A session replayed as it ran, next to its recorded bill."""

    recorded: RecordedCost
    sequence: RequestSequence
    replay: Replay

    @property
    def recorded_usd(self) -> float:
        """The recorded bill."""
        return self.recorded.usd

    @property
    def replayed_usd(self) -> float:
        """The bill of the replay."""
        return self.replay.usd

    @property
    def error(self) -> float:
        """Relative error of the replayed bill (0.05 = 5% too high)."""
        return self.replayed_usd / self.recorded_usd - 1 if self.recorded_usd else 0.0

    @property
    def recorded_read_share(self) -> float:
        """Share of the recorded bill paid for cache reads."""
        return self.recorded.read_usd / self.recorded_usd if self.recorded_usd else 0.0

    @property
    def replayed_read_share(self) -> float:
        """Share of the replayed bill paid for cache reads."""
        return self.replay.read_usd / self.replayed_usd if self.replayed_usd else 0.0

    @property
    def read_share_error(self) -> float:
        """Relative error of the replayed cache-read share."""
        recorded = self.recorded_read_share
        return self.replayed_read_share / recorded - 1 if recorded else 0.0


def replay_session(
    source: Source,
    *,
    counter: TokenCounter | None = None,
    prices: PriceTable | None = None,
    options: BuildOptions | None = None,
    policy: CachePolicy | None = None,
    warm_client_prompt: bool = False,
) -> SessionReplay:
    """Rebuild a session's requests, fit its two constants, replay and price it.

    ``counter`` defaults to the offline ``cl100k`` counter for Claude Code sessions
    and ``o200k`` for Codex rollouts.
    """
    lines = read_lines(source)
    table = prices if prices is not None else load_price_table()
    recorded = recorded_from_lines(lines, prices=table)
    sequence = _requests_of(lines, options)
    if counter is None:
        counter = get_counter("o200k" if sequence.format == "codex" else "cl100k")
    calibration = fit_calibration(sequence, counter)
    replay = price_requests(
        sequence,
        counter=counter,
        calibration=calibration,
        prices=table,
        policy=policy,
        warm_client_prompt=warm_client_prompt,
    )
    return SessionReplay(recorded, sequence, replay)
