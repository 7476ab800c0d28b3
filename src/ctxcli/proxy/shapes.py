"""What the proxy needs to know about the three request shapes it speaks.

Anthropic Messages (``/v1/messages``), OpenAI Chat Completions (``/v1/chat/completions``) and
OpenAI Responses (``/v1/responses``): where the history is, which blocks carry a
``cache_control`` breakpoint and where the proxy puts them, and how a conversation is
recognised from one request to the next. How a request is cut into the blocks prompt
caching sees, for its price, is the cost instrument's rule (:mod:`ctxcli.cost.blocks`).
"""

from __future__ import annotations

import copy
import hashlib
from typing import Any, Literal

import orjson

from ctxcli.cost.blocks import without_cache_control

__all__ = [
    "Api",
    "MAX_BREAKPOINTS",
    "MAX_NESTING",
    "breakpoint_positions",
    "canonical",
    "conversation_key",
    "digest",
    "history_key",
    "mark_breakpoint",
    "nests_deeper",
    "place_breakpoints",
    "strip_cache_control",
]

Api = Literal["anthropic", "openai_chat", "openai_responses"]

MAX_BREAKPOINTS = 4
"""The most ``cache_control`` breakpoints the Anthropic API accepts in one request."""

_NO_BREAKPOINT_TYPES = frozenset({"thinking", "redacted_thinking"})

MAX_NESTING = 200
"""The deepest the parts of a request the proxy reads may nest (its JSON encoder stops at
254 levels); a deeper request is forwarded as it came."""

_READ_FIELDS = ("messages", "input", "system", "instructions", "tools")


def nests_deeper(body: dict[str, Any], limit: int = MAX_NESTING) -> bool:
    """True if the history, system prompt or tools of ``body`` nest over ``limit`` levels.

    Levels of lists and objects, walked level by level: no recursion, whatever the depth.
    """
    level = [body.get(name) for name in _READ_FIELDS]
    for _ in range(limit):
        level = [
            child
            for value in level
            if isinstance(value, dict | list)
            for child in (value.values() if isinstance(value, dict) else value)
        ]
        if not level:
            return False
    return any(isinstance(value, dict | list) for value in level)


def canonical(value: Any) -> bytes:
    """Stable bytes for a JSON value, ``cache_control`` left out (it moves between requests)."""
    return orjson.dumps(without_cache_control(value), option=orjson.OPT_SORT_KEYS)


def digest(value: Any) -> str:
    """A short hash of :func:`canonical` (what the proxy keeps instead of the text)."""
    return hashlib.sha256(canonical(value)).hexdigest()[:32]


def strip_cache_control(messages: list[Any]) -> list[Any]:
    """A deep copy of ``messages`` without any ``cache_control`` field."""
    return [without_cache_control(m) for m in messages]


def history_key(api: Api) -> str:
    """The body field holding the conversation."""
    return "input" if api == "openai_responses" else "messages"


def conversation_key(body: dict[str, Any], api: Api) -> str | None:
    """Recognise a conversation across requests: its system prompt and first message.

    None when the request has no history to key on.
    """
    history = body.get(history_key(api))
    if isinstance(history, str) or not history:
        return None
    system: Any = body.get("system") if api == "anthropic" else body.get("instructions")
    return digest([body.get("model", ""), system, history[0]])


def breakpoint_positions(messages: list[Any]) -> list[tuple[int, int]]:
    """``(message index counted from the end, block index)`` of every breakpoint.

    Counting from the end keeps the place meaningful when earlier messages were reduced.
    """
    found: list[tuple[int, int]] = []
    n = len(messages)
    for i, msg in enumerate(messages):
        content = msg.get("content") if isinstance(msg, dict) else None
        if isinstance(content, list):
            for j, part in enumerate(content):
                if isinstance(part, dict) and "cache_control" in part:
                    found.append((n - i, j))
    return found


def _fixed_breakpoints(body: dict[str, Any]) -> int:
    count = sum(1 for t in body.get("tools") or [] if isinstance(t, dict) and "cache_control" in t)
    system = body.get("system")
    if isinstance(system, list):
        count += sum(1 for s in system if isinstance(s, dict) and "cache_control" in s)
    return count


def place_breakpoints(
    original: list[Any], sent: list[Any], body: dict[str, Any]
) -> tuple[list[Any], int]:
    """Put the original request's message breakpoints on the reduced messages.

    ``sent`` has no ``cache_control``. Each breakpoint goes to the same message counted from
    the end (the recent messages are the ones a reducer leaves alone), on the same block
    or the last one there that can hold a breakpoint (never a thinking block, never an empty
    text). At most 4 breakpoints in all. Returns the messages and the breakpoints placed.
    """
    wanted = breakpoint_positions(original)
    out = copy.deepcopy(sent)
    room = MAX_BREAKPOINTS - _fixed_breakpoints(body)
    placed = 0
    for from_end, j in wanted:
        if placed >= room:
            break
        i = max(0, len(out) - from_end)
        for index in range(i, -1, -1):
            if index >= len(out):
                continue
            part = _breakpoint_block(out, index, j)
            if part is not None:
                if "cache_control" not in part:
                    part["cache_control"] = _find_control(original, from_end, j)
                    placed += 1
                break
    return out, placed


def _find_control(original: list[Any], from_end: int, j: int) -> Any:
    msg = original[len(original) - from_end]
    return msg["content"][j]["cache_control"]


def _breakpoint_block(messages: list[Any], index: int, j: int) -> dict[str, Any] | None:
    msg = messages[index]
    if not isinstance(msg, dict):
        return None
    content = msg.get("content")
    if isinstance(content, str):
        if not content:
            return None
        msg["content"] = content = [{"type": "text", "text": content}]
    if not isinstance(content, list) or not content:
        return None
    for k in range(min(j, len(content) - 1), -1, -1):
        part = content[k]
        if not isinstance(part, dict) or part.get("type") in _NO_BREAKPOINT_TYPES:
            continue
        if part.get("type") == "text" and not part.get("text"):
            continue
        return part
    return None


def mark_breakpoint(messages: list[Any], index: int, body: dict[str, Any]) -> bool:
    """Add a breakpoint on the last block of ``messages[index]`` that can hold one.

    Only when the request (``body``'s tools and system, and ``messages``) has fewer than
    four, the message has none yet and its content is a list of blocks (a string would
    become a block list, and change the bytes the provider caches). The breakpoint's
    ``cache_control`` is that of the next one in ``messages`` (so a 1-hour one never follows
    a 5-minute one), else ``{"type": "ephemeral"}``. Changes ``messages`` in place; returns
    whether a breakpoint was added.
    """
    marks = breakpoint_positions(messages)
    if not 0 <= index < len(messages) or _fixed_breakpoints(body) + len(marks) >= MAX_BREAKPOINTS:
        return False
    msg = messages[index]
    content = msg.get("content") if isinstance(msg, dict) else None
    if not isinstance(content, list) or any(
        isinstance(p, dict) and "cache_control" in p for p in content
    ):
        return False
    part = _breakpoint_block(messages, index, len(content) - 1)
    if part is None:
        return False
    n = len(messages)
    later = [(n - from_end, j) for from_end, j in marks if n - from_end > index]
    control: Any = {"type": "ephemeral"}
    if later:
        i, j = later[0]
        control = copy.deepcopy(messages[i]["content"][j]["cache_control"])
    part["cache_control"] = control
    return True
