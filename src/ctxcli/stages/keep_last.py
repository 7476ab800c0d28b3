"""Stage keep_last: Synaptic's LastN, cutting only where no tool call loses its result."""

from __future__ import annotations

from pydantic import Field

from ctxcli.core.cuts import (
    is_user_turn,
    latest_safe_cut,
    leading_system,
    range_key,
    render_messages,
)
from ctxcli.core.model import Conversation
from ctxcli.stages.base import StageContext, StageOptions, StageResult, register

__all__ = ["KeepLastOptions", "keep_last"]


class KeepLastOptions(StageOptions):
    """Options of keep_last."""

    renamed = {"n": "keep_messages"}

    keep_messages: int = Field(
        20, ge=1, description="Non-system messages kept from the end (more if a pair needs it)."
    )
    start_on_user: bool = Field(
        False,
        description="Move the cut back until the kept messages start with a user turn "
        "(Anthropic-style APIs reject a history that starts with the assistant).",
    )


@register("keep_last", options=KeepLastOptions)
def keep_last(conv: Conversation, opts: KeepLastOptions, ctx: StageContext) -> StageResult:
    """Keep the leading system messages and the last keep_messages, never orphaning a tool call.

    Applies to: every format. System messages at the start always stay (with the
    records the format keeps at the top, such as Codex ``session_meta``); system
    messages later on are kept when they fall in the tail but are not counted.

    Effect: drops every message between the leading system messages and the last
    ``keep_messages`` non-system messages. The cut moves earlier, keeping more messages, until no
    call/result pair and no multi-record response (Claude Code) crosses it, so the
    kept part never starts with an orphaned tool result (langchain #33245) nor ends
    a call without its answer. The dropped records' bytes go to the restore pack and
    their text to ``{offload_dir}/keep_last/<first>-<last>``, named in the notes.
    Idempotent: on its own output the cut falls at the same place and nothing moves.

    Interacts with: run after ``strip_tool_calls`` (see ``strip_and_truncate``) to
    count only conversational messages; ``summarize`` keeps a summary of what it cuts
    instead of dropping it.
    """
    counters = {"dropped": 0, "cut_moved": 0}
    start = leading_system(conv)
    messages = conv.messages
    # Walk back from the end until n non-system messages are behind the cut.
    target = len(messages)
    counted = 0
    while target > start and counted < opts.keep_messages:
        target -= 1
        if messages[target].role != "system":
            counted += 1
    if target <= start:
        note = (
            f"{counted} non-system messages <= keep_messages {opts.keep_messages}; nothing dropped"
        )
        return StageResult(conv, counters, (note,))

    def starts_user_turn(c: int) -> bool:
        return is_user_turn(messages[c])

    cut = latest_safe_cut(conv, start, target, starts_user_turn if opts.start_on_user else None)
    if cut == start:
        why = " and starts on a user turn" if opts.start_on_user else ""
        note = f"no cut point keeps every tool call with its result{why}; nothing dropped"
        return StageResult(conv, counters, (note,))
    dropped = range(start, cut)
    path = ctx.offload.put(
        "keep_last", range_key(conv, start, cut - 1), render_messages(conv, dropped)
    )
    counters["dropped"] = len(dropped)
    counters["cut_moved"] = target - cut
    plural = "s" if len(dropped) != 1 else ""
    notes = [f"dropped {len(dropped)} message{plural}; their text is in {path}"]
    if cut < target:
        notes.append(f"kept {target - cut} more messages so no tool call loses its result")
    kept = messages[:start] + messages[cut:]
    return StageResult(conv.with_messages(kept), counters, tuple(notes))
