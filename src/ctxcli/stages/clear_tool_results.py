"""Stage clear_tool_results: Eino's clearing of old tool results over a token budget."""

from __future__ import annotations

import json

from pydantic import Field

from ctxcli.core.hints import clear_args_hint, clear_hint, is_cleared, is_cleared_args
from ctxcli.core.model import Block, Conversation, Kind, Message
from ctxcli.stages.base import StageContext, StageOptions, StageResult, register


class ClearToolOverride(StageOptions):
    """Per-tool settings for clear_tool_results."""

    skip: bool = Field(False, description="Never clear this tool's results.")


class ClearToolResultsOptions(StageOptions):
    """Options of clear_tool_results."""

    max_tokens: int = Field(
        30000, ge=0, description="Clear only when the transcript has more tokens than this."
    )
    keep_rounds: int = Field(
        1, ge=0, description="The last this many rounds (assistant turn + its results) stay."
    )
    clear_arguments: bool = Field(
        False,
        description="Also offload the arguments of the older calls (those of short "
        "results too: an apply_patch input is long, its result short).",
    )
    tools: dict[str, ClearToolOverride] = Field(
        default_factory=dict, description="Per-tool overrides, keyed by tool name."
    )


@register("clear_tool_results", options=ClearToolResultsOptions)
def clear_tool_results(
    conv: Conversation, opts: ClearToolResultsOptions, ctx: StageContext
) -> StageResult:
    """Replace old tool results by a one-line hint once the transcript is over max_tokens.

    Applies to: tool results (and, with ``clear_arguments``, the arguments of their
    calls) older than the last ``keep_rounds`` rounds, in every format.

    Effect: when the model-visible tokens exceed ``max_tokens``, each older result
    becomes ``[ctx: old tool result cleared; full content saved to
    {offload_dir}/clear/{id}]`` and its text goes to that file. Results already cleared,
    results shorter than the hint and tools marked ``skip`` stay. The call and its
    result stay paired: only texts change.

    Interacts with: after ``truncate_tool_output`` it clears what truncation left;
    ``keep_last`` and ``summarize`` drop messages instead of clearing them.
    """
    counters = {"cleared": 0, "arguments_cleared": 0}
    # exceeds() answers from the counts known so far when it can, so on a large input
    # the stage starts while the rest is still being counted in the background.
    if not ctx.tokens.exceeds(conv, opts.max_tokens):
        total = ctx.tokens.total(conv)
        return StageResult(conv, counters, (f"{total} tokens <= max_tokens {opts.max_tokens}",))
    rounds = conv.rounds()
    if opts.keep_rounds == 0:
        protected_from = len(conv.messages)
    elif len(rounds) >= opts.keep_rounds:
        protected_from = rounds[-opts.keep_rounds].first
    else:
        protected_from = 0
    messages = list(conv.messages)
    for ref, block in conv.iter_blocks(Kind.TOOL_RESULT):
        mi, bi = ref
        if mi >= protected_from:
            break
        name = conv.tool_name(ref)
        override = opts.tools.get(name or "")
        if override is not None and override.skip:
            continue
        text = block.text
        if is_cleared(text):
            continue
        key = block.call_id or f"result-{mi}-{bi}"
        path = ctx.offload.path_for("clear", key)
        if len(text) > len(clear_hint(ctx.language, path=path)):
            path = ctx.offload.put("clear", key, text)
            _set(messages, mi, bi, block.with_text(clear_hint(ctx.language, path=path)))
            counters["cleared"] += 1
        call = conv.call_of(ref)
        # A call's input can be long though its result is short (an apply_patch patch).
        if opts.clear_arguments and call is not None:
            cmi, cbi = call
            call_block = messages[cmi].blocks[cbi]
            args = call_block.text
            if is_cleared_args(args) or len(args) <= 80:
                continue
            apath = ctx.offload.put("clear", f"{key}.args", args)
            note = json.dumps(
                {"ctx_cleared": clear_args_hint(ctx.language, path=apath)}, ensure_ascii=False
            )
            _set(messages, cmi, cbi, call_block.with_text(note))
            counters["arguments_cleared"] += 1
    if not counters["cleared"] and not counters["arguments_cleared"]:
        return StageResult(conv, counters)
    return StageResult(conv.with_messages(messages), counters)


def _set(messages: list[Message], mi: int, bi: int, block: Block) -> None:
    msg = messages[mi]
    blocks = list(msg.blocks)
    blocks[bi] = block
    messages[mi] = msg.with_blocks(blocks)
