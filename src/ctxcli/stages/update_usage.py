"""Stage update_usage: the saved context-size figure a client resumes with, brought up to date."""

from __future__ import annotations

import json
from typing import Any

from pydantic import Field

from ctxcli.core.model import Conversation, Message, RecordEdits, SourceRecord, hydrate
from ctxcli.core.usage import tracker_key, usage_of
from ctxcli.stages.base import StageContext, StageOptions, StageResult, register

__all__ = ["CONTEXT_FIELDS", "UpdateUsageOptions", "update_usage"]


class UpdateUsageOptions(StageOptions):
    """Options of update_usage."""

    context_window_tokens: int = Field(
        200_000,
        ge=1,
        description="The model's context window, for formats that do not record it (Claude Code).",
    )
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
    resume) and Claude Code sessions (the ``message.usage`` of the last assistant
    record: Claude Code 2.1 adds its input, cache and output tokens up as the
    context size and auto-compacts on resume when that is over its threshold);
    other formats are left unchanged.

    Effect: Codex compacts before the first turn of a resume when that saved figure
    is over its auto-compact limit, so a reduced session would still be compacted
    because of the tokens it no longer holds. When the figure states more than
    ``above_share`` of ``model_context_window``, it becomes the old figure scaled by
    how much the model-visible items shrank (their bytes in the file, encrypted
    reasoning included). Only ``total_tokens`` changes: the input, cached and output
    counts usage trackers price stay. Claude Code's figure is spread over several
    usage fields that trackers price, so it is scaled only on a record trackers skip
    (not the first record of its API response, which they count); otherwise a note
    says why it stays. The original record goes to the restore pack.

    Interacts with: run it last, after the stages that shrink the session.
    """
    counters = {"records_updated": 0}
    if conv.format == "claude_code":
        return _claude_code(conv, opts, counters)
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
    counters["records_updated"] = 1
    note = f"saved context size {old:,} -> {new:,} tokens (line {rec.key + 1})"
    path = ("payload", "info", "last_token_usage", "total_tokens")
    out = conv.with_record_edits(RecordEdits(set_values={rec.key: {path: new}}))
    return StageResult(out, counters, (note,))


CONTEXT_FIELDS = (
    "input_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "output_tokens",
)


def _claude_code(
    conv: Conversation, opts: UpdateUsageOptions, counters: dict[str, int]
) -> StageResult:
    start = conv.resume_start if conv.resume_start is not None else -1
    keys = sorted(m.key for m in conv.messages if m.key is not None and m.key > start)
    last = next((k for k in reversed(keys) if usage_of(conv.records[k].data)), None)
    if last is None:
        return StageResult(conv, counters, ("no assistant usage to update",))
    data = conv.records[last].data
    usage = data["message"]["usage"]
    old = sum(v for f in CONTEXT_FIELDS if isinstance(v := usage.get(f), int))
    if old <= opts.above_share * opts.context_window_tokens:
        return StageResult(conv, counters, (f"{old} tokens saved: no client compacts on it",))
    pair = tracker_key(data)
    first = next(
        (r.key for r in conv.records if isinstance(d := r.data, dict) and tracker_key(d) == pair),
        last,
    )
    if pair is None or first == last:
        note = f"{old} tokens saved on line {last + 1} kept: usage trackers count that record"
        return StageResult(conv, counters, (note,))
    before, after = _item_bytes(conv, start)
    if not before or after >= before:
        return StageResult(conv, counters)
    values: dict[tuple[str | int, ...], Any] = {
        ("message", "usage", f): round(usage[f] * after / before)
        for f in CONTEXT_FIELDS
        if isinstance(usage.get(f), int)
    }
    new = sum(int(v) for v in values.values())
    counters["records_updated"] = 1
    note = f"saved context size {old:,} -> {new:,} tokens (line {last + 1})"
    out = conv.with_record_edits(RecordEdits(set_values={last: values}))
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


def _item_bytes(conv: Conversation, start: int = -1) -> tuple[int, int]:
    """Bytes of the model-visible items after record ``start``, and an estimate of them now.

    An item is what the model is sent of a record (Claude Code's ``message``, a Codex
    ``payload``); encrypted reasoning counts, UI copies do not.
    """
    before = sum(_size(r.data) for r in conv.records if r.message and r.key > start)
    after = 0
    for msg in conv.messages:
        if msg.key is None:
            after += sum(len(b.text) for b in msg.blocks)
        elif msg.key > start:
            after += _now(msg, conv.records[msg.key])
    return before, after


def _size(data: Any) -> int:
    if isinstance(data, dict):
        data = data.get("message", data.get("payload", data))
    return len(json.dumps(hydrate(data), ensure_ascii=False))


def _now(msg: Message, rec: SourceRecord) -> int:
    """The item's size with its block texts as they are now."""
    size = _size(rec.data)
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
        old = hydrate(old)
        if isinstance(old, str):
            if old != block.text:
                size += len(block.text) - len(old)
            continue
        try:
            same = json.loads(block.text) == old
        except ValueError:
            same = False
        if not same:
            size += len(block.text) - len(json.dumps(old, ensure_ascii=False))
    return size
