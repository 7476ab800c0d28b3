"""Check that every tool call has its result and every result its call."""

from __future__ import annotations

from dataclasses import replace

from ctxcli.core.errors import VALIDATE_ON_INVALID, OnInvalid
from ctxcli.core.model import Kind
from ctxcli.formats import Document, load, split_collection
from ctxcli.formats.format import Problem

__all__ = ["Problem", "check_document", "validate_bytes"]


def check_document(doc: Document) -> list[Problem]:
    """Pairing problems of a loaded transcript (a final unanswered call is allowed)."""
    conv = doc.conversation
    problems: list[Problem] = []
    last_assistant = max(
        (i for i, m in enumerate(conv.messages) if m.role == "assistant"), default=-1
    )
    for ref, block in conv.iter_blocks(Kind.TOOL_RESULT):
        if conv.call_of(ref) is None:
            line = doc.line_of(conv.messages[ref[0]])
            problems.append(
                Problem(
                    line,
                    "orphan_result",
                    block.call_id,
                    f"tool result {block.call_id!r} has no matching tool call",
                )
            )
    tail_group = conv.messages[last_assistant].group if last_assistant >= 0 else None
    for ref, block in conv.iter_blocks(Kind.TOOL_CALL):
        if conv.results_of(ref):
            continue
        msg = conv.messages[ref[0]]
        is_final = ref[0] == last_assistant or (tail_group is not None and msg.group == tail_group)
        if is_final and not any(m.role != "assistant" for m in conv.messages[ref[0] + 1 :]):
            continue
        problems.append(
            Problem(
                doc.line_of(msg),
                "unanswered_call",
                block.call_id,
                f"tool call {block.call_id!r} ({block.name}) has no result",
            )
        )
    problems.extend(doc.format.check(doc))
    return sorted(problems, key=lambda p: (p.line or 0, p.kind))


def validate_bytes(
    raw: bytes,
    path: str = "<stdin>",
    *,
    format: str = "auto",
    on_invalid: OnInvalid = VALIDATE_ON_INVALID,
) -> list[Problem]:
    """Load a transcript and return its pairing problems.

    Unlike reducing, checking stops at a line that is not JSON in every format by
    default: reporting it is the point of a check. In a file of many trajectories
    (tau-bench runs, OpenHands output, dataset rows) each is checked on its own; a
    problem names its trajectory and message.
    """
    on_invalid = OnInvalid.of(on_invalid)
    split = split_collection(raw, path, format=format)
    if split is None:
        return check_document(load(raw, path, format=format, on_invalid=on_invalid))
    problems: list[Problem] = []
    for part in split.parts:
        for p in check_document(load(part.raw, part.name, on_invalid=on_invalid)):
            message = f"{part.label}, message {p.line}: {p.message}"
            problems.append(replace(p, line=None, message=message))
    return problems
