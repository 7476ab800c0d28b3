"""Stage strip_and_truncate: Synaptic's StripAndTruncate, strip_tool_calls then keep_last."""

from __future__ import annotations

from ctxcli.core.model import Conversation
from ctxcli.stages.base import StageContext, StageResult, register
from ctxcli.stages.keep_last import KeepLastOptions, keep_last
from ctxcli.stages.strip_tool_calls import StripToolCallsOptions, strip_tool_calls

__all__ = ["StripAndTruncateOptions", "strip_and_truncate"]


class StripAndTruncateOptions(KeepLastOptions, StripToolCallsOptions):
    """Options of strip_and_truncate: those of keep_last and strip_tool_calls together."""


@register("strip_and_truncate", options=StripAndTruncateOptions)
def strip_and_truncate(
    conv: Conversation, opts: StripAndTruncateOptions, ctx: StageContext
) -> StageResult:
    """Remove tool calls and their results, then keep the last keep_messages.

    Applies to: every format.

    Effect: exactly ``strip_tool_calls`` followed by ``keep_last`` with the same
    options, so ``keep_messages`` counts only conversational messages. Both halves keep calls
    paired with their results (``keep_tools`` and ``keep_last_rounds`` leave some tool
    blocks in place, and the cut respects them). Offloads go to both stages' areas.

    Interacts with: the same as configuring the two stages in a row; use that when
    they need different settings.
    """
    data = opts.model_dump()
    strip_opts = StripToolCallsOptions(**{k: data[k] for k in StripToolCallsOptions.model_fields})
    keep_opts = KeepLastOptions(**{k: data[k] for k in KeepLastOptions.model_fields})
    stripped = strip_tool_calls(conv, strip_opts, ctx)
    kept = keep_last(stripped.conversation, keep_opts, ctx)
    counters = dict(stripped.counters)
    counters["messages_dropped"] += kept.counters["dropped"]
    counters["cut_moved"] = kept.counters["cut_moved"]
    return StageResult(kept.conversation, counters, stripped.notes + kept.notes)
