"""Where a transcript may be cut, and the readable text of what a cut removes.

Stages that drop whole messages (``keep_last``, ``summarize``) keep the leading
system messages and a tail, and drop what lies between. Dropping is only safe where
no tool call is separated from its result: LangChain's ``trim_messages`` keeps the
last N messages and leaves an orphaned result at the start (langchain #33245), and
its summarizer cuts between a call and its result so the provider answers 400
(langchain #38352, #34282, deepagents #270). Here a cut is chosen from the links
the :class:`~ctxcli.core.model.Conversation` computes, so parallel calls, results spread
over several messages, interleaved Claude Code records and reused ids all count.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Mapping

from ctxcli.core.model import Conversation, Kind, Message

__all__ = [
    "SYSTEM_ROLES",
    "is_user_turn",
    "latest_safe_cut",
    "leading_system",
    "range_key",
    "render_message",
    "render_messages",
    "safe_cuts",
]

SYSTEM_ROLES = frozenset({"system"})


def leading_system(conv: Conversation) -> int:
    """Number of system messages at the start (they always stay)."""
    count = 0
    for msg in conv.messages:
        if msg.role not in SYSTEM_ROLES:
            break
        count += 1
    return count


def _spans(conv: Conversation) -> Iterable[list[int]]:
    """Message indices that must be kept or dropped together.

    One span per tool call (the call and every result linked to it) and one per
    ``group`` (Claude Code splits one API response over several records; keeping
    half of a response would send the API a turn it never produced).
    """
    groups: dict[str, list[int]] = {}
    for mi, msg in enumerate(conv.messages):
        if msg.group is not None:
            groups.setdefault(msg.group, []).append(mi)
        for bi, block in enumerate(msg.blocks):
            if block.kind is Kind.TOOL_CALL:
                results = conv.results_of((mi, bi))
                if results:
                    yield [mi, *(r[0] for r in results)]
    yield from (members for members in groups.values() if len(members) > 1)


def safe_cuts(conv: Conversation, start: int) -> list[bool]:
    """For each cut ``c`` in ``[0, len(conv)]``: may messages ``[start, c)`` be dropped?

    Dropping ``[start, c)`` keeps ``[0, start)`` and ``[c, len)``. It is safe when every
    span (a call with its results, a group) lies wholly on one side: all kept or all
    dropped. Positions before ``start`` are never safe; ``c == start`` (drop nothing)
    always is.
    """
    n = len(conv.messages)
    # forbid[c] > 0 means cut c splits some span; built as a difference array.
    diff = [0] * (n + 2)
    for members in _spans(conv):
        lo, hi = min(members), max(members)
        if hi < start:
            continue
        dropped_side = [m for m in members if m >= start]
        first = min(dropped_side)
        if lo < start:
            # Part of the span is in the kept prefix: none of it may be dropped.
            diff[first + 1] += 1
            diff[n + 1] -= 1
        else:
            # Cutting after the first member and at or before the last splits it.
            diff[lo + 1] += 1
            diff[hi + 1] -= 1
    safe = [False] * (n + 1)
    level = 0
    for c in range(n + 1):
        level += diff[c]
        safe[c] = c >= start and (c == start or level == 0)
    return safe


def latest_safe_cut(
    conv: Conversation,
    start: int,
    target: int,
    accept: Callable[[int], bool] | None = None,
) -> int:
    """The largest safe cut ``c`` with ``start <= c <= target`` (``start`` if none).

    ``accept`` adds a condition on the first kept message (e.g. "is a user turn").
    Moving the cut earlier keeps more messages, never fewer, so the result still
    honours what the caller asked to keep.
    """
    target = max(start, min(target, len(conv.messages)))
    safe = safe_cuts(conv, start)
    for c in range(target, start, -1):
        if safe[c] and (accept is None or accept(c)):
            return c
    return start


def is_user_turn(msg: Message) -> bool:
    """A user message that is not only tool results (a turn a provider may start on)."""
    return msg.role == "user" and any(b.kind is not Kind.TOOL_RESULT for b in msg.blocks)


def range_key(conv: Conversation, first: int, last: int) -> str:
    """An offload file name for messages ``first..last``: their record numbers.

    Messages a stage created have no record; their position stands in.
    """

    def ident(i: int) -> str:
        key = conv.messages[i].key
        return f"r{key}" if key is not None else f"m{i}"

    return f"{ident(first)}-{ident(last)}"


def render_message(
    index: int,
    msg: Message,
    tool_name: Callable[[int, int], str | None],
    only: Container[int] | None = None,
) -> str:
    """One message as plain text: a header line, then each block (or the blocks in ``only``)."""
    lines = [f"--- message {index} ({msg.role}) ---"]
    for bi, block in enumerate(msg.blocks):
        if only is not None and bi not in only:
            continue
        if block.kind is Kind.TEXT:
            lines.append(block.text)
        elif block.kind is Kind.THINKING:
            lines.append(f"[thinking]\n{block.text}")
        elif block.kind is Kind.TOOL_CALL:
            lines.append(f"[tool call {block.name or '?'} id={block.call_id}]\n{block.text}")
        elif block.kind is Kind.TOOL_RESULT:
            name = tool_name(index, bi) or "?"
            status = ", error" if block.is_error else ""
            lines.append(f"[tool result {name} id={block.call_id}{status}]\n{block.text}")
        else:
            lines.append(f"[{block.kind.value} block]")
    return "\n".join(lines)


def render_messages(
    conv: Conversation, indices: Iterable[int], only: Mapping[int, Container[int]] | None = None
) -> str:
    """The readable text of some messages of ``conv`` (or of some of their blocks)."""

    def name(mi: int, bi: int) -> str | None:
        return conv.tool_name((mi, bi))

    parts = (
        render_message(i, conv.messages[i], name, None if only is None else only.get(i, ()))
        for i in indices
    )
    return "\n\n".join(parts) + "\n"
