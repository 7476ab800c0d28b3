"""Stage dedupe_outputs: repeated tool results and stale file reads become one line."""

from __future__ import annotations

import posixpath
from typing import Any

import orjson
from pydantic import Field

from ctxcli.core.hints import is_ctx_marked, same_as_hint, stale_read_hint
from ctxcli.core.model import BlockRef, Conversation, Kind
from ctxcli.stages._naming import result_key
from ctxcli.stages.base import StageContext, StageOptions, StageResult, register

__all__ = ["DedupeOutputsOptions", "dedupe_outputs"]


class DedupeOutputsOptions(StageOptions):
    """Options of dedupe_outputs."""

    min_chars: int = Field(
        200, ge=0, description="Results shorter than this many characters always stay."
    )
    stale_reads: bool = Field(
        True, description="Replace a file read by a stub once a later edit changed the file."
    )
    read_tools: list[str] = Field(
        default_factory=lambda: ["Read"], description="Tools that read a file."
    )
    edit_tools: list[str] = Field(
        default_factory=lambda: ["Edit", "MultiEdit", "Write", "NotebookEdit"],
        description="Tools that change a file; a successful call makes earlier reads stale.",
    )
    path_arguments: list[str] = Field(
        default_factory=lambda: ["file_path", "notebook_path", "path"],
        description="Argument names that hold the file a read or edit tool works on.",
    )


@register("dedupe_outputs", options=DedupeOutputsOptions)
def dedupe_outputs(
    conv: Conversation, opts: DedupeOutputsOptions, ctx: StageContext
) -> StageResult:
    """Turn a tool result identical to an earlier one, or a read made stale, into one line.

    Applies to: tool results of at least ``min_chars`` characters, in every format.

    Effect: a result whose text equals an earlier result's becomes ``[ctx: same
    output as the earlier <tool> result <call id>; full text saved to <path>]``. With
    ``stale_reads``, the result of a ``read_tools`` call on a file that a later,
    successful ``edit_tools`` call changed becomes ``[ctx: stale read of <file>: the
    file was edited later; this read is saved to <path>]``: the agent no longer holds
    an outdated copy of the file, and can read the old one back. Texts go to
    ``{offload_dir}/dedupe_outputs/<call id>``. Only the result texts change: every
    call keeps its result.

    Interacts with: run it before ``truncate_tool_output`` (identical long results
    would otherwise be truncated twice, to texts that no longer match) and after
    ``strip_system_reminders`` (a reminder appended to one copy hides the match).
    Results other stages already rewrote are left alone, so a rerun changes nothing.
    """
    counters = {"duplicates": 0, "stale_reads": 0, "chars_removed": 0}
    stale = _stale_reads(conv, opts) if opts.stale_reads else {}
    first: dict[str, BlockRef] = {}
    messages = list(conv.messages)
    for ref, block in conv.iter_blocks(Kind.TOOL_RESULT):
        text = block.text
        if len(text) < opts.min_chars or is_ctx_marked(text):
            continue
        mi, bi = ref
        call_id = result_key(ref, block)
        if ref in stale:
            path = ctx.offload.put("dedupe_outputs", call_id, text)
            new_text = stale_read_hint(ctx.language, file=stale[ref], path=path)
            counters["stale_reads"] += 1
        elif text in first:
            earlier = first[text]
            earlier_block = conv.block(earlier)
            path = ctx.offload.put("dedupe_outputs", result_key(earlier, earlier_block), text)
            tool = conv.tool_name(earlier) or "tool"
            # The hint names the earlier call by its whole id: the agent finds it by that.
            ref_id = earlier_block.call_id or result_key(earlier, earlier_block)
            new_text = same_as_hint(ctx.language, tool=tool, ref=ref_id, path=path)
            counters["duplicates"] += 1
        else:
            first[text] = ref
            continue
        if len(new_text) >= len(text):
            continue
        counters["chars_removed"] += len(text) - len(new_text)
        blocks = list(messages[mi].blocks)
        blocks[bi] = block.with_text(new_text)
        messages[mi] = messages[mi].with_blocks(blocks)
    if not counters["duplicates"] and not counters["stale_reads"]:
        return StageResult(conv, counters)
    return StageResult(conv.with_messages(messages), counters)


def _stale_reads(conv: Conversation, opts: DedupeOutputsOptions) -> dict[BlockRef, str]:
    """Results of read calls that a later successful edit of the same file made stale."""
    reads: list[tuple[BlockRef, str, str]] = []  # (result ref, file key, file as written)
    last_edit: dict[str, int] = {}  # file key -> message index of its last successful edit
    read_tools, edit_tools = set(opts.read_tools), set(opts.edit_tools)
    for ref, block in conv.iter_blocks(Kind.TOOL_CALL):
        if block.name not in read_tools and block.name not in edit_tools:
            continue
        file = _file_argument(block.text, opts.path_arguments)
        results = conv.results_of(ref)
        if file is None or not results:
            continue  # an unanswered call did nothing (yet)
        # Windows sessions spell one file with either slash, and paths may hold "..".
        key = posixpath.normpath(file.replace("\\", "/"))
        if block.name in edit_tools:
            if all(not conv.block(r).is_error for r in results):
                last_edit[key] = max(last_edit.get(key, -1), ref[0])
        else:
            reads.extend((r, key, file) for r in results if not conv.block(r).is_error)
    return {ref: file for ref, key, file in reads if last_edit.get(key, -1) > ref[0]}


def _file_argument(arguments: str, names: list[str]) -> str | None:
    try:
        args: Any = orjson.loads(arguments)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(args, dict):
        return None
    for name in names:
        value = args.get(name)
        if isinstance(value, str) and value:
            return value
    return None
