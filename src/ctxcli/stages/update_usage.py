"""Stage update_usage: the saved context-size figure a client resumes with, brought up to date."""

from __future__ import annotations

import json
from typing import Any

from pydantic import Field

from ctxcli.core.model import Conversation, Message, RecordEdits, SourceRecord
from ctxcli.stages.base import StageContext, StageOptions, StageResult, register


class UpdateUsageOptions(StageOptions):
    """Options of update_usage."""

    above_share: float = Field(
        0.5,
        ge=0.0,
        le=1.0,
        description="Update the figure only when it states more than this share of the "
        "model's context window (lower figures make no client compact or warn, and usage "
        "trackers read the same records).",
    )


@register("update_usage", options=UpdateUsageOptions)
def update_usage(conv: Conversation, opts: UpdateUsageOptions, ctx: StageContext) -> StageResult:
    """Scale the context size a resumed client reads from the file to the reduced session.

    Applies to: Codex rollouts (the last ``token_count`` event, whose
    ``info.last_token_usage.total_tokens`` Codex 0.169 takes as the context size on
    resume); other formats are left unchanged.

    Effect: Codex compacts before the first turn of a resume when that saved figure
    is over its auto-compact limit, so a reduced session would still be compacted
    because of the tokens it no longer holds. When the figure states more than
    ``above_share`` of ``model_context_window``, it becomes the old figure scaled by
    how much the model-visible items shrank (their bytes in the file, encrypted
    reasoning included). Only ``total_tokens`` changes: the input, cached and output
    counts usage trackers price stay. The original record goes to the restore pack.

    Interacts with: run it last, after the stages that shrink the session.
    """
    counters = {"records_updated": 0}
    if conv.format != "codex":
        return StageResult(conv, counters, (f"not applicable to {conv.format} transcripts",))
    found = _last_token_count(conv)
    if found is None:
        return StageResult(conv, counters, ("no token_count record",))
    rec, info = found
    old = info["last_token_usage"]["total_tokens"]
    window = info.get("model_context_window")
    if not isinstance(window, int) or old <= opts.above_share * window:
        return StageResult(conv, counters, (f"{old} tokens saved: no client compacts on it",))
    before, after = _item_bytes(conv)
    new = max(1, round(old * after / before)) if before else old
    if new >= old:
        return StageResult(conv, counters)
    usage = {**info["last_token_usage"], "total_tokens": new}
    payload = {**rec.data["payload"], "info": {**info, "last_token_usage": usage}}
    counters["records_updated"] = 1
    note = f"saved context size {old:,} -> {new:,} tokens (line {rec.key + 1})"
    out = conv.with_record_edits(RecordEdits(replace={rec.key: {**rec.data, "payload": payload}}))
    return StageResult(out, counters, (note,))


def _last_token_count(conv: Conversation) -> tuple[SourceRecord, dict[str, Any]] | None:
    """The last kept ``token_count`` event with a usable ``last_token_usage``."""
    for rec in reversed(conv.records):
        data = rec.data
        if not isinstance(data, dict) or data.get("type") != "event_msg":
            continue
        if rec.key in conv.record_edits.drop:
            continue
        payload = data.get("payload")
        info = payload.get("info") if isinstance(payload, dict) else None
        if not isinstance(payload, dict) or payload.get("type") != "token_count":
            continue
        last = info.get("last_token_usage") if isinstance(info, dict) else None
        if isinstance(last, dict) and isinstance(last.get("total_tokens"), int):
            return rec, info  # type: ignore[return-value]
    return None


def _item_bytes(conv: Conversation) -> tuple[int, int]:
    """Bytes of the model-visible records in the file, and an estimate of them now."""
    before = sum(r.size for r in conv.records if r.message)
    after = 0
    for msg in conv.messages:
        if msg.key is None:
            after += sum(len(b.text) for b in msg.blocks)
        else:
            after += _now(msg, conv.records[msg.key])
    return before, after


def _now(msg: Message, rec: SourceRecord) -> int:
    """The record's size with its block texts as they are now."""
    size = rec.size
    for block in msg.blocks:
        if block.slot is None:
            size += len(block.text)
            continue
        path, codec = block.slot
        if codec == "keep":
            continue
        old: Any = rec.data
        try:
            for step in path:
                old = old[step]
        except (KeyError, IndexError, TypeError):
            continue
        size += len(block.text) - (len(old) if isinstance(old, str) else len(json.dumps(old)))
    return size
