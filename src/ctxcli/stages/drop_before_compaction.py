"""Stage drop_before_compaction: what a compaction already summarised leaves the file."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from ctxcli.core.cuts import range_key, render_messages
from ctxcli.core.hints import before_compaction_hint, cites_before_compaction
from ctxcli.core.model import Conversation, Kind, Message, RecordEdits
from ctxcli.core.usage import is_usage_stub
from ctxcli.stages._validity import matches, unless_worse
from ctxcli.stages.base import StageContext, StageOptions, StageResult, register

__all__ = ["DropBeforeCompactionOptions", "drop_before_compaction"]


class DropBeforeCompactionOptions(StageOptions):
    """Options of drop_before_compaction."""

    records: list[str] = Field(
        default_factory=lambda: [
            "user",
            "assistant",
            "progress",
            "system",
            "file-history-snapshot",
            "queue-operation",
            "attachment",
        ],
        description="Records before the boundary that go with the conversation, by type or "
        "type:subtype. Others (summary, custom-title, permission-mode...) hold the session's "
        "own settings and stay.",
    )
    cite_in_summary: bool = Field(
        True,
        description="Add one line to the compaction summary naming the file that holds "
        "the dropped messages, so the agent can look details up.",
    )


@register("drop_before_compaction", options=DropBeforeCompactionOptions)
def drop_before_compaction(
    conv: Conversation, opts: DropBeforeCompactionOptions, ctx: StageContext
) -> StageResult:
    """Drop everything before the last compaction boundary; the boundary and summary stay.

    Applies to: formats that know where a resumed session's context starts (Claude
    Code: the compaction restart on the chain a resume walks back from the leaf, a
    ``compact_boundary`` record or, in 1.0.x, an ``isCompactSummary`` user record
    with ``parentUuid`` null). A file without
    a boundary, or whose boundary preserves a segment of earlier messages, is left
    unchanged.

    Effect: when Claude Code compacts, an ``isCompactSummary`` user record replaces
    everything before the boundary in the model's context, yet the old records stay
    in the file and ``claude --resume`` still has to read them. This stage removes
    the messages before the boundary and the records of the ``records`` types; the
    session's own settings (title, permission mode, unknown record types) stay. The
    dropped messages are offloaded as readable text to
    ``{offload_dir}/drop_before_compaction/<first>-<last>`` and, with
    ``cite_in_summary``, the summary gains a line naming that file. The records
    that carry a response's API usage stay as stubs usage trackers still read
    (see ``ctxcli.core.usage``; the format makes them). The format
    relinks the boundary's ``logicalParentUuid``; if the result would lose a
    call/result pair or split the record tree, nothing changes and a note says why.

    Interacts with: run it first in a chain: later stages then work only on what
    a resume sends. Token counts after the boundary do not change (only the line
    added to the summary), the file shrinks.
    """
    counters = {"messages_dropped": 0, "records_dropped": 0, "records_kept": 0}
    start = _boundary(conv, ctx)
    if isinstance(start, str):
        return StageResult(conv, counters, (start,))
    gone = [i for i, m in enumerate(conv.messages) if m.key is not None and m.key < start]
    drop, keep = _unseen_records_before(conv, start, opts.records)
    if not gone and not drop:
        return StageResult(conv, counters)
    counters.update(messages_dropped=len(gone), records_dropped=len(drop), records_kept=len(keep))
    notes: list[str] = []
    gone_set = set(gone)
    kept: list[Message] = [m for i, m in enumerate(conv.messages) if i not in gone_set]
    if gone:
        path = ctx.offload.put(
            "drop_before_compaction",
            range_key(conv, gone[0], gone[-1]),
            render_messages(conv, gone),
        )
        notes.append(f"{len(gone)} messages before the compaction saved to {path}")
        if opts.cite_in_summary:
            kept = _cite(
                conv, kept, start, before_compaction_hint(ctx.language, count=len(gone), path=path)
            )
    out = conv.with_messages(kept).with_record_edits(
        RecordEdits(drop=frozenset(drop), keep=frozenset(keep))
    )
    return unless_worse("drop_before_compaction", conv, out, counters, ctx, notes)


def _boundary(conv: Conversation, ctx: StageContext) -> int | str:
    """The key of the compaction boundary record, or a note saying why nothing goes."""
    start = conv.resume_start
    if start is None:
        return f"not applicable to {conv.format} transcripts"
    if start < 0 or start >= len(conv.records):
        return "no compaction boundary"
    if _preserves_segment(conv.records[start].data):
        return "the boundary preserves earlier messages; kept"
    strays = _continuing_earlier(conv, start)
    if strays:
        note = (
            f"left unchanged: {len(strays)} record(s) after the boundary continue the "
            f"conversation before it (first: {strays[0]!r})"
        )
        ctx.log(f"drop_before_compaction: {note}")
        return note
    return start


def _unseen_records_before(
    conv: Conversation, start: int, patterns: list[str]
) -> tuple[set[int], set[int]]:
    """Keys of the records before ``start`` the model never sees: to drop, to keep."""
    drop: set[int] = set()
    keep: set[int] = set()
    for rec in conv.records[:start]:
        if rec.message:
            continue
        if is_usage_stub(rec.data):
            keep.add(rec.key)  # what usage trackers read of a response dropped before
        elif matches(rec.data, patterns):
            drop.add(rec.key)
        elif rec.data is not None:
            keep.add(rec.key)
    return drop, keep


def _preserves_segment(data: Any) -> bool:
    # Partial compaction keeps some earlier messages in the resumed context; those
    # must not go (cozempic checks the same flag).
    if not isinstance(data, dict):
        return False
    meta = data.get("compactMetadata")
    return bool(data.get("hasPreservedSegment")) or (
        isinstance(meta, dict) and bool(meta.get("preservedSegment"))
    )


def _continuing_earlier(conv: Conversation, start: int) -> list[str]:
    """Uuids of records after the boundary whose ancestors never reach it.

    After a compaction every new record descends from the boundary; one that hangs
    off an earlier record still carries the old context, which must then stay.
    """
    parent: dict[str, Any] = {}
    for rec in conv.records:
        data = rec.data
        if isinstance(data, dict) and isinstance(data.get("uuid"), str):
            parent[data["uuid"]] = data.get("parentUuid")
    boundary = conv.records[start].data
    top = boundary.get("uuid") if isinstance(boundary, dict) else None
    below: set[str] = {top} if isinstance(top, str) else set()
    strays: list[str] = []
    for rec in conv.records[start + 1 :]:
        data = rec.data
        uuid = data.get("uuid") if isinstance(data, dict) else None
        if not isinstance(uuid, str) or "parentUuid" not in data:
            continue
        node, seen = data["parentUuid"], {uuid}
        while isinstance(node, str) and node not in below and node not in seen:
            seen.add(node)
            node = parent.get(node)
        if isinstance(node, str) and node in below:
            below.add(uuid)
        else:
            strays.append(uuid)
    return strays


def _cite(conv: Conversation, kept: list[Message], start: int, hint: str) -> list[Message]:
    """Add ``hint`` to the compaction summary: the first message after the boundary."""
    for i, msg in enumerate(kept):
        if msg.key is None or msg.key < start:
            continue
        data = conv.records[msg.key].data
        if not (isinstance(data, dict) and data.get("isCompactSummary") is True):
            return kept
        texts = [bi for bi, b in enumerate(msg.blocks) if b.kind is Kind.TEXT]
        if not texts or cites_before_compaction(msg.blocks[texts[-1]].text):
            return kept
        blocks = list(msg.blocks)
        last = blocks[texts[-1]]
        blocks[texts[-1]] = last.with_text(f"{last.text}\n\n{hint}")
        return [*kept[:i], msg.with_blocks(blocks), *kept[i + 1 :]]
    return kept
