"""Stage head_tail: keep the head and tail of long tool results, offload the middle."""

from __future__ import annotations

import re

from pydantic import Field, model_validator

from ctxcli.core.hints import is_truncated
from ctxcli.core.model import Block, BlockRef, Conversation, Kind
from ctxcli.stages._naming import result_key
from ctxcli.stages.base import StageContext, StageOptions, StageResult, register

__all__ = [
    "AREA",
    "HeadTailOptions",
    "cut",
    "head_tail",
    "is_head_tailed",
    "replace_blocks",
]

AREA = "head_tail"

# The marker ReasonBlocks' TokenSavingMiddleware writes, kept verbatim so tools that
# grep for it keep working; the offload path goes on a line of its own after it.
_MARKER = "[... {removed} chars truncated ...]"
_MARKER_RE = re.compile(r"(?:^|\n)\[\.\.\. \d+ chars truncated \.\.\.\](?:\n|$)")
_SAVED = {
    "en": "[ctx: full output saved to {path}]",
    "zh": "[ctx: 完整输出已保存到 {path}]",
}


class HeadTailOptions(StageOptions):
    """Options of head_tail."""

    renamed = {"keep_recent": "keep_recent_results"}

    threshold_chars: int = Field(
        1800, ge=1, description="Tool results longer than this many characters are cut."
    )
    head_chars: int = Field(900, ge=0, description="Characters kept from the start.")
    tail_chars: int = Field(700, ge=0, description="Characters kept from the end.")
    keep_recent_results: int = Field(
        2, ge=0, description="The last this many tool results are never cut."
    )
    offload: bool = Field(
        True,
        description="Save each full result to <offload_dir>/head_tail/<id> and cite it; "
        "false leaves only the marker (ctx restore still rebuilds the original).",
    )

    @model_validator(mode="after")
    def _saves_something(self) -> HeadTailOptions:
        if self.head_chars + self.tail_chars >= self.threshold_chars:
            raise ValueError(
                f"head_chars + tail_chars ({self.head_chars} + {self.tail_chars} = "
                f"{self.head_chars + self.tail_chars}) must be less than threshold_chars "
                f"({self.threshold_chars}), or no result would get shorter; raise "
                "threshold_chars or lower head_chars or tail_chars"
            )
        return self


def is_head_tailed(text: str) -> bool:
    """True if ``text`` already carries the head_tail marker."""
    return "chars truncated ...]" in text and _MARKER_RE.search(text) is not None


def cut(text: str, head_chars: int, tail_chars: int, hint: str | None) -> str:
    """``text``'s head and tail around the marker (and ``hint``, when given)."""
    removed = len(text) - head_chars - tail_chars
    middle = _MARKER.format(removed=removed)
    if hint:
        middle = f"{middle}\n{hint}"
    tail = text[len(text) - tail_chars :] if tail_chars else ""
    return f"{text[:head_chars]}\n\n{middle}\n\n{tail}"


def _truncation_line(text: str) -> tuple[int, int] | None:
    """Span of the line holding truncate_tool_output's hint, if any."""
    pos = 0
    for line in text.split("\n"):
        if is_truncated(line):
            return pos, pos + len(line)
        pos += len(line) + 1
    return None


def _cut_around_hint(text: str, span: tuple[int, int], opts: HeadTailOptions) -> str | None:
    """Shorten a truncate_tool_output preview further while keeping its hint line.

    The hint names the file that already holds the full output, so nothing new is
    offloaded; only the preview around it gets shorter.
    """
    before, hint, after = text[: span[0]], text[span[0] : span[1]], text[span[1] :]
    head = before[: opts.head_chars]
    tail = after[len(after) - opts.tail_chars :] if opts.tail_chars else ""
    removed = len(before) - len(head) + len(after) - len(tail)
    if removed <= 0:
        return None
    new = f"{head}\n\n{_MARKER.format(removed=removed)}\n{hint}\n\n{tail}"
    return new if len(new) < len(text) else None


def _reads_own_offload(conv: Conversation, ref: BlockRef) -> bool:
    # Cutting the result of a call that reads one of our own files back would send the
    # agent round a cut -> read -> cut loop (the loop reported against Eino).
    call = conv.call_of(ref)
    if call is None:
        return False
    # Paths are always cited as {root}/head_tail/..., whatever the root.
    return f"/{AREA}/" in conv.block(call).text


@register("head_tail", options=HeadTailOptions)
def head_tail(conv: Conversation, opts: HeadTailOptions, ctx: StageContext) -> StageResult:
    r"""Keep the first head_chars and last tail_chars of long tool results; offload the middle.

    Applies to: tool results longer than ``threshold_chars``, in every format, except
    the last ``keep_recent_results`` results and results of calls that read a head_tail file.

    Effect: the result becomes ``{head}\n\n[... N chars truncated ...]\n\n{tail}``
    (N = characters removed) with, under the marker, a line naming
    ``{offload_dir}/head_tail/{id}``, which holds the full result. With
    ``offload = false`` no file is written and the line is left out. A result that
    already carries the marker is left alone, so a rerun changes nothing.

    Interacts with: a result already cut by ``truncate_tool_output`` keeps its hint
    line (which names the full output) and only its preview gets shorter. Run it
    before ``compress_words``, which then compresses what is left and keeps both
    marker lines; stages see each other's output, so the savings add up.
    """
    counters = {"compressions": 0, "chars_saved": 0, "already_truncated": 0, "not_offloaded": 0}
    results = list(conv.iter_blocks(Kind.TOOL_RESULT))
    eligible = results[: max(0, len(results) - opts.keep_recent_results)]
    root = ctx.offload.root
    changed: dict[BlockRef, Block] = {}
    for ref, block in eligible:
        text = block.text
        if len(text) <= opts.threshold_chars or is_head_tailed(text):
            continue
        if _reads_own_offload(conv, ref):
            continue
        mi, bi = ref
        span = _truncation_line(text)
        if span is not None:
            new_text = _cut_around_hint(text, span, opts)
            if new_text is None:
                continue
            counters["already_truncated"] += 1
        elif opts.offload:
            path = ctx.offload.put(AREA, result_key(ref, block), text)
            hint = _SAVED.get(ctx.language, _SAVED["en"]).format(path=path)
            new_text = cut(text, opts.head_chars, opts.tail_chars, hint)
        else:
            new_text = cut(text, opts.head_chars, opts.tail_chars, None)
            counters["not_offloaded"] += 1
        changed[ref] = block.with_text(new_text)
        counters["compressions"] += 1
        counters["chars_saved"] += len(text) - len(new_text)
    notes: tuple[str, ...] = ()
    if counters["not_offloaded"]:
        notes = (
            f"offload = false: {counters['not_offloaded']} cut results were not saved to "
            f"{root}/{AREA}/, so the agent cannot read their middles back (ctx restore "
            "still rebuilds the original)",
        )
    return StageResult(replace_blocks(conv, changed), counters, notes)


def replace_blocks(conv: Conversation, changed: dict[BlockRef, Block]) -> Conversation:
    """``conv`` with some blocks replaced; the same object when nothing changed."""
    if not changed:
        return conv
    messages = list(conv.messages)
    by_message: dict[int, dict[int, Block]] = {}
    for (mi, bi), block in changed.items():
        by_message.setdefault(mi, {})[bi] = block
    for mi, blocks in by_message.items():
        msg = messages[mi]
        messages[mi] = msg.with_blocks([blocks.get(bi, b) for bi, b in enumerate(msg.blocks)])
    return conv.with_messages(messages)
