"""Stage strip_system_reminders: keep each distinct <system-reminder> block once."""

from __future__ import annotations

import re

from pydantic import Field

from ctxcli.core.hints import reminder_removed_hint
from ctxcli.core.model import Conversation, Kind
from ctxcli.stages.base import StageContext, StageOptions, StageResult, register

__all__ = ["REMINDER", "StripSystemRemindersOptions", "strip_system_reminders"]

# A reminder with the blank line Claude Code puts before it and the line break after
# it: removing all of it leaves the output as the tool printed it.
REMINDER = re.compile(r"\n{0,2}<system-reminder>.*?</system-reminder>\n?", re.DOTALL)


class StripSystemRemindersOptions(StageOptions):
    """Options of strip_system_reminders."""

    include_text: bool = Field(
        False,
        description="Also strip repeats inside text blocks (user turns), not only tool results.",
    )


@register("strip_system_reminders", options=StripSystemRemindersOptions)
def strip_system_reminders(
    conv: Conversation, opts: StripSystemRemindersOptions, ctx: StageContext
) -> StageResult:
    """Remove repeated identical <system-reminder> blocks, keeping the first occurrence.

    Applies to: tool results (and, with ``include_text``, text blocks) in every
    format; Claude Code appends the same reminder (the malware notice after every
    Read) to result after result.

    Effect: the first occurrence of each distinct ``<system-reminder>...</system-reminder>``
    block stays where it is; every later identical block is cut out together with
    the blank lines that introduced it. A result that held nothing else becomes
    ``[ctx: repeated system reminder removed]`` rather than empty. Nothing is
    offloaded: the same text is still there, once; the original records go to the
    restore pack.

    Interacts with: run it before ``dedupe_outputs`` (outputs differing only by a
    reminder then match) and before truncation stages.
    """
    counters = {"reminders_removed": 0, "blocks_changed": 0, "chars_removed": 0}
    kinds = (Kind.TOOL_RESULT, Kind.TEXT) if opts.include_text else (Kind.TOOL_RESULT,)
    seen: set[str] = set()
    messages = list(conv.messages)
    for mi, msg in enumerate(conv.messages):
        blocks = list(msg.blocks)
        changed = False
        for bi, block in enumerate(msg.blocks):
            text = block.text
            if block.kind not in kinds or "<system-reminder>" not in text:
                continue
            removed = 0

            def cut(match: re.Match[str]) -> str:
                nonlocal removed
                body = match.group(0).strip("\n")
                if body not in seen:
                    seen.add(body)
                    return match.group(0)
                removed += 1
                return ""

            new_text = REMINDER.sub(cut, text)
            if not removed:
                continue
            if not new_text.strip():
                new_text = reminder_removed_hint(ctx.language)
            counters["reminders_removed"] += removed
            counters["blocks_changed"] += 1
            counters["chars_removed"] += len(text) - len(new_text)
            blocks[bi] = block.with_text(new_text)
            changed = True
        if changed:
            messages[mi] = msg.with_blocks(blocks)
    if not counters["reminders_removed"]:
        return StageResult(conv, counters)
    return StageResult(conv.with_messages(messages), counters)
