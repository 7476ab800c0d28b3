"""ctx stage plugin: replace e-mail addresses in tool results (and optionally text)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field

from ctxcli.stages import Conversation, Kind, StageContext, StageOptions, StageResult, register

EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")


class RedactEmailsOptions(StageOptions):
    """Options of redact_emails."""

    replacement: str = Field(
        "[email]", min_length=1, description="Text that replaces each address."
    )
    kinds: list[Literal["tool_result", "tool_call", "text"]] = Field(
        default_factory=lambda: ["tool_result"],
        description="Block kinds to redact: tool_result, tool_call (arguments), text.",
    )


@register("redact_emails", options=RedactEmailsOptions)
def redact_emails(conv: Conversation, opts: RedactEmailsOptions, ctx: StageContext) -> StageResult:
    """Replace e-mail addresses with a placeholder before the transcript reaches a model.

    Applies to: the block kinds listed in ``kinds`` (tool results by default), in
    every format.

    Effect: each address becomes ``replacement``. Nothing is offloaded: the
    original records stay in the restore pack, so ``ctx restore`` brings the
    addresses back. A rerun finds no address and changes nothing.

    Interacts with: run it first, so that texts offloaded by ``truncate_tool_output``
    and ``clear_tool_results`` are already redacted.
    """
    kinds = {Kind(k) for k in opts.kinds}
    messages = list(conv.messages)
    redacted = 0
    for mi, msg in enumerate(conv.messages):
        blocks = list(msg.blocks)
        for bi, block in enumerate(blocks):
            if block.kind not in kinds:
                continue
            text, n = EMAIL.subn(opts.replacement, block.text)
            if n:
                blocks[bi] = block.with_text(text)
                redacted += n
        if blocks != list(msg.blocks):
            messages[mi] = msg.with_blocks(blocks)
    if not redacted:
        return StageResult(conv, {"redacted": 0})
    return StageResult(conv.with_messages(messages), {"redacted": redacted})
