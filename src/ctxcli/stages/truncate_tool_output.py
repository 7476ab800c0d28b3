"""Stage truncate_tool_output: Eino's truncation of long tool results, offloaded."""

from __future__ import annotations

from pydantic import Field

from ctxcli.core.hints import is_ctx_marked, truncation_preview
from ctxcli.core.model import Block, BlockRef, Conversation, Kind
from ctxcli.stages._naming import result_key
from ctxcli.stages.base import (
    StageContext,
    StageOptions,
    StageResult,
    everything_final,
    register,
)

__all__ = [
    "TruncateToolOutputOptions",
    "TruncateToolOverride",
    "reads_offloaded_file",
    "truncate_tool_output",
]


class TruncateToolOverride(StageOptions):
    """Per-tool settings; they take precedence over the stage's own."""

    renamed = {"max_length": "max_chars"}

    max_chars: int | None = Field(None, ge=256, description="Characters kept for this tool.")
    skip: bool = Field(False, description="Never truncate this tool's results.")


class TruncateToolOutputOptions(StageOptions):
    """Options of truncate_tool_output."""

    renamed = {"max_length": "max_chars"}

    max_chars: int = Field(
        50000, ge=256, description="Results longer than this many characters are truncated."
    )
    read_tool_name: str = Field(
        "read_file", description="Tool the agent uses to read an offloaded file back."
    )
    tools: dict[str, TruncateToolOverride] = Field(
        default_factory=dict, description="Per-tool overrides, keyed by tool name."
    )


def reads_offloaded_file(conv: Conversation, ref: BlockRef, read_tool: str, root: str) -> bool:
    """True if a result answers a read-tool call on a file ctx offloaded.

    Truncating such a result again would send the agent round the
    truncate -> read -> truncate loop reported against Eino.
    """
    call = conv.call_of(ref)
    if call is None:
        return False
    block = conv.block(call)
    if block.name != read_tool:
        return False
    args = block.text
    return f"{root}/" in args or "/trunc/" in args or "/clear/" in args


@register("truncate_tool_output", options=TruncateToolOutputOptions, frontier=everything_final)
def truncate_tool_output(
    conv: Conversation, opts: TruncateToolOutputOptions, ctx: StageContext
) -> StageResult:
    """Cut tool results longer than max_chars to a head+tail preview; offload the full text.

    Applies to: every tool result, in every format (per-tool ``skip`` and
    ``max_chars`` overrides by tool name).

    Effect: a result longer than ``max_chars`` characters becomes its head, a hint
    naming ``{offload_dir}/trunc/{id}`` and the read tool, and its tail, together no
    longer than ``max_chars``. The full text goes to that file. Results already
    truncated by ctx, and results of the read tool reading an offloaded file, are
    left alone, so a rerun changes nothing and the agent never loops.

    Interacts with: run it before ``clear_tool_results`` (which then sees the shorter
    results) and before ``head_tail``/``compress_words``, which skip marked text.
    """
    messages = list(conv.messages)
    counters = {"truncated": 0, "chars_removed": 0, "read_loop_skipped": 0}
    root = ctx.offload.root
    frozen = conv.frozen
    for ref, block in conv.iter_blocks(Kind.TOOL_RESULT):
        if ref[0] < frozen:
            continue  # a kept prefix: decided by an earlier run (see register)
        # Looking the name up means finding the call: only worth it with overrides
        # (the in-process reducer runs this stage on every model call).
        override = opts.tools.get(conv.tool_name(ref) or "") if opts.tools else None
        if override is not None and override.skip:
            continue
        limit = override.max_chars if override and override.max_chars else opts.max_chars
        text = block.text
        if len(text) <= limit or is_ctx_marked(text):
            continue
        if reads_offloaded_file(conv, ref, opts.read_tool_name, root):
            counters["read_loop_skipped"] += 1
            continue
        mi, bi = ref
        path = ctx.offload.put("trunc", result_key(ref, block), text)
        new_text = truncation_preview(text, limit, path, opts.read_tool_name, ctx.language)
        msg = messages[mi]
        blocks: list[Block] = list(msg.blocks)
        blocks[bi] = block.with_text(new_text)
        messages[mi] = msg.with_blocks(blocks)
        counters["truncated"] += 1
        counters["chars_removed"] += len(text) - len(new_text)
    if not counters["truncated"]:
        return StageResult(conv, counters)
    return StageResult(conv.with_messages(messages), counters)
