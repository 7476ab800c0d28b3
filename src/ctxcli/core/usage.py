"""What usage trackers read from a session file, kept when a record itself goes.

ccusage and similar trackers add up ``message.usage`` of a Claude Code session's
assistant records for a user's spend history, one usage per API response
(:func:`response_key`): the first record of each response they meet. A record the
client never sends (before a compaction boundary, a thinking-only record) may leave
the file, but its first-of-a-response usage stays as a *stub*: an assistant record
with no content and no place in the uuid tree (no ``uuid``/``parentUuid``), holding
only the fields trackers read. The client skips it on resume; ``ctx restore`` puts
the full record back (the format keeps the original in the restore pack).
"""

from __future__ import annotations

from typing import Any

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
    """The API response an assistant record belongs to, the one key for counting each once.

    Claude Code writes one response over several records (one content block each) that
    share ``message.id`` and ``requestId``: the key is the pair. A record without a
    ``requestId`` (older clients, hand-made files) is keyed by its message id alone,
    ``(id, "")``: the id names the response (a tracker that requires both ids counts such a
    response once per record, an overcount). None when the record has no
    message id: it is a response of its own. ``ctx cost``, ``ctx sessions``' spent column,
    the usage stubs and ``update_usage`` all count by this key.
    """
    message = data.get("message")
    mid = message.get("id") if isinstance(message, dict) else None
    rid = data.get("requestId")
    if not isinstance(mid, str):
        return None
    return mid, rid if isinstance(rid, str) else ""


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
