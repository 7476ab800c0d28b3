"""Which API response a record is, and what usage trackers read of it, kept when it goes.

Claude Code writes one API response over several assistant records; :func:`response_key`
says which response a record belongs to, the one key ctx counts each response once by
(``ctx cost``, the spent column of ``ctx sessions``). ccusage and similar trackers add up
``message.usage`` of those records for a user's spend history, once per response when a
record carries both of the ids they dedupe by (:func:`tracker_key`), and every time when it
does not. A record the client never sends (before a compaction boundary, a thinking-only
record) may leave the file, but the usage a tracker counts stays as a *stub*: an assistant
record with no content and no place in the uuid tree (no ``uuid``/``parentUuid``), holding
only the fields trackers read. The client skips it on resume; ``ctx restore`` puts the full
record back (the format keeps the original in the restore pack).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ALWAYS",
    "NOT_SPEND",
    "STUB_FIELDS",
    "STUB_MESSAGE_FIELDS",
    "is_usage_stub",
    "response_key",
    "usage_of",
    "usage_stub",
]

STUB_FIELDS = ("type", "sessionId", "timestamp", "requestId", "costUSD", "isApiErrorMessage")
STUB_MESSAGE_FIELDS = ("id", "model", "usage")
NOT_SPEND = ("service_tier", "inference_geo")  # usage fields no price depends on
ALWAYS = ("input_tokens", "output_tokens")  # usage fields trackers require


def usage_of(data: Any) -> dict[str, Any] | None:
    """The ``message.usage`` of an assistant record, else None."""
    if not isinstance(data, dict) or data.get("type") != "assistant":
        return None
    message = data.get("message")
    usage = message.get("usage") if isinstance(message, dict) else None
    return usage if isinstance(usage, dict) else None


def response_key(data: dict[str, Any]) -> tuple[str, str] | None:
    """The API response an assistant record belongs to: the one key to count each once by.

    Claude Code writes one response over several records (one content block each) that
    share ``message.id`` and ``requestId``: the key is the pair. A record without a
    ``requestId`` (older clients, hand-made files) is keyed by its message id alone,
    ``(id, "")``: the id names the response. None when the record has no message id: it is
    a response of its own.
    """
    message = data.get("message")
    mid = message.get("id") if isinstance(message, dict) else None
    rid = data.get("requestId")
    if not isinstance(mid, str):
        return None
    return mid, rid if isinstance(rid, str) else ""


def tracker_key(data: dict[str, Any]) -> tuple[str, str] | None:
    """The key usage trackers count a record's usage once by, or None: counted every time.

    Trackers dedupe by ``message.id`` and ``requestId`` together (ccusage); a record that
    lacks either is counted each time they meet it, so for such a record there is no key:
    its :func:`response_key` without the ``requestId`` it does not have. What a reduction
    keeps for trackers follows this key, so their reports stay the same.
    """
    key = response_key(data)
    return key if key is not None and key[1] else None


def is_usage_stub(data: Any) -> bool:
    """True for a record :func:`usage_stub` made: an assistant record without content."""
    return usage_of(data) is not None and "content" not in data["message"]


def usage_stub(data: dict[str, Any]) -> dict[str, Any]:
    """The stub of assistant record ``data``: what trackers read, nothing else."""
    message = data["message"]
    stub = {f: data[f] for f in STUB_FIELDS if f in data}
    stub["message"] = {f: message[f] for f in STUB_MESSAGE_FIELDS if f in message}
    usage = {k: v for k, v in message["usage"].items() if k not in NOT_SPEND}
    kept = {k: v for k, v in _nonzero(usage).items() if k not in ALWAYS}
    stub["message"]["usage"] = kept | {k: usage[k] for k in ALWAYS if k in usage}
    return stub


def _nonzero(usage: dict[str, Any]) -> dict[str, Any]:
    """``usage`` without its zero counts and empty parts: a tracker reads them as 0."""
    out: dict[str, Any] = {}
    for key, value in usage.items():
        if isinstance(value, dict):
            value = _nonzero(value)
        if not isinstance(value, bool) and value in (0, [], {}, None):
            continue
        out[key] = value
    return out
