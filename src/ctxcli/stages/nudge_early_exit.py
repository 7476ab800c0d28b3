"""Stage nudge_early_exit: tell an agent that is going round in circles to submit."""

from __future__ import annotations

from pydantic import Field

from ctxcli.core.model import Block, Conversation, Kind, Message
from ctxcli.core.monitors import StuckRule, looks_stuck, monitor_scores, steps_of
from ctxcli.stages.base import StageContext, StageOptions, StageResult, register

__all__ = ["DEFAULT_NUDGE", "NudgeEarlyExitOptions", "nudge_early_exit"]

DEFAULT_NUDGE = (
    "You appear to be stuck in a loop. Stop investigating and submit your current best "
    "answer now using whatever submission tool your task expects. Do not start another "
    "investigation."
)


class NudgeEarlyExitOptions(StageOptions):
    """Options of nudge_early_exit."""

    min_model_calls: int = Field(
        40, ge=0, description="Never nudge before the agent has made this many model calls."
    )
    streak_threshold: float = Field(
        StuckRule().streak, ge=0, le=1, description="Nudge when the streak monitor is above this."
    )
    hedge_threshold: float = Field(
        StuckRule().hedge,
        ge=0,
        le=1,
        description="Nudge when hedge is above this and diversity is too.",
    )
    diversity_threshold: float = Field(
        StuckRule().diversity,
        ge=0,
        le=1,
        description="The diversity monitor (high = few tools) must exceed this.",
    )
    text: str = Field(DEFAULT_NUDGE, min_length=1, description="The user message appended.")


def _last_user_text(conv: Conversation) -> str | None:
    for msg in reversed(conv.messages):
        if msg.role == "user":
            return msg.text
    return None


def _unanswered_call_at_end(conv: Conversation) -> bool:
    # A message between a tool call and its result would break the pair, so an agent
    # waiting on its tools is not nudged.
    for mi in range(len(conv.messages) - 1, -1, -1):
        msg = conv.messages[mi]
        if msg.role != "assistant":
            return False
        for bi, block in enumerate(msg.blocks):
            if block.kind is Kind.TOOL_CALL and not conv.results_of((mi, bi)):
                return True
    return False


@register("nudge_early_exit", options=NudgeEarlyExitOptions)
def nudge_early_exit(
    conv: Conversation, opts: NudgeEarlyExitOptions, ctx: StageContext
) -> StageResult:
    """Append a user message asking a looping agent to submit its best answer now.

    Applies to: transcripts of any format with at least ``min_model_calls`` model
    calls (assistant responses; records of one response count once).

    Effect: computes the six monitors (see ``ctx stats``); when they look stuck
    (:func:`~ctxcli.core.monitors.looks_stuck`: ``streak`` above ``streak_threshold``,
    or ``hedge`` above ``hedge_threshold`` while ``diversity`` is above
    ``diversity_threshold``), one user message holding
    ``text`` is appended. Nothing is appended when the last user message already is
    that text (so a rerun changes nothing) or when the transcript ends with a tool
    call still waiting for its result.

    Interacts with: run it last; it reads tool calls and results, which other stages
    shorten but never remove, and its message is the only one it adds.
    """
    counters = {"nudges": 0, "model_calls": len(conv.rounds())}
    scores = monitor_scores(steps_of(conv))
    shown = ", ".join(f"{k} {v:.2f}" for k, v in scores.items())
    if counters["model_calls"] < opts.min_model_calls:
        return StageResult(
            conv, counters, (f"{counters['model_calls']} model calls < {opts.min_model_calls}",)
        )
    rule = StuckRule(
        streak=opts.streak_threshold, hedge=opts.hedge_threshold, diversity=opts.diversity_threshold
    )
    if not looks_stuck(scores, rule):
        return StageResult(conv, counters, (f"not stuck: {shown}",))
    if _last_user_text(conv) == opts.text:
        return StageResult(conv, counters, ("already nudged",))
    if _unanswered_call_at_end(conv):
        return StageResult(conv, counters, (f"stuck ({shown}) but a tool call awaits its result",))
    nudge = Message(role="user", blocks=(Block(Kind.TEXT, opts.text),), key=None)
    counters["nudges"] = 1
    return StageResult(conv.with_messages([*conv.messages, nudge]), counters, (f"nudged: {shown}",))
