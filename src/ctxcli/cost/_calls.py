"""The API calls a session file records: one per response, each counted once.

Claude Code writes one API response over several ``assistant`` records (one content
block each) that share ``message.id`` and ``requestId``; adding up every record's usage
counts a response several times (ccusage issue #389). A response is keyed by
:func:`ctxcli.core.usage.response_key`, the key every part of ctx counts responses by; a
record without a message id is a response of its own. The input and cache figures are
the same on all of them, while ``output_tokens`` is the streaming count when the record
was written (often 1 on all but the last), so a response's output is the largest seen.

Codex logs ``token_count`` events after each model call with the session's cumulative
``total_token_usage`` and the call's ``last_token_usage``, and logs the same totals again
at times; a call is a change of the cumulative total. A total that goes down is a new
process resuming the rollout: its counter restarted from zero.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ctxcli.core.usage import response_key
from ctxcli.cost._jsonl import count, seconds
from ctxcli.cost.prices import TokenUsage

# Assistant records that are no API response: the client's own error notes and messages.
SYNTHETIC_MODEL = "<synthetic>"
_CODEX_FIELDS = ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_output_tokens")


Diagnosis = tuple[str | None, int | None]
"""Why the provider says a request missed the cache: ``(cache_miss_reason.type or None,
cache_missed_input_tokens or None)``."""


@dataclass(frozen=True, slots=True)
class Call:
    """One billed API call: where the file records it and what it used.

    Attributes:
        key: ``message.id`` (Claude Code) or ``call-<n>`` (Codex).
        index: position of its first record in the parsed records.
        line: line of that record in the file.
        at: its timestamp, seconds since the epoch.
        model: the model that answered.
        usage: tokens as the provider billed them.
        reasoning_tokens: hidden reasoning among the output tokens (Codex).
        sidechain: a subagent's call (Claude Code ``isSidechain``).
        diagnosis: the provider's cache diagnostics, when the file records them
            (Claude Code ``message.diagnostics``): ``(reason, missed tokens)``, the
            reason None when the request matched the previous one's prefix.
    """

    key: str
    index: int
    line: int
    at: float | None
    model: str | None
    usage: TokenUsage
    reasoning_tokens: int = 0
    sidechain: bool = False
    diagnosis: Diagnosis | None = None


def diagnosis(message: dict[str, Any]) -> Diagnosis | None:
    """Return the cache diagnostics a Claude Code response records, or None.

    ``message.diagnostics``, from about 2.1.260: ``{"cache_miss_reason": {"type": ...,
    "cache_missed_input_tokens": ...} | null}``.
    """
    found = message.get("diagnostics")
    if not isinstance(found, dict):
        return None
    reason = found.get("cache_miss_reason")
    if not isinstance(reason, dict):
        return (None, None)
    kind = reason.get("type")
    missed = reason.get("cache_missed_input_tokens")
    return (
        kind if isinstance(kind, str) else None,
        count(missed) if isinstance(missed, int) else None,
    )


def claude_code_calls(records: Sequence[tuple[int, dict[str, Any]]]) -> tuple[list[Call], int]:
    """The responses of a Claude Code file, once each, and the assistant records skipped."""
    first: dict[tuple[str, str], int] = {}
    usages: dict[tuple[str, str], list[dict[str, Any]]] = {}
    diagnosed: dict[tuple[str, str], Diagnosis] = {}
    skipped = 0
    for i, (line, record) in enumerate(records):
        if record.get("type") != "assistant":
            continue
        message = record.get("message")
        usage = message.get("usage") if isinstance(message, dict) else None
        if not isinstance(message, dict) or not isinstance(usage, dict):
            continue
        if record.get("isApiErrorMessage") or message.get("model") == SYNTHETIC_MODEL:
            skipped += 1
            continue
        key = response_key(record) or (f"line:{line}", "")
        first.setdefault(key, i)
        usages.setdefault(key, []).append(usage)
        found = diagnosis(message)
        if found is not None:
            diagnosed.setdefault(key, found)
    calls = [
        replace(_claude_code_call(records, first[k], k[0], usages[k]), diagnosis=diagnosed.get(k))
        for k in first
    ]
    return calls, skipped


def _claude_code_call(
    records: Sequence[tuple[int, dict[str, Any]]], i: int, key: str, usages: list[dict[str, Any]]
) -> Call:
    line, record = records[i]
    message = record["message"]

    def top(name: str) -> int:
        return max(count(u.get(name)) for u in usages)

    written = top("cache_creation_input_tokens")
    split = [u["cache_creation"] for u in usages if isinstance(u.get("cache_creation"), dict)]
    hour = max((count(s.get("ephemeral_1h_input_tokens")) for s in split), default=0)
    hour = min(hour, written)
    usage = TokenUsage(
        input=top("input_tokens"),
        cache_read=top("cache_read_input_tokens"),
        cache_write_5m=written - hour,
        cache_write_1h=hour,
        output=top("output_tokens"),
    )
    model = message.get("model")
    return Call(
        key=key,
        index=i,
        line=line,
        at=seconds(record.get("timestamp")),
        model=model if isinstance(model, str) else None,
        usage=usage,
        sidechain=bool(record.get("isSidechain")),
    )


def codex_calls(records: Sequence[tuple[int, dict[str, Any]]]) -> list[Call]:
    """The model calls of a Codex rollout, once each, from its cumulative token counts."""
    calls: list[Call] = []
    model: str | None = None
    previous: tuple[int, ...] | None = None
    for i, (line, record) in enumerate(records):
        payload = record.get("payload")
        if not isinstance(payload, dict):
            continue
        if record.get("type") in ("turn_context", "session_meta"):
            named = payload.get("model")
            model = named if isinstance(named, str) and named else model
            continue
        if record.get("type") != "event_msg" or payload.get("type") != "token_count":
            continue
        info = payload.get("info")
        total = _codex_figures(info.get("total_token_usage") if isinstance(info, dict) else None)
        if total is None or total == previous:
            continue  # no usage yet, or the same totals logged again
        last = _codex_figures(info.get("last_token_usage")) if isinstance(info, dict) else None
        figures = _codex_delta(total, previous, last)
        previous = total
        calls.append(_codex_call(f"call-{len(calls) + 1}", i, line, record, model, figures))
    return calls


def _codex_figures(usage: Any) -> tuple[int, ...] | None:
    if not isinstance(usage, dict):
        return None
    return tuple(count(usage.get(k)) for k in _CODEX_FIELDS)


def _codex_delta(
    total: tuple[int, ...], previous: tuple[int, ...] | None, last: tuple[int, ...] | None
) -> tuple[int, ...]:
    """One call's figures: the change of the cumulative total (or all of it after a reset)."""
    if previous is None or any(t < p for t, p in zip(total, previous, strict=True)):
        # First call, or a new process whose counter restarted: its own last call if
        # logged, else everything it counted.
        return (
            last
            if last is not None and all(x <= t for x, t in zip(last, total, strict=True))
            else total
        )
    return tuple(t - p for t, p in zip(total, previous, strict=True))


def _codex_call(
    key: str, i: int, line: int, record: dict[str, Any], model: str | None, f: tuple[int, ...]
) -> Call:
    inputs, cached, output, reasoning = f
    cached = min(cached, inputs)
    return Call(
        key=key,
        index=i,
        line=line,
        at=seconds(record.get("timestamp")),
        model=model,
        usage=TokenUsage(input=inputs - cached, cache_read=cached, output=output),
        reasoning_tokens=reasoning,
    )
