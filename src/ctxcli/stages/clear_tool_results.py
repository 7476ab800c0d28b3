"""Stage clear_tool_results: Eino's clearing of old tool results over a token budget."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

from pydantic import AliasChoices, Field

from ctxcli.core.hints import (
    clear_args_hint,
    clear_hint,
    is_cleared,
    is_cleared_args,
    truncated_path,
)
from ctxcli.core.model import Block, BlockRef, Conversation, Kind, Message
from ctxcli.stages._naming import result_key
from ctxcli.stages.base import StageContext, StageOptions, StageResult, register

__all__ = ["ClearToolOverride", "ClearToolResultsOptions", "clear_tool_results"]


class ClearToolOverride(StageOptions):
    """Per-tool settings for clear_tool_results."""

    skip: bool = Field(False, description="Never clear this tool's results.")


class ClearToolResultsOptions(StageOptions):
    """Options of clear_tool_results."""

    renamed = {"clear_at_least": "clear_at_least_tokens"}

    max_tokens: int = Field(
        30000, ge=0, description="Clear only when the transcript has more tokens than this."
    )
    keep_rounds: int = Field(
        1,
        ge=0,
        description="The last this many rounds of tool use (a response that calls tools and "
        "its results) stay; a closing answer without calls is no round.",
    )
    keep_results: int = Field(
        0,
        ge=0,
        description="Also keep the last this many tool results, whatever their rounds "
        "(Anthropic's and LangChain's keep, counted in tool uses).",
    )
    clear_at_least_tokens: int = Field(
        0,
        ge=0,
        description="Clear nothing unless it reclaims at least this many tokens, so a small "
        "gain does not break the provider's prompt cache (Eino's ClearAtLeastTokens).",
    )
    clear_arguments: bool = Field(
        False,
        validation_alias=AliasChoices("clear_arguments", "clear_tool_inputs"),
        description="Also offload the arguments of the older calls, those of short results "
        "too: an apply_patch input is long, its result short (alias: clear_tool_inputs).",
    )
    exclude_tools: list[str] = Field(
        default_factory=list,
        description="Tools whose results are never cleared (same as tools.<name>.skip).",
    )
    tools: dict[str, ClearToolOverride] = Field(
        default_factory=dict, description="Per-tool overrides, keyed by tool name."
    )
    hint: Literal["short", "long", "marker"] = Field(
        "short",
        description="short: '[ctx cleared: <dir>/clear/<call id>]'; long: a sentence naming "
        "the same file; marker: '[ctx cleared]', as short as LangChain's placeholder but "
        "naming no file the agent could read (ctx restore still rebuilds the original).",
    )


def _frontier(before: Conversation, result: StageResult, opts: ClearToolResultsOptions) -> int:
    """Messages whose clearing no appended message can change (see ``register``).

    Appending only adds tokens, results and rounds, so once this stage cleared, it
    clears again everything it cleared, and what it left before the protected rounds
    and the last ``keep_results`` results it left for reasons of their own (a skipped
    tool, a result shorter than its hint). What lies after that boundary may be
    cleared by a later run. A run that cleared nothing decides nothing for good: a
    longer transcript may cross ``max_tokens`` or ``clear_at_least_tokens``.
    """
    counters = result.counters
    if not before.frozen and not (counters.get("cleared") or counters.get("arguments_cleared")):
        return 0
    # The stage changes texts only: its input has the same rounds and results (and
    # has worked them out already).
    boundary = _protected_from(before, opts)
    results = [ref for ref, _ in before.iter_blocks(Kind.TOOL_RESULT)]
    last = len(results) - opts.keep_results
    if 0 <= last < len(results):
        boundary = min(boundary, results[last][0])
    return boundary


@register("clear_tool_results", options=ClearToolResultsOptions, frontier=_frontier)
def clear_tool_results(
    conv: Conversation, opts: ClearToolResultsOptions, ctx: StageContext
) -> StageResult:
    """Replace old tool results by a one-line hint once the transcript is over max_tokens.

    Applies to: tool results (and, with ``clear_arguments``, the arguments of their
    calls) older than the last ``keep_rounds`` rounds of tool use and the last
    ``keep_results`` results, in every format. A round is a response that calls
    tools together with its results, so a session that ends with a plain answer still
    keeps its last results.

    Effect: when the model-visible tokens exceed ``max_tokens``, each older result
    becomes ``[ctx cleared: {offload_dir}/clear/{id}]``, named by its tool call id as
    in Eino (``hint = "long"`` writes ``[ctx: old tool result cleared; full content
    saved to {offload_dir}/clear/{id}]``, ``hint = "marker"`` just ``[ctx cleared]``)
    and its text goes to that file; a result ``truncate_tool_output`` shortened in
    this run cites its ``trunc/{id}`` file instead, which holds the full text. An id
    longer than 12 characters names the file by its last 8 (``stages._naming``). Results
    already cleared, results no longer than the hint in tokens and tools in
    ``exclude_tools`` or marked ``skip`` stay. When everything to clear would reclaim
    fewer than ``clear_at_least_tokens`` tokens, nothing is cleared. The call and its result
    stay paired: only texts change. With ``max_tokens = 0`` and ``keep_results = 10``
    this is observation masking (the ``swe-agent`` preset).

    Names as in Anthropic's ``clear_tool_uses`` edit and LangChain's
    ``ClearToolUsesEdit``: trigger = ``max_tokens``, keep = ``keep_results`` (with
    ``keep_rounds = 0``), ``clear_at_least`` = ``clear_at_least_tokens``,
    ``exclude_tools``, ``clear_tool_inputs`` = ``clear_arguments``. Their ``clear_at_least`` stops clearing once enough is
    reclaimed; ours, like Eino's, skips a clearing that would reclaim too little.

    Interacts with: after ``truncate_tool_output`` it clears what truncation left;
    ``keep_last`` and ``summarize`` drop messages instead of clearing them.
    """
    counters = {"cleared": 0, "arguments_cleared": 0, "tokens_reclaimed": 0}
    # A kept prefix (an incremental re-run) means an earlier run over it cleared: the
    # longer transcript is over max_tokens and reclaims enough too (see _frontier).
    resumed = conv.frozen > 0
    # exceeds() answers from the counts known so far when it can, so on a large input
    # the stage starts while the rest is still being counted in the background.
    if not resumed and not ctx.tokens.exceeds(conv, opts.max_tokens):
        total = ctx.tokens.total(conv)
        return StageResult(conv, counters, (f"{total} tokens <= max_tokens {opts.max_tokens}",))
    plan = _plan(conv, opts, ctx)
    reclaimed = sum(item.saved for item in plan)
    if not plan or (not resumed and reclaimed < opts.clear_at_least_tokens):
        note = f"clearing would reclaim {reclaimed} tokens < clear_at_least_tokens {opts.clear_at_least_tokens}"
        return StageResult(conv, counters, (note,) if plan else ())
    messages = list(conv.messages)
    for item in plan:
        _apply(messages, conv, item, opts, ctx, counters)
    counters["tokens_reclaimed"] = reclaimed
    return StageResult(conv.with_messages(messages), counters)


def _apply(
    messages: list[Message],
    conv: Conversation,
    item: _Clear,
    opts: ClearToolResultsOptions,
    ctx: StageContext,
    counters: dict[str, int],
) -> None:
    """Clear one planned result (and its call's arguments) in ``messages``."""
    if item.result:
        # A result truncated earlier cites the file holding its full text: one read
        # gets the original back, and the preview is not stored a second time.
        path = item.cited or ctx.offload.put("clear", item.key, item.block.text)
        _set(messages, item.ref, item.block.with_text(_hint(ctx, opts, path)))
        counters["cleared"] += 1
    if item.call is not None:
        call_block = conv.block(item.call)
        apath = ctx.offload.put("clear", f"{item.key}.args", call_block.text)
        note = json.dumps(
            {"ctx_cleared": clear_args_hint(ctx.language, path=apath)}, ensure_ascii=False
        )
        _set(messages, item.call, call_block.with_text(note))
        counters["arguments_cleared"] += 1


@dataclass(frozen=True, slots=True)
class _Clear:
    """One result to clear, and what clearing it takes.

    One result to clear: where it is, its offload key, the file its hint cites when
    that file exists already (``cited``), whether the result itself goes (a short one
    stays), its call (if its arguments go) and the tokens saved.
    """

    ref: BlockRef
    block: Block
    key: str
    cited: str | None
    result: bool
    call: BlockRef | None
    saved: int


def _protected_from(conv: Conversation, opts: ClearToolResultsOptions) -> int:
    """Index of the first message of the last ``keep_rounds`` rounds of tool use."""
    if opts.keep_rounds == 0:
        return len(conv.messages)
    rounds = conv.tool_rounds()
    return rounds[-opts.keep_rounds].first if len(rounds) >= opts.keep_rounds else 0


def _plan(conv: Conversation, opts: ClearToolResultsOptions, ctx: StageContext) -> list[_Clear]:
    """The results to clear, priced in tokens with the hints they will get."""
    count = ctx.tokens.counter.count
    protected_from = _protected_from(conv, opts)
    results = list(conv.iter_blocks(Kind.TOOL_RESULT))
    last = len(results) - opts.keep_results
    skip = set(opts.exclude_tools) | {name for name, o in opts.tools.items() if o.skip}
    plan: list[_Clear] = []
    frozen = conv.frozen
    for number, (ref, block) in enumerate(results, start=1):
        if ref[0] >= protected_from or number > last:
            break
        if ref[0] < frozen:
            continue  # a kept prefix: decided by an earlier run
        if skip and (conv.tool_name(ref) or "") in skip:
            continue
        text = block.text
        if is_cleared(text):
            continue
        key = result_key(ref, block)
        cited = _full_text_file(ctx, key, text)
        hint = _hint(ctx, opts, cited or ctx.offload.path_for("clear", key))
        saved = max(0, count(text) - count(hint))
        # A call's input can be long though its result is short (an apply_patch patch).
        call = conv.call_of(ref) if opts.clear_arguments else None
        if call is not None:
            args = conv.block(call).text
            if is_cleared_args(args) or len(args) <= 80:
                call = None
            else:
                apath = ctx.offload.path_for("clear", f"{key}.args")
                note = json.dumps({"ctx_cleared": clear_args_hint(ctx.language, path=apath)})
                saved += max(0, count(args) - count(note))
        if saved <= 0:
            continue
        plan.append(_Clear(ref, block, key, cited, count(text) > count(hint), call, saved))
    return plan


def _full_text_file(ctx: StageContext, key: str, text: str) -> str | None:
    """The file truncate_tool_output wrote this result's full text to, if it did.

    Only a file of this run's store, named by the same key, is cited: a hint copied
    from elsewhere (an agent that read a reduced file) is not taken for one.
    """
    path = truncated_path(text)
    return path if path is not None and path == ctx.offload.path_for("trunc", key) else None


def _hint(ctx: StageContext, opts: ClearToolResultsOptions, path: str) -> str:
    return clear_hint(ctx.language, path=path, form=opts.hint)


def _set(messages: list[Message], ref: BlockRef, block: Block) -> None:
    mi, bi = ref
    msg = messages[mi]
    blocks = list(msg.blocks)
    blocks[bi] = block
    messages[mi] = msg.with_blocks(blocks)
