"""Stage summarize: replace old history by one summary message, never orphaning a tool call."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, ValidationInfo, field_validator

from ctxcli.core.cuts import latest_safe_cut, leading_system, range_key, render_messages
from ctxcli.core.hints import is_summary, summary_hint
from ctxcli.core.model import Block, Conversation, Kind, Message
from ctxcli.services.anthropic_client import DEFAULT_MODEL
from ctxcli.services.summarizer import SummarizerError, build_summarizer
from ctxcli.stages.base import StageContext, StageOptions, StageResult, register

__all__ = ["MIN_SAVING_TOKENS", "SummarizeOptions", "summarize"]

MIN_SAVING_TOKENS = 64
"""A summary must save at least this much (and half of what it replaces) to be used."""


class SummarizeOptions(StageOptions):
    """Options of summarize."""

    trigger: Literal["tokens", "always"] = Field(
        "tokens", description='"tokens": only when over max_tokens; "always": on every run.'
    )
    max_tokens: int = Field(
        100_000, ge=0, description="Summarize when the transcript has more tokens than this."
    )
    keep_tokens: int | None = Field(
        None,
        ge=0,
        description="Tokens of the most recent messages kept verbatim "
        "(default: a fifth of max_tokens; exclusive with keep_messages).",
    )
    keep_messages: int | None = Field(
        None, ge=0, description="Keep this many recent non-system messages instead of tokens."
    )
    summarizer: Literal["extractive", "anthropic"] = Field(
        "extractive",
        description='"extractive" (offline, deterministic) or "anthropic" (a Claude model).',
    )
    model: str = Field(DEFAULT_MODEL, description="Claude model of the anthropic summarizer.")
    base_url: str | None = Field(
        None, description="API base URL of the anthropic summarizer (default: ANTHROPIC_BASE_URL)."
    )
    prompt: str | None = Field(
        None, description="System prompt of the anthropic summarizer (default: built in)."
    )
    chunk_tokens: int = Field(
        50_000,
        ge=2_000,
        description="History tokens per summarizer request; longer histories go in chunks.",
    )
    summary_max_tokens: int = Field(
        2_000, ge=100, description="Longest reply the anthropic summarizer may write, in tokens."
    )
    timeout_seconds: float = Field(60.0, gt=0, description="Timeout of one API request.")
    max_retries: int = Field(2, ge=0, description="Retries of a failed API request.")

    @field_validator("keep_tokens")
    @classmethod
    def _keep_below_trigger(cls, value: int | None, info: ValidationInfo) -> int | None:
        limit = info.data.get("max_tokens")
        if value is not None and info.data.get("trigger") == "tokens" and limit is not None:
            if value >= limit:
                raise ValueError(
                    f"must be below max_tokens ({limit}), or the summary cannot bring the "
                    "transcript under the trigger"
                )
        return value

    @field_validator("keep_messages")
    @classmethod
    def _one_way_to_keep(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value is not None and info.data.get("keep_tokens") is not None:
            raise ValueError("set keep_tokens or keep_messages, not both")
        return value

    @field_validator("summary_max_tokens")
    @classmethod
    def _fits_chunks(cls, value: int, info: ValidationInfo) -> int:
        chunk = info.data.get("chunk_tokens")
        if chunk is not None and value * 4 > chunk:
            raise ValueError(
                f"must be at most a quarter of chunk_tokens ({chunk}) so partial summaries "
                "can be merged"
            )
        return value


@register("summarize", options=SummarizeOptions)
def summarize(conv: Conversation, opts: SummarizeOptions, ctx: StageContext) -> StageResult:
    """Replace the history before the most recent messages by one summary message.

    Applies to: every format, when the transcript is over ``max_tokens`` (or always,
    with ``trigger = "always"``).

    Effect: the leading system messages stay; the most recent ``keep_tokens`` (or
    ``keep_messages``) stay verbatim; everything between becomes one user message
    ``[ctx: summary of N earlier messages; full text saved to
    {offload_dir}/summarize/<first>-<last>]`` followed by the summary. The cut moves
    earlier, keeping more, until no tool call is separated from its result, so the
    provider never sees a dangling call or result (langchain #38352, deepagents #270).
    The summary comes from the ``extractive`` summarizer (offline) or the
    ``anthropic`` one (a Claude model, in chunks for long histories). If the
    summarizer fails (no key, timeout, HTTP error, empty reply) the transcript stays
    unchanged, the reason is noted and ``failures`` counted: history is never replaced
    by a placeholder (langchain #39261). A rerun recognises its own summary and does
    not summarize it again.

    Interacts with: ``strip_tool_calls`` before it leaves only the conversation to
    summarize; ``keep_last`` drops history instead of summarizing it.
    """
    counters = {"summarized": 0, "failures": 0}
    total = ctx.tokens.total(conv)
    if opts.trigger == "tokens" and total <= opts.max_tokens:
        return StageResult(conv, counters, (f"{total} tokens <= max_tokens {opts.max_tokens}",))
    start = leading_system(conv)
    cut = latest_safe_cut(conv, start, _tail_start(conv, start, opts, ctx))
    dropped = conv.messages[start:cut]
    if all(_is_own_summary(m) for m in dropped):
        return StageResult(conv, counters, ("nothing new to summarize",))
    before = sum(ctx.tokens.message(m) for m in dropped)
    if before <= MIN_SAVING_TOKENS:
        # No summary can save enough here: do not even ask for one.
        return StageResult(conv, counters, (f"only {before} tokens to summarize; kept",))
    body, note = _paying_summary(conv.with_messages(dropped), before, opts, ctx, counters)
    if body is None:
        # The summarizer could not run (no key, a timeout...): fail-safe, a fallback.
        fallbacks = (note,) if counters["failures"] else ()
        return StageResult(conv, counters, (note,), fallbacks)
    key = range_key(conv, start, cut - 1)
    path = ctx.offload.put("summarize", key, render_messages(conv, range(start, cut)))
    summary = _summary(ctx, len(dropped), path, body)
    after = ctx.tokens.message(summary)
    counters["summarized"] = len(dropped)
    plural = "s" if len(dropped) != 1 else ""
    note = (
        f"summarized {len(dropped)} message{plural} ({before} tokens) in {after} tokens; see {path}"
    )
    messages = (*conv.messages[:start], summary, *conv.messages[cut:])
    return StageResult(conv.with_messages(messages), counters, (note,))


def _paying_summary(
    history: Conversation,
    before: int,
    opts: SummarizeOptions,
    ctx: StageContext,
    counters: dict[str, int],
) -> tuple[str | None, str]:
    """The summary of ``history`` (``before`` tokens), or None and why there is none."""
    try:
        body = _ask(history, opts, ctx)
    except SummarizerError as exc:
        counters["failures"] = 1
        reason = f"summary failed, transcript left unchanged: {exc}"
        ctx.log(f"summarize: {reason}")
        return None, reason
    # Whether a summary pays is decided without the offload path, so a transcript gets
    # the same answer whatever directory the run writes to; the margin leaves room
    # for the path, so the output never grows.
    after = ctx.tokens.message(_summary(ctx, len(history.messages), "", body))
    if after > before // 2 or before - after < MIN_SAVING_TOKENS:
        return None, (
            f"the summary ({after} tokens) would not halve what it replaces ({before}); "
            "transcript left unchanged"
        )
    return body, ""


def _ask(history: Conversation, opts: SummarizeOptions, ctx: StageContext) -> str:
    """The configured summarizer's summary of ``history`` (raises SummarizerError).

    A summarizer this stage built is closed after use; one handed in through
    ``ctx.summarizer`` belongs to the caller.
    """
    summarizer = build_summarizer(
        opts.summarizer,
        given=ctx.summarizer,
        access=ctx.anthropic,
        cache=ctx.answers,
        model=opts.model,
        base_url=opts.base_url,
        prompt=opts.prompt,
        chunk_tokens=opts.chunk_tokens,
        summary_max_tokens=opts.summary_max_tokens,
        timeout_seconds=opts.timeout_seconds,
        max_retries=opts.max_retries,
    )
    try:
        return summarizer.summarize(history, ctx.tokens.counter.count)
    finally:
        close = getattr(summarizer, "close", None)
        if callable(close) and summarizer is not ctx.summarizer:
            close()


def _tail_start(conv: Conversation, start: int, opts: SummarizeOptions, ctx: StageContext) -> int:
    """Where the verbatim tail begins, before moving to a safe cut."""
    messages = conv.messages
    i = len(messages)
    if opts.keep_messages is not None:
        counted = 0
        while i > start and counted < opts.keep_messages:
            i -= 1
            counted += messages[i].role != "system"
        return i
    budget = opts.keep_tokens if opts.keep_tokens is not None else opts.max_tokens // 5
    used = 0
    while i > start:
        cost = ctx.tokens.message(messages[i - 1])
        if used + cost > budget:
            break
        used += cost
        i -= 1
    return i


def _summary(ctx: StageContext, count: int, path: str, body: str) -> Message:
    """The summary message: the marker line naming the offload file, then the summary."""
    text = f"{summary_hint(ctx.language, count=count, path=path)}\n{body}"
    return Message("user", (Block(Kind.TEXT, text),))


def _is_own_summary(msg: Message) -> bool:
    return msg.role == "user" and any(
        b.kind is Kind.TEXT and is_summary(b.text) for b in msg.blocks
    )
