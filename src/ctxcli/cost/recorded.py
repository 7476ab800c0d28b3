"""The recorded bill: what a session cost, from the usage its file holds (no replay).

Example:
    >>> bill = recorded_cost("session.jsonl")  # doctest: +SKIP
    >>> round(bill.usd, 2), len(bill.requests)  # doctest: +SKIP
    (9.53, 139)
"""

from __future__ import annotations

from dataclasses import dataclass

from ctxcli.core.errors import TranscriptError
from ctxcli.cost._calls import Call, Diagnosis, claude_code_calls, codex_calls
from ctxcli.cost._jsonl import Lines, SessionFormat, Source, read_lines, session_format
from ctxcli.cost.prices import BillTotals, PriceTable, TokenUsage, load_price_table

__all__ = ["RecordedCost", "RecordedRequest", "recorded_cost", "recorded_from_lines"]


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One API call as the session file records it, priced.

    Attributes:
        key: the response's ``message.id`` (Claude Code) or ``call-<n>`` (Codex).
        line: line of its first record in the file.
        at: timestamp, seconds since the epoch (None if the record has none).
        model: the model that answered.
        usage: tokens as billed: uncached input, cache read, cache writes, output.
        usd: its price, or None when the model is not in the price table.
        sidechain: a subagent's call logged in its parent's file.
        diagnosis: the provider's cache diagnostics for it, if recorded (see
            :data:`ctxcli.cost._calls.Diagnosis`).
    """

    key: str
    line: int
    at: float | None
    model: str | None
    usage: TokenUsage
    usd: float | None
    read_usd: float | None
    sidechain: bool = False
    diagnosis: Diagnosis | None = None


@dataclass(frozen=True, slots=True)
class RecordedCost(BillTotals):
    """A session's recorded bill: each API call once, priced, and the totals.

    A session's recorded bill: each API call once, priced, and the totals
    (``usage``, ``usd``, ``read_usd``).

    Attributes:
        name: the file (or ``<lines>``).
        format: ``claude_code`` or ``codex``.
        requests: the calls in file order.
        malformed_lines: lines that were not JSON objects (skipped).
        skipped_records: assistant records that are no API call (API error notes,
            ``<synthetic>`` messages).
    """

    name: str
    format: SessionFormat
    requests: tuple[RecordedRequest, ...]
    malformed_lines: int = 0
    skipped_records: int = 0

    @property
    def unpriced_models(self) -> tuple[str, ...]:
        """Models of calls left out of :attr:`usd` (not in the price table)."""
        return tuple(sorted({r.model or "?" for r in self.requests if r.usd is None}))


def recorded_cost(source: Source, *, prices: PriceTable | None = None) -> RecordedCost:
    """The recorded bill of a Claude Code session or Codex rollout.

    Args:
        source: a path, or an iterable of the file's lines.
        prices: the price table (default: :func:`load_price_table`, which reads
            ``$CTX_PRICES``).

    Raises:
        TranscriptError: the file is neither a Claude Code session nor a Codex rollout.
        ConfigError: ``$CTX_PRICES`` names an invalid price file.
    """
    return recorded_from_lines(read_lines(source), prices=prices)


def recorded_from_lines(lines: Lines, *, prices: PriceTable | None = None) -> RecordedCost:
    """:func:`recorded_cost` of records already read (see ``ctxcli.cost._jsonl``)."""
    table = prices if prices is not None else load_price_table()
    fmt = session_format(lines.records)
    if fmt is None:
        raise TranscriptError(
            lines.name,
            None,
            "not a Claude Code session or a Codex rollout, the files that record what each call cost: nothing to price",
        )
    skipped = 0
    if fmt == "codex":
        calls = codex_calls(lines.records)
    else:
        calls, skipped = claude_code_calls(lines.records)
    requests = tuple(_priced(c, table) for c in calls)
    return RecordedCost(lines.name, fmt, requests, lines.malformed, skipped)


def _priced(call: Call, table: PriceTable) -> RecordedRequest:
    price = table.lookup(call.model)
    return RecordedRequest(
        key=call.key,
        line=call.line,
        at=call.at,
        model=call.model,
        usage=call.usage,
        usd=price.usd(call.usage) if price is not None else None,
        read_usd=price.read_usd(call.usage) if price is not None else None,
        sidechain=call.sidechain,
        diagnosis=call.diagnosis,
    )
