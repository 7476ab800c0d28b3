"""Stage clear_thinking: the Anthropic API's clear_thinking_20251015 edit, on the file."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import Field

from ctxcli.core.model import Conversation, Kind, Message, RecordEdits
from ctxcli.stages._validity import trailing_records, unless_worse
from ctxcli.stages.base import StageContext, StageOptions, StageResult, register

__all__ = ["ClearThinkingOptions", "FORMATS", "clear_thinking"]

# Formats whose writers remove a block a stage left out (and sign their thinking),
# and Codex, whose reasoning items (encrypted) go whole.
FORMATS = ("claude_code", "anthropic", "codex")


class ClearThinkingOptions(StageOptions):
    """Options of clear_thinking."""

    keep_turns: int = Field(
        1,
        ge=1,
        description="The last this many assistant turns that hold thinking keep it "
        "(the API needs the thinking of a turn still in its tool loop).",
    )


@register("clear_thinking", options=ClearThinkingOptions)
def clear_thinking(
    conv: Conversation, opts: ClearThinkingOptions, ctx: StageContext
) -> StageResult:
    """Remove thinking blocks (and their signatures) from all but the last keep_turns turns.

    Applies to: Claude Code sessions and Anthropic Messages transcripts (the formats
    whose thinking blocks carry signatures) and Codex rollouts, whose ``reasoning``
    items (summary + ``encrypted_content``) are dropped whole: Codex sends them without
    an id, and the Responses API accepts a history without them (it rejects only a
    reasoning item it cannot resolve, or one with nothing after it). Other formats are
    left unchanged.

    Effect: as the Anthropic API's ``clear_thinking_20251015`` context edit does,
    every ``thinking`` and ``redacted_thinking`` block of an assistant turn older
    than the last ``keep_turns`` turns with thinking is removed, signature and all
    (a turn is one API response, however many records it is split over). An
    assistant record left with no content is dropped rather than kept empty; the
    format relinks its children and keeps the records that followed it. If the
    result would lose a call/result pair or split the record tree, nothing changes
    and a note says why. The removed reasoning of each turn is offloaded to
    ``{offload_dir}/clear_thinking/<turn>``; the original records go to the restore
    pack.

    Interacts with: run it before stages that count the tokens left (it removes
    tokens the API would not have kept anyway). Idempotent: the kept turns are the
    same on a rerun.
    """
    counters = {"turns_cleared": 0, "blocks_removed": 0, "records_dropped": 0, "chars_removed": 0}
    if conv.format not in FORMATS:
        return StageResult(conv, counters, (f"not applicable to {conv.format} transcripts",))
    turns = [
        r.assistant
        for r in conv.rounds()
        if any(b.kind is Kind.THINKING for i in r.assistant for b in conv.messages[i].blocks)
    ]
    old = turns[: max(len(turns) - opts.keep_turns, 0)]
    if not old:
        return StageResult(conv, counters)
    replace: dict[int, Message | None] = {}
    keep: set[int] = set()
    for members in old:
        removed = _clear_turn(conv, members, replace, keep, counters)
        counters["turns_cleared"] += 1
        if removed:
            first = conv.messages[members[0]]
            name = first.group or f"message-{first.key if first.key is not None else members[0]}"
            ctx.offload.put("clear_thinking", name, "\n\n".join(removed))
    messages = [
        new for mi, msg in enumerate(conv.messages) if (new := replace.get(mi, msg)) is not None
    ]
    out = conv.with_messages(messages)
    if keep:
        out = out.with_record_edits(RecordEdits(keep=frozenset(keep)))
    return unless_worse("clear_thinking", conv, out, counters, ctx)


def _clear_turn(
    conv: Conversation,
    members: Sequence[int],
    replace: dict[int, Message | None],
    keep: set[int],
    counters: dict[str, int],
) -> list[str]:
    """Plan one turn's messages without thinking (in ``replace``, ``keep``); its reasoning."""
    removed: list[str] = []
    for mi in members:
        msg = conv.messages[mi]
        thinking = [b for b in msg.blocks if b.kind is Kind.THINKING]
        if not thinking:
            continue
        removed += [b.text for b in thinking if b.text]
        counters["blocks_removed"] += len(thinking)
        counters["chars_removed"] += sum(len(b.text) for b in thinking)
        rest = [b for b in msg.blocks if b.kind is not Kind.THINKING]
        if rest:
            replace[mi] = msg.with_blocks(rest)
            continue
        # Never an empty assistant record: drop it. What followed it (progress,
        # snapshots) belongs to the same response, which goes on: keep those.
        replace[mi] = None
        counters["records_dropped"] += 1
        if msg.key is not None:
            keep.update(trailing_records(conv.records, msg.key))
    return removed
