"""The one pairing rule: every tool call has its result and every result its call.

``ctx validate``, ``ctx doctor`` (its checks and its repairs) and the stages that must not
make a transcript worse (``stages/_validity``) all ask this one function, so they cannot
disagree on what an orphan is. It lives in ``core`` because formats and stages, which
both need it, may not import each other.
"""

from __future__ import annotations

from dataclasses import dataclass

from ctxcli.core.model import BlockRef, Conversation, Kind

__all__ = ["ORPHAN_RESULT", "UNANSWERED_CALL", "Unpaired", "unpaired"]

ORPHAN_RESULT = "orphan_result"
UNANSWERED_CALL = "unanswered_call"


@dataclass(frozen=True, slots=True)
class Unpaired:
    """A tool call without a result, or a result without a call, where it is."""

    kind: str
    """:data:`ORPHAN_RESULT` or :data:`UNANSWERED_CALL`."""
    ref: BlockRef
    call_id: str | None


def unpaired(conv: Conversation) -> list[Unpaired]:
    """Results without their call, then calls without a result, oldest first.

    A result answers the oldest unanswered call of its id that precedes it
    (:meth:`Conversation.call_of`). A final call is excepted: a call of the last
    assistant response (its last message, or one of the same ``group``) after which the
    transcript holds nothing but assistant messages may still be running when the file
    is read, and the client answers it itself when it resumes.
    """
    out = [
        Unpaired(ORPHAN_RESULT, ref, block.call_id)
        for ref, block in conv.iter_blocks(Kind.TOOL_RESULT)
        if conv.call_of(ref) is None
    ]
    messages = conv.messages
    last = max((i for i, m in enumerate(messages) if m.role == "assistant"), default=-1)
    tail = messages[last].group if last >= 0 else None
    for ref, block in conv.iter_blocks(Kind.TOOL_CALL):
        if conv.results_of(ref):
            continue
        msg = messages[ref[0]]
        final = ref[0] == last or (tail is not None and msg.group == tail)
        if final and all(m.role == "assistant" for m in messages[ref[0] + 1 :]):
            continue
        out.append(Unpaired(UNANSWERED_CALL, ref, block.call_id))
    return out
