"""A session's bill four ways: as recorded, as replayed, with ctx live, reduced and resumed.

:func:`session_cost` is what ``ctx cost`` calls: it replays the session through the
cache model (:func:`ctxcli.cost.replay.replay_session`, which fits the two constants),
then prices, with the same model and constants, the requests each chain would have
sent live (:func:`ctxcli.cost.counterfactual.live_requests`) and the requests after a
reduce-in-place and resume (:func:`ctxcli.cost.counterfactual.resumed_requests`).

Example:
    >>> cost = session_cost("session.jsonl")  # doctest: +SKIP
    >>> f"{cost.recorded_usd:.2f} {cost.replayed_usd:.2f} {cost.with_ctx_usd:.2f}"  # doctest: +SKIP
    '9.53 8.99 5.81'
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ctxcli.cost._jsonl import Source
from ctxcli.cost.alternatives import Compaction, alternative_requests
from ctxcli.cost.anchor import (
    Anchoring,
    RequestCheck,
    anchored_usd,
    check_requests,
    recorded_for,
)
from ctxcli.cost.counterfactual import (
    RESUME_PRESETS,
    Chain,
    LiveOptions,
    default_resume_at,
    live_requests,
    resumed_requests,
)
from ctxcli.cost.horizon import Horizon, horizon_summary, payback_horizons
from ctxcli.cost.prices import PriceTable, TokenUsage, load_price_table
from ctxcli.cost.recorded import RecordedRequest
from ctxcli.cost.replay import (
    Replay,
    ReplayedRequest,
    SessionReplay,
    Sizer,
    price_requests,
    replay_session,
)
from ctxcli.cost.sequence import BuildOptions, RequestSequence
from ctxcli.cost.why import Why, WriteCause, attribute_writes
from ctxcli.services.tokens.by_name import get_counter
from ctxcli.services.tokens.ledger import TokenCounter

CONTEXT_WINDOW = {"claude_code": 200_000, "codex": 272_000}
"""The context window the client compacts against (Claude Code's Sonnet/Opus 4.x, and
gpt-5-codex's input window)."""

__all__ = ["ChainCost", "CostOptions", "RequestCost", "SessionCost", "session_cost"]


@dataclass(frozen=True)
class CostOptions:
    """What :func:`session_cost` prices, and how.

    Attributes:
        chains: the chains to run live (default: ctx's live default chain); the first
            is the one reported as ``with_ctx``.
        resume: the chain of the reduce-and-resume scenario: ``"auto"`` the format's
            resume preset (``claude-code-resume``, ``codex-resume``), None none.
        resume_at: the request the resumed client sends first (default: the one after
            the session's longest pause).
        live: how the live reducer runs (its prefix policy, breakpoints).
        prices: the price table (default: the built-in one, or ``$CTX_PRICES``).
        build: how the recorded requests are rebuilt from the file.
        counter: our token counter (default: ``cl100k``, ``o200k`` for Codex).
        alternatives: the peers' strategies to price beside ctx (names in
            :data:`~ctxcli.cost.alternatives.ALTERNATIVES`).
    """

    chains: tuple[Chain, ...] = ()
    resume: Chain | Literal["auto"] | None = "auto"
    resume_at: int | None = None
    live: LiveOptions = field(default_factory=LiveOptions)
    prices: PriceTable | None = None
    build: BuildOptions | None = None
    counter: TokenCounter | None = None
    alternatives: tuple[str, ...] = ()


@dataclass(frozen=True)
class ChainCost:
    """The session priced with one chain in the loop.

    Attributes:
        name: the chain's name (a preset, or a config file).
        mode: ``live`` (ctx proxy / Reducer on every call) or ``resume`` (the file
            reduced once, before request ``resume_at``, then resumed).
        replay: the priced requests.
        changed: per request, the reducer changed messages it had sent (live).
        held_back: per request, the prefix policy held back a change (live).
        resume_at: the first request of the resumed client (resume).
    """

    name: str
    mode: Literal["live", "resume", "alternative"]
    replay: Replay
    changed: tuple[bool, ...] = ()
    held_back: tuple[bool, ...] = ()
    resume_at: int | None = None
    anchored: float | None = None
    band: float = 0.0
    horizons: tuple[Horizon, ...] = ()

    @property
    def usd(self) -> float:
        """The bill through the cache model alone (compare with ``replayed_usd``)."""
        return self.replay.usd

    @property
    def anchored_usd(self) -> float:
        """Return the bill anchored on the records.

        Each recorded request's recorded price plus what the model says this chain changes
        (:func:`~ctxcli.cost.anchor.anchored_usd`).
        """
        return self.anchored if self.anchored is not None else self.usd

    @property
    def busts(self) -> int:
        """Requests whose cached prefix collapsed."""
        return self.replay.busts

    def alternative_dict(self) -> dict[str, Any]:
        """Return the JSON shape of an alternative.

        Its bill (anchored on the records), its band, the requests it changed and the
        cache it wrote.
        """
        return {
            "name": self.name,
            "usd": round(self.anchored_usd, 6),
            "band_usd": round(self.band, 6),
            "model_usd": round(self.usd, 6),
            "requests_changed": sum(self.changed),
            "cache_writes": self.replay.usage.cache_write,
        }

    def to_dict(self) -> dict[str, Any]:
        """The stable JSON shape of this bill's totals."""
        return {
            "name": self.name,
            "mode": self.mode,
            "usd": round(self.usd, 6),
            "anchored_usd": round(self.anchored_usd, 6),
            "band_usd": round(self.band, 6),
            "horizons": horizon_summary(self.horizons),
            "busts": self.busts,
            "changes": sum(self.changed),
            "held_back": sum(self.held_back),
            "resume_at": self.resume_at,
            "usage": usage_dict(self.replay.usage),
        }


@dataclass(frozen=True)
class RequestCost:
    """One request priced every way (``with_ctx``: the first chain's)."""

    index: int
    recorded: RecordedRequest | None
    replayed: ReplayedRequest
    with_ctx: ReplayedRequest
    changed: bool
    held_back: bool
    why: tuple[WriteCause, ...] = ()

    def check(self) -> RequestCheck:
        """The request beside its record (call only when it has one)."""
        assert self.recorded is not None
        rec = self.recorded
        return RequestCheck(rec.key, rec.usage, rec.usd, self.replayed.usage, self.replayed.usd)

    def to_dict(self) -> dict[str, Any]:
        """The stable JSON shape of one request."""
        recorded = self.recorded
        return {
            "n": self.index,
            "key": self.replayed.key,
            "at": self.replayed.at,
            "model": self.replayed.model,
            "recorded_usd": _usd(recorded.usd if recorded is not None else None),
            "replayed_usd": _usd(self.replayed.usd),
            "with_ctx_usd": _usd(self.with_ctx.usd),
            "recorded": usage_dict(recorded.usage) if recorded is not None else None,
            "replayed": {**usage_dict(self.replayed.usage), "bust": self.replayed.bust},
            "errors": self.check().to_dict() if recorded is not None else None,
            "why": [c.to_dict() for c in self.why],
            "with_ctx": {
                **usage_dict(self.with_ctx.usage),
                "bust": self.with_ctx.bust,
                "changed": self.changed,
                "held_back": self.held_back,
            },
        }


@dataclass(frozen=True)
class SessionCost:
    """A session's bill as recorded, as replayed, with each chain and after a resume."""

    session: SessionReplay
    chains: tuple[ChainCost, ...]
    resume: ChainCost | None = None
    prices: PriceTable | None = None
    alternatives: tuple[ChainCost, ...] = ()

    @property
    def name(self) -> str:
        """The session file."""
        return self.session.sequence.name

    @property
    def recorded_usd(self) -> float:
        """The bill the file records."""
        return self.session.recorded_usd

    @property
    def replayed_usd(self) -> float:
        """The bill of the session replayed as it ran."""
        return self.session.replayed_usd

    @property
    def with_ctx_usd(self) -> float:
        """The bill with the first chain live, through the cache model alone."""
        return self.chains[0].usd

    def why(self) -> Why:
        """Return the session's cache writes as run, by cause.

        Each recorded request's own usage and diagnostics, the replay's where the file
        records none.
        """
        s = self.session
        records = recorded_for(s.recorded.requests, s.replay)
        usages = [
            rec.usage if rec is not None else r.usage
            for rec, r in zip(records, s.replay.requests, strict=True)
        ]
        diagnoses = [rec.diagnosis if rec is not None else None for rec in records]
        return attribute_writes(s.sequence, usages, diagnoses, prices=self.prices)

    @property
    def anchoring(self) -> Anchoring:
        """Each recorded request beside its replay (:func:`~ctxcli.cost.anchor.check_requests`)."""
        return check_requests(self.session.recorded.requests, self.session.replay)

    def requests(self) -> list[RequestCost]:
        """Each request priced every way, in order (the timeline ``ctx report`` draws)."""
        recorded = self.session.recorded.requests
        live = self.chains[0]
        why = self.why().requests
        out = []
        for n, replayed in enumerate(self.session.replay.requests):
            rec = recorded[n] if n < len(recorded) and recorded[n].key == replayed.key else None
            out.append(
                RequestCost(
                    n,
                    rec,
                    replayed,
                    live.replay.requests[n],
                    live.changed[n] if live.changed else False,
                    live.held_back[n] if live.held_back else False,
                    why[n],
                )
            )
        return out

    def to_dict(self) -> dict[str, Any]:
        """The stable JSON shape ``ctx cost --json`` prints."""
        s = self.session
        calibration = s.replay.calibration
        return {
            "session": self.name,
            "format": s.sequence.format,
            "calls": len(s.replay.requests),
            "recorded_usd": round(self.recorded_usd, 6),
            "replayed_usd": round(self.replayed_usd, 6),
            "with_ctx_usd": round(self.with_ctx_usd, 6),
            "with_ctx_anchored_usd": round(self.chains[0].anchored_usd, 6),
            "with_ctx_band_usd": round(self.chains[0].band, 6),
            "chain": self.chains[0].name,
            "replay_error": round(s.error, 6),
            "per_request": self.anchoring.to_dict(),
            "why": self.why().to_dict(),
            "calibration": {
                "overhead_tokens": calibration.overhead_tokens,
                "token_ratio": round(calibration.token_ratio, 6),
            },
            "recorded": {"usage": usage_dict(s.recorded.usage)},
            "replayed": {"usage": usage_dict(s.replay.usage), "busts": s.replay.busts},
            "chains": [c.to_dict() for c in self.chains],
            "alternatives": [a.alternative_dict() for a in self.alternatives],
            "resume": self.resume.to_dict() if self.resume is not None else None,
            "requests": [r.to_dict() for r in self.requests()],
        }


def session_cost(source: Source, options: CostOptions | None = None) -> SessionCost:
    """Price a Claude Code session or Codex rollout as recorded, replayed and with ctx.

    Raises:
        TranscriptError: the file is neither a Claude Code session nor a Codex rollout.
        ConfigError: a chain or the price table is invalid.
    """
    options = options or CostOptions()
    table = options.prices if options.prices is not None else load_price_table()
    session = replay_session(source, counter=options.counter, prices=table, options=options.build)
    sequence = session.sequence
    counter = options.counter or get_counter("o200k" if sequence.format == "codex" else "cl100k")

    def priced(requests: RequestSequence) -> Replay:
        calibration = session.replay.calibration
        return price_requests(requests, counter=counter, calibration=calibration, prices=table)

    records = recorded_for(session.recorded.requests, session.replay)
    base = session.replay.requests
    as_run = anchored_usd(records, base, base)

    def anchored(cost: ChainCost) -> ChainCost:
        usd = anchored_usd(records, base, cost.replay.requests)
        # The model prices only what the chain changes: its error bounds that part.
        horizons = payback_horizons(base, cost.replay.requests, cost.changed, table)
        band = abs(session.error) * abs(usd - as_run)
        return replace(cost, anchored=usd, band=band, horizons=tuple(horizons))

    chains = []
    for chain in options.chains or (Chain.default(),):
        run = live_requests(sequence, chain, options.live)
        replay = priced(run.sequence)
        chains.append(anchored(ChainCost(chain.name, "live", replay, run.changed, run.held_back)))
    resume = None
    at = options.resume_at if options.resume_at is not None else default_resume_at(sequence)
    if options.resume is not None and at is not None:
        chosen = options.resume
        chain = Chain.preset(RESUME_PRESETS[sequence.format]) if chosen == "auto" else chosen
        replay = priced(resumed_requests(sequence, chain, at, options.live.offload_dir))
        resume = anchored(ChainCost(chain.name, "resume", replay, resume_at=at))
    alternatives = []
    measure = Sizer(counter.count, session.replay.calibration)
    for name in options.alternatives:
        settings = {"compaction": Compaction(window=CONTEXT_WINDOW[sequence.format])}
        alt = alternative_requests(name, sequence, measure, **settings)
        cost = ChainCost(name, "alternative", priced(alt.sequence), alt.changed)
        alternatives.append(anchored(cost))
    return SessionCost(session, tuple(chains), resume, table, tuple(alternatives))


def usage_dict(usage: TokenUsage) -> dict[str, int]:
    """Tokens by kind, as JSON."""
    return {
        "input_tokens": usage.input_total,
        "uncached": usage.input,
        "cache_read": usage.cache_read,
        "cache_write_5m": usage.cache_write_5m,
        "cache_write_1h": usage.cache_write_1h,
        "output": usage.output,
    }


def _usd(value: float | None) -> float | None:
    return round(value, 6) if value is not None else None
