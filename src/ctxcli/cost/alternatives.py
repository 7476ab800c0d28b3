"""What the peers would have sent on the same recorded session, priced by the same model.

Each alternative turns the recorded requests into the requests it would have sent
(a :class:`~ctxcli.cost.sequence.RequestSequence`), which :mod:`ctxcli.cost.session`
prices with the session's cache model and constants, anchored on the records:

- ``anthropic_context_editing``: Anthropic's server-side ``clear_tool_uses_20250919``
  at its documented defaults (:class:`ContextEditing`: trigger at 100,000 input tokens,
  keep the 3 most recent tool uses, no minimum to clear, no tool excluded, tool inputs
  kept). It runs on the provider, on each request independently (the client keeps its
  full history), before the prompt cache sees it: its documented rules are implemented
  here.
- ``langchain_clear_tool_uses``: LangChain 1.x ``ClearToolUsesEdit`` at its defaults,
  the real one, run on each rebuilt request converted to LangChain messages, as
  ``ContextEditingMiddleware`` runs it (a copy of the messages per model call, counted
  with ``count_tokens_approximately``).
- ``observation_masking``: The Complexity Trap's (Lindenbauer et al., 2025) observation
  masking: every tool result but the latest ``window`` (10) replaced by a placeholder
  naming how many lines it had.
- ``client_compaction``: the client's own auto-compaction: when a request's input
  reaches ``threshold`` of the context window, one extra call summarises the
  conversation, and the requests after send the summary and what follows it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from ctxcli.core.errors import ConfigError
from ctxcli.cost._codex import MODEL_ITEMS
from ctxcli.cost.blocks import BlockMemo, content_block, content_items, response_item_block
from ctxcli.cost.counterfactual import exact_blocks, with_messages
from ctxcli.cost.sequence import Block, Request, RequestSequence, block_key

__all__ = [
    "ALTERNATIVES",
    "AlternativeRun",
    "Compaction",
    "ContextEditing",
    "ObservationMasking",
    "alternative_requests",
]

ALTERNATIVES = (
    "anthropic_context_editing",
    "langchain_clear_tool_uses",
    "observation_masking",
    "client_compaction",
)

Measure = Callable[[Block], int]
"""Provider tokens of a block (:class:`~ctxcli.cost.replay.Sizer`)."""

CLEARED = "[Tool result cleared]"
"""What Anthropic's context editing puts in place of a cleared result (the documented
"placeholder text"; its exact wording is not published, a few tokens either way)."""


@dataclass(frozen=True)
class AlternativeRun:
    """The requests an alternative would have sent, and which of them it changed."""

    sequence: RequestSequence
    changed: tuple[bool, ...]


@dataclass(frozen=True)
class ContextEditing:
    """``clear_tool_uses_20250919``'s parameters, at their documented defaults.

    Attributes:
        trigger: when it activates: the prompt's input tokens (``input_tokens``) or its
            tool uses (``tool_uses``) exceed ``trigger_value``.
        keep: the most recent tool uses whose results are kept.
        clear_at_least: clear nothing unless at least this many input tokens go.
        exclude_tools: tools whose results are never cleared.
        clear_tool_inputs: clear the tool calls' inputs too.
    """

    trigger: Literal["input_tokens", "tool_uses"] = "input_tokens"
    trigger_value: int = 100_000
    keep: int = 3
    clear_at_least: int = 0
    exclude_tools: tuple[str, ...] = ()
    clear_tool_inputs: bool = False


@dataclass(frozen=True)
class ObservationMasking:
    """The Complexity Trap's observation masking: results older than ``window`` masked."""

    window: int = 10


@dataclass(frozen=True)
class Compaction:
    """The client's auto-compaction.

    Attributes:
        window: the model's context window, in tokens.
        threshold: share of the window at which the client compacts (Claude Code: 95%).
        summary_tokens: the summary's size (an assumption: the file holds no summary of
            a compaction that did not happen).
    """

    window: int = 200_000
    threshold: float = 0.95
    summary_tokens: int = 4_000


@dataclass(frozen=True, slots=True)
class _Slot:
    """A tool result in a request's messages."""

    message: int
    item: int | None  # index in the message's content (Anthropic); None: the item itself
    id: str
    name: str | None
    tokens: int
    lines: int


def alternative_requests(
    name: str, sequence: RequestSequence, measure: Measure, **settings: Any
) -> AlternativeRun:
    """The requests the alternative ``name`` (one of :data:`ALTERNATIVES`) would have sent."""
    if name == "anthropic_context_editing":
        editing = settings.get("editing") or ContextEditing()
        return _per_request(
            sequence, measure, lambda r, s: _context_editing(r, s, editing, measure)
        )
    if name == "langchain_clear_tool_uses":
        return _per_request(sequence, measure, lambda r, s: _langchain(r.messages, sequence.format))
    if name == "observation_masking":
        masking = settings.get("masking") or ObservationMasking()
        return _per_request(sequence, measure, lambda r, s: _masked(s, masking))
    if name == "client_compaction":
        return _compacted(sequence, measure, settings.get("compaction") or Compaction())
    raise ConfigError(f"unknown alternative {name!r}: one of {', '.join(ALTERNATIVES)}")


Edit = Callable[[Request, list[_Slot]], tuple[dict[str, str], set[str]]]
"""Given a request and its tool results: the results to replace (id -> text) and
the tool calls whose inputs to clear."""


def _per_request(sequence: RequestSequence, measure: Measure, edit: Edit) -> AlternativeRun:
    """Apply ``edit`` to each request on its own (the client keeps its full history)."""
    fmt = sequence.format
    sizes = exact_blocks(sequence)
    memo: BlockMemo = {}
    replaced: dict[tuple[int, str], Any] = {}
    out: list[Request] = []
    changed: list[bool] = []
    for request in sequence.requests:
        slots = _slots(request.messages, fmt, measure)
        clear, inputs = edit(request, slots) if slots else ({}, set())
        if not clear and not inputs:
            out.append(request)
            changed.append(False)
            continue
        messages = _replaced(request.messages, fmt, clear, inputs, replaced)
        out.append(with_messages(sequence, request, messages, sizes, memo))
        changed.append(True)
    return AlternativeRun(replace(sequence, requests=tuple(out)), tuple(changed))


def _context_editing(
    request: Request, slots: list[_Slot], editing: ContextEditing, measure: Measure
) -> tuple[dict[str, str], set[str]]:
    if editing.trigger == "tool_uses":
        over = len(slots) > editing.trigger_value
    else:  # the whole prompt's input tokens, client prompt included
        over = sum(measure(b) for b in request.blocks) > editing.trigger_value
    if not over:
        return {}, set()
    candidates = slots[: max(0, len(slots) - editing.keep)]
    chosen = [s for s in candidates if s.name not in editing.exclude_tools]
    if sum(s.tokens for s in chosen) < editing.clear_at_least:
        return {}, set()  # cannot clear the minimum: the strategy is not applied
    inputs = {s.id for s in chosen} if editing.clear_tool_inputs else set()
    return {s.id: CLEARED for s in chosen}, inputs


def _masked(slots: list[_Slot], masking: ObservationMasking) -> tuple[dict[str, str], set[str]]:
    old = slots[: max(0, len(slots) - masking.window)]
    return {s.id: f"Old environment output: ({s.lines} lines omitted)" for s in old}, set()


def _slots(messages: Sequence[Any], fmt: str, measure: Measure) -> list[_Slot]:
    """The tool results of a request, in order, with the name of the tool that made each."""
    names: dict[str, str] = {}
    out: list[_Slot] = []
    for m, message in enumerate(messages):
        if not isinstance(message, dict):
            continue
        if fmt == "codex":
            kind = message.get("type")
            if kind in MODEL_ITEMS and "call_id" in message:
                names[str(message["call_id"])] = str(message.get("name", ""))
            elif kind in ("function_call_output", "custom_tool_call_output"):
                text = _text(message.get("output"))
                cid = str(message.get("call_id", ""))
                block = response_item_block(message)
                out.append(_Slot(m, None, cid, names.get(cid), measure(block), _lines(text)))
            continue
        for i, item in enumerate(content_items(message.get("content"))):
            if not isinstance(item, dict):
                continue
            if item.get("type") == "tool_use":
                names[str(item.get("id"))] = str(item.get("name", ""))
            elif item.get("type") == "tool_result":
                tid = str(item.get("tool_use_id", ""))
                tokens = measure(content_block("user", item))
                text = _text(item.get("content"))
                out.append(_Slot(m, i, tid, names.get(tid), tokens, _lines(text)))
    return out


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        return _text(content.get("content", content.get("output", "")))
    if isinstance(content, list):
        return "\n".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
    return ""


def _lines(text: str) -> int:
    return text.count("\n") + 1 if text else 0


def _replaced(
    messages: Sequence[Any],
    fmt: str,
    clear: dict[str, str],
    inputs: set[str],
    memo: dict[tuple[int, str], Any],
) -> list[Any]:
    """Return ``messages`` with the results in ``clear`` and the inputs of ``inputs`` cleared.

    Unchanged objects are kept (their blocks are made once), and each replaced object is
    made once per (object, text), so it is the same bytes request after request.
    """

    def swap(item: dict[str, Any], field: str, value: Any) -> Any:
        key = (id(item), f"{field}\0{value}")
        hit = memo.get(key)
        if hit is None or hit[0] is not item:
            hit = memo[key] = (item, {**item, field: value})
        return hit[1]

    out: list[Any] = []
    for message in messages:
        if not isinstance(message, dict):
            out.append(message)
            continue
        if fmt == "codex":
            cid = str(message.get("call_id", ""))
            kind = message.get("type")
            if kind in ("function_call_output", "custom_tool_call_output") and cid in clear:
                message = swap(message, "output", clear[cid])
            elif kind == "function_call" and cid in inputs:
                message = swap(message, "arguments", "{}")
            elif kind == "custom_tool_call" and cid in inputs:
                message = swap(message, "input", "")
            out.append(message)
            continue
        items = content_items(message.get("content"))
        new = []
        for item in items:
            if isinstance(item, dict) and item.get("type") == "tool_result":
                tid = str(item.get("tool_use_id", ""))
                item = swap(item, "content", clear[tid]) if tid in clear else item
            elif isinstance(item, dict) and item.get("type") == "tool_use":
                item = swap(item, "input", {}) if str(item.get("id")) in inputs else item
            new.append(item)
        if any(a is not b for a, b in zip(items, new, strict=True)):
            message = {**message, "content": new}
        out.append(message)
    return out


def _langchain(messages: Sequence[Any], fmt: str) -> tuple[dict[str, str], set[str]]:
    """Run LangChain's own ``ClearToolUsesEdit`` (defaults) and read back what it cleared.

    As its ``ContextEditingMiddleware`` does by default.
    """
    from langchain.agents.middleware import ClearToolUsesEdit
    from langchain_core.messages import ToolMessage
    from langchain_core.messages.utils import count_tokens_approximately

    converted = _to_langchain(messages, fmt)
    edit = ClearToolUsesEdit()
    edit.apply(converted, count_tokens=count_tokens_approximately)
    clear: dict[str, str] = {}
    for message in converted:
        if isinstance(message, ToolMessage) and message.response_metadata.get(
            "context_editing", {}
        ).get("cleared"):
            clear[message.tool_call_id] = str(message.content)
    return clear, set()


def _to_langchain(messages: Sequence[Any], fmt: str) -> list[Any]:
    """Build the request as LangChain messages.

    Tool calls on AI messages, results as tool messages, text as human or AI messages.
    """
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    out: list[Any] = []
    for message in messages:
        if not isinstance(message, dict):
            continue
        if fmt == "codex":
            kind = message.get("type")
            if kind in ("function_call", "custom_tool_call", "local_shell_call"):
                call = {"id": str(message.get("call_id", "")), "name": str(message.get("name", "")),
                        "args": {}, "type": "tool_call"}  # fmt: skip
                out.append(AIMessage("", tool_calls=[call]))
            elif kind in ("function_call_output", "custom_tool_call_output"):
                output = _text(message.get("output"))
                out.append(ToolMessage(output, tool_call_id=str(message.get("call_id", ""))))
            elif kind == "message":
                text = _text(message.get("content"))
                role = message.get("role")
                out.append(AIMessage(text) if role == "assistant" else HumanMessage(text))
            continue
        items = [i for i in content_items(message.get("content")) if isinstance(i, dict)]
        if message.get("role") == "assistant":
            calls: list[Any] = [
                {
                    "id": str(i.get("id")),
                    "name": str(i.get("name", "")),
                    "args": i.get("input") if isinstance(i.get("input"), dict) else {},
                    "type": "tool_call",
                }  # fmt: skip
                for i in items
                if i.get("type") == "tool_use"
            ]
            # Text and thinking blocks stay content blocks, as langchain-anthropic keeps them.
            rest: list[str | dict[Any, Any]] = [i for i in items if i.get("type") != "tool_use"]
            out.append(AIMessage(rest, tool_calls=calls))
            continue
        others: list[str | dict[Any, Any]] = [i for i in items if i.get("type") != "tool_result"]
        for item in items:
            if item.get("type") == "tool_result":
                tid = str(item.get("tool_use_id", ""))
                out.append(ToolMessage(item.get("content") or "", tool_call_id=tid))
        if others:
            out.append(HumanMessage(others))
    return out


def _compacted(
    sequence: RequestSequence, measure: Measure, compaction: Compaction
) -> AlternativeRun:
    """The requests with the client compacting at its threshold (see :class:`Compaction`)."""
    sizes = exact_blocks(sequence)
    memo: BlockMemo = {}
    limit = compaction.threshold * compaction.window
    # Per lineage: how many of its messages the last summary replaced, and the summary.
    state: dict[bytes, tuple[int, Any]] = {}
    out: list[Request] = []
    changed: list[bool] = []
    for request in sequence.requests:
        lineage = request.blocks[0].key if request.blocks else b""
        done = state.get(lineage)
        messages = list(request.messages)
        if done is not None and len(messages) >= done[0]:
            messages = [done[1], *messages[done[0] :]]
        edited = (
            with_messages(sequence, request, messages, sizes, memo) if done is not None else request
        )
        if sum(measure(b) for b in edited.blocks) >= limit and len(messages) > 1:
            # One call summarises what would have been sent; this request then sends
            # the summary in its place.
            out.append(_summarising(edited, compaction))
            changed.append(True)
            summary = _summary(sequence.format, request.key, compaction)
            state[lineage] = (len(request.messages), summary)
            messages = [summary]
            edited = with_messages(sequence, request, messages, sizes, memo)
            # The summary is its exact size, whatever its placeholder text counts.
            edited = replace(edited, blocks=_sized_summary(edited.blocks, compaction))
        elif done is not None:
            edited = replace(edited, blocks=_sized_summary(edited.blocks, compaction))
        out.append(edited)
        changed.append(done is not None or edited is not request)
    return AlternativeRun(replace(sequence, requests=tuple(out)), tuple(changed))


def _summarising(request: Request, compaction: Compaction) -> Request:
    ask = Block(block_key("compaction request"), "Summarise the conversation so far.")
    return replace(
        request,
        key=f"compact@{request.key}",
        blocks=(*request.blocks, ask),
        output_tokens=compaction.summary_tokens,
        recorded=None,
    )


SUMMARY_TEXT = "summary of the conversation so far"


def _summary(fmt: str, key: str, compaction: Compaction) -> Any:
    text = f"{SUMMARY_TEXT} ({key})"
    if fmt == "codex":
        return {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": text}],
        }
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def _sized_summary(blocks: tuple[Block, ...], compaction: Compaction) -> tuple[Block, ...]:
    """Return the blocks with the summary's block given its assumed size.

    The summary is the block after the client prompt.
    """
    if len(blocks) < 2 or SUMMARY_TEXT not in blocks[1].text:
        return blocks
    summary = replace(blocks[1], text="", tokens=compaction.summary_tokens)
    return (blocks[0], summary, *blocks[2:])
