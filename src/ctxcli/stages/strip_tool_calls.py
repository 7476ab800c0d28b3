"""Stage strip_tool_calls: Synaptic's StripToolCalls, removing calls and results in pairs."""

from __future__ import annotations

from collections.abc import Container

from pydantic import Field

from ctxcli.core.cuts import range_key, render_messages
from ctxcli.core.model import Block, BlockRef, Conversation, Kind, Message
from ctxcli.stages.base import StageContext, StageOptions, StageResult, register

__all__ = ["StripToolCallsOptions", "strip_tool_calls"]


class StripToolCallsOptions(StageOptions):
    """Options of strip_tool_calls."""

    keep_last_rounds: int = Field(
        0,
        ge=0,
        description="The last this many rounds of tool calls keep their calls and results "
        "(the agent's work in progress); a closing answer without calls is no round.",
    )
    keep_tools: list[str] = Field(
        default_factory=list, description="Tools whose calls and results always stay."
    )


@register("strip_tool_calls", options=StripToolCallsOptions)
def strip_tool_calls(
    conv: Conversation, opts: StripToolCallsOptions, ctx: StageContext
) -> StageResult:
    """Remove tool calls and their results, keeping what the user and the assistant said.

    Applies to: every format; tool calls and results older than the last
    ``keep_last_rounds`` rounds, except those of ``keep_tools``.

    Effect: a call and every result linked to it are removed together, so no call or
    result is ever left without its partner. A message that held nothing but tool
    blocks (an assistant turn of calls, a ``tool`` message, a user turn of results)
    is dropped; one that also holds text keeps its text and loses only the tool
    blocks. Thinking that accompanied only tool calls goes with them. The removed text
    is offloaded to ``{offload_dir}/strip_tool_calls/<first>-<last>`` (named in the
    notes) and the original records to the restore pack.

    Interacts with: ``strip_and_truncate`` runs it before ``keep_last``; running it
    before ``summarize`` leaves the summarizer only the conversation itself.
    """
    counters = {"calls_removed": 0, "results_removed": 0, "messages_dropped": 0}
    remove = _pairs_to_remove(conv, opts)
    if not remove:
        return StageResult(conv, counters, ("no tool calls or results to remove",))
    by_message: dict[int, set[int]] = {}
    for mi, bi in remove:
        by_message.setdefault(mi, set()).add(bi)
        kind = conv.messages[mi].blocks[bi].kind
        counters["calls_removed" if kind is Kind.TOOL_CALL else "results_removed"] += 1
    messages: list[Message] = []
    shown: dict[int, Container[int]] = dict(by_message)
    for mi, msg in enumerate(conv.messages):
        gone = by_message.get(mi)
        if not gone:
            messages.append(msg)
            continue
        rest = [b for bi, b in enumerate(msg.blocks) if bi not in gone]
        if any(_is_substantive(b) for b in rest):
            messages.append(msg.with_blocks(rest))
        else:
            counters["messages_dropped"] += 1
            shown[mi] = range(len(msg.blocks))
    if not messages:
        # A transcript of nothing but tool traffic: an empty one is no transcript at all.
        return StageResult(conv, dict.fromkeys(counters, 0), ("only tool calls and results; kept",))
    affected = sorted(by_message)
    path = ctx.offload.put(
        "strip_tool_calls",
        range_key(conv, affected[0], affected[-1]),
        render_messages(conv, affected, shown),
    )
    note = (
        f"removed {counters['calls_removed']} tool calls and {counters['results_removed']} "
        f"results; their text is in {path}"
    )
    return StageResult(conv.with_messages(messages), counters, (note,))


def _pairs_to_remove(conv: Conversation, opts: StripToolCallsOptions) -> set[BlockRef]:
    """The call and result blocks to remove: always a call together with all its results."""
    if opts.keep_last_rounds == 0:
        protected_from = len(conv.messages)
    else:
        rounds = conv.tool_rounds()
        protected_from = (
            rounds[-opts.keep_last_rounds].first if len(rounds) >= opts.keep_last_rounds else 0
        )
    keep_tools = set(opts.keep_tools)
    remove: set[BlockRef] = set()
    for ref, block in conv.iter_blocks(Kind.TOOL_CALL):
        if ref[0] >= protected_from or block.name in keep_tools:
            continue
        remove.add(ref)
        remove.update(conv.results_of(ref))
    for ref, _block in conv.iter_blocks(Kind.TOOL_RESULT):
        # A result without a call (already orphaned in the input) has no partner to
        # keep in step with; it goes like any other old result.
        if conv.call_of(ref) is None and ref[0] < protected_from:
            if conv.tool_name(ref) not in keep_tools:
                remove.add(ref)
    return remove


def _is_substantive(block: Block) -> bool:
    """A block worth keeping a message for once its tool blocks are gone.

    Blank text (OpenAI's ``content: ""`` beside tool calls) and thinking that led only
    to tool calls are not: a message left with nothing else is dropped.
    """
    if block.kind is Kind.TEXT:
        return bool(block.text.strip())
    return block.kind is not Kind.THINKING
