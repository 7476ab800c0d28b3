"""Rebuild what each model call of a Codex rollout sent, from its response items.

A call's input is every ``response_item`` before it (``ghost_snapshot`` items are git
snapshots the model never sees), after the client's instructions and tools, which are
a hidden block. Its outputs (reasoning, function and custom tool calls, assistant
messages) are the run of model items next to its ``token_count`` event: after it in
cli 0.40 (the event comes first), before it in other versions.

Reasoning items are encrypted; each is as large as the reasoning tokens recorded for
the call that made it. The Responses API drops the reasoning items that come before
the last user message, so a new user turn sends none of the earlier ones (the shared
rollouts fit this within 1%: 09-24 is 16% off when they are kept).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from ctxcli.cost._calls import Call
from ctxcli.cost._claude_code import BlockMemo
from ctxcli.cost._jsonl import iter_dicts, seconds
from ctxcli.cost.sequence import Block, Request, block_key

Records = Sequence[tuple[int, dict[str, Any]]]

MODEL_ITEMS = {
    "reasoning",
    "function_call",
    "custom_tool_call",
    "local_shell_call",
    "web_search_call",
}
HIDDEN = Block(block_key("codex:client prompt"), hidden=True)


@dataclass(slots=True)
class _Item:
    """A response item: its block (reasoning: made when its call is known), and roles."""

    payload: dict[str, Any]
    block: Block | None
    from_model: bool
    user_turn: bool
    owner: int | None = None  # the call that produced it


def codex_requests(records: Records, calls: Sequence[Call]) -> list[Request]:
    """The requests of ``calls``, each with the response items before it."""
    at_record = {c.index: n for n, c in enumerate(calls)}
    items: list[_Item] = []
    requests: list[Request] = []
    open_call: int | None = None  # a call whose outputs may follow
    sent: float | None = None  # when the last input item was logged
    sizes: dict[bytes, Block] = {}  # reasoning items whose call is known, by key
    memo: BlockMemo = {}
    for i, (_, record) in enumerate(records):
        kind = record.get("type")
        payload = record.get("payload")
        if not isinstance(payload, dict):
            continue
        if kind == "compacted":
            items = [_item({"type": "message", "role": "user", "content": payload.get("message")})]
            open_call = None
        elif kind == "response_item" and payload.get("type") != "ghost_snapshot":
            item = _item(payload)
            if item.from_model:
                item.owner = open_call
            else:
                open_call = None
                sent = seconds(record.get("timestamp"))
            items.append(item)
        elif i in at_record:
            n = at_record[i]
            for item in reversed(items):  # outputs logged before their token_count
                if not item.from_model or item.owner is not None:
                    break
                item.owner = n
            _size_reasoning(items, calls, sizes)
            payloads = tuple(it.payload for it in items if it.owner != n)
            requests.append(_request(calls[n], payloads, item_blocks(payloads, sizes, memo), sent))
            open_call = n
    return requests


def item_blocks(
    items: Sequence[Any], sizes: Mapping[bytes, Block], memo: BlockMemo
) -> tuple[Block, ...]:
    """Build the cache blocks of a Responses input as the API bills them.

    The blocks of the Responses input ``items`` as the API bills them: the client's
    hidden prompt, then each item, except the reasoning items before the last user
    message (the API drops them) and those of unknown size (``sizes``: by key).
    """
    last_user = max((k for k, it in enumerate(items) if _is_user(it)), default=-1)
    blocks = [HIDDEN]
    for k, payload in enumerate(items):
        reasoning = isinstance(payload, dict) and payload.get("type") == "reasoning"
        if reasoning:
            block = sizes.get(_key(payload)) if k >= last_user else None
        else:
            hit = memo.get(id(payload))
            if hit is None or hit[0] is not payload:
                hit = memo[id(payload)] = (payload, _item_block(payload))
            block = hit[1]
        if block is not None:
            blocks.append(block)
    return tuple(blocks)


def _size_reasoning(items: list[_Item], calls: Sequence[Call], sizes: dict[bytes, Block]) -> None:
    """Size the reasoning items whose call is known (once each)."""
    for item in items:
        if (
            item.payload.get("type") == "reasoning"
            and item.owner is not None
            and item.block is None
        ):
            item.block = _reasoning_block(item, items, calls)
            sizes[item.block.key] = item.block


def _request(
    call: Call, items: tuple[Any, ...], blocks: tuple[Block, ...], sent: float | None
) -> Request:
    return Request(
        key=call.key,
        at=sent if sent is not None else call.at,  # the call starts once its input is in
        model=call.model,
        blocks=blocks,
        output_tokens=call.usage.output,
        recorded=call.usage,
        messages=items,
    )


def _reasoning_block(item: _Item, items: list[_Item], calls: Sequence[Call]) -> Block:
    """A reasoning item, sized by its call's reasoning tokens (shared by its items)."""
    owner = item.owner if item.owner is not None else -1
    siblings = sum(1 for it in items if it.owner == owner and it.payload.get("type") == "reasoning")
    tokens = calls[owner].reasoning_tokens // max(siblings, 1)
    return Block(_key(item.payload), tokens=tokens)


def _key(payload: Any) -> bytes:
    return block_key("codex", orjson.dumps(payload, option=orjson.OPT_SORT_KEYS))


def _is_user(payload: Any) -> bool:
    return (
        isinstance(payload, dict)
        and payload.get("role") == "user"
        and payload.get("type", "message") == "message"
    )


def _item(payload: dict[str, Any]) -> _Item:
    kind = payload.get("type")
    role = payload.get("role")
    from_model = kind in MODEL_ITEMS or (kind == "message" and role == "assistant")
    return _Item(payload, None, from_model, kind == "message" and role == "user")


def _item_block(payload: Any) -> Block:
    """The block of one item that is no reasoning item: its text as the model reads it."""
    raw = orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)
    data = payload if isinstance(payload, dict) else {}
    return Block(block_key("codex", raw), _text(data, raw))


def _text(payload: dict[str, Any], raw: bytes) -> str:
    """The text the model reads for one response item."""
    kind = payload.get("type")
    if kind == "message":
        content = payload.get("content")
        if isinstance(content, str):
            return content
        return "\n".join(str(c.get("text", "")) for c in iter_dicts(content))
    if kind == "function_call":
        return f"{payload.get('name', '')}\n{payload.get('arguments', '')}"
    if kind == "custom_tool_call":
        return f"{payload.get('name', '')}\n{payload.get('input', '')}"
    if kind in ("function_call_output", "custom_tool_call_output"):
        output = payload.get("output")
        if isinstance(output, str):
            return output
        return orjson.dumps(output).decode()
    return raw.decode("utf-8", "replace")
