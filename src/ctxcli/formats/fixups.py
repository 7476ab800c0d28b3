"""What several formats do to a planned output or to the records they loaded.

Drop the turns a stage emptied, find the tool results a stage changed (to relink what
points at them), and refuse a file in which no record is of the format.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ctxcli.core.errors import Remedy, TranscriptError
from ctxcli.core.model import Kind, Message
from ctxcli.formats.format import OutRecord, State
from ctxcli.formats.lines import Record

__all__ = ["changed_result_ids", "drop_emptied", "require_recognised"]


def changed_result_ids(old: Message, new: Message) -> set[str]:
    """Call ids of the tool results whose text a stage changed or removed."""
    kept = {b.slot: b for b in new.blocks if b.slot is not None}
    ids: set[str] = set()
    for block in old.blocks:
        if block.kind is not Kind.TOOL_RESULT or block.call_id is None:
            continue
        after = kept.get(block.slot)
        if after is None or after.text != block.text:
            ids.add(block.call_id)
    return ids


def drop_emptied(plan: list[OutRecord]) -> None:
    """Drop records whose every block a stage removed: an empty turn cannot stay.

    Shared by the formats whose records hold one item each (a call, an output) or
    whose APIs reject empty content.
    """
    for rec in plan:
        if (
            rec.state is not State.DROPPED
            and rec.message is not None
            and not rec.message.blocks
            and rec.orig is not None
            and rec.orig.message is not None
            and rec.orig.message.blocks
        ):
            rec.state = State.DROPPED


def require_recognised(
    records: Sequence[Record], path: str, recognised: Callable[[Any], bool], what: str
) -> None:
    """Refuse a file in which no record is of the format (a wrong ``--format``).

    Formats that pass unknown records through would otherwise "reduce" any JSONL
    file to itself and report nothing to do.
    """
    first: int | None = None
    for rec in records:
        if not rec.has_data:
            continue
        if recognised(rec.data):
            return
        first = rec.line if first is None else first
    if first is not None:
        raise TranscriptError(path, first, f"no record is {what}", remedy=Remedy.CHECK_FORMAT)
