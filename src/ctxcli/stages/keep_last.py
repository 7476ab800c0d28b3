"""Stage keep_last: Synaptic's LastN, cutting only where no tool call loses its result."""

from __future__ import annotations

from collections.abc import Callable

from pydantic import Field

from ctxcli.core.cuts import (
    is_user_turn,
    latest_safe_cut,
    leading_system,
    range_key,
    render_messages,
    safe_cuts,
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
    max_tokens: int | None = Field(
        None,
        ge=1,
        description="Also keep no more than this many tokens of the newest messages: the "
        "cut moves later, past whole call/result pairs (and to a user turn with "
        "start_on_user), until what is kept fits. None: no token limit.",
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
    With ``max_tokens``, the newest messages that fit are kept whole: the cut is the
    earliest safe one (no pair split, on a user turn with ``start_on_user``) after
    which the kept messages hold at most ``max_tokens`` (counted with ``ctx.tokens``);
    if no such cut exists, the last safe one is taken and a note says it is over.

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
    if target <= start and opts.max_tokens is None:
        note = (
            f"{counted} non-system messages <= keep_messages {opts.keep_messages}; nothing dropped"
        )
        return StageResult(conv, counters, (note,))

    def starts_user_turn(c: int) -> bool:
        return is_user_turn(messages[c])

    accept = starts_user_turn if opts.start_on_user else None
    cut = latest_safe_cut(conv, start, target, accept)
    over: str | None = None
    if opts.max_tokens is not None:
        cut, over = _fit_tokens(conv, start, cut, opts.max_tokens, accept, ctx)
    if cut == start:
        why = " and starts on a user turn" if opts.start_on_user else ""
        note = f"no cut point keeps every tool call with its result{why}; nothing dropped"
        if opts.max_tokens is not None and target <= start and over is None:
            note = f"{opts.max_tokens:,} tokens hold every message; nothing dropped"
        return StageResult(conv, counters, (note,))
    counters["dropped"] = cut - start
    counters["cut_moved"] = max(0, target - cut)
    notes = _dropped_notes(conv, start, cut, target, ctx)
    kept = messages[:start] + messages[cut:]
    return StageResult(conv.with_messages(kept), counters, (*notes, *([over] if over else [])))


def _dropped_notes(
    conv: Conversation, start: int, cut: int, target: int, ctx: StageContext
) -> list[str]:
    """Offload the text of messages ``start..cut``; the notes that say where it went."""
    dropped = range(start, cut)
    path = ctx.offload.put(
        "keep_last", range_key(conv, start, cut - 1), render_messages(conv, dropped)
    )
    plural = "s" if len(dropped) != 1 else ""
    notes = [f"dropped {len(dropped)} message{plural}; their text is in {path}"]
    if cut < target:
        notes.append(f"kept {target - cut} more messages so no tool call loses its result")
    return notes


def _fit_tokens(
    conv: Conversation,
    start: int,
    cut: int,
    max_tokens: int,
    accept: Callable[[int], bool] | None,
    ctx: StageContext,
) -> tuple[int, str | None]:
    """The earliest safe cut at or after ``cut`` whose kept messages fit ``max_tokens``.

    The leading messages (before ``start``) always stay and count; when even the newest
    safe cut keeps too much, that cut is returned with a note saying by how much.
    """
    messages = conv.messages
    lead = sum(ctx.tokens.message(m) for m in messages[:start])
    # suffix[c]: tokens of messages c.. to the end, what cut c keeps after the lead.
    suffix = [0] * (len(messages) + 1)
    for c in range(len(messages) - 1, start - 1, -1):
        suffix[c] = suffix[c + 1] + ctx.tokens.message(messages[c])
    safe = safe_cuts(conv, start)
    best = cut
    for c in range(max(cut, start), len(messages)):
        if c > start and (not safe[c] or (accept is not None and not accept(c))):
            continue
        best = c
        if lead + suffix[c] <= max_tokens:
            return c, None
    return best, (
        f"the newest part that can be kept whole holds {lead + suffix[best]:,} tokens, "
        f"over max_tokens {max_tokens:,}"
    )
